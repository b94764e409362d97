//! Evidence of a finding drawn from sampled records: error messages
//! clustered into templates, and the attribute values that came with the
//! change.

use std::collections::BTreeMap;

use serde::Serialize;
use skein_model::{AnyValue, KeyValue, LogRecord, Span};

use crate::payload::as_ref_value;

/// Messages sharing a template once numbers, ids and hex are masked.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ErrorTemplate {
    pub template: String,
    /// Occurrences among the sampled records.
    pub count: u64,
    /// Where it was read: `status`, `exception` or `log`.
    pub source: &'static str,
    /// One message as it was.
    pub example: String,
}

/// Longest template or example kept, in characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// `s` with UUIDs as `<id>`, hex strings of 8+ characters with a digit as
/// `<hex>`, and digit runs as `<n>`: messages that differ only in such
/// values share a template.
pub fn mask(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if is_uuid(&b[i..]) && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            out.push_str("<id>");
            i += 36;
            continue;
        }
        if b[i].is_ascii_alphanumeric() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let word = &s[start..i];
            let hexlike = word.len() >= 8
                && word.bytes().all(|c| c.is_ascii_hexdigit())
                && word.bytes().any(|c| c.is_ascii_digit());
            if hexlike {
                out.push_str("<hex>");
            } else {
                let mut in_digits = false;
                for c in word.chars() {
                    if c.is_ascii_digit() {
                        if !in_digits {
                            out.push_str("<n>");
                        }
                        in_digits = true;
                    } else {
                        out.push(c);
                        in_digits = false;
                    }
                }
            }
            continue;
        }
        let c = s[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    truncate(&out)
}

fn is_uuid(b: &[u8]) -> bool {
    const DASHES: [usize; 4] = [8, 13, 18, 23];
    b.len() >= 36
        && (0..36).all(|k| {
            if DASHES.contains(&k) {
                b[k] == b'-'
            } else {
                b[k].is_ascii_hexdigit()
            }
        })
        && b.get(36).is_none_or(|c| !c.is_ascii_alphanumeric())
}

fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Clusters error messages into templates, most frequent first: status
/// messages and `exception` events of failing spans, and bodies of error
/// logs (severity ERROR or worse).
#[derive(Default)]
pub struct Templates {
    by: BTreeMap<(String, &'static str), (u64, String)>,
}

impl Templates {
    pub fn add(&mut self, source: &'static str, message: &str) {
        let message = message.trim();
        if message.is_empty() {
            return;
        }
        let e = self
            .by
            .entry((mask(message), source))
            .or_insert_with(|| (0, truncate(message)));
        e.0 += 1;
    }

    pub fn add_span(&mut self, s: &Span) {
        if !s.is_error() {
            return;
        }
        self.add("status", &s.status.message);
        for e in s.events.iter().filter(|e| e.name == "exception") {
            let ty = text(&e.attributes, "exception.type");
            let msg = text(&e.attributes, "exception.message");
            match (ty, msg) {
                (Some(t), Some(m)) => self.add("exception", &format!("{t}: {m}")),
                (Some(x), None) | (None, Some(x)) => self.add("exception", x),
                (None, None) => {}
            }
        }
    }

    pub fn add_log(&mut self, l: &LogRecord) {
        if l.severity_number >= 17
            && let Some(body) = scalar(&l.body)
        {
            self.add("log", &body);
        }
    }

    /// The `n` most frequent templates.
    pub fn top(self, n: usize) -> Vec<ErrorTemplate> {
        let mut v: Vec<ErrorTemplate> = self
            .by
            .into_iter()
            .map(|((template, source), (count, example))| ErrorTemplate {
                template,
                count,
                source,
                example,
            })
            .collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.template.cmp(&b.template)));
        v.truncate(n);
        v
    }
}

fn text<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    skein_model::value::find_str(attrs, key).filter(|s| !s.is_empty())
}

/// A value as short text, if it is a scalar (payload references and
/// arrays, maps and bytes are not compared).
fn scalar(v: &AnyValue) -> Option<String> {
    if as_ref_value(v).is_some() {
        return None;
    }
    match v {
        AnyValue::Str(s) if s.len() <= 256 => Some(s.clone()),
        AnyValue::Int(i) => Some(i.to_string()),
        AnyValue::Bool(b) => Some(b.to_string()),
        AnyValue::Double(d) => Some(d.to_string()),
        _ => None,
    }
}

/// An attribute value far more common among the bad spans than before the
/// change: a deploy's `service.version`, the one failing `host.name`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChangedAttribute {
    /// `resource` or `span`.
    pub scope: &'static str,
    pub key: String,
    pub value: String,
    /// The most common value of the key before the change, if another.
    pub before_value: Option<String>,
    /// Share of the sampled bad spans carrying `value`.
    pub share_of_bad: f64,
    /// Share of the sampled spans before the change carrying it.
    pub share_before: f64,
}

/// Share of bad spans a value needs, and how much above its share before.
const MIN_SHARE_OF_BAD: f64 = 0.6;
const MIN_SHARE_GAIN: f64 = 0.4;
/// Bad spans needed to say anything.
const MIN_BAD: usize = 3;

