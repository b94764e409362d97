//! The agent-first command-line client: every question about the stored
//! telemetry is one command, answering the REST API's JSON (or a table on a
//! terminal) with stable exit codes.
//!
//! | module | what it holds |
//! |---|---|
//! | `client` | HTTP, errors, exit codes |
//! | `output` | JSON/NDJSON, `--fields`, tables |
//! | `filters` | flags → API parameters, client-side validation |
//! | `inspect` | `status`, `services`, `operations`, `summarize`, `anomalies` |
//! | `llm` | `llm usage`, `llm tools`, `sessions`, `session` |
//! | `export` | `export spans\|logs`: NDJSON to stdout |
//! | `query` | `query …`, `get trace`, `correlate` |
//! | `sql` | `sql "SELECT …"`: read-only SQL |
//! | `stream` | `watch`, `tail` |
//! | `waterfall` | the trace waterfall of `get trace --format table` |
//! | `skill` | `skill install`: the agent skill file |
//! | `mcp` | `mcp`: the MCP server over stdio, `mcp config` |
//! | `backup` | `backup`, `restore`, `verify` |
//! | `verify_erasure` | `verify --erasure ID --data-dir DIR`, offline |

mod backup;
pub mod client;
mod export;
pub mod filters;
mod inspect;
mod llm;
mod mcp;
pub mod output;
mod query;
pub mod skill;
mod sql;
mod stream;
mod verify_erasure;
mod waterfall;

use std::time::Duration;

use clap::{Args, Subcommand};

use client::{CliError, CliResult, Client, Exit};
use output::{Format, Out};

/// Flags every client command takes (before or after the command name).
#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// The Skein server to ask.
    #[arg(
        long,
        global = true,
        env = "SKEIN_SERVER",
        default_value = "http://127.0.0.1:7700",
        value_name = "URL",
        help_heading = "Client options"
    )]
    pub server: String,
    /// Sent as `Authorization: Bearer TOKEN`.
    #[arg(
        long,
        global = true,
        env = "SKEIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        help_heading = "Client options"
    )]
    pub token: Option<String>,
    /// Trust these PEM certificates (besides the system's roots) for an
    /// https:// --server: a self-signed certificate or a private CA.
    #[arg(
        long,
        global = true,
        env = "SKEIN_CA_CERT",
        value_name = "FILE",
        help_heading = "Client options"
    )]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Output: json (the API's object; NDJSON for streams) or table [default:
    /// table on a terminal, else json]. `get trace` also takes otlp.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "FORMAT",
        help_heading = "Client options"
    )]
    pub format: Option<Format>,
    /// Keep only these fields (comma-separated; `a.b` reaches into objects):
    /// of each element of the answer's list (spans, logs, points, traces,
    /// services, operations, anomalies), else of the answer itself. With
    /// --format table: the columns.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        value_name = "A,B,C",
        help_heading = "Client options"
    )]
    pub fields: Vec<String>,
    /// Give up on a request after this long (exit 3).
    #[arg(
        long,
        global = true,
        default_value = "30s",
        value_name = "DURATION",
        value_parser = filters::parse_duration_arg,
        help_heading = "Client options"
    )]
    pub timeout: Duration,
}

