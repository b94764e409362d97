//! Log records ⇄ `ExportLogsServiceRequest`.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::logs::v1 as pl;

use super::common::*;
use super::trace::optional_span_id;
use super::{Decoded, check_time};
use crate::error::ModelError;
use crate::ids::TraceId;
use crate::log::LogRecord;
use crate::value::AnyValue;

pub fn logs_from_otlp(req: ExportLogsServiceRequest) -> Decoded<LogRecord> {
    let count = req
        .resource_logs
        .iter()
        .flat_map(|rl| &rl.scope_logs)
        .map(|sl| sl.log_records.len())
        .sum();
    let mut out = Decoded::with_capacity(count);
    let mut index = 0usize;
    for rl in req.resource_logs {
        let resource = resource_from_otlp(rl.resource, rl.schema_url);
        for sl in rl.scope_logs {
            let scope = scope_from_otlp(sl.scope, sl.schema_url);
            for r in sl.log_records {
                match log_from_otlp(r, &resource, &scope) {
                    Ok(l) => out.records.push(l),
                    Err(e) => out.reject(e.at(format_args!("log record {index}"))),
                }
                index += 1;
            }
        }
    }
    out
}

fn log_from_otlp(
    r: pl::LogRecord,
    resource: &Arc<crate::Resource>,
    scope: &Arc<crate::Scope>,
) -> Result<LogRecord, ModelError> {
    check_time("time_unix_nano", r.time_unix_nano)?;
    check_time("observed_time_unix_nano", r.observed_time_unix_nano)?;
    if !(0..=24).contains(&r.severity_number) {
        return Err(ModelError::new(format!(
            "severity_number {} is outside 0-24",
            r.severity_number
        )));
    }
    let trace_id =
        if r.trace_id.is_empty() || r.trace_id.iter().all(|b| *b == 0) && r.trace_id.len() == 16 {
            None
        } else {
            Some(TraceId::from_bytes(&r.trace_id).map_err(|_| {
                ModelError::new(format!("trace_id must be 16 bytes or empty, got {}", r.trace_id.len()))
            })?)
        };
    Ok(LogRecord {
        time_unix_nano: r.time_unix_nano,
        observed_time_unix_nano: r.observed_time_unix_nano,
        severity_number: r.severity_number,
        severity_text: r.severity_text,
        body: r.body.map(any_value_from_otlp).unwrap_or_default(),
        attributes: attrs_from_otlp(r.attributes),
        dropped_attributes_count: r.dropped_attributes_count,
        flags: r.flags,
        trace_id,
        span_id: optional_span_id(&r.span_id, "span_id")?,
        event_name: r.event_name,
        resource: resource.clone(),
        scope: scope.clone(),
    })
}

pub fn logs_to_otlp(logs: &[LogRecord]) -> ExportLogsServiceRequest {
    let mut req = ExportLogsServiceRequest::default();
    for by_resource in runs(logs, |a, b| Arc::ptr_eq(&a.resource, &b.resource)) {
        let (resource, schema_url) = resource_to_otlp(&by_resource[0].resource);
        let mut rl = pl::ResourceLogs {
            resource,
            scope_logs: Vec::new(),
            schema_url,
        };
        for by_scope in runs(by_resource, |a, b| Arc::ptr_eq(&a.scope, &b.scope)) {
            let (scope, schema_url) = scope_to_otlp(&by_scope[0].scope);
            rl.scope_logs.push(pl::ScopeLogs {
                scope,
                log_records: by_scope.iter().map(log_to_otlp).collect(),
                schema_url,
            });
        }
        req.resource_logs.push(rl);
    }
    req
}

pub fn log_to_otlp(r: &LogRecord) -> pl::LogRecord {
    pl::LogRecord {
        time_unix_nano: r.time_unix_nano,
        observed_time_unix_nano: r.observed_time_unix_nano,
        severity_number: r.severity_number,
        severity_text: r.severity_text.clone(),
        body: match r.body {
            AnyValue::Empty => None,
            ref b => Some(any_value_to_otlp(b)),
        },
        attributes: attrs_to_otlp(&r.attributes),
        dropped_attributes_count: r.dropped_attributes_count,
        flags: r.flags,
        trace_id: r.trace_id.map(|t| t.0.to_vec()).unwrap_or_default(),
        span_id: r.span_id.map(|s| s.0.to_vec()).unwrap_or_default(),
        event_name: r.event_name.clone(),
    }
}
