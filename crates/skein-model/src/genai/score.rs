//! Scores: a judgement of a trace, span or session (a human's thumbs-up, an
//! eval's 0.83, an agent's "wrong tool"), stored as the OTel GenAI
//! `gen_ai.evaluation.result` event: a log record with that event name, the
//! trace and span it judges, and `gen_ai.evaluation.*` attributes. So scores
//! sent by instrumentations as events and scores posted to the API are one
//! thing, durable like any telemetry.

use std::sync::Arc;

use serde::Serialize;

use crate::ids::{SpanId, TraceId};
use crate::log::LogRecord;
use crate::resource::Resource;
use crate::value::{AnyValue, KeyValue, find_attr};

pub const EVENT_NAME: &str = "gen_ai.evaluation.result";
pub const NAME_KEY: &str = "gen_ai.evaluation.name";
const VALUE_KEY: &str = "gen_ai.evaluation.score.value";
const LABEL_KEY: &str = "gen_ai.evaluation.score.label";
const EXPLANATION_KEY: &str = "gen_ai.evaluation.explanation";
pub const SESSION_KEY: &str = "gen_ai.conversation.id";
const ID_KEY: &str = "skein.score.id";
const SOURCE_KEY: &str = "skein.score.source";
/// The value as posted (a number, string or bool), so it reads back as sent.
const RAW_KEY: &str = "skein.score.value";

/// Who scored.
pub const SOURCES: &[&str] = &["human", "eval", "agent", "api"];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    pub id: Option<String>,
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    pub session_id: Option<String>,
    pub name: String,
    /// A number, a string or a bool.
    pub value: serde_json::Value,
    pub comment: Option<String>,
    pub source: Option<String>,
    pub time_unix_nano: u64,
}

