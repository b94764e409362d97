//! The overview commands: `status`, `summarize`, `anomalies`, `services`,
//! `operations`.

use clap::Args;
use serde_json::{Map, Value};

use super::client::{CliResult, Exit, NotFound, Params};
use super::filters::{ExplainArg, WindowArgs, duration_arg, params_with_explain, time_arg};
use super::output::{self, Out, columns, key_values, table, write_stdout};
use super::{Ctx, found};

#[derive(Args, Debug)]
pub struct SummarizeArgs {
    /// Only this service.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
}

#[derive(Args, Debug)]
pub struct AnomaliesArgs {
    /// How far back to search for the point where an operation's error
    /// rate or latency changed [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, conflicts_with_all = ["last", "baseline"])]
    pub lookback: Option<String>,
    /// Fixed-split form: the current window, ending now (or --until)
    /// [default: 5m when --baseline is given].
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub last: Option<String>,
    /// Fixed-split form: the baseline window just before the current one
    /// [default: 30m when --last is given].
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub baseline: Option<String>,
    /// End of the look-back [default: now].
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub until: Option<String>,
    /// Only this service's operations.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Findings at most (max 100).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub limit: usize,
    /// Say how each finding was reached (and how the engine answered).
    #[command(flatten)]
    pub explain: ExplainArg,
}

#[derive(Args, Debug)]
pub struct ServicesArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
}

#[derive(Args, Debug)]
pub struct OperationsArgs {
    /// The service (as `skein services` lists it).
    pub service: String,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
}

const STATUS_KEYS: &[(&str, &str)] = &[
    ("server", "SERVER"),
    ("status", "STATUS"),
    ("version", "VERSION"),
    ("uptime_seconds", "UPTIME"),
    ("records", "RECORDS"),
    ("spans", "SPANS"),
    ("logs", "LOGS"),
    ("metric_points", "METRIC POINTS"),
    ("parts", "PARTS"),
    ("text_index_backlog_parts", "PARTS TO TEXT-INDEX"),
    ("bytes_on_disk", "ON DISK"),
    ("wal_bytes", "WAL"),
    ("disk_free_bytes", "DISK FREE"),
    ("min_free_disk_bytes", "MIN FREE"),
    ("retention_policy", "RETENTION"),
    ("hot_records", "HOT RECORDS"),
    ("hot_bytes", "HOT"),
    ("resident_memory_bytes", "MEMORY"),
    ("durability", "DURABILITY"),
    ("data_dir", "DATA DIR"),
];

/// One line on parts kept in a bucket: where, what waits to go up, the cache.
fn object_storage_line(os: &Value, read_only: bool) -> String {
    let n = |k: &str| os.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    let lookups = n("cache_hits") + n("cache_misses");
    let hit_ratio = if lookups == 0 {
        "no block reads yet".to_string()
    } else {
        format!(
            "{:.0}% of block reads hit",
            100.0 * n("cache_hits") as f64 / lookups as f64
        )
    };
    let corrupt = match n("corrupt_reads") {
        0 => String::new(),
        c => format!(" · {c} CORRUPT READS refused"),
    };
    format!(
        "storage: {}{} · {} objects ({}) in the bucket · {} waiting to upload ({}) · cache {} of {}, {hit_ratio}{corrupt}",
        os.get("url").and_then(Value::as_str).unwrap_or("?"),
        if read_only { " (read-only)" } else { "" },
        n("remote_objects"),
        mib(n("remote_bytes")),
        n("pending_uploads"),
        mib(n("pending_upload_bytes")),
        mib(n("cache_bytes")),
        mib(n("cache_capacity_bytes")),
    )
}

