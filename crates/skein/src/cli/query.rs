//! The search and lookup commands: `query traces|spans|logs|metrics`,
//! `get trace`, `correlate`.

use clap::{Args, Subcommand};

use super::client::{CliResult, Exit, NotFound};
use super::filters::{LogFilters, MetricFilters, PayloadsArg, SpanFilters};
use super::inspect::print_list;
use super::output::{Format, table, write_stdout};
use super::{Ctx, found, waterfall};

#[derive(Subcommand, Debug)]
pub enum QueryCommand {
    /// Traces having a span that matches, newest first (one summary each).
    Traces(SpanFilters),
    /// Spans, newest first.
    Spans(SpanFilters),
    /// Log records, newest first.
    Logs(LogFilters),
    /// Metric points, newest first.
    Metrics(MetricFilters),
}

#[derive(Subcommand, Debug)]
pub enum GetCommand {
    /// One trace: its spans in tree order with their depth. With --format
    /// table, a waterfall; with --format otlp, OTLP/JSON.
    Trace(GetTraceArgs),
    /// One payload's bytes (a prompt, completion or big value that records
    /// refer to as {"$payload": "blake3:…"}), written to stdout as stored.
    Payload(GetPayloadArgs),
}

#[derive(Args, Debug)]
pub struct GetPayloadArgs {
    /// The reference: blake3:<64 hex digits>.
    #[arg(value_name = "REF")]
    pub reference: String,
}

#[derive(Args, Debug)]
pub struct GetTraceArgs {
    /// The trace id (32 hex digits).
    pub trace_id: String,
    /// Add the engine's account of how it answered.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub payloads: PayloadsArg,
}

#[derive(Args, Debug)]
pub struct CorrelateArgs {
    /// The trace id (32 hex digits).
    #[arg(long = "trace", value_name = "ID")]
    pub trace_id: String,
    #[command(flatten)]
    pub payloads: PayloadsArg,
}

pub const SPAN_COLUMNS: &[(&str, &str)] = &[
    ("start_time_unix_nano", "START"),
    ("trace_id", "TRACE"),
    ("span_id", "SPAN"),
    ("service", "SERVICE"),
    ("name", "NAME"),
    ("kind", "KIND"),
    ("duration_ns", "DURATION"),
    ("status", "STATUS"),
];

const TRACE_COLUMNS: &[(&str, &str)] = &[
    ("start_time_unix_nano", "START"),
    ("trace_id", "TRACE"),
    ("root.service", "ROOT SERVICE"),
    ("root.name", "ROOT"),
    ("span_count", "SPANS"),
    ("error_count", "ERRORS"),
    ("duration_ns", "DURATION"),
    ("services", "SERVICES"),
];

pub const LOG_COLUMNS: &[(&str, &str)] = &[
    ("time_unix_nano", "TIME"),
    ("service", "SERVICE"),
    ("severity", "SEVERITY"),
    ("body", "BODY"),
    ("trace_id", "TRACE"),
];

const METRIC_COLUMNS: &[(&str, &str)] = &[
    ("time_unix_nano", "TIME"),
    ("service", "SERVICE"),
    ("name", "NAME"),
    ("type", "TYPE"),
    ("value", "VALUE"),
    ("unit", "UNIT"),
    ("attributes", "ATTRIBUTES"),
];

/// `skein query …`: the search endpoints. Exit 1 when nothing matched.
pub fn query(ctx: &Ctx, q: &QueryCommand) -> CliResult<Exit> {
    if let QueryCommand::Metrics(f) = q
        && let Some(promql) = &f.promql
    {
        return promql_query(ctx, f, promql);
    }
    let (path, params, key, cols) = match q {
        // Trace summaries hold no attribute values: --payloads does not apply.
        QueryCommand::Traces(f) => {
            let mut p = f.params();
            p.retain(|(k, _)| k != "payloads");
            ("traces", p, "traces", TRACE_COLUMNS)
        }
        QueryCommand::Spans(f) => ("spans", f.params(), "spans", SPAN_COLUMNS),
        QueryCommand::Logs(f) => ("logs", f.params(), "logs", LOG_COLUMNS),
        QueryCommand::Metrics(f) => ("metrics", f.params(), "points", METRIC_COLUMNS),
    };
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", path], &params, NotFound::Unexpected)?;
    let exit = found(v.get(key));
    print_list(&ctx.out, v, key, cols, None)?;
    Ok(exit)
}

/// `skein get trace ID`. Exit 1 when there is no such trace.
pub fn get(ctx: &Ctx, g: &GetCommand) -> CliResult<Exit> {
    let a = match g {
        GetCommand::Trace(a) => a,
        GetCommand::Payload(p) => return get_payload(ctx, p),
    };
    let mut params = Vec::new();
    a.payloads.params(&mut params);
    if ctx.out.format == Format::Otlp {
        params.push(("format".to_string(), "otlp".to_string()));
    }
    if a.explain {
        params.push(("explain".to_string(), "true".to_string()));
    }
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "traces", &a.trace_id], &params, NotFound::NoResults)?;
    match ctx.out.format {
        Format::Otlp => ctx.out.json(&v)?,
        Format::Table if ctx.out.fields.is_empty() => write_stdout(&waterfall::render(&v, waterfall::WIDTH))?,
        _ => print_list(&ctx.out, v, "spans", SPAN_COLUMNS, None)?,
    }
    Ok(Exit::Ok)
}

