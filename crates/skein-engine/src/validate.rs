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

/// Canonicalizes what has more than one bit pattern for one value, so that a
/// record reads back exactly as stored in every tier (parts keep doubles in
/// OTLP/JSON, where every NaN is `"NaN"`) and content keys stay stable: NaN
/// payloads and signs become the canonical quiet NaN.
pub trait Normalize {
    fn normalize(&mut self);
}

fn canonical_nan(d: &mut f64) {
    if d.is_nan() {
        *d = f64::NAN;
    }
}

fn has_odd_nan(v: &skein_model::AnyValue) -> bool {
    use skein_model::AnyValue;
    match v {
        AnyValue::Double(d) => d.is_nan() && d.to_bits() != f64::NAN.to_bits(),
        AnyValue::Array(a) => a.iter().any(has_odd_nan),
        AnyValue::Map(m) => m.iter().any(|kv| has_odd_nan(&kv.value)),
        _ => false,
    }
}

fn canon_value(v: &mut skein_model::AnyValue) {
    use skein_model::AnyValue;
    match v {
        AnyValue::Double(d) => canonical_nan(d),
        AnyValue::Array(a) => a.iter_mut().for_each(canon_value),
        AnyValue::Map(m) => m.iter_mut().for_each(|kv| canon_value(&mut kv.value)),
        _ => {}
    }
}

fn canon_attrs(attrs: &mut [KeyValue]) {
    for kv in attrs {
        canon_value(&mut kv.value);
    }
}

fn canon_shared<T: Clone>(arc: &mut std::sync::Arc<T>, attrs: impl Fn(&T) -> &[KeyValue], fix: impl Fn(&mut T)) {
    if attrs(arc).iter().any(|kv| has_odd_nan(&kv.value)) {
        fix(std::sync::Arc::make_mut(arc));
    }
}

fn canon_resource_scope(r: &mut std::sync::Arc<skein_model::Resource>, s: &mut std::sync::Arc<skein_model::Scope>) {
    canon_shared(r, |r| &r.attributes, |r| canon_attrs(&mut r.attributes));
    canon_shared(s, |s| &s.attributes, |s| canon_attrs(&mut s.attributes));
}

impl Normalize for Span {
    fn normalize(&mut self) {
        canon_attrs(&mut self.attributes);
        for e in &mut self.events {
            canon_attrs(&mut e.attributes);
        }
        for l in &mut self.links {
            canon_attrs(&mut l.attributes);
        }
        canon_resource_scope(&mut self.resource, &mut self.scope);
    }
}

impl Normalize for LogRecord {
    fn normalize(&mut self) {
        canon_value(&mut self.body);
        canon_attrs(&mut self.attributes);
        canon_resource_scope(&mut self.resource, &mut self.scope);
    }
}

impl Normalize for MetricPoint {
    fn normalize(&mut self) {
        use skein_model::metric::{Number, PointValue};
        canon_attrs(&mut self.attributes);
        let num = |n: &mut Number| {
            if let Number::Double(d) = n {
                canonical_nan(d);
            }
        };
        match &mut self.value {
            PointValue::Number(Some(n)) => num(n),
            PointValue::Number(None) => {}
            PointValue::Histogram(h) => {
                h.sum
                    .iter_mut()
                    .chain(h.min.iter_mut())
                    .chain(h.max.iter_mut())
                    .for_each(canonical_nan);
                h.explicit_bounds.iter_mut().for_each(canonical_nan);
            }
            PointValue::ExponentialHistogram(h) => {
                h.sum
                    .iter_mut()
                    .chain(h.min.iter_mut())
                    .chain(h.max.iter_mut())
                    .for_each(canonical_nan);
                canonical_nan(&mut h.zero_threshold);
            }
            PointValue::Summary(s) => {
                canonical_nan(&mut s.sum);
                for (q, v) in &mut s.quantiles {
                    canonical_nan(q);
                    canonical_nan(v);
                }
            }
        }
        for e in &mut self.exemplars {
            canon_attrs(&mut e.filtered_attributes);
            if let Some(n) = &mut e.value {
                num(n);
            }
        }
        canon_shared(&mut self.metric, |m| &m.metadata, |m| canon_attrs(&mut m.metadata));
        canon_resource_scope(&mut self.resource, &mut self.scope);
    }
}
