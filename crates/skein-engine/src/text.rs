//! What full-text search reads of each record: its text values by field
//! (`body`, `name`, `message`, `payload`), with payloads read in full.
//!
//! | field | logs | spans |
//! |---|---|---|
//! | `body` | the body (its text, or its JSON form) | — |
//! | `name` | the event name, `exception.type` | the span name, its events' names, their `exception.type` |
//! | `message` | `exception.message` / `.stacktrace` attributes | the status message; those attributes of events |
//! | `payload` | attributes stored as payloads, GenAI content | the same, of the span and its events |
//!
//! A body stored as a payload is read as the body.

use std::borrow::Cow;

use skein_model::{AnyValue, KeyValue, LogRecord, MetricPoint, Span, genai};

use crate::payload::{PayloadRef, as_ref_value, is_binary_ref};

pub use skein_text::{Field as TextField, Highlight, Query as TextQuery, QueryError as TextQueryError};

/// Reads the text a payload reference names, if it can.
pub type ReadPayloadText = dyn Fn(&PayloadRef) -> Option<String> + Send + Sync;

/// Where a payload is stored, as far as reading it goes: payloads read in
/// the order of their places are read a frame at a time (a frame holds
/// many payloads, and decompressing it is most of reading one).
pub type PayloadPlace = (u8, u64, u64);

/// Where a payload is stored (see [`PayloadPlace`]).
pub type PlacePayload = dyn Fn(&PayloadRef) -> PayloadPlace + Send + Sync;

/// Resolves a payload reference to its text.
#[derive(Clone)]
pub struct PayloadText {
    read: std::sync::Arc<ReadPayloadText>,
    place: Option<std::sync::Arc<PlacePayload>>,
}

impl PayloadText {
    pub fn new(read: impl Fn(&PayloadRef) -> Option<String> + Send + Sync + 'static) -> PayloadText {
        PayloadText {
            read: std::sync::Arc::new(read),
            place: None,
        }
    }

    /// Tells where payloads are, so that many are read in the cheapest
    /// order (see [`place`](Self::place)).
    pub fn with_places(self, place: impl Fn(&PayloadRef) -> PayloadPlace + Send + Sync + 'static) -> PayloadText {
        PayloadText {
            place: Some(std::sync::Arc::new(place)),
            ..self
        }
    }

    /// The text of payload `id`, if it can be read.
    pub fn read(&self, id: &PayloadRef) -> Option<String> {
        (self.read)(id)
    }

    /// Where payload `id` is: a caller reading many payloads reads them
    /// in the order of their places. The same for all without places.
    pub fn place(&self, id: &PayloadRef) -> PayloadPlace {
        self.place.as_ref().map_or((0, 0, 0), |place| place(id))
    }
}

impl std::fmt::Debug for PayloadText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadText")
    }
}

/// A body's text: a string as itself, any other value as its plain JSON.
pub fn body_text(body: &AnyValue) -> std::borrow::Cow<'_, str> {
    match body {
        AnyValue::Str(s) => s.as_str().into(),
        other => skein_model::plain::any_value_to_plain_json(other).to_string().into(),
    }
}

const EXCEPTION_MESSAGES: [&str; 2] = ["exception.message", "exception.stacktrace"];