impl Score {
    /// The log record that stores it.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        id: &str,
        trace_id: TraceId,
        span_id: Option<SpanId>,
        session_id: Option<&str>,
        name: &str,
        value: &AnyValue,
        comment: Option<&str>,
        source: &str,
        time_unix_nano: u64,
    ) -> LogRecord {
        let mut attributes = vec![
            KeyValue::new(NAME_KEY, name),
            KeyValue::new(ID_KEY, id),
            KeyValue::new(SOURCE_KEY, source),
            KeyValue::new(RAW_KEY, value.clone()),
        ];
        match value {
            AnyValue::Int(_) | AnyValue::Double(_) => {
                attributes.push(KeyValue::new(VALUE_KEY, value.as_f64().unwrap_or(0.0)));
            }
            AnyValue::Bool(b) => {
                attributes.push(KeyValue::new(VALUE_KEY, if *b { 1.0 } else { 0.0 }));
                attributes.push(KeyValue::new(LABEL_KEY, b.to_string()));
            }
            other => attributes.push(KeyValue::new(LABEL_KEY, other.clone())),
        }
        if let Some(c) = comment {
            attributes.push(KeyValue::new(EXPLANATION_KEY, c));
        }
        if let Some(s) = session_id {
            attributes.push(KeyValue::new(SESSION_KEY, s));
        }
        LogRecord {
            time_unix_nano,
            observed_time_unix_nano: time_unix_nano,
            severity_number: 9,
            severity_text: "INFO".into(),
            body: AnyValue::Str(format!("score {name}")),
            attributes,
            trace_id: Some(trace_id),
            span_id,
            event_name: EVENT_NAME.into(),
            resource: Arc::new(Resource {
                attributes: vec![KeyValue::new("service.name", "skein.scores")],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The score a `gen_ai.evaluation.result` log record or span event
    /// holds (`None` for anything else).
    pub fn from_event(
        event_name: &str,
        attrs: &[KeyValue],
        trace_id: Option<TraceId>,
        span_id: Option<SpanId>,
        time_unix_nano: u64,
    ) -> Option<Score> {
        if event_name != EVENT_NAME {
            return None;
        }
        let s = |k: &str| find_attr(attrs, k).and_then(AnyValue::as_str).map(str::to_string);
        let value = find_attr(attrs, RAW_KEY)
            .or_else(|| find_attr(attrs, VALUE_KEY))
            .or_else(|| find_attr(attrs, LABEL_KEY))
            .map(crate::plain::any_value_to_plain_json)
            .unwrap_or(serde_json::Value::Null);
        Some(Score {
            id: s(ID_KEY),
            trace_id: trace_id.map(|t| t.to_hex()),
            span_id: span_id.map(|s| s.to_hex()),
            session_id: s(SESSION_KEY),
            name: s(NAME_KEY).unwrap_or_default(),
            value,
            comment: s(EXPLANATION_KEY),
            source: s(SOURCE_KEY),
            time_unix_nano,
        })
    }

    /// The log records that store the `gen_ai.evaluation.result` events
    /// inside `spans`, so that they are scores like posted ones. Each
    /// record's id is derived from the event, so a re-sent span stores the
    /// same record again (and deduplicates with it), not a second score.
    pub fn records_of_span_events(spans: &[crate::Span]) -> Vec<LogRecord> {
        let mut out = Vec::new();
        for span in spans {
            for e in span.events.iter().filter(|e| e.name == EVENT_NAME) {
                let Some(s) = Score::from_event(&e.name, &e.attributes, None, None, e.time_unix_nano) else {
                    continue;
                };
                let mut key = Vec::with_capacity(64);
                key.extend_from_slice(&span.trace_id.0);
                key.extend_from_slice(&span.span_id.0);
                key.extend_from_slice(&e.time_unix_nano.to_le_bytes());
                key.extend_from_slice(s.name.as_bytes());
                let id = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&key));
                let value = find_attr(&e.attributes, VALUE_KEY)
                    .or_else(|| find_attr(&e.attributes, LABEL_KEY))
                    .cloned()
                    .unwrap_or(AnyValue::Str(String::new()));
                let session = s
                    .session_id
                    .clone()
                    .or_else(|| crate::genai::LlmCall::from_attributes(&span.attributes).and_then(|c| c.session_id));
                let mut r = Score::record(
                    &id,
                    span.trace_id,
                    Some(span.span_id),
                    session.as_deref(),
                    &s.name,
                    &value,
                    s.comment.as_deref(),
                    "eval",
                    e.time_unix_nano.max(span.start_time_unix_nano),
                );
                r.resource = span.resource.clone();
                out.push(r);
            }
        }
        out
    }

    pub fn from_log(l: &LogRecord) -> Option<Score> {
        Score::from_event(&l.event_name, &l.attributes, l.trace_id, l.span_id, l.effective_time())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_score_reads_back_as_posted() {
        let t = TraceId::from_u128(7);
        for value in [
            AnyValue::Double(0.83),
            AnyValue::Bool(true),
            AnyValue::Str("wrong tool".into()),
        ] {
            let r = Score::record("id1", t, None, Some("s1"), "helpful", &value, Some("why"), "human", 5);
            let s = Score::from_log(&r).unwrap();
            assert_eq!(s.value, crate::plain::any_value_to_plain_json(&value));
            assert_eq!((s.name.as_str(), s.session_id.as_deref()), ("helpful", Some("s1")));
            assert_eq!(
                (s.comment.as_deref(), s.source.as_deref()),
                (Some("why"), Some("human"))
            );
            assert_eq!(s.trace_id, Some(t.to_hex()));
        }
    }

    #[test]
    fn span_events_become_the_same_records_each_time() {
        let span = crate::Span {
            trace_id: TraceId::from_u128(9),
            events: vec![crate::span::Event {
                time_unix_nano: 10,
                name: EVENT_NAME.into(),
                attributes: vec![KeyValue::new(NAME_KEY, "relevance"), KeyValue::new(VALUE_KEY, 0.25)],
                ..Default::default()
            }],
            ..Default::default()
        };
        let a = Score::records_of_span_events(std::slice::from_ref(&span));
        let b = Score::records_of_span_events(std::slice::from_ref(&span));
        assert_eq!(a.len(), 1);
        assert_eq!(a, b, "a re-sent span gives the same record");
        let s = Score::from_log(&a[0]).unwrap();
        assert_eq!(
            (s.name.as_str(), s.value.clone()),
            ("relevance", serde_json::json!(0.25))
        );
        assert_eq!(s.trace_id, Some(span.trace_id.to_hex()));
    }

    #[test]
    fn an_otel_evaluation_event_is_a_score() {
        let attrs = vec![
            KeyValue::new(NAME_KEY, "relevance"),
            KeyValue::new(VALUE_KEY, 0.5),
            KeyValue::new(LABEL_KEY, "partial"),
        ];
        let s = Score::from_event(EVENT_NAME, &attrs, None, None, 1).unwrap();
        assert_eq!(
            (s.name.as_str(), s.value.clone()),
            ("relevance", serde_json::json!(0.5))
        );
        assert!(Score::from_event("other", &attrs, None, None, 1).is_none());
    }
}
