//! Query definitions for spans, logs and metric points.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int8Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use skein_model::{AnyValue, KeyValue, LogRecord, MetricPoint, Span, SpanKind, StatusCode, TraceId};

use super::window::Window;
use crate::payload::{self, PayloadRef};
use crate::record::{Record, RecordKey};
use crate::terms::{self, AttrScope, Term};
use crate::text::{self, PayloadText, TextQuery, body_text};

/// Where an attribute filter looks.

#[derive(Debug, Clone, PartialEq)]
pub enum AttrPredicate {
    /// Typed equality (an int 200 does not equal the string "200").
    Eq(AnyValue),
    /// Equal to any of these values (how the API reads `attr.k=200`: the
    /// int, the double or the string).
    AnyOf(Vec<AnyValue>),
    Exists,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AttrFilter {
    pub scope: AttrScope,
    pub key: String,
    pub predicate: AttrPredicate,
}

impl AttrFilter {
    pub fn eq(scope: AttrScope, key: impl Into<String>, value: impl Into<AnyValue>) -> Self {
        AttrFilter {
            scope,
            key: key.into(),
            predicate: AttrPredicate::Eq(value.into()),
        }
    }

    pub fn exists(scope: AttrScope, key: impl Into<String>) -> Self {
        AttrFilter {
            scope,
            key: key.into(),
            predicate: AttrPredicate::Exists,
        }
    }

    fn matches_list(&self, attrs: &[KeyValue]) -> bool {
        attrs.iter().any(|kv| {
            kv.key == self.key
                && match &self.predicate {
                    AttrPredicate::Exists => true,
                    AttrPredicate::Eq(v) => stored_eq(&kv.value, v),
                    AttrPredicate::AnyOf(vs) => vs.iter().any(|v| stored_eq(&kv.value, v)),
                }
        })
    }

    /// The posting group of a filter on a record without events (a log
    /// record or metric point): there, as in `matches`, the `Event` scope
    /// means the record's own attributes, which are indexed as `Record`.
    /// Whether a metric point matches (it has no events: the `Event`
    /// scope is its own attributes).
    pub(crate) fn matches_point(&self, p: &MetricPoint) -> bool {
        match self.scope {
            AttrScope::Record | AttrScope::Event => self.matches_list(&p.attributes),
            AttrScope::Resource => self.matches_list(&p.resource.attributes),
        }
    }

    pub(crate) fn group_without_events(&self) -> Option<TermGroup> {
        match self.scope {
            AttrScope::Event => AttrFilter {
                scope: AttrScope::Record,
                ..self.clone()
            }
            .group(),
            _ => self.group(),
        }
    }

    /// The posting group narrowing this filter, if it is indexable.
    fn group(&self) -> Option<TermGroup> {
        let key = terms::attr_exists(self.scope, &self.key);
        match &self.predicate {
            AttrPredicate::Exists => Some(TermGroup {
                terms: vec![key],
                attr_key: None,
            }),
            AttrPredicate::Eq(v) => terms::attr_eq(self.scope, &self.key, v).map(|t| TermGroup {
                terms: vec![t],
                attr_key: Some(key),
            }),
            // Narrows only if every alternative is indexable.
            AttrPredicate::AnyOf(vs) => vs
                .iter()
                .map(|v| terms::attr_eq(self.scope, &self.key, v))
                .collect::<Option<Vec<_>>>()
                .map(|terms| TermGroup {
                    terms,
                    attr_key: Some(key),
                }),
        }
    }
}

/// A disjunction of terms: a row is a candidate if it has any of them.
/// Whether a stored value equals a query value. A value stored as a
/// payload reference equals the string whose hash it names (no string
/// that long has an index term, so such a filter always reaches here).
fn stored_eq(stored: &AnyValue, wanted: &AnyValue) -> bool {
    match (payload::as_ref_value(stored), wanted) {
        (Some((id, len)), AnyValue::Str(s)) => s.len() as u64 == len && PayloadRef::of(s.as_bytes()) == id,
        _ => stored.query_eq(wanted),
    }
}

#[derive(Debug, Clone)]
pub struct TermGroup {
    pub terms: Vec<Term>,
    /// For attribute-value terms: the key, whose values a part may not have
    /// indexed (then this group cannot narrow that part).
    pub attr_key: Option<Term>,
}

fn single(t: Term) -> TermGroup {
    TermGroup {
        terms: vec![t],
        attr_key: None,
    }
}

/// Position in a newest-first result list: the `(time, key)` of the last
/// record returned. The next page holds records strictly older.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub time: u64,
    pub key: RecordKey,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{:032x}-{:016x}", self.time, self.key.hi, self.key.lo)
    }
}