/// `skein status`: readiness (`/readyz`) and the stats (`/api/v1/stats`)
/// in one object. Exit 0 when ready, 4 when the server answers but is not
/// (starting, shutting down, faulted), 3 when it does not answer.
pub fn status(ctx: &Ctx) -> CliResult<Exit> {
    let c = ctx.client(false)?;
    let r = c.send(&["readyz"], &[])?;
    let code = r.status();
    let body = r.bytes().unwrap_or_default();
    let readiness: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut v = Map::new();
    v.insert("server".into(), c.base().into());
    let exit = if code.is_success() {
        let stats = c.get_json(&["api", "v1", "stats"], &[], NotFound::Unexpected)?;
        if let Value::Object(m) = stats {
            v.extend(m);
        }
        v.insert("ready".into(), true.into());
        // "degraded" when a fault that leaves writes working is in force
        // (a damaged payload): the stats carry it in `faults`.
        let status = readiness.get("status").and_then(Value::as_str).unwrap_or("ready");
        v.insert("status".into(), status.into());
        if let Some(m) = readiness.get("message") {
            v.insert("message".into(), m.clone());
        }
        Exit::Ok
    } else if code.as_u16() == 503 && readiness.get("status").is_some() {
        // A faulted server still answers queries: what it holds helps the
        // operator judge the damage. Its faults come from /readyz below.
        if readiness["status"] == "faulted"
            && let Ok(Value::Object(stats)) = c.get_json(&["api", "v1", "stats"], &[], NotFound::Unexpected)
        {
            v.extend(stats);
        }
        v.insert("ready".into(), false.into());
        v.insert("status".into(), readiness["status"].clone());
        v.insert(
            "message".into(),
            readiness.get("message").cloned().unwrap_or(Value::Null),
        );
        if let Some(faults) = readiness.get("faults") {
            v.insert("faults".into(), faults.clone());
        }
        Exit::Server
    } else {
        return Err(super::client::api_error(code, &body, NotFound::Unexpected));
    };
    let v = Value::Object(v);
    if ctx.out.table() {
        let keys = columns(&ctx.out, STATUS_KEYS);
        let keys: Vec<(String, String)> = if ctx.out.fields.is_empty() {
            keys.into_iter().filter(|(k, _)| v.get(k).is_some()).collect()
        } else {
            keys
        };
        write_stdout(&key_values(&v, &keys))?;
        if let Some(os) = v.get("object_storage").filter(|o| o.is_object()) {
            write_stdout(&object_storage_line(os, v["read_only"] == true))?;
        }
        if let Some(faults) = v.get("faults").and_then(Value::as_array).filter(|f| !f.is_empty()) {
            write_stdout(&fault_lines(faults))?;
        } else if let Some(m) = v.get("message").and_then(Value::as_str) {
            write_stdout(&format!("not ready: {m}"))?;
        }
    } else {
        ctx.out.json(&ctx.out.trim(v, None))?;
    }
    Ok(exit)
}

/// The faults of a faulted server, one per line after a header that says
/// what they mean, so they stand out under the key/value lines.
fn fault_lines(faults: &[Value]) -> String {
    // Degraded (still ready) when every fault is of a kind that leaves the
    // server answering and heals or waits (a full disk, failing retention).
    let degraded = faults
        .iter()
        .all(|f| serde_json::from_value::<skein_engine::FaultKind>(f["kind"].clone()).is_ok_and(|k| k.degrades_only()));
    let mut out = format!(
        "{}: {} fault{} need{} an operator\n",
        if degraded { "DEGRADED" } else { "NOT READY" },
        faults.len(),
        if faults.len() == 1 { "" } else { "s" },
        if faults.len() == 1 { "s" } else { "" }
    );
    for f in faults {
        let kind = f.get("kind").and_then(Value::as_str).unwrap_or("?");
        let message = f.get("message").and_then(Value::as_str).unwrap_or("");
        let failures = f.get("failures").and_then(Value::as_u64).unwrap_or(0);
        let since = f
            .get("since_unix_nano")
            .and_then(Value::as_u64)
            .map(output::rfc3339)
            .unwrap_or_else(|| "…".into());
        let plural = if failures == 1 { "" } else { "s" };
        out.push_str(&format!(
            "  FAULT {kind}: {message} (since {since}, {failures} failure{plural})\n"
        ));
    }
    out
}

