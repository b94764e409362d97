//! `skein-bench mcp`: what an MCP tool call costs over the REST API it
//! wraps. One `skein serve`, one 10-span trace; `GET /api/v1/traces/{id}`
//! and `tools/call get_trace` over streamable HTTP (`POST /mcp`) taken in
//! turn on two keep-alive connections, every answer checked (10 spans, no
//! error). The overhead is the difference of the medians.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};

use crate::http1::Connection;
use crate::machine::Machine;
use crate::server::SkeinProcess;
use crate::stats::Samples;

#[derive(Args, Debug)]
pub struct McpArgs {
    /// The skein binary to benchmark.
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Calls of each kind (REST and MCP), after a warm-up of a tenth as many.
    #[arg(long, default_value_t = 2000)]
    pub calls: usize,
    /// Where BENCHMARKS.md and benchmarks.json go.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPANS: usize = 10;

/// The headers of a streamable-HTTP MCP request.
const MCP_HEADERS: &[(&str, &str)] = &[
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", "2025-11-25"),
];

fn ingest(api: &str) -> Result<(), String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let t0 = now - 60_000_000_000;
    let spans: Vec<Value> = (0..SPANS)
        .map(|i| {
            let parent = match i {
                0 => Value::Null,
                1..=3 => json!(format!("{:016x}", 1)),
                _ => json!(format!("{:016x}", 2 + (i - 4) / 2)),
            };
            let service = ["checkout", "inventory", "payments", "db"][i % 4];
            json!({
                "trace_id": TRACE, "span_id": format!("{:016x}", i + 1), "parent_span_id": parent,
                "name": format!("op-{i}"), "service": service,
                "kind": if i == 0 { "server" } else { "client" },
                "start_time_unix_nano": t0 + i as u64 * 1_000_000, "duration_ns": 20_000_000 - i as u64 * 1_000_000,
                "status": if i == 7 { "error" } else { "unset" },
                "attributes": {"http.route": "/checkout", "attempt": i},
            })
        })
        .collect();
    let r = reqwest::blocking::Client::new()
        .post(format!("{api}/api/v1/spans"))
        .json(&spans)
        .send()
        .map_err(|e| format!("ingest: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("ingest: HTTP {}", r.status()));
    }
    Ok(())
}

fn rest_call(c: &mut Connection) -> Result<Duration, String> {
    let started = Instant::now();
    let a = c.get(&format!("/api/v1/traces/{TRACE}"))?;
    let took = started.elapsed();
    let v: Value = serde_json::from_slice(&a.body).map_err(|e| format!("REST answer: {e}"))?;
    if a.status != 200 || v["span_count"] != SPANS {
        return Err(format!(
            "REST answer: HTTP {}, span_count {}",
            a.status, v["span_count"]
        ));
    }
    Ok(took)
}

fn mcp_post(c: &mut Connection, body: &Value) -> Result<(Duration, Value), String> {
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let a = c.post("/mcp", MCP_HEADERS, &bytes)?;
    let took = started.elapsed();
    let v: Value = serde_json::from_slice(&a.body).map_err(|e| {
        format!(
            "MCP answer (HTTP {}): {e}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        )
    })?;
    if a.status != 200 {
        return Err(format!("MCP answer: HTTP {}: {v}", a.status));
    }
    Ok((took, v))
}

fn mcp_call(c: &mut Connection, id: usize) -> Result<Duration, String> {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "get_trace", "arguments": {"trace_id": TRACE}}});
    let (took, v) = mcp_post(c, &call)?;
    let r = &v["result"];
    if r["isError"] != false || r["structuredContent"]["untrusted_telemetry"]["span_count"] != SPANS {
        return Err(format!("MCP get_trace: {v}"));
    }
    Ok(took)
}

pub fn run(args: &McpArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let server = SkeinProcess::start(&args.skein_bin, &[])?;
    ingest(&server.api)?;
    let mut rest = Connection::new(&server.api)?;
    let mut mcp = Connection::new(&server.api)?;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "skein-bench", "version": env!("CARGO_PKG_VERSION")}}});
    mcp_post(&mut mcp, &init)?;
    let (mut rest_s, mut mcp_s) = (Samples::default(), Samples::default());
    let warmup = (args.calls / 10).max(1);
    for i in 0..warmup + args.calls {
        // In turn, so both see the same machine noise.
        let (r, m) = (rest_call(&mut rest)?, mcp_call(&mut mcp, i + 1)?);
        if i >= warmup {
            rest_s.push(r);
            mcp_s.push(m);
        }
    }
    server.stop()?;
    let (rest_p, mcp_p) = (rest_s.summary(), mcp_s.summary());
    let overhead_p50 = mcp_p.p50_ms - rest_p.p50_ms;
    let result = json!({
        "machine": machine.finish(),
        "params": {"spans": SPANS, "calls": args.calls, "warmup": warmup, "transport": "streamable HTTP (stateless, JSON answers), one keep-alive connection each"},
        "results": {
            "rest_get_trace": rest_p,
            "mcp_get_trace": mcp_p,
            "overhead_p50_ms": overhead_p50,
            "overhead_p95_ms": mcp_p.p95_ms - rest_p.p95_ms,
            "target_p50_ms": 2.0,
            "meets_target": mcp_p.p50_ms <= 2.0,
        },
    });
    println!(
        "get_trace of {SPANS} spans: REST p50 {:.3} ms, MCP p50 {:.3} ms, overhead p50 {overhead_p50:.3} ms",
        rest_p.p50_ms, mcp_p.p50_ms
    );
    crate::report::write(&args.out, "mcp", result)
}
