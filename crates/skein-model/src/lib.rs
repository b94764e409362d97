//! Skein's data model: spans, log records and metric points with typed
//! attributes, their resources and scopes, and lossless conversion from and
//! to OTLP. No I/O lives here.

pub mod corpus;
pub mod error;
pub mod genai;
pub mod ids;
pub mod json;
pub mod json_attrs;
pub mod log;
pub mod metric;
pub mod otlp;
pub mod plain;
pub mod remote_write;
pub mod resource;
pub mod span;
pub mod value;

pub use error::ModelError;
pub use ids::{SpanId, TraceId};
pub use log::LogRecord;
pub use metric::{MetricDesc, MetricKind, MetricPoint, Number, PointValue};
pub use resource::{Resource, Scope};
pub use span::{Event, Link, Span, SpanKind, Status, StatusCode};
pub use value::{AnyValue, KeyValue};