impl std::str::FromStr for Cursor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid cursor {s:?}: pass back the next_cursor of a previous answer");
        let mut it = s.split('-');
        let (Some(t), Some(hi), Some(lo), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(bad());
        };
        Ok(Cursor {
            time: t.parse().map_err(|_| bad())?,
            key: RecordKey {
                hi: u128::from_str_radix(hi, 16).map_err(|_| bad())?,
                lo: u64::from_str_radix(lo, 16).map_err(|_| bad())?,
            },
        })
    }
}

/// Behaviour shared by the three query types.
pub trait RecordQuery<R: Record>: Send + Sync {
    /// Posting groups, all of which a candidate must hit.
    fn term_groups(&self) -> Vec<TermGroup>;
    /// A trace the records must belong to (narrowed by the trace index).
    fn trace(&self) -> Option<TraceId> {
        None
    }
    /// The window on record time.
    fn window(&self) -> Window;
    fn limit(&self) -> usize;
    fn cursor(&self) -> Option<Cursor>;
    /// The full predicate.
    fn matches(&self, r: &R) -> bool;
    /// Columns a cheap pre-check can run on before whole rows are decoded,
    /// and the pre-check itself (it may only reject rows `matches` rejects).
    fn prefilter_columns(&self) -> &'static [&'static str] {
        &[]
    }
    fn prefilter(&self, _batch: &RecordBatch, _row: usize) -> bool {
        true
    }
    fn has_prefilter(&self) -> bool {
        false
    }
    /// A full-text query the records must match (narrowed by the text
    /// indexes; `matches` re-checks it).
    fn text(&self) -> Option<&TextQuery> {
        None
    }
    /// Reads payload text, for indexing the hot tier and for `matches`.
    fn payload_text(&self) -> Option<&PayloadText> {
        None
    }
}

/// Span search. Unset fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct SpanQuery {
    pub service: Option<String>,
    /// Exact span name.
    pub name: Option<String>,
    /// Case-insensitive substring of the span name.
    pub name_contains: Option<String>,
    pub kind: Option<SpanKind>,
    pub status: Option<StatusCode>,
    pub min_duration_ns: Option<u64>,
    pub max_duration_ns: Option<u64>,
    /// On start time.
    pub window: Window,
    pub trace_id: Option<TraceId>,
    /// Only spans without a parent.
    pub root_only: bool,
    pub attributes: Vec<AttrFilter>,
    /// Full-text query over the span's name, status message, exception
    /// attributes and payloads (see `text`).
    pub text: Option<TextQuery>,
    pub limit: usize,
    pub cursor: Option<Cursor>,
    /// Reads payloads for `text` (the engine sets it).
    pub payload_text: Option<PayloadText>,
}

fn contains_ci(haystack: &str, needle_lower: &str) -> bool {
    if needle_lower.is_empty() {
        return true;
    }
    if haystack.is_ascii() && needle_lower.is_ascii() {
        let h = haystack.as_bytes();
        let n = needle_lower.as_bytes();
        return h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n));
    }
    haystack.to_lowercase().contains(needle_lower)
}

impl RecordQuery<Span> for SpanQuery {
    fn text(&self) -> Option<&TextQuery> {
        self.text.as_ref()
    }
    fn payload_text(&self) -> Option<&PayloadText> {
        self.payload_text.as_ref()
    }
    fn term_groups(&self) -> Vec<TermGroup> {
        let mut g = Vec::new();
        if let Some(s) = &self.service {
            g.push(single(terms::service(s)));
        }
        if let Some(n) = &self.name {
            g.push(single(terms::name(n)));
        }
        if let Some(k) = self.kind {
            g.push(single(terms::kind(k as u8)));
        }
        if let Some(c) = self.status {
            g.push(single(terms::status(c as u8)));
        }
        g.extend(self.attributes.iter().filter_map(AttrFilter::group));
        g
    }

    fn trace(&self) -> Option<TraceId> {
        self.trace_id
    }

    fn window(&self) -> Window {
        self.window
    }

    fn limit(&self) -> usize {
        self.limit
    }

    fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    fn matches(&self, s: &Span) -> bool {
        let d = s.duration_ns();
        self.service.as_deref().is_none_or(|v| s.service_name() == v)
            && self.name.as_deref().is_none_or(|v| s.name == v)
            && self
                .name_contains
                .as_deref()
                .is_none_or(|v| contains_ci(&s.name, &v.to_lowercase()))
            && self.kind.is_none_or(|k| s.kind == k)
            && self.status.is_none_or(|c| s.status.code == c)
            && self.min_duration_ns.is_none_or(|m| d >= m)
            && self.max_duration_ns.is_none_or(|m| d <= m)
            && self.window.contains(s.start_time_unix_nano)
            && self.trace_id.is_none_or(|t| s.trace_id == t)
            && (!self.root_only || s.parent_span_id.is_none())
            && self
                .text
                .as_ref()
                .is_none_or(|t| text::matches(t, s, self.payload_text.as_ref()))
            && self.attributes.iter().all(|f| match f.scope {
                AttrScope::Record => f.matches_list(&s.attributes),
                AttrScope::Resource => f.matches_list(&s.resource.attributes),
                AttrScope::Event => s.events.iter().any(|e| f.matches_list(&e.attributes)),
            })
    }

    fn has_prefilter(&self) -> bool {
        self.name_contains.is_some() || self.min_duration_ns.is_some() || self.max_duration_ns.is_some()
    }

    fn prefilter_columns(&self) -> &'static [&'static str] {
        &["name", "duration_ns", "kind", "status_code"]
    }

    fn prefilter(&self, b: &RecordBatch, i: usize) -> bool {
        let name = b.column_by_name("name").and_then(|c| c.as_string_opt::<i32>());
        let dur = b
            .column_by_name("duration_ns")
            .and_then(|c| c.as_primitive_opt::<Int64Type>());
        let kind = b.column_by_name("kind").and_then(|c| c.as_primitive_opt::<Int8Type>());
        let status = b
            .column_by_name("status_code")
            .and_then(|c| c.as_primitive_opt::<Int8Type>());
        if let (Some(n), Some(col)) = (&self.name_contains, name)
            && col.is_valid(i)
            && !contains_ci(col.value(i), &n.to_lowercase())
        {
            return false;
        }
        if let Some(col) = dur.filter(|c| c.is_valid(i)) {
            let d = col.value(i).max(0) as u64;
            if self.min_duration_ns.is_some_and(|m| d < m) || self.max_duration_ns.is_some_and(|m| d > m) {
                return false;
            }
        }
        if let (Some(k), Some(col)) = (self.kind, kind)
            && col.is_valid(i)
            && col.value(i) != k as i8
        {
            return false;
        }
        if let (Some(c), Some(col)) = (self.status, status)
            && col.is_valid(i)
            && col.value(i) != c as i8
        {
            return false;
        }
        true
    }
}

/// Log search.
#[derive(Debug, Clone, Default)]
pub struct LogQuery {
    pub service: Option<String>,
    /// Severity number at least this (e.g. 13 = WARN).
    pub min_severity: Option<i32>,
    pub trace_id: Option<TraceId>,
    pub span_id: Option<skein_model::SpanId>,
    /// Case-insensitive substring of the body (its text, or its JSON form).
    pub body_contains: Option<String>,
    pub attributes: Vec<AttrFilter>,
    /// Full-text query over the body, event name, exception attributes and
    /// payloads (see `text`).
    pub text: Option<TextQuery>,
    /// On the record's time (a log's effective time).
    pub window: Window,
    pub limit: usize,
    pub cursor: Option<Cursor>,
    /// Reads the text of values stored as payloads, for `body_contains`
    /// and `text` (the engine sets it; without it only the reference's
    /// preview is searched).
    pub payload_text: Option<PayloadText>,
}

impl LogQuery {
    /// The body's text: a payload's own text when the body is one and the
    /// query can read it.
    fn body_text<'a>(&self, body: &'a AnyValue) -> std::borrow::Cow<'a, str> {
        if let (Some((id, _)), Some(read)) = (payload::as_ref_value(body), &self.payload_text)
            && let Some(text) = read.read(&id)
        {
            return text.into();
        }
        body_text(body)
    }
}

impl RecordQuery<LogRecord> for LogQuery {
    fn text(&self) -> Option<&TextQuery> {
        self.text.as_ref()
    }
    fn payload_text(&self) -> Option<&PayloadText> {
        self.payload_text.as_ref()
    }
    fn term_groups(&self) -> Vec<TermGroup> {
        let mut g = Vec::new();
        if let Some(s) = &self.service {
            g.push(single(terms::service(s)));
        }
        if let Some(min) = self.min_severity
            && min > 0
        {
            g.push(TermGroup {
                terms: (min..=24).map(terms::severity).collect(),
                attr_key: None,
            });
        }
        g.extend(self.attributes.iter().filter_map(AttrFilter::group_without_events));
        g
    }

