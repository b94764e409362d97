//! `skein-bench ingest-matrix`: protocol × concurrent clients × batch size,
//! each cell the median of several timed rounds, with request latency.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use skein_model::corpus::Corpus;

use crate::e2e::bar;
use crate::load::{self, Payload, Protocol, Target};
use crate::machine::Machine;
use crate::server::SkeinProcess;
use crate::stats::median;

#[derive(clap::Args, Debug, Clone)]
pub struct MatrixArgs {
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Seconds of load per round.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub clients: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
    pub batches: Vec<usize>,
    /// Protocols: otlp-http-protobuf, otlp-http-json, grpc, json-api.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "otlp-http-protobuf,otlp-http-json,grpc,json-api"
    )]
    pub protocols: Vec<String>,
    #[arg(long, default_value = "fsync")]
    pub durability: String,
    /// Drive a running OTLP/HTTP endpoint instead (HTTP protocols only).
    #[arg(long)]
    pub target: Option<String>,
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

fn protocol(name: &str) -> Result<Protocol, String> {
    match name {
        "otlp-http-protobuf" => Ok(Protocol::OtlpHttpProtobuf),
        "otlp-http-json" => Ok(Protocol::OtlpHttpJson),
        "grpc" => Ok(Protocol::Grpc),
        "json-api" => Ok(Protocol::JsonApi),
        other => Err(format!("unknown protocol {other:?}")),
    }
}

/// Payloads of `batch` spans each, enough for one round at a generous rate,
/// from a fresh slice of the corpus (so rounds do not re-send spans).
fn payloads(c: &Corpus, protocol: Protocol, batch: usize, round_seed: u64, seconds: f64) -> Vec<Payload> {
    let budget_spans = ((400_000.0 * seconds) as u64).min(1_200_000);
    let n = (budget_spans / batch as u64).clamp(1, 60_000);
    let base = round_seed * 2_000_000;
    let mut out = Vec::with_capacity(n as usize);
    let mut spans = Vec::with_capacity(batch);
    let mut t = base;
    while (out.len() as u64) < n {
        for s in c.trace(t % c.traces) {
            spans.push(s);
            if spans.len() == batch {
                out.push(load::encode(protocol, &spans));
                spans.clear();
            }
        }
        t += 1;
    }
    out
}

pub fn run(args: &MatrixArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let corpus = Corpus::new(100_000_000, now);
    let mut cells: Vec<Value> = Vec::new();
    let mut round_seed = 0u64;
    let total = args.protocols.len() * args.clients.len() * args.batches.len();
    let pb = bar(total as u64, "ingest matrix cells");
    for pname in &args.protocols {
        let p = protocol(pname)?;
        let server = match &args.target {
            Some(_) => None,
            None => Some(SkeinProcess::start(
                &args.skein_bin,
                &["--durability".into(), args.durability.clone()],
            )?),
        };
        let target = match (&server, &args.target) {
            (Some(s), _) => s.target(),
            (None, Some(t)) => {
                if matches!(p, Protocol::Grpc | Protocol::JsonApi) {
                    continue;
                }
                Target {
                    otlp_http: t.trim_end_matches('/').to_string(),
                    grpc: String::new(),
                    api: String::new(),
                }
            }
            (None, None) => unreachable!(),
        };
        for &clients in &args.clients {
            for &batch in &args.batches {
                let mut rates = Vec::new();
                let mut p50s = Vec::new();
                let mut p99s = Vec::new();
                let mut errors = 0;
                let mut first_error = None;
                for _ in 0..args.rounds {
                    round_seed += 1;
                    let pl = Arc::new(payloads(&corpus, p, batch, round_seed, args.seconds));
                    let r = load::run(
                        &target,
                        p,
                        "/v1/traces",
                        pl,
                        clients,
                        Some(Duration::from_secs_f64(args.seconds)),
                        None,
                    )?;
                    rates.push(r.records_per_sec());
                    let s = r.latencies.summary();
                    p50s.push(s.p50_ms);
                    p99s.push(s.p99_ms);
                    errors += r.errors;
                    first_error = first_error.or(r.first_error);
                }
                // The latency of the median-throughput round.
                let mut idx: Vec<usize> = (0..rates.len()).collect();
                idx.sort_by(|a, b| rates[*a].total_cmp(&rates[*b]));
                let mid = idx[(idx.len() - 1) / 2];
                cells.push(json!({
                    "protocol": p.name(), "clients": clients, "batch": batch,
                    "spans_per_sec": median(rates.clone()), "rounds": rates,
                    "p50_ms": p50s[mid], "p99_ms": p99s[mid], "errors": errors, "first_error": first_error,
                }));
                pb.inc(1);
            }
        }
        if let Some(s) = server {
            s.stop()?;
        }
    }
    pb.finish_and_clear();
    let result = json!({
        "machine": machine.finish(),
        "params": {"seconds": args.seconds, "rounds": args.rounds, "durability": args.durability, "target": args.target},
        "cells": cells,
    });
    crate::report::write(&args.out, "ingest_matrix", result)
}