/// `skein correlate --trace ID`: the trace, its logs, its services'
/// metrics around it. Exit 1 when there is no such trace.
pub fn correlate(ctx: &Ctx, a: &CorrelateArgs) -> CliResult<Exit> {
    let mut params = Vec::new();
    a.payloads.params(&mut params);
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "correlate", &a.trace_id], &params, NotFound::NoResults)?;
    if ctx.out.table() && ctx.out.fields.is_empty() {
        let mut text = waterfall::render(&v["trace"], waterfall::WIDTH);
        for (title, key, cols) in [("LOGS", "logs", LOG_COLUMNS), ("METRICS", "metrics", METRIC_COLUMNS)] {
            let rows = v[key].as_array().cloned().unwrap_or_default();
            text.push_str(&format!("\n{title} ({})\n", rows.len()));
            if !rows.is_empty() {
                let cols: Vec<(String, String)> = cols.iter().map(|(k, h)| (k.to_string(), h.to_string())).collect();
                text.push_str(&table(&rows, &cols));
            }
        }
        write_stdout(&text)?;
    } else if ctx.out.table() {
        write_stdout(&super::output::key_values(&v, &super::output::columns(&ctx.out, &[])))?;
    } else {
        ctx.out.json(&ctx.out.trim(v, None))?;
    }
    Ok(Exit::Ok)
}

/// `skein get payload REF`: the bytes as stored, to stdout. Exit 1 when no
/// payload has that reference.
fn get_payload(ctx: &Ctx, a: &GetPayloadArgs) -> CliResult<Exit> {
    use std::io::Write;
    let c = ctx.client(false)?;
    let r = c.send(&["api", "v1", "payloads", &a.reference], &[])?;
    let status = r.status();
    let body = r
        .bytes()
        .map_err(|e| super::client::CliError::new(Exit::Unreachable, "unreachable", e.to_string()))?;
    if !status.is_success() {
        return Err(super::client::api_error(status, &body, NotFound::NoResults));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&body)?;
    out.flush()?;
    Ok(Exit::Ok)
}

/// Seconds since the epoch, as the Prometheus API takes times, of a time
/// flag (any form `--since` takes; `None`: now).
fn prometheus_time(flag: &str, v: Option<&String>) -> CliResult<String> {
    use skein_server::api::params::parse_time;
    let ns = match v {
        Some(v) => {
            parse_time(v).map_err(|e| super::client::CliError::new(Exit::Usage, "usage", format!("{flag}: {e}")))?
        }
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    };
    Ok(format!("{}.{:03}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000_000))
}

/// `skein query metrics --promql Q [--step S]`: the Prometheus API's answer
/// (`data`: resultType and result). A table shows one row per sample.
fn promql_query(ctx: &Ctx, f: &MetricFilters, promql: &str) -> CliResult<Exit> {
    let w = &f.window;
    let end = prometheus_time("--until", w.until.as_ref())?;
    let mut params = vec![("query".to_string(), promql.to_string())];
    let path = match &f.step {
        None => {
            params.push(("time".into(), end));
            "query"
        }
        Some(step) => {
            let since = match (&w.since, &w.last) {
                (Some(s), _) => Some(s.clone()),
                (None, Some(l)) => Some(l.clone()),
                (None, None) => Some("1h".to_string()),
            };
            params.push(("start".into(), prometheus_time("--since", since.as_ref())?));
            params.push(("end".into(), end));
            params.push(("step".into(), step.clone()));
            "query_range"
        }
    };
    let v = ctx
        .client(false)?
        .get_json(&["prometheus", "api", "v1", path], &params, NotFound::Unexpected)?;
    let data = v.get("data").cloned().unwrap_or_default();
    let result = data.get("result").cloned().unwrap_or_default();
    let exit = match &result {
        serde_json::Value::Array(a) if a.is_empty() => Exit::NoResults,
        _ => Exit::Ok,
    };
    if !ctx.out.table() {
        ctx.out.json(&data)?;
        return Ok(exit);
    }
    let mut rows = Vec::new();
    let mut push = |metric: &serde_json::Value, p: &serde_json::Value| {
        // A native histogram reads as its count, sum and bucket count.
        let value = match &p[1] {
            serde_json::Value::Object(h) => serde_json::json!(format!(
                "histogram count={} sum={} buckets={}",
                h.get("count").and_then(|v| v.as_str()).unwrap_or("0"),
                h.get("sum").and_then(|v| v.as_str()).unwrap_or("0"),
                h.get("buckets").and_then(|v| v.as_array()).map_or(0, Vec::len)
            )),
            v => v.clone(),
        };
        rows.push(serde_json::json!({"metric": metric.to_string(), "time": p[0], "value": value}));
    };
    match &result {
        serde_json::Value::Array(series) => {
            for s in series {
                for key in ["value", "histogram"] {
                    if let Some(p) = s.get(key) {
                        push(&s["metric"], p);
                    }
                }
                for key in ["values", "histograms"] {
                    for p in s.get(key).and_then(|v| v.as_array()).into_iter().flatten() {
                        push(&s["metric"], p);
                    }
                }
            }
        }
        scalar => push(&serde_json::json!({}), scalar),
    }
    print_list(
        &ctx.out,
        serde_json::json!({"samples": rows}),
        "samples",
        &[("metric", "SERIES"), ("time", "TIME"), ("value", "VALUE")],
        None,
    )?;
    Ok(exit)
}
