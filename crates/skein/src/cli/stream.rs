//! The live commands: `watch` (a summary per tick) and `tail` (the latest
//! spans and logs, or with -f, each new one as it arrives).

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::client::{CliError, CliResult, Exit, NotFound, Params, api_error};
use super::filters::{parse_duration_arg, severity_arg, status_arg};
use super::output::{clip, human_duration, percent, rfc3339, write_stdout};
use super::{Ctx, Out};

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Time between ticks; each prints the summary of the window since the
    /// previous one.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = parse_duration_arg)]
    pub interval: Duration,
    /// Stop after N ticks [default: never].
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Only this service.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Signal {
    All,
    Spans,
    Logs,
}

#[derive(Args, Debug)]
pub struct TailArgs {
    /// Follow: print each new span and log as it is stored, until stopped.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Without -f: how many of the latest records to print.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,
    /// With -f: stop after N records [default: never].
    #[arg(long, value_name = "N", requires = "follow")]
    pub count: Option<u64>,
    /// Which records.
    #[arg(long, value_enum, default_value = "all")]
    pub signal: Signal,
    /// Only this service.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Spans with this status: unset, ok, error (error also keeps only logs
    /// of severity error and above).
    #[arg(long, value_name = "STATUS", value_parser = status_arg)]
    pub status: Option<String>,
    /// Logs of at least this severity: trace, debug, info, warn, error, fatal.
    #[arg(long, value_name = "LEVEL", value_parser = severity_arg)]
    pub severity: Option<String>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// One line of `watch` for people.
fn watch_line(v: &Value) -> String {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let end = v["window"]["end_unix_nano"].as_u64().map(rfc3339).unwrap_or_default();
    let p95 = v["latency"]["p95_ns"]
        .as_f64()
        .map(human_duration)
        .unwrap_or_else(|| "-".into());
    let top: Vec<String> = v["top_services"]
        .as_array()
        .map(|a| {
            a.iter()
                .take(3)
                .map(|s| format!("{}({})", s["service"].as_str().unwrap_or("?"), s["spans"]))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{end}  spans {}  traces {}  errors {} ({})  p95 {p95}  logs {}  points {}{}{}",
        n("spans"),
        n("traces"),
        n("error_spans"),
        percent(v["error_rate"].as_f64().unwrap_or(0.0)),
        n("logs"),
        n("metric_points"),
        if top.is_empty() { "" } else { "  top " },
        top.join(" ")
    )
}

/// `skein watch`: every interval, the summary of `[previous tick, now)`.
pub fn watch(ctx: &Ctx, a: &WatchArgs) -> CliResult<Exit> {
    if a.interval < Duration::from_millis(100) {
        return Err(CliError::usage("--interval must be at least 100ms"));
    }
    let client = ctx.client(false)?;
    let mut since = now_ns();
    let mut next = Instant::now() + a.interval;
    let mut ticks = 0u64;
    while a.count.is_none_or(|c| ticks < c) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += a.interval;
        let until = now_ns();
        let mut p: Params = vec![("since".into(), since.to_string()), ("until".into(), until.to_string())];
        if let Some(s) = &a.service {
            p.push(("service".into(), s.clone()));
        }
        let v = client.get_json(&["api", "v1", "summary"], &p, NotFound::Unexpected)?;
        since = until;
        ticks += 1;
        if ctx.out.table() {
            write_stdout(&watch_line(&v))?;
        } else {
            ctx.out.ndjson(&ctx.out.trim(v, None))?;
        }
    }
    Ok(Exit::Ok)
}

/// A tail record as one NDJSON object: the record with `signal`.
fn tagged(signal: &str, mut record: Value) -> Value {
    if let Value::Object(m) = &mut record {
        m.insert("signal".into(), signal.into());
    }
    record
}

/// One line of `tail` for people.
fn tail_line(v: &Value) -> String {
    let t = |k: &str| v.get(k).and_then(Value::as_u64).map(rfc3339).unwrap_or_default();
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
    match s("signal") {
        "span" => format!(
            "{}  span  {}  {}  {}  {}",
            t("start_time_unix_nano"),
            s("service"),
            s("name"),
            human_duration(v["duration_ns"].as_f64().unwrap_or(0.0)),
            v["status"]["code"].as_str().unwrap_or("")
        ),
        "log" => {
            let body = match &v["body"] {
                Value::String(b) => b.clone(),
                other => other.to_string(),
            };
            format!(
                "{}  log   {}  {}  {}",
                t("time_unix_nano"),
                s("service"),
                s("severity").to_uppercase(),
                clip(&body, 160)
            )
        }
        "lagged" => format!("… {} records skipped (reading too slowly)", v["skipped"]),
        _ => v.to_string(),
    }
}

fn print_record(out: &Out, v: Value) -> CliResult<()> {
    if out.table() {
        write_stdout(&tail_line(&v))
    } else {
        out.ndjson(&out.trim(v, None))
    }
}

fn time_of(v: &Value) -> u64 {
    v.get("start_time_unix_nano")
        .or_else(|| v.get("time_unix_nano"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// `skein tail [-f]`.
pub fn tail(ctx: &Ctx, a: &TailArgs) -> CliResult<Exit> {
    if a.follow { follow(ctx, a) } else { latest(ctx, a) }
}

/// The latest `--limit` spans and logs, oldest first; exit 1 when none.
fn latest(ctx: &Ctx, a: &TailArgs) -> CliResult<Exit> {
    let client = ctx.client(false)?;
    let limit = a.limit.clamp(1, 10_000);
    let mut records: Vec<Value> = Vec::new();
    if a.signal != Signal::Logs {
        let mut p: Params = vec![("limit".into(), limit.to_string())];
        if let Some(s) = &a.service {
            p.push(("service".into(), s.clone()));
        }
        if let Some(s) = &a.status {
            p.push(("status".into(), s.clone()));
        }
        let v = client.get_json(&["api", "v1", "spans"], &p, NotFound::Unexpected)?;
        let spans = v.get("spans").and_then(Value::as_array).cloned().unwrap_or_default();
        records.extend(spans.into_iter().map(|s| tagged("span", s)));
    }
    if a.signal != Signal::Spans {
        let mut p: Params = vec![("limit".into(), limit.to_string())];
        if let Some(s) = &a.service {
            p.push(("service".into(), s.clone()));
        }
        // As the live stream does: --status error keeps error logs only.
        let severity = a
            .severity
            .clone()
            .or_else(|| (a.status.as_deref() == Some("error")).then(|| "error".to_string()));
        if let Some(s) = severity {
            p.push(("severity".into(), s));
        }
        let v = client.get_json(&["api", "v1", "logs"], &p, NotFound::Unexpected)?;
        let logs = v.get("logs").and_then(Value::as_array).cloned().unwrap_or_default();
        records.extend(logs.into_iter().map(|l| tagged("log", l)));
    }
    // Newest `limit` of both, printed oldest first (as tail does).
    records.sort_by_key(|r| std::cmp::Reverse(time_of(r)));
    records.truncate(limit);
    records.reverse();
    let exit = if records.is_empty() { Exit::NoResults } else { Exit::Ok };
    for r in records {
        print_record(&ctx.out, r)?;
    }
    Ok(exit)
}

/// Follows `/api/v1/tail` (server-sent events) until stopped or `--count`.
fn follow(ctx: &Ctx, a: &TailArgs) -> CliResult<Exit> {
    let client = ctx.client(true)?;
    let mut p: Params = vec![(
        "signal".into(),
        match a.signal {
            Signal::All => "all",
            Signal::Spans => "spans",
            Signal::Logs => "logs",
        }
        .into(),
    )];
    for (k, v) in [
        ("service", &a.service),
        ("status", &a.status),
        ("severity", &a.severity),
    ] {
        if let Some(v) = v {
            p.push((k.into(), v.clone()));
        }
    }
    let r = client.send(&["api", "v1", "tail"], &p)?;
    if !r.status().is_success() {
        let status = r.status();
        let body = r.bytes().unwrap_or_default();
        return Err(api_error(status, &body, NotFound::Unexpected));
    }
    let mut seen = 0u64;
    let (mut event, mut data) = (String::new(), String::new());
    for line in BufReader::new(r).lines() {
        let line =
            line.map_err(|e| CliError::new(Exit::Unreachable, "unreachable", format!("the stream broke: {e}")))?;
        if line.is_empty() {
            if !data.is_empty() {
                let record: Value = serde_json::from_str(&data).unwrap_or_else(|_| json!({"data": data}));
                let name = if event.is_empty() { "message" } else { event.as_str() };
                print_record(&ctx.out, tagged(name, record))?;
                if name != "lagged" {
                    seen += 1;
                }
                if a.count.is_some_and(|c| seen >= c) {
                    return Ok(Exit::Ok);
                }
            }
            event.clear();
            data.clear();
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
        // Comments (keep-alives) and other fields are ignored.
    }
    Err(CliError::new(
        Exit::Unreachable,
        "unreachable",
        "the server closed the stream (shutting down?)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_read_well() {
        let span = tagged(
            "span",
            json!({"start_time_unix_nano": 1_700_000_000_000_000_000u64, "service": "checkout", "name": "GET /cart",
                   "duration_ns": 1_250_000, "status": {"code": "error", "message": null}}),
        );
        assert_eq!(
            tail_line(&span),
            "2023-11-14T22:13:20.000Z  span  checkout  GET /cart  1.25ms  error"
        );
        let log = tagged(
            "log",
            json!({"time_unix_nano": 1_700_000_000_000_000_000u64, "service": "payments", "severity": "error",
                   "body": "charge failed"}),
        );
        assert_eq!(
            tail_line(&log),
            "2023-11-14T22:13:20.000Z  log   payments  ERROR  charge failed"
        );
    }
}
