//! `skein-bench`: reproducible benchmarks of Skein that verify every answer
//! and write BENCHMARKS.md (and benchmarks.json) from the run itself.

mod e2e;
mod engine_mode;
mod expected;
mod http1;
mod inproc;
mod ladder;
mod llm_mode;
mod load;
mod machine;
mod matrix;
mod mcp_mode;
mod promql_mode;
mod report;
mod server;
mod sql_mode;
mod stats;
mod storage_mode;
mod text_mode;
mod ui_mode;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "skein-bench",
    version,
    about = "Benchmarks of Skein that write BENCHMARKS.md"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Start `skein serve`, ingest the canonical corpus, run verified queries.
    E2e(e2e::E2eArgs),
    /// Protocol × clients × batch size ingest throughput and latency.
    IngestMatrix(matrix::MatrixArgs),
    /// Fill 1M, 10M, … rows per signal and find where dashboards exceed 5 s.
    Ladder(ladder::LadderArgs),
    /// The storage engine in process: ingest, disk, memory, queries.
    Engine(engine_mode::EngineArgs),
    /// Full-text search over the agent corpus's logs, in process: ingest
    /// with the index on and off, a rare and a common word, index size.
    Text(text_mode::TextArgs),
    /// What the typed LLM columns cost at ingest, in process: the agent
    /// corpus's spans as generated against the same with their GenAI keys
    /// renamed.
    Llm(llm_mode::LlmArgs),
    /// MCP tool call overhead: `get_trace` of a 10-span trace over
    /// streamable HTTP (`/mcp`) against `GET /api/v1/traces/{id}`.
    Mcp(mcp_mode::McpArgs),
    /// The web UI's render time per view in headless Chromium over the
    /// agent corpus (1M spans by default).
    Ui(ui_mode::UiArgs),
    /// Local disk against object storage (moto_server's S3 API on
    /// loopback): ingest, trace by id cold and warm, an attribute filter,
    /// services; bucket requests and bytes per query, cache hit ratio.
    Storage(storage_mode::StorageArgs),
    /// SQL: the issue #23 query (count and approximate p95 per service over
    /// the last hour) through `POST /api/v1/sql`, over 10M spans by default.
    Sql(sql_mode::SqlArgs),
    /// PromQL side by side with the real Prometheus on the same samples (issue #23).
    Promql(promql_mode::PromqlArgs),
    /// Write BENCHMARKS.md anew from the benchmarks.json beside it (after
    /// merging entries of runs made into other directories).
    Render {
        /// The directory holding benchmarks.json.
        #[arg(long, default_value = ".")]
        out: std::path::PathBuf,
    },
    /// (Internal) the engine's memory probe, run by `engine` as a child.
    #[command(hide = true)]
    EngineMemory(engine_mode::MemoryArgs),
}

fn main() -> ExitCode {
    // The engine runs in process here (engine mode): tune as `skein` does.
    skein_engine::allocator::tune_mimalloc();
    let cli = Cli::parse();
    let r = match &cli.mode {
        Mode::E2e(a) => e2e::run(a),
        Mode::IngestMatrix(a) => matrix::run(a),
        Mode::Ladder(a) => ladder::run(a),
        Mode::Engine(a) => engine_mode::run(a),
        Mode::Text(a) => text_mode::run(a),
        Mode::Llm(a) => llm_mode::run(a),
        Mode::Mcp(a) => mcp_mode::run(a),
        Mode::Ui(a) => ui_mode::run(a),
        Mode::Storage(a) => storage_mode::run(a),
        Mode::Sql(a) => sql_mode::run(a),
        Mode::Promql(a) => promql_mode::run(a),
        Mode::Render { out } => report::rewrite(out),
        Mode::EngineMemory(a) => engine_mode::memory(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skein-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
