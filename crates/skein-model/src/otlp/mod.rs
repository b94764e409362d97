//! Lossless conversion between OTLP protobuf messages and the model.
//!
//! Decoding validates every record and rejects invalid ones individually
//! (OTLP partial success): a bad span never takes its batch down with it.
//! Encoding groups consecutive records that share a resource (and scope, and
//! metric) `Arc`, so decode → encode reproduces the original envelopes.
//!
//! Canonical forms, the only places where encode(decode(x)) differs from x:
//! an absent resource/scope/status becomes an empty one and back (proto3 does
//! not distinguish them), an all-zero parent or log id is "no id", and
//! envelopes with no records vanish.

mod common;
mod json_decode;
mod logs;
mod metrics;
mod trace;

pub use common::{any_value_from_otlp, any_value_to_otlp, attrs_from_otlp, attrs_to_otlp};
pub use json_decode::{logs_request_from_json, metrics_request_from_json, trace_request_from_json};
pub use logs::{logs_from_otlp, logs_to_otlp};
pub use metrics::{metrics_from_otlp, metrics_to_otlp};
pub use trace::{spans_from_otlp, spans_to_otlp};

pub use opentelemetry_proto::tonic as proto;

/// Records decoded from one export request, and the ones rejected.
#[derive(Debug, Default)]
pub struct Decoded<T> {
    pub records: Vec<T>,
    pub rejected: u64,
    /// Messages of the first few rejections (all are counted in `rejected`).
    pub errors: Vec<String>,
}

/// How many rejection messages are kept; more would only repeat.
pub const MAX_ERROR_MESSAGES: usize = 8;

impl<T> Decoded<T> {
    /// Room for `n` records up front: a request's records are large, and
    /// growing the vector by doubling copies them over and over.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Decoded {
            records: Vec::with_capacity(n),
            rejected: 0,
            errors: Vec::new(),
        }
    }

    pub(crate) fn reject(&mut self, err: crate::ModelError) {
        self.rejected += 1;
        if self.errors.len() < MAX_ERROR_MESSAGES {
            self.errors.push(err.to_string());
        }
    }

    /// A one-line summary of the rejections for an OTLP partial-success message.
    pub fn error_message(&self) -> String {
        if self.rejected == 0 {
            return String::new();
        }
        let mut msg = format!("rejected {}: {}", self.rejected, self.errors.join("; "));
        if self.rejected as usize > self.errors.len() {
            msg.push_str("; …");
        }
        msg
    }
}

/// The largest timestamp Skein stores: nanoseconds that fit an `i64`
/// (year 2262), which Parquet's TIMESTAMP(NANOS) and every query engine use.
pub const MAX_TIME_NS: u64 = i64::MAX as u64;

pub(crate) fn check_time(what: &str, t: u64) -> Result<(), crate::ModelError> {
    if t > MAX_TIME_NS {
        return Err(crate::ModelError::new(format!(
            "{what} {t} is beyond year 2262 (the maximum is {MAX_TIME_NS} ns)"
        )));
    }
    Ok(())
}
