//! The LLM commands: `llm usage`, `llm tools`, `sessions`, `session ID`.

use clap::{Args, Subcommand};
use serde_json::Value;

use super::client::{CliResult, Exit, NotFound, Params};
use super::filters::{ExplainArg, WindowArgs, params_with_explain};
use super::inspect::print_list;
use super::output::{cell, rfc3339, write_stdout};
use super::{Ctx, found};

#[derive(Subcommand, Debug)]
pub enum LlmCommand {
    /// Calls, tokens by kind, cost and latency of LLM calls, grouped.
    Usage(UsageArgs),
    /// Tool executions per tool: calls, errors, p50/p95.
    Tools(ToolsArgs),
}

#[derive(Args, Debug)]
pub struct UsageArgs {
    /// Group by model, provider, service, session, agent, user or day.
    #[arg(long = "by", value_name = "DIMENSION", default_value = "model")]
    pub by: String,
    /// Add each group's mean score per score name (`scores` in the JSON).
    #[arg(long)]
    pub scores: bool,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
}

#[derive(Args, Debug)]
pub struct ToolsArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
}

#[derive(Args, Debug)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// Sessions per page.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Continue after a previous page (its `next_cursor`).
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
}

#[derive(Args, Debug)]
pub struct SessionArgs {
    /// The session id (`skein sessions` lists them).
    pub id: String,
    /// `ref` (default: big messages as payload references) or `inline`.
    #[arg(long, value_name = "MODE", default_value = "ref")]
    pub payloads: String,
}

#[derive(Subcommand, Debug)]
pub enum ScoreCommand {
    /// Score a trace (or one of its spans, or a session) without changing it.
    Add(ScoreAddArgs),
}

#[derive(Args, Debug)]
pub struct ScoreAddArgs {
    /// The trace scored (32 hex digits).
    #[arg(long = "trace", value_name = "TRACE_ID")]
    pub trace_id: String,
    /// The score's name, e.g. helpful, correctness.
    #[arg(long)]
    pub name: String,
    /// A number, true/false, or any other text (a label).
    #[arg(long)]
    pub value: String,
    /// The span scored (16 hex digits).
    #[arg(long = "span", value_name = "SPAN_ID")]
    pub span_id: Option<String>,
    /// The session scored.
    #[arg(long = "session", value_name = "SESSION_ID")]
    pub session_id: Option<String>,
    #[arg(long)]
    pub comment: Option<String>,
    /// human, eval, agent or api.
    #[arg(long, default_value = "agent")]
    pub source: String,
    /// Accept a trace the server does not hold.
    #[arg(long)]
    pub allow_unknown_trace: bool,
}

/// `skein score add`: `POST /api/v1/scores` → `{"id"}`.
pub fn score(ctx: &Ctx, c: &ScoreCommand) -> CliResult<Exit> {
    let ScoreCommand::Add(a) = c;
    let value = if let Ok(n) = a.value.parse::<f64>() {
        serde_json::json!(n)
    } else if let Ok(b) = a.value.parse::<bool>() {
        Value::Bool(b)
    } else {
        Value::String(a.value.clone())
    };
    let mut body = serde_json::json!({"trace_id": a.trace_id, "name": a.name, "value": value, "source": a.source});
    for (k, v) in [
        ("span_id", &a.span_id),
        ("session_id", &a.session_id),
        ("comment", &a.comment),
    ] {
        if let Some(v) = v {
            body[k] = Value::String(v.clone());
        }
    }
    let p: Params = if a.allow_unknown_trace {
        vec![("allow_unknown_trace".into(), "true".into())]
    } else {
        Vec::new()
    };
    let v = ctx.client(false)?.post_json(&["api", "v1", "scores"], &p, &body)?;
    if ctx.out.table() {
        write_stdout(&format!("score {}", v["id"].as_str().unwrap_or("?")))?;
    } else {
        ctx.out.json(&v)?;
    }
    Ok(Exit::Ok)
}

const USAGE_COLUMNS: &[(&str, &str)] = &[
    ("key", "GROUP"),
    ("calls", "CALLS"),
    ("errors", "ERRORS"),
    ("input_tokens", "INPUT"),
    ("cache_read_tokens", "CACHE READ"),
    ("cache_write_tokens", "CACHE WRITE"),
    ("output_tokens", "OUTPUT"),
    ("reasoning_tokens", "REASONING"),
    ("cost_usd", "COST USD"),
    ("unpriced_calls", "UNPRICED"),
    ("latency_p50_ns", "P50"),
    ("latency_p95_ns", "P95"),
    ("ttft_p50_ns", "TTFT P50"),
];

const TOOL_COLUMNS: &[(&str, &str)] = &[
    ("tool", "TOOL"),
    ("calls", "CALLS"),
    ("errors", "ERRORS"),
    ("error_rate", "ERROR%"),
    ("p50_ns", "P50"),
    ("p95_ns", "P95"),
];

const SESSION_COLUMNS: &[(&str, &str)] = &[
    ("session_id", "SESSION"),
    ("end_time_unix_nano", "LAST ACTIVE"),
    ("traces", "TRACES"),
    ("llm_calls", "LLM CALLS"),
    ("input_tokens", "INPUT"),
    ("output_tokens", "OUTPUT"),
    ("cost_usd", "COST USD"),
    ("errors", "ERRORS"),
    ("models", "MODELS"),
    ("agents", "AGENTS"),
];

pub fn llm(ctx: &Ctx, c: &LlmCommand) -> CliResult<Exit> {
    match c {
        LlmCommand::Usage(a) => usage(ctx, a),
        LlmCommand::Tools(a) => tools(ctx, a),
    }
}

