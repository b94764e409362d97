//! Log records.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{SpanId, TraceId};
use crate::resource::{Resource, Scope};
use crate::value::{AnyValue, KeyValue, attributes_size};

/// One log record. Logs have no natural id, so the engine keys them by a hash
/// of their content: storing the same record twice keeps one copy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LogRecord {
    pub time_unix_nano: u64,
    pub observed_time_unix_nano: u64,
    /// 0 (unspecified) to 24 (FATAL4), as OTLP numbers severities.
    pub severity_number: i32,
    pub severity_text: String,
    pub body: AnyValue,
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes_count: u32,
    pub flags: u32,
    pub trace_id: Option<TraceId>,
    pub span_id: Option<SpanId>,
    pub event_name: String,
    #[serde(skip)]
    pub resource: Arc<Resource>,
    #[serde(skip)]
    pub scope: Arc<Scope>,
}

impl LogRecord {
    /// The record's time: `time_unix_nano`, or the observed time when the
    /// source did not set one (as the OTel data model specifies).
    pub fn effective_time(&self) -> u64 {
        if self.time_unix_nano != 0 {
            self.time_unix_nano
        } else {
            self.observed_time_unix_nano
        }
    }

    pub fn service_name(&self) -> &str {
        self.resource.service_name()
    }

    pub fn approx_size(&self) -> usize {
        std::mem::size_of::<LogRecord>()
            + self.severity_text.len()
            + self.event_name.len()
            + self.body.approx_size()
            + attributes_size(&self.attributes)
    }
}

/// Severity bands, by the lowest severity number of each band.
pub fn severity_band(number: i32) -> &'static str {
    match number {
        1..=4 => "trace",
        5..=8 => "debug",
        9..=12 => "info",
        13..=16 => "warn",
        17..=20 => "error",
        21..=24 => "fatal",
        _ => "unspecified",
    }
}

/// Parses a severity name (`warn`, `ERROR`, `info2`) or number to its number;
/// a band name maps to the band's lowest number.
pub fn parse_severity(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (0..=24).contains(&n).then_some(n);
    }
    let lower = s.to_ascii_lowercase();
    let (name, offset) = match lower.char_indices().find(|(_, c)| c.is_ascii_digit()) {
        Some((i, _)) => (&lower[..i], lower[i..].parse::<i32>().ok()?),
        None => (lower.as_str(), 1),
    };
    if !(1..=4).contains(&offset) {
        return None;
    }
    let base = match name {
        "trace" => 1,
        "debug" => 5,
        "info" => 9,
        "warn" | "warning" => 13,
        "error" => 17,
        "fatal" => 21,
        _ => return None,
    };
    Some(base + offset - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_parse() {
        assert_eq!(parse_severity("warn"), Some(13));
        assert_eq!(parse_severity("ERROR"), Some(17));
        assert_eq!(parse_severity("info2"), Some(10));
        assert_eq!(parse_severity("17"), Some(17));
        assert_eq!(parse_severity("25"), None);
        assert_eq!(parse_severity("loud"), None);
        assert_eq!(severity_band(18), "error");
    }
}
