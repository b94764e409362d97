//! Queries: what can be asked of each signal, and how.
//!
//! Every filter has two halves: `term_groups` (postings that can only
//! narrow the candidates) and `matches` (the predicate itself, re-checked on
//! every decoded record). An index therefore never changes an answer, only
//! how many rows are read to find it.

pub mod aggregate;
pub mod diagnose;
pub mod explain;
pub mod filter;
pub mod llm;
pub mod scan;
pub mod search;
pub mod series;
pub mod shadow;
pub mod sketch;
pub mod timeline;
pub mod window;

pub use aggregate::{Latency, OperationSummary, ServiceSummary, Summary};
pub use diagnose::{DiagnoseRequest, Diagnosis, Finding};
pub use explain::{Explain, SourceExplain};
pub use filter::{AttrFilter, AttrPredicate, Cursor, LogQuery, MetricQuery, SpanQuery};
pub use search::SearchResult;
pub use window::Window;
