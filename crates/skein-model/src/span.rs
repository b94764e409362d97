//! Spans: one timed operation of a trace.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{SpanId, TraceId};
use crate::resource::{Resource, Scope};
use crate::value::{KeyValue, attributes_size, heap_size};

/// What a span represents in its trace, as OTLP numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[repr(u8)]
pub enum SpanKind {
    #[default]
    Unspecified = 0,
    Internal = 1,
    Server = 2,
    Client = 3,
    Producer = 4,
    Consumer = 5,
}

impl SpanKind {
    pub const ALL: [SpanKind; 6] = [
        SpanKind::Unspecified,
        SpanKind::Internal,
        SpanKind::Server,
        SpanKind::Client,
        SpanKind::Producer,
        SpanKind::Consumer,
    ];

    pub fn from_i32(v: i32) -> Option<SpanKind> {
        SpanKind::ALL.get(usize::try_from(v).ok()?).copied()
    }

    pub fn as_i32(self) -> i32 {
        self as i32
    }

    /// Lowercase name used by the API and CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Unspecified => "unspecified",
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
        }
    }

    /// Accepts the API name (`server`) or the OTLP name (`SPAN_KIND_SERVER`).
    pub fn parse(s: &str) -> Option<SpanKind> {
        let lower = s.to_ascii_lowercase();
        let name = lower.strip_prefix("span_kind_").unwrap_or(&lower);
        SpanKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Status code of a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[repr(u8)]
pub enum StatusCode {
    #[default]
    Unset = 0,
    Ok = 1,
    Error = 2,
}

impl StatusCode {
    pub fn from_i32(v: i32) -> Option<StatusCode> {
        match v {
            0 => Some(StatusCode::Unset),
            1 => Some(StatusCode::Ok),
            2 => Some(StatusCode::Error),
            _ => None,
        }
    }

    pub fn as_i32(self) -> i32 {
        self as i32
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StatusCode::Unset => "unset",
            StatusCode::Ok => "ok",
            StatusCode::Error => "error",
        }
    }

    /// Accepts `error` or `STATUS_CODE_ERROR`, any case.
    pub fn parse(s: &str) -> Option<StatusCode> {
        let lower = s.to_ascii_lowercase();
        match lower.strip_prefix("status_code_").unwrap_or(&lower) {
            "unset" => Some(StatusCode::Unset),
            "ok" => Some(StatusCode::Ok),
            "error" => Some(StatusCode::Error),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Status {
    pub code: StatusCode,
    pub message: String,
}

/// A timed event inside a span (an exception, a log line, a retry).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Event {
    pub time_unix_nano: u64,
    pub name: String,
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes_count: u32,
}

/// A pointer from a span to a span of another (or the same) trace.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Link {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub trace_state: String,
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes_count: u32,
    pub flags: u32,
}

/// One span. Identity is `(trace_id, span_id)`: storing a span with the same
/// identity again replaces it.
///
/// `resource` and `scope` are shared by every span of an export batch; the
/// wire encodings of batches store each once (they are skipped by serde here).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent_span_id: Option<SpanId>,
    pub trace_state: String,
    pub flags: u32,
    pub name: String,
    pub kind: SpanKind,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes_count: u32,
    pub events: Vec<Event>,
    pub dropped_events_count: u32,
    pub links: Vec<Link>,
    pub dropped_links_count: u32,
    pub status: Status,
    #[serde(skip)]
    pub resource: Arc<Resource>,
    #[serde(skip)]
    pub scope: Arc<Scope>,
}

impl Span {
    /// Duration in ns; a span whose end precedes its start lasts 0.
    pub fn duration_ns(&self) -> u64 {
        self.end_time_unix_nano.saturating_sub(self.start_time_unix_nano)
    }

    pub fn service_name(&self) -> &str {
        self.resource.service_name()
    }

    pub fn is_root(&self) -> bool {
        self.parent_span_id.is_none()
    }

    pub fn is_error(&self) -> bool {
        self.status.code == StatusCode::Error
    }

    /// Approximate bytes this span holds, excluding the shared resource/scope.
    pub fn approx_size(&self) -> usize {
        // The span itself sits in an Arc allocation.
        heap_size(std::mem::size_of::<Span>() + 16)
            + heap_size(self.name.len())
            + if self.trace_state.is_empty() {
                0
            } else {
                heap_size(self.trace_state.len())
            }
            + if self.status.message.is_empty() {
                0
            } else {
                heap_size(self.status.message.len())
            }
            + attributes_size(&self.attributes)
            + self
                .events
                .iter()
                .map(|e| std::mem::size_of::<Event>() + heap_size(e.name.len()) + attributes_size(&e.attributes))
                .sum::<usize>()
            + self
                .links
                .iter()
                .map(|l| std::mem::size_of::<Link>() + heap_size(l.trace_state.len()) + attributes_size(&l.attributes))
                .sum::<usize>()
    }
}