/// One text value of a record, as it is stored.
#[derive(Debug, Clone, PartialEq)]
pub enum TextValue<'a> {
    /// Text held in the record.
    Text(Cow<'a, str>),
    /// A value stored as a payload: its reference and the preview the
    /// record keeps.
    Payload { id: PayloadRef, preview: &'a str },
}

impl<'a> TextValue<'a> {
    fn of(v: &'a AnyValue) -> TextValue<'a> {
        // Binary values hold no text to search, stored inline or not.
        if matches!(v, AnyValue::Bytes(_)) || is_binary_ref(v) {
            return TextValue::Text(Cow::Borrowed(""));
        }
        if let Some((id, _)) = as_ref_value(v) {
            let preview = match v {
                AnyValue::Map(m) => m.get(2).and_then(|kv| kv.value.as_str()).unwrap_or(""),
                _ => "",
            };
            return TextValue::Payload { id, preview };
        }
        TextValue::Text(body_text(v))
    }

    /// The text: a payload read through `read` (without it, or when it
    /// cannot, the preview stands in).
    pub fn resolve(self, read: Option<&PayloadText>) -> Cow<'a, str> {
        match self {
            TextValue::Text(t) => t,
            TextValue::Payload { id, preview } => match read.and_then(|r| r.read(&id)) {
                Some(text) => text.into(),
                None => preview.into(),
            },
        }
    }
}

/// A record's text values for full-text search, by field.
pub trait TextRecord {
    /// Appends the record's text values, borrowed from it.
    fn text_values<'a>(&'a self, out: &mut Vec<(TextField, TextValue<'a>)>);

    /// The record's text, payloads read through `read`.
    fn text_doc(&self, read: Option<&PayloadText>) -> Vec<(TextField, Cow<'_, str>)> {
        let mut values = Vec::new();
        self.text_values(&mut values);
        values.into_iter().map(|(f, v)| (f, v.resolve(read))).collect()
    }
}

/// Exception types as `name`, their messages and stack traces as
/// `message`, payloads and GenAI content as `payload`.
fn attr_values<'a>(attrs: &'a [KeyValue], out: &mut Vec<(TextField, TextValue<'a>)>) {
    for kv in attrs {
        // The key decides first: most attributes hold no searchable text,
        // and turning their values into text (JSON for non-strings) would
        // cost more than everything else an index does with a record.
        if let Some(field) = attr_field(kv) {
            out.push((field, TextValue::of(&kv.value)));
        }
    }
}

/// The field of attribute `kv`'s text, if it is searched: its key's, or
/// `payload` for any other value stored as a payload.
fn attr_field(kv: &KeyValue) -> Option<TextField> {
    key_field(&kv.key).or_else(|| as_ref_value(&kv.value).map(|_| TextField::Payload))
}

/// The field of an attribute's text when its key alone decides it.
fn key_field(key: &str) -> Option<TextField> {
    if key == "exception.type" {
        Some(TextField::Name)
    } else if EXCEPTION_MESSAGES.contains(&key) {
        Some(TextField::Message)
    } else if genai::is_content_key(key) {
        Some(TextField::Payload)
    } else {
        None
    }
}

impl TextRecord for LogRecord {
    fn text_values<'a>(&'a self, out: &mut Vec<(TextField, TextValue<'a>)>) {
        out.push((TextField::Body, TextValue::of(&self.body)));
        if !self.event_name.is_empty() {
            out.push((TextField::Name, TextValue::Text(self.event_name.as_str().into())));
        }
        attr_values(&self.attributes, out);
    }
}

impl TextRecord for Span {
    fn text_values<'a>(&'a self, out: &mut Vec<(TextField, TextValue<'a>)>) {
        out.push((TextField::Name, TextValue::Text(self.name.as_str().into())));
        if !self.status.message.is_empty() {
            out.push((TextField::Message, TextValue::Text(self.status.message.as_str().into())));
        }
        attr_values(&self.attributes, out);
        for e in &self.events {
            out.push((TextField::Name, TextValue::Text(e.name.as_str().into())));
            attr_values(&e.attributes, out);
        }
    }
}

/// Metric points hold no text to search.
impl TextRecord for MetricPoint {
    fn text_values<'a>(&'a self, _out: &mut Vec<(TextField, TextValue<'a>)>) {}
}

/// `doc` as the borrowed list the text query reads.
pub fn borrowed<'a>(doc: &'a [(TextField, Cow<'_, str>)]) -> Vec<(TextField, &'a str)> {
    doc.iter().map(|(f, s)| (*f, s.as_ref())).collect()
}

/// Whether `r` matches `q`, its payloads read through `read`.
pub fn matches<R: TextRecord>(q: &TextQuery, r: &R, read: Option<&PayloadText>) -> bool {
    q.matches(&borrowed(&r.text_doc(read)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{PayloadRef, ref_value};

    #[test]
    fn records_read_their_text_by_field() {
        let mut s = crate::testdata::spans(1, 1).remove(0);
        s.name = "GET /cart".into();
        s.status.message = "upstream PoolTimeout".into();
        let prompt = "Why is checkout slow? ".repeat(20);
        s.attributes.push(KeyValue::new(
            "gen_ai.input.messages",
            ref_value(PayloadRef::of(prompt.as_bytes()), &prompt),
        ));
        s.events.push(skein_model::Event {
            name: "exception".into(),
            attributes: vec![KeyValue::new("exception.type", "ConnectionRefusedError")],
            ..Default::default()
        });
        let q = |t: &str| TextQuery::parse(t).unwrap();
        let full = prompt.clone();
        let read = PayloadText::new(move |_| Some(full.clone()));
        assert!(matches(&q("name:cart"), &s, None));
        assert!(matches(&q("message:pooltimeout"), &s, None));
        assert!(matches(&q("name:ConnectionRefusedError"), &s, None));
        assert!(matches(&q("name:exception"), &s, None), "event names are names");
        assert!(!matches(&q("message:ConnectionRefusedError"), &s, None));
        assert!(matches(&q("payload:checkout"), &s, None), "the preview stands in");
        // Past the 200-character preview only the payload itself has it.
        let mut deep = s.clone();
        let long = format!("{} needle", "hay ".repeat(100));
        deep.attributes.push(KeyValue::new(
            "app.doc",
            ref_value(PayloadRef::of(long.as_bytes()), &long),
        ));
        let long2 = long.clone();
        let read_long = PayloadText::new(move |_| Some(long2.clone()));
        assert!(!matches(&q("payload:needle"), &deep, None));
        assert!(matches(&q("payload:needle"), &deep, Some(&read_long)));
        assert!(!matches(&q("body:cart"), &s, Some(&read)), "spans have no body");

        let mut l = crate::testdata::logs(1).remove(0);
        l.body = AnyValue::Str("connection refused by db.query".into());
        assert!(matches(&q("body:\"connection refused\""), &l, None));
        assert!(matches(&q("query AND NOT timeout"), &l, None));
    }
}
