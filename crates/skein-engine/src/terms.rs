//! Index terms: 64-bit hashes of "field = value" facts about a record.
//!
//! Postings are keyed by these hashes, not by the text, so a term costs no
//! allocation and eight bytes of memory. Two facts may hash alike; that only
//! widens a candidate set, and every query re-checks its predicates on the
//! decoded record, so a collision can never change an answer.

use std::sync::LazyLock;

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

/// Calls `f` with the bytes a term hashes: `tag`, then each part as its
/// length (u32 LE) and its bytes. Nearly every term fits on the stack.
fn with_frame<T>(tag: u8, parts: &[&[u8]], f: impl FnOnce(&mut [u8]) -> T) -> T {
    let len = 1 + parts.iter().map(|p| 4 + p.len()).sum::<usize>();
    let mut stack = [0u8; 128];
    let mut heap = Vec::new();
    let buf = if len <= stack.len() {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap[..]
    };
    buf[0] = tag;
    let mut at = 1;
    for p in parts {
        buf[at..at + 4].copy_from_slice(&(p.len() as u32).to_le_bytes());
        copy_short(&mut buf[at + 4..at + 4 + p.len()], p);
        at += 4 + p.len();
    }
    f(buf)
}

/// `dst.copy_from_slice(src)` (equal lengths) without a call to `memcpy`
/// for the short parts terms are made of: keys, small values and one-byte
/// tags. Fixed-size copies compile to a move or two, where a `memcpy` call
/// per part was 2.6% of the server's CPU under OTLP ingest (perf).
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    // Two overlapping fixed-size copies cover any length in [W, 2W]. They
    // go through arrays so that their size is a constant the compiler sees
    // (copying between two subslices still called memcpy).
    fn two<const W: usize>(dst: &mut [u8], src: &[u8]) {
        if let (Some(d), Some(s)) = (dst.first_chunk_mut::<W>(), src.first_chunk::<W>()) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (dst.last_chunk_mut::<W>(), src.last_chunk::<W>()) {
            *d = *s;
        }
    }
    match n {
        0 => {}
        1..=3 => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        4..=8 => two::<4>(dst, src),
        9..=16 => two::<8>(dst, src),
        17..=32 => two::<16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

fn hash_parts(tag: u8, parts: &[&[u8]]) -> Term {
    // One-shot hashing of a contiguous buffer: far cheaper than a streaming
    // hasher for inputs this short.
    with_frame(tag, parts, |buf| xxh3_64(buf))
}

pub fn service(name: &str) -> Term {
    hash_parts(b's', &[name.as_bytes()])
}

/// Span name, log event name or metric name.
pub fn name(name: &str) -> Term {
    hash_parts(b'n', &[name.as_bytes()])
}

pub fn kind(kind: u8) -> Term {
    byte_term(b'k', kind)
}

pub fn status(code: u8) -> Term {
    byte_term(b'c', code)
}

/// The term of a one-byte value (span kinds and status codes, every span
/// has one of each), hashed once per process for the values that exist.
fn byte_term(tag: u8, value: u8) -> Term {
    static KINDS: LazyLock<[Term; 8]> = LazyLock::new(|| std::array::from_fn(|v| hash_parts(b'k', &[&[v as u8]])));
    static CODES: LazyLock<[Term; 8]> = LazyLock::new(|| std::array::from_fn(|v| hash_parts(b'c', &[&[v as u8]])));
    let known = match tag {
        b'k' => KINDS.get(value as usize),
        b'c' => CODES.get(value as usize),
        _ => None,
    };
    known.copied().unwrap_or_else(|| hash_parts(tag, &[&[value]]))
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
    with_indexed_value(value, |type_tag, bytes| {
        hash_parts(b'a', &[&[scope.tag()], key.as_bytes(), &[type_tag], bytes])
    })
}

/// Calls `f` with the type tag and bytes an equality term hashes for
/// `value`, if it is indexable.
fn with_indexed_value<T>(value: &AnyValue, f: impl FnOnce(u8, &[u8]) -> T) -> Option<T> {
    Some(match value {
        AnyValue::Str(s) if s.len() <= MAX_INDEXED_VALUE_LEN => f(b's', s.as_bytes()),
        AnyValue::Int(i) => f(b'i', &i.to_le_bytes()),
        AnyValue::Bool(b) => f(b'b', &[*b as u8]),
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
            f(b'd', &d.to_bits().to_le_bytes())
        }
        _ => return None,
    })
}