fn window_line(w: &Value) -> String {
    let t = |k: &str| {
        w.get(k)
            .and_then(Value::as_u64)
            .map(output::rfc3339)
            .unwrap_or_else(|| "…".into())
    };
    format!("{} → {}", t("start_unix_nano"), t("end_unix_nano"))
}

const SERVICE_COLUMNS: &[(&str, &str)] = &[
    ("service", "SERVICE"),
    ("spans", "SPANS"),
    ("traces", "TRACES"),
    ("errors", "ERRORS"),
    ("error_rate", "ERROR%"),
    ("p50_ns", "P50"),
    ("p95_ns", "P95"),
    ("p99_ns", "P99"),
    ("max_ns", "MAX"),
    ("rate_per_sec", "RATE/S"),
];

const OPERATION_COLUMNS: &[(&str, &str)] = &[
    ("service", "SERVICE"),
    ("name", "OPERATION"),
    ("spans", "SPANS"),
    ("errors", "ERRORS"),
    ("error_rate", "ERROR%"),
    ("p50_ns", "P50"),
    ("p95_ns", "P95"),
    ("p99_ns", "P99"),
    ("rate_per_sec", "RATE/S"),
];

fn owned(cols: &[(&str, &str)]) -> Vec<(String, String)> {
    cols.iter().map(|(k, h)| (k.to_string(), h.to_string())).collect()
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn summary_table(v: &Value) -> String {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let lat = |k: &str| {
        v["latency"]
            .get(k)
            .and_then(Value::as_f64)
            .map(output::human_duration)
            .unwrap_or_else(|| "-".into())
    };
    let sev: Vec<String> = v["logs_by_severity"]
        .as_object()
        .map(|m| m.iter().map(|(k, c)| format!("{k} {c}")).collect())
        .unwrap_or_default();
    let mut out = String::new();
    let mut line = |k: &str, text: String| out.push_str(&format!("{k:<8} {text}\n"));
    line("WINDOW", window_line(&v["window"]));
    if let Some(s) = v.get("service").and_then(Value::as_str) {
        line("SERVICE", s.to_string());
    }
    line(
        "SPANS",
        format!(
            "{} in {}, {} ({}), {}",
            n("spans"),
            plural(n("traces"), "trace"),
            plural(n("error_spans"), "error"),
            output::percent(v["error_rate"].as_f64().unwrap_or(0.0)),
            plural(n("services"), "service")
        ),
    );
    line(
        "LATENCY",
        format!(
            "p50 {}  p95 {}  p99 {}  max {}",
            lat("p50_ns"),
            lat("p95_ns"),
            lat("p99_ns"),
            lat("max_ns")
        ),
    );
    let sev = if sev.is_empty() {
        String::new()
    } else {
        format!(" ({})", sev.join(", "))
    };
    line("LOGS", format!("{}{sev}", n("logs")));
    line(
        "METRICS",
        format!(
            "{} in {} series",
            plural(n("metric_points"), "point"),
            n("metric_series")
        ),
    );
    for (title, key, cols) in [
        ("TOP SERVICES", "top_services", SERVICE_COLUMNS),
        ("TOP ERROR OPERATIONS", "top_error_operations", OPERATION_COLUMNS),
        ("FINDINGS", "findings", FINDING_COLUMNS),
    ] {
        if let Some(rows) = v[key].as_array().filter(|r| !r.is_empty()) {
            out.push_str(&format!("\n{title}\n"));
            out.push_str(&table(rows, &owned(cols)));
        }
    }
    out
}

/// `skein summarize`: `/api/v1/summary`. Exit 1 when the window holds no
/// spans, logs or metric points.
pub fn summarize(ctx: &Ctx, a: &SummarizeArgs) -> CliResult<Exit> {
    let mut p = Params::new();
    a.window.params(&mut p);
    if let Some(s) = &a.service {
        p.push(("service".into(), s.clone()));
    }
    params_with_explain(&mut p, a.explain.explain);
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "summary"], &p, NotFound::Unexpected)?;
    let total: u64 = ["spans", "logs", "metric_points"]
        .iter()
        .map(|k| v.get(*k).and_then(Value::as_u64).unwrap_or(0))
        .sum();
    print_object(&ctx.out, v, summary_table)?;
    Ok(if total == 0 { Exit::NoResults } else { Exit::Ok })
}

