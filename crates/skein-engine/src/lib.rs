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

pub mod allocator;
pub mod codec;
pub mod engine;
pub mod error;
pub mod fsutil;
pub mod hash;
pub mod hot;
pub mod part;
pub mod query;
pub mod record;
pub mod storage;
pub mod terms;
#[doc(hidden)]
pub mod testdata;
pub mod validate;
pub mod wal;

pub use engine::{Engine, EngineOptions, EngineStats, IngestReport, TraceResult};
pub use error::{Error, Result};
pub use query::aggregate::Window;
pub use query::{AttrFilter, AttrPredicate, Cursor, Explain, LogQuery, MetricQuery, SearchResult, SpanQuery};
pub use record::{Record, RecordKey, Signal};
pub use terms::AttrScope;
pub use wal::Durability;
