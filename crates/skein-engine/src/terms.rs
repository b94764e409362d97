//! Index terms: 64-bit hashes of "field = value" facts about a record.
//!
//! Postings are keyed by these hashes, not by the text, so a term costs no
//! allocation and eight bytes of memory. Two facts may hash alike; that only
//! widens a candidate set, and every query re-checks its predicates on the
//! decoded record, so a collision can never change an answer.

use skein_model::AnyValue;
use xxhash_rust::xxh3::xxh3_64;

pub type Term = u64;

/// Where an attribute lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AttrScope {
    /// The record's own attributes (span, log record or metric point).
    Record,
    Resource,
    /// Attributes of a span's events.
    Event,
}

impl AttrScope {
    fn tag(self) -> u8 {
        match self {
            AttrScope::Record => b'r',
            AttrScope::Resource => b'R',
            AttrScope::Event => b'e',
        }
    }
}

/// Attribute string values longer than this are not indexed (they are
/// payloads, not labels); queries on them scan and re-check instead.
pub const MAX_INDEXED_VALUE_LEN: usize = 256;

fn hash_parts(tag: u8, parts: &[&[u8]]) -> Term {
    // One-shot hashing of a reused buffer: far cheaper than a streaming
    // hasher for inputs this short.
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        b.clear();
        b.push(tag);
        for p in parts {
            b.extend_from_slice(&(p.len() as u32).to_le_bytes());
            b.extend_from_slice(p);
        }
        xxh3_64(&b)
    })
}

pub fn service(name: &str) -> Term {
    hash_parts(b's', &[name.as_bytes()])
}

/// Span name, log event name or metric name.
pub fn name(name: &str) -> Term {
    hash_parts(b'n', &[name.as_bytes()])
}

pub fn kind(kind: u8) -> Term {
    hash_parts(b'k', &[&[kind]])
}

pub fn status(code: u8) -> Term {
    hash_parts(b'c', &[&[code]])
}

pub fn severity(number: i32) -> Term {
    hash_parts(b'v', &[&number.to_le_bytes()])
}

/// "The record has attribute `key` in `scope`".
pub fn attr_exists(scope: AttrScope, key: &str) -> Term {
    hash_parts(b'x', &[&[scope.tag()], key.as_bytes()])
}

/// "Attribute `key` in `scope` equals `value`", for indexable scalar values.
pub fn attr_eq(scope: AttrScope, key: &str, value: &AnyValue) -> Option<Term> {
    let (type_tag, bytes): (u8, std::borrow::Cow<'_, [u8]>) = match value {
        AnyValue::Str(s) if s.len() <= MAX_INDEXED_VALUE_LEN => (b's', s.as_bytes().into()),
        AnyValue::Int(i) => (b'i', i.to_le_bytes().to_vec().into()),
        AnyValue::Bool(b) => (b'b', vec![*b as u8].into()),
        // Doubles index by bit pattern after the normalisations that make
        // AnyValue::query_eq equal: -0.0 == 0.0, and every NaN is one NaN.
        AnyValue::Double(d) => {
            let d = if *d == 0.0 {
                0.0f64
            } else if d.is_nan() {
                f64::NAN
            } else {
                *d
            };
            (b'd', d.to_bits().to_le_bytes().to_vec().into())
        }
        _ => return None,
    };
    Some(hash_parts(b'a', &[&[scope.tag()], key.as_bytes(), &[type_tag], &bytes]))
}

/// A term emitted for a record, with the exists-term of its attribute key
/// for attribute-equality terms (used to cap high-cardinality keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexTerm {
    pub term: Term,
    pub attr_key: Option<Term>,
}

/// Emits the exists- and equality-terms of an attribute list.
pub fn attr_terms(scope: AttrScope, attrs: &[skein_model::KeyValue], out: &mut Vec<IndexTerm>) {
    for kv in attrs {
        let key = attr_exists(scope, &kv.key);
        out.push(IndexTerm {
            term: key,
            attr_key: None,
        });
        if let Some(t) = attr_eq(scope, &kv.key, &kv.value) {
            out.push(IndexTerm {
                term: t,
                attr_key: Some(key),
            });
        }
    }
}

/// Emits a plain term.
pub fn plain(term: Term, out: &mut Vec<IndexTerm>) {
    out.push(IndexTerm { term, attr_key: None });
}
