//! Skein's storage engine: a write-ahead log with group commit, an indexed
//! hot tier, immutable time-sorted Parquet parts with resident sidecar
//! indexes, streaming compaction, and the queries and aggregations over all
//! of it. It knows nothing of the network; `skein-server` puts it there.
//!
//! Layout of a data directory:
//! ```text
//! LOCK                      flock + pid of the owning process
//! wal/<first-seq>.wal       WAL segments
//! parts/<signal>/<id>.parquet, <id>.idx   parts and their sidecars
//! ```
//!
//! # The embedder's API
//! Open an [`Engine`] with [`EngineOptions`], ingest spans, logs and metric
//! points, and ask it [`SpanQuery`], [`LogQuery`], [`MetricQuery`] and the
//! aggregations over a [`Window`]. Failures are an [`Error`]; states that
//! need an operator are [`Fault`]s. Everything re-exported here is the API;
//! the modules marked hidden are internals that the fuzz targets, benches
//! and examples reach into, with no promise of stability.
//!
//! # Layers (imports run one way, top to bottom)
//! ```text
//! engine        ingest, flush, compaction, recovery; the locks (engine/mod.rs)
//! query         search, aggregations, explain, the window
//! hot, part     the hot tier; Parquet parts, their sidecar index, page cache
//! payload       content-addressed payloads in packs
//! wal, codec    the log and its batch encoding
//! record, stats, terms, validate    what the engine knows of each signal
//! envelope, storage, fsutil, hash   files, checksums, hashing
//! ```

pub mod backup;
mod engine;
mod error;
mod health;
mod query;

pub mod allocator;
#[doc(hidden)]
pub mod codec;
#[doc(hidden)]
pub mod envelope;
#[doc(hidden)]
pub mod fsutil;
#[doc(hidden)]
pub mod hash;
#[doc(hidden)]
pub mod hot;
#[doc(hidden)]
pub mod part;
#[doc(hidden)]
pub mod payload;
#[doc(hidden)]
pub mod record;
#[doc(hidden)]
pub mod stats;
#[doc(hidden)]
pub mod storage;
#[doc(hidden)]
pub mod terms;
#[doc(hidden)]
pub mod testdata;
pub mod text;
#[doc(hidden)]
pub mod text_index;
#[doc(hidden)]
pub mod validate;
#[doc(hidden)]
pub mod wal;

pub use engine::erasure;
pub use engine::{
    Clock, CompactionOptions, Engine, EngineOptions, EngineStats, IngestReport, MinFreeDisk, OnDiskFull, Retention,
    RetentionReport, RetentionStats, TraceResult,
};
pub use error::{Error, Result};
pub use health::{Fault, FaultKind};
pub use part::{PageCacheStats, WriterOptions};
pub use payload::{PayloadPolicy, PayloadRef, PayloadStats};
pub use query::diagnose::series::Buckets;
pub use query::llm::{
    SessionDetail, SessionPage, SessionSummary, SessionTurn, ToolSummary, Usage, UsageFigures, UsageGroup, UsageGroupBy,
};
pub use query::scan::{ScanRequest, ScanStats, schema as scan_schema};
pub use query::series::{Sample, SeriesSink};
pub use query::timeline::{MetricName, ServiceSeries};
pub use query::{
    AttrFilter, AttrPredicate, Cursor, DiagnoseRequest, Diagnosis, Explain, Finding, Latency, LogQuery, MetricQuery,
    OperationSummary, SearchResult, ServiceSummary, SourceExplain, SpanQuery, Summary, Window,
};
pub use record::{Record, RecordKey, Signal};
pub use storage::object::{ObjectStorageOptions, ObjectStorageStats, RemoteConfig};
pub use terms::AttrScope;
pub use text::{Highlight, PayloadText, TextField, TextQuery, TextQueryError, TextRecord};
pub use validate::Limits;
pub use wal::{Durability, RecoveryMode};
