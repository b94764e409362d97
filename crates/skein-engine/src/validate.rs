//! Limits every stored record must respect. Conversion from OTLP already
//! rejects malformed ids and times; these checks also cover records built by
//! other front ends (the JSON span API, tests, embedders), and bound sizes.

use skein_model::otlp::MAX_TIME_NS;
use skein_model::{KeyValue, LogRecord, MetricPoint, Span};

/// Size limits, with their documented defaults.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest single record (its approximate in-memory size). Default 8 MiB.
    pub max_record_bytes: usize,
    /// Most attributes on one record, event or resource. Default 1,024.
    pub max_attributes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record_bytes: 8 << 20,
            max_attributes: 1024,
        }
    }
}

fn check_time(what: &str, t: u64) -> Result<(), String> {
    if t > MAX_TIME_NS {
        return Err(format!("{what} {t} is beyond year 2262"));
    }
    Ok(())
}

fn check_attrs(what: &str, attrs: &[KeyValue], limits: &Limits) -> Result<(), String> {
    if attrs.len() > limits.max_attributes {
        return Err(format!(
            "{what} has {} attributes, more than the limit of {}",
            attrs.len(),
            limits.max_attributes
        ));
    }
    Ok(())
}

fn check_size(size: usize, limits: &Limits) -> Result<(), String> {
    if size > limits.max_record_bytes {
        return Err(format!(
            "record of {size} bytes exceeds the {} byte record limit",
            limits.max_record_bytes
        ));
    }
    Ok(())
}

pub trait Validate {
    fn validate(&self, limits: &Limits) -> Result<(), String>;
}

impl Validate for Span {
    fn validate(&self, limits: &Limits) -> Result<(), String> {
        if self.trace_id.is_zero() {
            return Err("trace_id is all zeros (invalid)".into());
        }
        if self.span_id.is_zero() {
            return Err("span_id is all zeros (invalid)".into());
        }
        check_time("start_time_unix_nano", self.start_time_unix_nano)?;
        check_time("end_time_unix_nano", self.end_time_unix_nano)?;
        check_attrs("span", &self.attributes, limits)?;
        check_attrs("resource", &self.resource.attributes, limits)?;
        for e in &self.events {
            check_time("event time_unix_nano", e.time_unix_nano)?;
            check_attrs("event", &e.attributes, limits)?;
        }
        check_size(self.approx_size(), limits)
    }
}

impl Validate for LogRecord {
    fn validate(&self, limits: &Limits) -> Result<(), String> {
        check_time("time_unix_nano", self.time_unix_nano)?;
        check_time("observed_time_unix_nano", self.observed_time_unix_nano)?;
        if !(0..=24).contains(&self.severity_number) {
            return Err(format!("severity_number {} is outside 0-24", self.severity_number));
        }
        check_attrs("log record", &self.attributes, limits)?;
        check_size(self.approx_size(), limits)
    }
}

impl Validate for MetricPoint {
    fn validate(&self, limits: &Limits) -> Result<(), String> {
        check_time("time_unix_nano", self.time_unix_nano)?;
        check_time("start_time_unix_nano", self.start_time_unix_nano)?;
        if self.metric.name.is_empty() {
            return Err("metric name is empty".into());
        }
        check_attrs("metric point", &self.attributes, limits)?;
        check_size(self.approx_size(), limits)
    }
}