/// [`attr_exists`] and [`attr_eq`] from one framing: the two share the
/// framed scope and key, and differ in the tag and the value after them.
fn attr_exists_and_eq(scope: AttrScope, key: &str, value: &AnyValue) -> (Term, Option<Term>) {
    let both = with_indexed_value(value, |type_tag, bytes| {
        with_frame(b'x', &[&[scope.tag()], key.as_bytes(), &[type_tag], bytes], |buf| {
            let exists = xxh3_64(&buf[..1 + 4 + 1 + 4 + key.len()]);
            buf[0] = b'a';
            (exists, xxh3_64(buf))
        })
    });
    match both {
        Some((exists, eq)) => (exists, Some(eq)),
        None => (attr_exists(scope, key), None),
    }
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
        let (key, eq) = attr_exists_and_eq(scope, &kv.key, &kv.value);
        out.push(IndexTerm {
            term: key,
            attr_key: None,
        });
        if let Some(t) = eq {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes a term hashes: part indexes on disk hold these hashes, so
    /// they must never change.
    fn framed(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![tag];
        for p in parts {
            b.extend_from_slice(&(p.len() as u32).to_le_bytes());
            b.extend_from_slice(p);
        }
        b
    }

    proptest::proptest! {
        /// The framing builds exactly the bytes `framed` describes, for
        /// parts of every short length and past the stack buffer.
        #[test]
        fn frames_hold_their_parts(
            tag in proptest::prelude::any::<u8>(),
            parts in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80), 0..5),
        ) {
            let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            let got = with_frame(tag, &refs, |buf| buf.to_vec());
            proptest::prop_assert_eq!(got, framed(tag, &refs));
        }

        /// Terms framed together equal the terms framed one by one.
        #[test]
        fn shared_framing_equals_separate_terms(
            key in ".{0,200}",
            s in ".{0,300}",
            i in proptest::prelude::any::<i64>(),
            d in proptest::prelude::any::<f64>(),
            which in 0u8..5,
        ) {
            let value = match which {
                0 => AnyValue::Str(s),
                1 => AnyValue::Int(i),
                2 => AnyValue::Double(d),
                3 => AnyValue::Bool(i % 2 == 0),
                _ => AnyValue::Array(vec![AnyValue::Int(i)]),
            };
            for scope in [AttrScope::Record, AttrScope::Resource, AttrScope::Event] {
                proptest::prop_assert_eq!(
                    attr_exists_and_eq(scope, &key, &value),
                    (attr_exists(scope, &key), attr_eq(scope, &key, &value))
                );
            }
        }
    }

    #[test]
    fn terms_hash_their_framed_parts() {
        assert_eq!(service("checkout"), xxh3_64(&framed(b's', &[b"checkout"])));
        for v in [0, 2, 7, 8, 200] {
            assert_eq!(kind(v), xxh3_64(&framed(b'k', &[&[v]])));
            assert_eq!(status(v), xxh3_64(&framed(b'c', &[&[v]])));
        }
        let r = AttrScope::Record;
        assert_eq!(
            attr_eq(r, "http.status_code", &AnyValue::Int(500)),
            Some(xxh3_64(&framed(
                b'a',
                &[b"r", b"http.status_code", b"i", &500i64.to_le_bytes()]
            )))
        );
        assert_eq!(
            attr_eq(AttrScope::Event, "ok", &AnyValue::Bool(true)),
            Some(xxh3_64(&framed(b'a', &[b"e", b"ok", b"b", &[1]])))
        );
        // Past the stack buffer: a long key with a long value.
        let key = "k".repeat(300);
        let value = "v".repeat(MAX_INDEXED_VALUE_LEN);
        assert_eq!(
            attr_eq(AttrScope::Resource, &key, &AnyValue::Str(value.clone())),
            Some(xxh3_64(&framed(b'a', &[b"R", key.as_bytes(), b"s", value.as_bytes()])))
        );
        // -0.0 is 0.0, and every NaN is one NaN.
        assert_eq!(
            attr_eq(r, "x", &AnyValue::Double(-0.0)),
            attr_eq(r, "x", &AnyValue::Double(0.0))
        );
        assert_eq!(
            attr_eq(r, "x", &AnyValue::Double(f64::NAN)),
            attr_eq(r, "x", &AnyValue::Double(-f64::NAN))
        );
    }
}