/// An answer without a main list: JSON (trimmed), the command's own table,
/// or with --fields a key/value table of those fields.
fn print_object(out: &Out, v: Value, render: impl Fn(&Value) -> String) -> CliResult<()> {
    if out.table() {
        if out.fields.is_empty() {
            write_stdout(&render(&v))
        } else {
            write_stdout(&key_values(&v, &columns(out, &[])))
        }
    } else {
        out.json(&out.trim(v, None))
    }
}

/// An answer with a main list `key`: JSON with --fields applied to each
/// element, or a table of the list.
pub fn print_list(out: &Out, v: Value, key: &str, cols: &[(&str, &str)], title: Option<String>) -> CliResult<()> {
    if out.table() {
        let rows = v.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
        let mut text = String::new();
        if let Some(t) = title {
            text.push_str(&t);
            text.push('\n');
        }
        text.push_str(&table(&rows, &columns(out, cols)));
        if let Some(c) = v.get("next_cursor").and_then(Value::as_str) {
            text.push_str(&format!("(more: --cursor {c})\n"));
        }
        write_stdout(&text)
    } else {
        out.json(&out.trim(v, Some(key)))
    }
}

const FINDING_COLUMNS: &[(&str, &str)] = &[
    ("service", "SERVICE"),
    ("operation", "OPERATION"),
    ("kind", "KIND"),
    ("role", "ROLE"),
    ("started_at_unix_nano", "STARTED"),
    ("impact", "IMPACT"),
    ("message", "MESSAGE"),
];

/// `skein anomalies`: `/api/v1/anomalies`. Exit 1 when nothing changed.
pub fn anomalies(ctx: &Ctx, a: &AnomaliesArgs) -> CliResult<Exit> {
    let mut p: Params = vec![("limit".into(), a.limit.to_string())];
    for (k, v) in [
        ("lookback", &a.lookback),
        ("last", &a.last),
        ("baseline", &a.baseline),
        ("until", &a.until),
        ("service", &a.service),
    ] {
        if let Some(v) = v {
            p.push((k.into(), v.clone()));
        }
    }
    params_with_explain(&mut p, a.explain.explain);
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "anomalies"], &p, NotFound::Unexpected)?;
    let exit = found(v.get("findings"));
    let title = match v.get("current") {
        Some(cur) => format!("current {}, baseline {}", window_line(cur), window_line(&v["baseline"])),
        None => format!("look-back {}", window_line(&v["window"])),
    };
    let explained = a.explain.explain && ctx.out.table();
    let lines: Vec<String> = if explained { findings_explained(&v) } else { Vec::new() };
    print_list(&ctx.out, v, "findings", FINDING_COLUMNS, Some(title))?;
    if exit == Exit::NoResults && ctx.out.table() {
        write_stdout("(no anomalies)")?;
    }
    if !lines.is_empty() {
        write_stdout(&lines.join("\n"))?;
    }
    Ok(exit)
}

/// How each finding was reached, for the table form of `--explain`.
fn findings_explained(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for f in v.get("findings").and_then(Value::as_array).into_iter().flatten() {
        out.push(format!(
            "\n{} {} ({}):",
            f["service"].as_str().unwrap_or(""),
            f["operation"].as_str().unwrap_or("(all operations)"),
            f["kind"].as_str().unwrap_or("")
        ));
        for line in f.get("explain").and_then(Value::as_array).into_iter().flatten() {
            out.push(format!("  - {}", line.as_str().unwrap_or("")));
        }
    }
    out
}