/// `skein llm usage --by model`: `/api/v1/llm/usage`. Exit 1 when no calls.
fn usage(ctx: &Ctx, a: &UsageArgs) -> CliResult<Exit> {
    let mut p: Params = vec![("group_by".into(), a.by.clone())];
    if a.scores {
        p.push(("include".into(), "scores".into()));
    }
    a.window.params(&mut p);
    params_with_explain(&mut p, a.explain.explain);
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "llm", "usage"], &p, NotFound::Unexpected)?;
    let exit = found(v.get("groups"));
    let title = ctx.out.table().then(|| {
        let t = &v["totals"];
        format!(
            "{} calls, {} input / {} output tokens, ${} ({} unpriced)",
            cell(t, "calls").0,
            cell(t, "input_tokens").0,
            cell(t, "output_tokens").0,
            cell(t, "cost_usd").0,
            cell(t, "unpriced_calls").0
        )
    });
    print_list(&ctx.out, v, "groups", USAGE_COLUMNS, title)?;
    Ok(exit)
}

/// `skein llm tools`: `/api/v1/llm/tools`. Exit 1 when no tool ran.
fn tools(ctx: &Ctx, a: &ToolsArgs) -> CliResult<Exit> {
    let mut p = Params::new();
    a.window.params(&mut p);
    params_with_explain(&mut p, a.explain.explain);
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "llm", "tools"], &p, NotFound::Unexpected)?;
    let exit = found(v.get("tools"));
    print_list(&ctx.out, v, "tools", TOOL_COLUMNS, None)?;
    Ok(exit)
}

/// `skein sessions`: `/api/v1/sessions`. Exit 1 when there are none.
pub fn sessions(ctx: &Ctx, a: &SessionsArgs) -> CliResult<Exit> {
    let mut p: Params = vec![("limit".into(), a.limit.to_string())];
    a.window.params(&mut p);
    if let Some(c) = &a.cursor {
        p.push(("cursor".into(), c.clone()));
    }
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "sessions"], &p, NotFound::Unexpected)?;
    let exit = found(v.get("sessions"));
    print_list(&ctx.out, v, "sessions", SESSION_COLUMNS, None)?;
    Ok(exit)
}

/// `skein session ID`: `/api/v1/sessions/{id}`, on a terminal a
/// conversation: each turn's messages, tool calls, tokens and cost.
/// Exit 1 when no such session.
pub fn session(ctx: &Ctx, a: &SessionArgs) -> CliResult<Exit> {
    let p: Params = vec![("payloads".into(), a.payloads.clone())];
    let v = ctx
        .client(false)?
        .get_json(&["api", "v1", "sessions", &a.id], &p, NotFound::NoResults)?;
    if !ctx.out.table() {
        ctx.out.json(&ctx.out.trim(v, Some("turns")))?;
        return Ok(Exit::Ok);
    }
    write_stdout(&conversation(&v))?;
    Ok(Exit::Ok)
}

/// A session as a person reads it.
fn conversation(v: &Value) -> String {
    let mut out = format!(
        "session {}: {} traces, {} LLM calls, {} input / {} output tokens, ${}, {} errors\n",
        v["session_id"].as_str().unwrap_or("?"),
        v["traces"].as_array().map_or(0, Vec::len),
        cell(v, "llm_calls").0,
        cell(v, "input_tokens").0,
        cell(v, "output_tokens").0,
        cell(v, "cost_usd").0,
        cell(v, "errors").0,
    );
    for t in v["turns"].as_array().into_iter().flatten() {
        let when = t["start_time_unix_nano"].as_u64().map(rfc3339).unwrap_or_default();
        let llm = &t["llm"];
        let status = if t["status"] == "error" { "  ERROR" } else { "" };
        if t["kind"] == "tool" {
            out.push_str(&format!(
                "\n{when}  tool {}  {}{status}\n",
                t["tool"]["name"].as_str().unwrap_or("?"),
                cell(t, "duration_ns").0
            ));
            out.push_str(&format!("  arguments: {}\n", brief(&t["tool"]["arguments"])));
            out.push_str(&format!("  result:    {}\n", brief(&t["tool"]["result"])));
            continue;
        }
        out.push_str(&format!(
            "\n{when}  {} {}  {}  in {} (cached {}) out {} (reasoning {})  ${} {}{status}\n",
            llm["provider"].as_str().unwrap_or("-"),
            llm["model"].as_str().unwrap_or("-"),
            cell(t, "duration_ns").0,
            cell(llm, "input_tokens").0,
            cell(llm, "cache_read_tokens").0,
            cell(llm, "output_tokens").0,
            cell(llm, "reasoning_tokens").0,
            cell(llm, "cost_usd").0,
            llm["cost_source"].as_str().unwrap_or(""),
        ));
        for (label, key) in [("system", "system"), ("input", "input"), ("output", "output")] {
            let m = &t["messages"][key];
            if !m.is_null() {
                out.push_str(&format!("  {label:<7}{}\n", brief(m)));
            }
        }
    }
    out
}

/// A message, tool argument or result on one line.
fn brief(v: &Value) -> String {
    let text = match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Object(m) if m.contains_key("$payload") => format!(
            "[payload {} bytes] {}",
            m.get("bytes").map(Value::to_string).unwrap_or_default(),
            m.get("preview").and_then(Value::as_str).unwrap_or("")
        ),
        other => other.to_string(),
    };
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 160 {
        format!("{}…", one_line.chars().take(160).collect::<String>())
    } else {
        one_line
    }
}
