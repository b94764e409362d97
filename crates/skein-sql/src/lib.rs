//! SQL over Skein's data with DataFusion: the tables `spans`, `logs` and
//! `metric_points`, read straight from the engine's hot tier and parts
//! through a table provider that pushes projection, time range, service,
//! trace id, attribute equality and limit into the engine's indexes (see
//! `docs/sql.md`).
//!
//! Read-only by construction: only queries are planned (no DDL, DML, COPY
//! or `SET`), no table reads a file (no listing tables, no URL tables, no
//! file-reading table functions: this build of DataFusion has none), and
//! spilling is off, so nothing is written either.
//!
//! Bounded: every query shares one memory pool (`--sql-memory`); a query
//! needing more fails with [`SqlError::TooLarge`] rather than holding its
//! input. Scans stream a batch at a time.
//!
//! Apart: queries run on a runtime of their own ([`exec`]), at a lower CPU
//! priority, never on the caller's. A query is CPU work that yields only
//! between batches (one batch of a nested-loop join can take seconds); on
//! the server's I/O runtime it held the workers that answer `/metrics`,
//! health checks and ingest. The answer reaches the caller through a
//! channel; dropping it stops the query at its next batch.

/// The DataFusion this crate is built on, for callers that stream answers.
pub use datafusion;

mod exec;
pub mod output;
mod payload_fn;
pub mod provider;
pub mod tables;

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::{SessionConfig, SessionContext};
use skein_engine::Engine;

use crate::provider::EngineTable;
use crate::tables::Table;

/// Limits of SQL queries.
#[derive(Debug, Clone)]
pub struct SqlOptions {
    /// Memory all running queries may hold together (sorts, hash tables,
    /// aggregation state).
    pub memory_bytes: usize,
    /// Longest a query may run, answer streaming included.
    pub timeout: Duration,
    /// Rows of a JSON answer (past them: `truncated: true`); NDJSON, CSV
    /// and Arrow stream everything.
    pub max_json_rows: usize,
    /// Rows per batch read from the engine.
    pub batch_rows: usize,
}

pub const DEFAULT_MEMORY_BYTES: usize = 512 << 20;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_JSON_ROWS: usize = 10_000;

impl Default for SqlOptions {
    fn default() -> Self {
        SqlOptions {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_json_rows: DEFAULT_MAX_JSON_ROWS,
            batch_rows: 8192,
        }
    }
}

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The query is wrong or not allowed: DataFusion's message.
    #[error("{0}")]
    Invalid(String),
    /// The query needs more memory than the pool holds.
    #[error("the query needs more memory than --sql-memory ({limit_mib} MiB) allows: {detail}")]
    TooLarge { limit_mib: usize, detail: String },
    #[error("the query ran longer than --sql-timeout ({}s)", .0.as_secs_f64())]
    Timeout(Duration),
    /// Reading the engine failed.
    #[error("{0}")]
    Engine(String),
}

impl SqlError {
    /// Classifies a DataFusion error: the caller's fault unless the engine
    /// failed underneath.
    pub fn from_datafusion(e: DataFusionError, opts: &SqlOptions) -> SqlError {
        match root(&e) {
            DataFusionError::ResourcesExhausted(detail) => SqlError::TooLarge {
                limit_mib: opts.memory_bytes >> 20,
                detail: detail.clone(),
            },
            DataFusionError::External(inner) if inner.downcast_ref::<skein_engine::Error>().is_some() => {
                SqlError::Engine(inner.to_string())
            }
            _ => SqlError::Invalid(e.to_string()),
        }
    }
}

/// The innermost DataFusion error behind contexts and shared wrappers.
fn root(e: &DataFusionError) -> &DataFusionError {
    match e {
        DataFusionError::Context(_, inner) => root(inner),
        DataFusionError::Shared(inner) => root(inner),
        DataFusionError::Diagnostic(_, inner) => root(inner),
        other => other,
    }
}