/// `skein services`: `/api/v1/services`. Exit 1 when there are none.
pub fn services(ctx: &Ctx, a: &ServicesArgs) -> CliResult<Exit> {
    let mut p = Params::new();
    a.window.params(&mut p);
    params_with_explain(&mut p, a.explain.explain);
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "services"], &p, NotFound::Unexpected)?;
    let exit = found(v.get("services"));
    print_list(&ctx.out, v, "services", SERVICE_COLUMNS, None)?;
    Ok(exit)
}

/// `skein operations SERVICE`: `/api/v1/services/{service}/operations`.
/// Exit 1 when the service has none (or does not exist).
pub fn operations(ctx: &Ctx, a: &OperationsArgs) -> CliResult<Exit> {
    let mut p = Params::new();
    a.window.params(&mut p);
    params_with_explain(&mut p, a.explain.explain);
    let v = ctx.client(false)?.get_json(
        &["api", "v1", "services", &a.service, "operations"],
        &p,
        NotFound::Unexpected,
    )?;
    let exit = found(v.get("operations"));
    print_list(&ctx.out, v, "operations", &OPERATION_COLUMNS[1..], None)?;
    Ok(exit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_summary_table_reads_as_sentences() {
        let v = json!({
            "window": {"start_unix_nano": 1_700_000_000_000_000_000u64, "end_unix_nano": 1_700_003_600_000_000_000u64},
            "service": null, "spans": 60, "traces": 60, "error_spans": 5, "error_rate": 5.0 / 60.0,
            "services": 3, "latency": {"p50_ns": 10_000_000, "p95_ns": 30_000_000, "p99_ns": 30_000_000, "max_ns": 30_000_000},
            "logs": 6, "logs_by_severity": {"error": 2, "info": 4}, "metric_points": 0, "metric_series": 0,
            "top_services": [], "top_error_operations": [],
        });
        let t = summary_table(&v);
        assert!(
            t.contains("SPANS    60 in 60 traces, 5 errors (8.3%), 3 services"),
            "{t}"
        );
        assert!(t.contains("LATENCY  p50 10ms  p95 30ms  p99 30ms  max 30ms"), "{t}");
        assert!(t.contains("LOGS     6 (error 2, info 4)"), "{t}");
        assert!(t.contains("2023-11-14T22:13:20.000Z → 2023-11-14T23:13:20.000Z"), "{t}");
    }

    #[test]
    fn each_fault_is_a_line_of_its_own() {
        let faults = serde_json::json!([
            {"kind": "wal", "message": "write of /d/1.wal: No space left on device (os error 28)",
             "since_unix_nano": 1_700_000_000_000_000_000u64, "failures": 1},
            {"kind": "flush", "message": "create /d/parts/spans/2.tmp: Not a directory (os error 20)",
             "since_unix_nano": 1_700_000_000_000_000_000u64, "failures": 3},
        ]);
        let t = fault_lines(faults.as_array().unwrap());
        assert_eq!(
            t,
            "NOT READY: 2 faults need an operator\n\
             \x20 FAULT wal: write of /d/1.wal: No space left on device (os error 28) (since 2023-11-14T22:13:20.000Z, 1 failure)\n\
             \x20 FAULT flush: create /d/parts/spans/2.tmp: Not a directory (os error 20) (since 2023-11-14T22:13:20.000Z, 3 failures)\n"
        );
        // A full disk and failing retention leave the server degraded, not
        // down.
        let faults = serde_json::json!([
            {"kind": "disk", "message": "12.0 MiB free on /d, below --min-free-disk 50.0 MiB",
             "since_unix_nano": 1_700_000_000_000_000_000u64, "failures": 4},
            {"kind": "retention", "message": "remove /d/parts/spans/1.parquet: Permission denied",
             "since_unix_nano": 1_700_000_000_000_000_000u64, "failures": 1},
        ]);
        let t = fault_lines(faults.as_array().unwrap());
        assert!(t.starts_with("DEGRADED: 2 faults need an operator\n"), "{t}");
        assert!(t.contains("FAULT disk: 12.0 MiB free on /d"), "{t}");
    }
}