/// The client commands, in the order an agent debugging usually runs them.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Is the server up? Readiness plus records, parts, bytes, memory, uptime.
    Status,
    /// What happened in a window (default the last hour): spans, traces,
    /// errors, latency, busiest services, failing operations, logs by severity.
    Summarize(inspect::SummarizeArgs),
    /// Services whose error rate or p95 latency regressed: the last 5m
    /// against the 30m before it.
    Anomalies(inspect::AnomaliesArgs),
    /// Every service with RED metrics: spans, traces, errors, p50/p95/p99.
    Services(inspect::ServicesArgs),
    /// RED metrics per operation (span name) of one service.
    Operations(inspect::OperationsArgs),
    /// LLM usage and cost, and tool calls.
    #[command(subcommand)]
    Llm(llm::LlmCommand),
    /// Sessions (conversations), most recent first.
    Sessions(llm::SessionsArgs),
    /// One session as a conversation: turns, tool calls, tokens and cost.
    Session(llm::SessionArgs),
    /// Score a trace, span or session (a human's or an eval's judgement).
    #[command(subcommand)]
    Score(llm::ScoreCommand),
    /// Search traces, spans, logs or metric points.
    #[command(subcommand)]
    Query(Box<query::QueryCommand>),
    /// Every span or log matching filters, as NDJSON on stdout (the last
    /// line `{"export_complete": true, "count": N}`).
    #[command(subcommand)]
    Export(Box<export::ExportCommand>),
    /// A read-only SQL query over spans, logs and metric_points (a table on
    /// a terminal, else the JSON answer; docs/sql.md).
    Sql(sql::SqlArgs),
    /// Fetch one record by id.
    #[command(subcommand)]
    Get(query::GetCommand),
    /// A trace with its logs and its services' metrics around it.
    Correlate(query::CorrelateArgs),
    /// Summaries of what arrives, every --interval (the window since the
    /// previous tick); NDJSON when not on a terminal.
    Watch(stream::WatchArgs),
    /// The latest spans and logs; with -f, follow new ones as they arrive.
    Tail(stream::TailArgs),
    /// The agent skill file that teaches coding agents to debug with Skein.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// The MCP server over stdio, asking the server at --server (for
    /// agents that start it: `skein mcp config` prints how to register it).
    Mcp(mcp::McpArgs),
    /// Back the data up to an empty directory or s3://BUCKET/PREFIX while
    /// the server goes on ingesting (a manifest with every file's BLAKE3).
    Backup(backup::BackupArgs),
    /// Restore a backup into a new data directory (no server needed).
    Restore(backup::RestoreArgs),
    /// Check every file of a data directory or backup; exit 4 naming what
    /// is damaged. With --erasure ID, check an erasure's receipt instead
    /// (digest, files, and that no record matching its criteria remains).
    Verify(backup::VerifyArgs),
}

/// What a command runs with.
pub struct Ctx {
    pub global: GlobalArgs,
    pub out: Out,
}

impl Ctx {
    /// A client with the request timeout (`stream`: none, for `tail -f`).
    pub fn client(&self, stream: bool) -> CliResult<Client> {
        let timeout = if stream { None } else { Some(self.global.timeout) };
        Client::with_ca(
            &self.global.server,
            self.global.token.clone(),
            timeout,
            self.global.ca_cert.as_deref(),
        )
    }
}

/// Runs a client command; the exit code to leave with.
pub fn run(command: Command, global: GlobalArgs) -> Exit {
    let out = Out::new(global.format, global.fields.clone());
    let ctx = Ctx { global, out };
    let result = if ctx.out.format == Format::Otlp && !matches!(command, Command::Get(_)) {
        Err(CliError::usage("--format otlp is only for `skein get trace`"))
    } else {
        dispatch(command, &ctx)
    };
    match result {
        Ok(exit) => exit,
        Err(e) => {
            e.report();
            e.exit
        }
    }
}

fn dispatch(command: Command, ctx: &Ctx) -> CliResult<Exit> {
    match command {
        Command::Status => inspect::status(ctx),
        Command::Summarize(a) => inspect::summarize(ctx, &a),
        Command::Anomalies(a) => inspect::anomalies(ctx, &a),
        Command::Services(a) => inspect::services(ctx, &a),
        Command::Operations(a) => inspect::operations(ctx, &a),
        Command::Llm(c) => llm::llm(ctx, &c),
        Command::Sessions(a) => llm::sessions(ctx, &a),
        Command::Session(a) => llm::session(ctx, &a),
        Command::Score(c) => llm::score(ctx, &c),
        Command::Query(q) => query::query(ctx, &q),
        Command::Export(c) => export::export(ctx, &c),
        Command::Sql(a) => sql::sql(ctx, &a),
        Command::Get(g) => query::get(ctx, &g),
        Command::Correlate(a) => query::correlate(ctx, &a),
        Command::Watch(a) => stream::watch(ctx, &a),
        Command::Tail(a) => stream::tail(ctx, &a),
        Command::Skill(s) => skill::run(ctx, &s),
        Command::Mcp(a) => mcp::run(ctx, &a),
        Command::Backup(a) => backup::backup(ctx, &a),
        Command::Restore(a) => backup::restore(ctx, &a),
        Command::Verify(a) => backup::verify(ctx, &a),
    }
}

/// Exit 1 when a list is empty: "worked, found nothing".
pub fn found(list: Option<&serde_json::Value>) -> Exit {
    match list.and_then(|v| v.as_array()) {
        Some(a) if a.is_empty() => Exit::NoResults,
        _ => Exit::Ok,
    }
}