/// Views over the tables: LLM calls (spans with GenAI fields; see
/// docs/llm.md) and scores (`gen_ai.evaluation.result` log events).
const VIEWS: &[&str] = &[
    "CREATE VIEW llm_calls AS SELECT trace_id, span_id, parent_span_id, service_name, name, \
     start_time_unix_nano, duration_ns, status_code, \
     CASE llm_kind WHEN 1 THEN 'llm' WHEN 2 THEN 'tool' WHEN 3 THEN 'agent' ELSE 'other' END AS kind, \
     llm_provider AS provider, llm_model AS model, llm_request_model AS request_model, \
     llm_operation AS operation, llm_input_tokens AS input_tokens, llm_output_tokens AS output_tokens, \
     llm_cache_read_tokens AS cache_read_tokens, llm_cache_write_tokens AS cache_write_tokens, \
     llm_reasoning_tokens AS reasoning_tokens, llm_reported_cost_usd AS reported_cost_usd, \
     llm_flagged AS flagged, llm_ttft_ns AS ttft_ns, session_id, user_id, agent_name, tool_name \
     FROM spans WHERE llm_kind IS NOT NULL",
    "CREATE VIEW scores AS SELECT attributes['skein.score.id'] AS id, trace_id, span_id, \
     attributes['gen_ai.conversation.id'] AS session_id, attributes['gen_ai.evaluation.name'] AS name, \
     TRY_CAST(attributes['gen_ai.evaluation.score.value'] AS DOUBLE) AS value, \
     attributes['gen_ai.evaluation.score.label'] AS label, \
     attributes['gen_ai.evaluation.explanation'] AS comment, attributes['skein.score.source'] AS source, \
     \"timestamp\" AS time_unix_nano \
     FROM logs WHERE event_name = 'gen_ai.evaluation.result'",
];

/// SQL over one engine.
pub struct Sql {
    engine: Arc<Engine>,
    opts: SqlOptions,
    runtime: Arc<RuntimeEnv>,
    tables: Vec<Arc<Table>>,
    exec: exec::Executor,
}

/// A planned query, ready to stream.
pub struct Answer {
    pub schema: SchemaRef,
    pub stream: SendableRecordBatchStream,
}

impl Sql {
    pub fn new(engine: Arc<Engine>, opts: SqlOptions) -> Result<Sql, SqlError> {
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(opts.memory_bytes, 1.0)
            // No spill files: the user's SQL writes nothing anywhere, and a
            // query past the pool fails with a clear error instead.
            .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled))
            .build_arc()
            .map_err(|e| SqlError::Engine(e.to_string()))?;
        Ok(Sql {
            engine,
            opts,
            runtime,
            tables: Table::all().into_iter().map(Arc::new).collect(),
            exec: exec::Executor::new().map_err(|e| SqlError::Engine(format!("SQL runtime: {e}")))?,
        })
    }

    pub fn options(&self) -> &SqlOptions {
        &self.opts
    }

    /// Queries running now: planned or streaming, until their answer is
    /// dropped or done and their operators have stopped.
    pub fn running(&self) -> usize {
        self.exec.running()
    }

    /// A fresh session with the tables and views registered (sessions are
    /// cheap; the memory pool is shared by all).
    async fn context(&self) -> Result<SessionContext, SqlError> {
        let config = SessionConfig::new()
            .with_information_schema(true)
            .with_batch_size(self.opts.batch_rows)
            // Two cores here; more partitions only add repartition work.
            .with_target_partitions(std::thread::available_parallelism().map_or(2, |n| n.get()).min(8));
        let ctx = SessionContext::new_with_config_rt(config, self.runtime.clone());
        for t in &self.tables {
            ctx.register_table(
                t.name,
                Arc::new(EngineTable {
                    engine: self.engine.clone(),
                    table: t.clone(),
                    batch_rows: self.opts.batch_rows,
                }),
            )
            .map_err(|e| SqlError::Engine(e.to_string()))?;
        }
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            payload_fn::PayloadFn::new(self.engine.clone()),
        ));
        // Views are planned into their queries, so filters on them reach
        // the tables' scans (and the engine's indexes) all the same.
        for v in VIEWS {
            ctx.sql(v).await.map_err(|e| SqlError::Engine(format!("view: {e}")))?;
        }
        Ok(ctx)
    }

    /// Plans `query` (a single read-only statement) and starts it on the
    /// SQL runtime. The caller bounds the time each batch may take (the
    /// planning is bounded here); dropping the answer stops the query.
    pub async fn run(&self, query: &str) -> Result<Answer, SqlError> {
        if query.trim().is_empty() {
            return Err(SqlError::Invalid("empty query: give one SELECT statement".into()));
        }
        let ctx = self.context().await?;
        let read_only = datafusion::execution::context::SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        let query = query.to_string();
        let plan = async move {
            let df = ctx.sql_with_options(&query, read_only).await?;
            let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
            let stream = df.execute_stream().await?;
            Ok::<_, DataFusionError>((schema, stream))
        };
        match tokio::time::timeout(self.opts.timeout, self.exec.start(plan)).await {
            Ok(r) => r.map_err(|e| self.error(e)),
            Err(_) => Err(SqlError::Timeout(self.opts.timeout)),
        }
    }

    pub fn error(&self, e: DataFusionError) -> SqlError {
        SqlError::from_datafusion(e, &self.opts)
    }
}

#[cfg(test)]
mod tests;