/// Values by (scope, key) → value → spans carrying it.
type ValueCounts = BTreeMap<(&'static str, String), BTreeMap<String, usize>>;

fn value_counts(spans: &[&Span]) -> ValueCounts {
    let mut out: ValueCounts = BTreeMap::new();
    for s in spans {
        for (scope, attrs) in [("resource", &s.resource.attributes), ("span", &s.attributes)] {
            for kv in attrs.iter() {
                if kv.key == "service.name" {
                    continue;
                }
                if let Some(v) = scalar(&kv.value) {
                    *out.entry((scope, kv.key.clone())).or_default().entry(v).or_default() += 1;
                }
            }
        }
    }
    out
}

/// Attribute values that came with the change, strongest first.
pub fn changed_attributes(bad: &[&Span], before: &[&Span], n: usize) -> Vec<ChangedAttribute> {
    if bad.len() < MIN_BAD {
        return Vec::new();
    }
    let (bad_counts, before_counts) = (value_counts(bad), value_counts(before));
    let mut out = Vec::new();
    for ((scope, key), values) in &bad_counts {
        let prior = before_counts.get(&(*scope, key.clone()));
        for (value, &n_bad) in values {
            let share_of_bad = n_bad as f64 / bad.len() as f64;
            let n_before = prior.and_then(|p| p.get(value)).copied().unwrap_or(0);
            let share_before = if before.is_empty() {
                0.0
            } else {
                n_before as f64 / before.len() as f64
            };
            if share_of_bad >= MIN_SHARE_OF_BAD && share_of_bad - share_before >= MIN_SHARE_GAIN {
                let before_value = prior
                    .and_then(|p| p.iter().max_by_key(|(v, n)| (**n, std::cmp::Reverse(*v))))
                    .map(|(v, _)| v.clone())
                    .filter(|v| v != value);
                out.push(ChangedAttribute {
                    scope,
                    key: key.clone(),
                    value: value.clone(),
                    before_value,
                    share_of_bad,
                    share_before,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        let gain = |c: &ChangedAttribute| c.share_of_bad - c.share_before;
        gain(b)
            .total_cmp(&gain(a))
            .then_with(|| (a.scope, &a.key).cmp(&(b.scope, &b.key)))
    });
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skein_model::{Resource, StatusCode};

    use super::*;
    use crate::testdata::span_with;

    #[test]
    fn masking_groups_messages_that_differ_in_values() {
        assert_eq!(
            mask("order 8823 failed after 30s (id 3f2a9c1e-0b4d-4c2a-9e1f-2b3c4d5e6f70)"),
            "order <n> failed after <n>s (id <id>)"
        );
        assert_eq!(mask("tx deadbeef12 aborted"), "tx <hex> aborted");
        assert_eq!(
            mask("connect 10.0.0.12:5432: refused"),
            "connect <n>.<n>.<n>.<n>:<n>: refused"
        );
        assert_eq!(mask("user42 not found"), "user<n> not found");
        assert_eq!(mask("naïve façade"), "naïve façade");
        let mut t = Templates::default();
        t.add("status", "timeout after 31 ms");
        t.add("status", "timeout after 2 ms");
        t.add("log", "pool exhausted");
        let top = t.top(5);
        assert_eq!(top[0].template, "timeout after <n> ms");
        assert_eq!(top[0].count, 2);
        assert_eq!(top[0].example, "timeout after 31 ms");
        assert_eq!((top[1].source, top[1].count), ("log", 1));
    }

    fn spans_on(service_version: &str, host: &str, n: usize) -> Vec<Span> {
        (0..n)
            .map(|_| {
                let mut s = span_with("api", "GET /x");
                let mut r = Resource::with_service("api");
                r.attributes.push(KeyValue::new("service.version", service_version));
                r.attributes.push(KeyValue::new("host.name", host));
                s.resource = Arc::new(r);
                s.status.code = StatusCode::Error;
                s
            })
            .collect()
    }

    #[test]
    fn a_new_version_on_every_bad_span_is_reported_with_the_old_one() {
        let mut bad = spans_on("1.5.0", "h1", 5);
        bad.extend(spans_on("1.5.0", "h2", 5));
        let mut before = spans_on("1.4.2", "h1", 8);
        before.extend(spans_on("1.4.2", "h2", 8));
        let (bad, before): (Vec<&Span>, Vec<&Span>) = (bad.iter().collect(), before.iter().collect());
        let c = changed_attributes(&bad, &before, 5);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].scope, c[0].key.as_str(), c[0].value.as_str()),
            ("resource", "service.version", "1.5.0")
        );
        assert_eq!(c[0].before_value.as_deref(), Some("1.4.2"));
        assert_eq!((c[0].share_of_bad, c[0].share_before), (1.0, 0.0));
        // h1 carried half the spans before and all the bad ones: a gain of
        // 0.5, reported; too few bad spans say nothing.
        let bad_host = spans_on("1.4.2", "h1", 10);
        let bad_host: Vec<&Span> = bad_host.iter().collect();
        let c = changed_attributes(&bad_host, &before, 5);
        assert_eq!(c.iter().map(|c| c.value.as_str()).collect::<Vec<_>>(), vec!["h1"]);
        assert!(changed_attributes(&bad[..2], &before, 5).is_empty());
    }
}