    fn trace(&self) -> Option<TraceId> {
        self.trace_id
    }

    fn window(&self) -> Window {
        self.window
    }

    fn limit(&self) -> usize {
        self.limit
    }

    fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    fn matches(&self, l: &LogRecord) -> bool {
        self.service.as_deref().is_none_or(|v| l.service_name() == v)
            && self.min_severity.is_none_or(|m| l.severity_number >= m)
            && self.trace_id.is_none_or(|t| l.trace_id == Some(t))
            && self.span_id.is_none_or(|s| l.span_id == Some(s))
            && self.window.contains(l.effective_time())
            && self
                .body_contains
                .as_deref()
                .is_none_or(|b| contains_ci(&self.body_text(&l.body), &b.to_lowercase()))
            && self
                .text
                .as_ref()
                .is_none_or(|t| text::matches(t, l, self.payload_text.as_ref()))
            && self.attributes.iter().all(|f| match f.scope {
                AttrScope::Record | AttrScope::Event => f.matches_list(&l.attributes),
                AttrScope::Resource => f.matches_list(&l.resource.attributes),
            })
    }

    /// A text query is decided on the text columns alone: a part's text
    /// index narrows to blocks of 32 rows, which compaction scatters over
    /// a thousand rows and more, so most candidates are neighbours of a
    /// hit that only their text rejects.
    fn has_prefilter(&self) -> bool {
        self.body_contains.is_some() || self.text.is_some()
    }

    fn prefilter_columns(&self) -> &'static [&'static str] {
        if self.text.is_some() {
            crate::part::columns::logs::TEXT_COLUMNS
        } else {
            &["body", "body_json"]
        }
    }

    fn prefilter(&self, b: &RecordBatch, i: usize) -> bool {
        if let Some(needle) = &self.body_contains {
            let body = b.column_by_name("body").and_then(|c| c.as_string_opt::<i32>());
            // Non-string bodies are decided on the decoded record, the empty
            // one (NULL in both columns) too: `matches` reads it as `null`.
            if let Some(col) = body
                && col.is_valid(i)
                && !contains_ci(col.value(i), &needle.to_lowercase())
            {
                return false;
            }
        }
        let Some(t) = &self.text else { return true };
        match crate::part::columns::logs::text_record(b, i) {
            Ok(l) => text::matches(t, &l, self.payload_text.as_ref()),
            // A row that does not decode is for the full read to report.
            Err(_) => true,
        }
    }
}

/// Metric point search.
#[derive(Debug, Clone, Default)]
pub struct MetricQuery {
    pub name: Option<String>,
    pub service: Option<String>,
    /// Point attribute (label) filters; `Resource` scope for resource ones.
    pub attributes: Vec<AttrFilter>,
    /// On the record's time (a log's effective time).
    pub window: Window,
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

impl RecordQuery<MetricPoint> for MetricQuery {
    fn term_groups(&self) -> Vec<TermGroup> {
        let mut g = Vec::new();
        if let Some(s) = &self.service {
            g.push(single(terms::service(s)));
        }
        if let Some(n) = &self.name {
            g.push(single(terms::name(n)));
        }
        g.extend(self.attributes.iter().filter_map(AttrFilter::group_without_events));
        g
    }

    fn window(&self) -> Window {
        self.window
    }

    fn limit(&self) -> usize {
        self.limit
    }

    fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    fn matches(&self, p: &MetricPoint) -> bool {
        self.service.as_deref().is_none_or(|v| p.service_name() == v)
            && self.name.as_deref().is_none_or(|v| p.metric.name == v)
            && self.window.contains(p.time_unix_nano)
            && self.attributes.iter().all(|f| f.matches_point(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let c = Cursor {
            time: 42,
            key: RecordKey { hi: 7, lo: 9 },
        };
        assert_eq!(c.to_string().parse::<Cursor>().unwrap(), c);
        assert!("nope".parse::<Cursor>().unwrap_err().contains("invalid cursor"));
    }

    #[test]
    fn substring_is_case_insensitive() {
        assert!(contains_ci("GET /Api/Users", "api/u"));
        assert!(!contains_ci("GET", "post"));
        assert!(contains_ci("Ünïcode ÄB", "äb"));
    }
}
