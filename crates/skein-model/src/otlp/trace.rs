//! Spans ⇄ `ExportTraceServiceRequest`.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1 as pt;

use super::common::*;
use super::{Decoded, check_time};
use crate::error::ModelError;
use crate::ids::{SpanId, TraceId};
use crate::span::{Event, Link, Span, SpanKind, Status, StatusCode};

/// Decodes and validates every span of an export request.
pub fn spans_from_otlp(req: ExportTraceServiceRequest) -> Decoded<Span> {
    let count = req
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum();
    let mut out = Decoded::with_capacity(count);
    let mut index = 0usize;
    for rs in req.resource_spans {
        let resource = resource_from_otlp(rs.resource, rs.schema_url);
        for ss in rs.scope_spans {
            let scope = scope_from_otlp(ss.scope, ss.schema_url);
            for span in ss.spans {
                match span_from_otlp(span, &resource, &scope) {
                    Ok(s) => out.records.push(s),
                    Err(e) => out.reject(e.at(format_args!("span {index}"))),
                }
                index += 1;
            }
        }
    }
    out
}

fn span_from_otlp(s: pt::Span, resource: &Arc<crate::Resource>, scope: &Arc<crate::Scope>) -> Result<Span, ModelError> {
    let trace_id = TraceId::from_bytes(&s.trace_id)?;
    if trace_id.is_zero() {
        return Err(ModelError::new("trace_id is all zeros (invalid)"));
    }
    let span_id = SpanId::from_bytes(&s.span_id)?;
    if span_id.is_zero() {
        return Err(ModelError::new("span_id is all zeros (invalid)"));
    }
    let parent_span_id = optional_span_id(&s.parent_span_id, "parent_span_id")?;
    let kind = SpanKind::from_i32(s.kind)
        .ok_or_else(|| ModelError::new(format!("kind {} is not a SpanKind (0-5)", s.kind)))?;
    let status = match s.status {
        None => Status::default(),
        Some(st) => Status {
            code: StatusCode::from_i32(st.code)
                .ok_or_else(|| ModelError::new(format!("status code {} is not a StatusCode (0-2)", st.code)))?,
            message: st.message,
        },
    };
    check_time("start_time_unix_nano", s.start_time_unix_nano)?;
    check_time("end_time_unix_nano", s.end_time_unix_nano)?;
    let mut events = Vec::with_capacity(s.events.len());
    for (i, e) in s.events.into_iter().enumerate() {
        check_time("time_unix_nano", e.time_unix_nano).map_err(|err| err.at(format_args!("event {i}")))?;
        events.push(Event {
            time_unix_nano: e.time_unix_nano,
            name: e.name,
            attributes: attrs_from_otlp(e.attributes),
            dropped_attributes_count: e.dropped_attributes_count,
        });
    }
    let mut links = Vec::with_capacity(s.links.len());
    for (i, l) in s.links.into_iter().enumerate() {
        let at = |err: ModelError| err.at(format_args!("link {i}"));
        links.push(Link {
            trace_id: TraceId::from_bytes(&l.trace_id).map_err(at)?,
            span_id: SpanId::from_bytes(&l.span_id).map_err(at)?,
            trace_state: l.trace_state,
            attributes: attrs_from_otlp(l.attributes),
            dropped_attributes_count: l.dropped_attributes_count,
            flags: l.flags,
        });
    }
    Ok(Span {
        trace_id,
        span_id,
        parent_span_id,
        trace_state: s.trace_state,
        flags: s.flags,
        name: s.name,
        kind,
        start_time_unix_nano: s.start_time_unix_nano,
        end_time_unix_nano: s.end_time_unix_nano,
        attributes: attrs_from_otlp(s.attributes),
        dropped_attributes_count: s.dropped_attributes_count,
        events,
        dropped_events_count: s.dropped_events_count,
        links,
        dropped_links_count: s.dropped_links_count,
        status,
        resource: resource.clone(),
        scope: scope.clone(),
    })
}

/// An empty or all-zero id means "none"; anything else must be 8 bytes.
pub(crate) fn optional_span_id(bytes: &[u8], what: &str) -> Result<Option<SpanId>, ModelError> {
    if bytes.is_empty() || bytes.iter().all(|b| *b == 0) && bytes.len() == 8 {
        return Ok(None);
    }
    SpanId::from_bytes(bytes)
        .map(Some)
        .map_err(|_| ModelError::new(format!("{what} must be 8 bytes or empty, got {}", bytes.len())))
}

/// Encodes spans, one envelope per run of spans sharing resource and scope.
pub fn spans_to_otlp(spans: &[Span]) -> ExportTraceServiceRequest {
    let mut req = ExportTraceServiceRequest::default();
    for by_resource in runs(spans, |a, b| Arc::ptr_eq(&a.resource, &b.resource)) {
        let (resource, schema_url) = resource_to_otlp(&by_resource[0].resource);
        let mut rs = pt::ResourceSpans {
            resource,
            scope_spans: Vec::new(),
            schema_url,
        };
        for by_scope in runs(by_resource, |a, b| Arc::ptr_eq(&a.scope, &b.scope)) {
            let (scope, schema_url) = scope_to_otlp(&by_scope[0].scope);
            rs.scope_spans.push(pt::ScopeSpans {
                scope,
                spans: by_scope.iter().map(span_to_otlp).collect(),
                schema_url,
            });
        }
        req.resource_spans.push(rs);
    }
    req
}

pub fn span_to_otlp(s: &Span) -> pt::Span {
    pt::Span {
        trace_id: s.trace_id.0.to_vec(),
        span_id: s.span_id.0.to_vec(),
        trace_state: s.trace_state.clone(),
        parent_span_id: s.parent_span_id.map(|p| p.0.to_vec()).unwrap_or_default(),
        flags: s.flags,
        name: s.name.clone(),
        kind: s.kind.as_i32(),
        start_time_unix_nano: s.start_time_unix_nano,
        end_time_unix_nano: s.end_time_unix_nano,
        attributes: attrs_to_otlp(&s.attributes),
        dropped_attributes_count: s.dropped_attributes_count,
        events: s
            .events
            .iter()
            .map(|e| pt::span::Event {
                time_unix_nano: e.time_unix_nano,
                name: e.name.clone(),
                attributes: attrs_to_otlp(&e.attributes),
                dropped_attributes_count: e.dropped_attributes_count,
            })
            .collect(),
        dropped_events_count: s.dropped_events_count,
        links: s
            .links
            .iter()
            .map(|l| pt::span::Link {
                trace_id: l.trace_id.0.to_vec(),
                span_id: l.span_id.0.to_vec(),
                trace_state: l.trace_state.clone(),
                attributes: attrs_to_otlp(&l.attributes),
                dropped_attributes_count: l.dropped_attributes_count,
                flags: l.flags,
            })
            .collect(),
        dropped_links_count: s.dropped_links_count,
        status: (s.status != Status::default()).then(|| pt::Status {
            message: s.status.message.clone(),
            code: s.status.code.as_i32(),
        }),
    }
}
