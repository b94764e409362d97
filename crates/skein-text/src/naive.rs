//! The naive model: a query evaluated directly on a record's tokens, with no
//! index. It is the definition of a match; indexes only narrow the rows it
//! is asked about, and every hit is re-checked here.
//!
//! A term matches a token when it is the token's text or one of its pieces,
//! or when the term is an identifier whose words appear consecutively among
//! the token's words (`PoolTimeout` matches `com.example.PoolTimeoutException`
//! and `pool_timeout`). A phrase matches when its terms match consecutive
//! tokens of one value. A prefix matches a token with a term (text or piece)
//! that starts with it.

use serde::Serialize;

use crate::field::{Field, FieldSet};
use crate::query::{Node, Query, QueryToken};
use crate::reject::term_may;
use crate::tokenize::{PieceKind, Token, tokenize};

/// A matching fragment of one value of a hit, with the matched terms marked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Highlight {
    pub field: Field,
    /// A window of the value around the matches (cut at whitespace where it
    /// can be).
    pub fragment: String,
    /// Byte ranges of the matched terms, relative to `fragment`, in order and
    /// not overlapping.
    pub ranges: Vec<(usize, usize)>,
}

/// Context kept on each side of the matches of a fragment, in bytes.
const CONTEXT: usize = 40;
/// Matches further apart than this start a new fragment.
const MAX_FRAGMENT: usize = 240;
/// Fragments shown per value: a prompt with a common word a hundred times
/// gives the first few, not the whole prompt back.
const MAX_FRAGMENTS_PER_VALUE: usize = 3;

struct Value<'a> {
    field: Field,
    text: &'a str,
    tokens: Vec<Token>,
}

/// Where a term matched: value index and byte range in that value.
type Occurrence = (usize, usize, usize);

impl Query {
    /// Whether the record matches: the definition every index answer is
    /// checked against.
    pub fn matches(&self, doc: &[(Field, &str)]) -> bool {
        if !self.may_match(doc) {
            return false;
        }
        eval_lazily(&self.root, doc)
    }

    /// The matching fragments of a record, per value, with the byte ranges of
    /// the terms that made it match (terms under NOT and alternatives of an
    /// OR that did not match are not marked). Empty when it does not match.
    pub fn highlights(&self, doc: &[(Field, &str)]) -> Vec<Highlight> {
        let values = analyze(self, doc);
        let mut found = Vec::new();
        if !eval(&self.root, &values, Some(&mut found)) {
            return Vec::new();
        }
        found.sort_unstable();
        let mut out = Vec::new();
        for (vi, value) in values.iter().enumerate() {
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            for &(_, s, e) in found.iter().filter(|o| o.0 == vi) {
                match ranges.last_mut() {
                    Some(last) if s < last.1 => last.1 = last.1.max(e),
                    _ => ranges.push((s, e)),
                }
            }
            fragments(value, &ranges, &mut out);
        }
        out
    }
}

/// Tokenizes the values of the fields the query looks at (values of other
/// fields are kept, untokenized, so indexes stay aligned with `doc`).
fn analyze<'a>(query: &Query, doc: &[(Field, &'a str)]) -> Vec<Value<'a>> {
    let used = query.fields();
    doc.iter()
        .map(|&(field, text)| Value {
            field,
            text,
            tokens: if used.contains(field) {
                tokenize(text)
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// Evaluates `node`; with `out`, also records where the terms that made it
/// match are.
fn eval(node: &Node, values: &[Value<'_>], out: Option<&mut Vec<Occurrence>>) -> bool {
    match node {
        Node::Term { fields, token } => leaf(values, *fields, out, |tokens, sink| term_find(token, tokens, sink)),
        Node::Prefix { fields, prefix } => leaf(values, *fields, out, |tokens, sink| prefix_find(prefix, tokens, sink)),
        Node::Phrase { fields, tokens: phrase } => leaf(values, *fields, out, |tokens, sink| {
            phrase_matches(phrase, tokens, sink);
        }),
        Node::And(nodes) => {
            let Some(out) = out else {
                return nodes.iter().all(|n| eval(n, values, None));
            };
            let mut mine = Vec::new();
            for n in nodes {
                let ok = match n {
                    Node::Not(_) => eval(n, values, None),
                    _ => eval(n, values, Some(&mut mine)),
                };
                if !ok {
                    return false;
                }
            }
            out.extend(mine);
            true
        }
        Node::Or(nodes) => {
            let Some(out) = out else {
                return nodes.iter().any(|n| eval(n, values, None));
            };
            let mut any = false;
            for n in nodes {
                let mut mine = Vec::new();
                if eval(n, values, Some(&mut mine)) {
                    any = true;
                    out.extend(mine);
                }
            }
            any
        }
        Node::Not(n) => !eval(n, values, None),
    }
}

/// [`eval`] without marking, on the record as it is: what `matches` asks,
/// for every candidate an index gives (most of a search's time when a word
/// is common). A term or prefix needs no value tokenized whole: tokens
/// never cross ASCII whitespace, so a value is read a chunk (a run between
/// ASCII whitespace) at a time up to the first match, and an ASCII chunk
/// that cannot hold the term (see [`Query::may_match`]) is not tokenized
/// at all. A phrase spans chunks, and tokenizes its fields' values whole.
/// The test `lazy_evaluation_answers_as_whole_values_do` holds it to `eval`.
fn eval_lazily(node: &Node, doc: &[(Field, &str)]) -> bool {
    match node {
        Node::Term { fields, token } => lazy_leaf(
            doc,
            *fields,
            |chunk| term_may(token, chunk),
            |tokens, sink| term_find(token, tokens, sink),
        ),
        Node::Prefix { fields, prefix } => lazy_leaf(
            doc,
            *fields,
            |chunk| chunk.contains(prefix.as_str()),
            |tokens, sink| prefix_find(prefix, tokens, sink),
        ),
        Node::Phrase { fields, tokens: phrase } => doc.iter().filter(|(f, _)| fields.contains(*f)).any(|(_, text)| {
            let mut sink = Vec::new();
            phrase_matches(phrase, &tokenize(text), &mut sink);
            !sink.is_empty()
        }),
        Node::And(nodes) => nodes.iter().all(|n| eval_lazily(n, doc)),
        Node::Or(nodes) => nodes.iter().any(|n| eval_lazily(n, doc)),
        Node::Not(n) => !eval_lazily(n, doc),
    }
}

/// Whether `find` finds anything in a chunk of a value of `fields`;
/// `may_hold` is asked first of an ASCII chunk, lower-cased.
fn lazy_leaf(
    doc: &[(Field, &str)],
    fields: FieldSet,
    may_hold: impl Fn(&str) -> bool,
    find: impl Fn(&[Token], &mut Vec<(usize, usize)>),
) -> bool {
    let mut lowered = String::new();
    let mut sink = Vec::new();
    for &(_, text) in doc.iter().filter(|(f, _)| fields.contains(*f)) {
        for chunk in text.split_ascii_whitespace() {
            if chunk.is_ascii() {
                lowered.clear();
                lowered.extend(chunk.chars().map(|c| c.to_ascii_lowercase()));
                if !may_hold(&lowered) {
                    continue;
                }
            }
            find(&tokenize(chunk), &mut sink);
            if !sink.is_empty() {
                return true;
            }
        }
    }
    false
}

/// Pushes the ranges term `token` matches in `tokens`.
fn term_find(token: &QueryToken, tokens: &[Token], sink: &mut Vec<(usize, usize)>) {
    for t in tokens {
        term_matches(token, t, sink);
    }
}

/// Pushes the ranges `prefix` matches in `tokens`. Several terms of a token
/// may start with the prefix; it marks the most telling: the parts that do
/// (`HikariPool` of `HikariPool.java:696`), else the whole token
/// (`PoolTimeout` for `pool*`), else the words or characters.
fn prefix_find(prefix: &str, tokens: &[Token], sink: &mut Vec<(usize, usize)>) {
    let starts = |s: &str| s.starts_with(prefix);
    for t in tokens {
        let before = sink.len();
        for p in t.pieces.iter().filter(|p| p.kind == PieceKind::Part && starts(&p.text)) {
            sink.push((p.start, p.end));
        }
        if sink.len() > before {
            continue;
        }
        if starts(&t.text) {
            sink.push((t.start, t.end));
            continue;
        }
        for p in t.pieces.iter().filter(|p| starts(&p.text)) {
            sink.push((p.start, p.end));
        }
    }
}

/// A term, phrase or prefix: `find` pushes the byte ranges it matches in a
/// value's tokens. Without `out`, stops at the first value that matches.
fn leaf(
    values: &[Value<'_>],
    fields: FieldSet,
    mut out: Option<&mut Vec<Occurrence>>,
    find: impl Fn(&[Token], &mut Vec<(usize, usize)>),
) -> bool {
    let mut any = false;
    let mut ranges = Vec::new();
    for (vi, v) in values.iter().enumerate().filter(|(_, v)| fields.contains(v.field)) {
        ranges.clear();
        find(&v.tokens, &mut ranges);
        if ranges.is_empty() {
            continue;
        }
        any = true;
        match out.as_deref_mut() {
            Some(out) => out.extend(ranges.iter().map(|&(s, e)| (vi, s, e))),
            None => return true,
        }
    }
    any
}

/// Whether term `q` matches token `t`, pushing the ranges it covers: the
/// token, a piece equal to it, or a run of the token's words equal to the
/// term's words.
pub(crate) fn term_matches(q: &QueryToken, t: &Token, out: &mut Vec<(usize, usize)>) -> bool {
    let before = out.len();
    if q.text == t.text {
        out.push((t.start, t.end));
    }
    for p in t.pieces.iter().filter(|p| p.text == q.text) {
        out.push((p.start, p.end));
    }
    if q.words.len() >= 2 {
        for run in t.words().windows(q.words.len()) {
            if run.iter().zip(&q.words).all(|(p, w)| p.text == *w)
                && let (Some(first), Some(last)) = (run.first(), run.last())
            {
                out.push((first.start, last.end));
            }
        }
    }
    out.len() > before
}

/// Phrase `phrase` at every start in `tokens`: the range from where its first
/// term matched (its last match in that token, next to the second) to where
/// its last matched (its first match in that token).
fn phrase_matches(phrase: &[QueryToken], tokens: &[Token], out: &mut Vec<(usize, usize)>) {
    let n = phrase.len();
    if n == 0 || tokens.len() < n {
        return;
    }
    let mut scratch = Vec::new();
    'start: for window in tokens.windows(n) {
        let (mut start, mut end) = (0, 0);
        for (i, (q, t)) in phrase.iter().zip(window).enumerate() {
            scratch.clear();
            if !term_matches(q, t, &mut scratch) {
                continue 'start;
            }
            if i == 0 {
                start = scratch.iter().map(|r| r.0).max().unwrap_or(t.start);
            }
            if i == n - 1 {
                end = scratch.iter().map(|r| r.1).min().unwrap_or(t.end);
            }
        }
        out.push((start, end.max(start)));
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Cuts fragments around `ranges` (sorted, disjoint) of one value.
fn fragments(value: &Value<'_>, ranges: &[(usize, usize)], out: &mut Vec<Highlight>) {
    let text = value.text;
    let mut groups: Vec<Vec<(usize, usize)>> = Vec::new();
    for &r in ranges {
        match groups.last_mut() {
            Some(g) if g.first().is_some_and(|f| r.1 - f.0 <= MAX_FRAGMENT) => g.push(r),
            _ => groups.push(vec![r]),
        }
    }
    for group in groups.into_iter().take(MAX_FRAGMENTS_PER_VALUE) {
        let (Some(&(first, _)), Some(&(_, last))) = (group.first(), group.last()) else {
            continue;
        };
        let mut start = floor_boundary(text, first.saturating_sub(CONTEXT));
        if start > 0
            && let Some(ws) = text[start..first].find(char::is_whitespace)
        {
            // Start after whitespace rather than mid-word.
            start += ws + text[start + ws..].chars().next().map_or(1, char::len_utf8);
        }
        let mut end = ceil_boundary(text, last + CONTEXT);
        if end < text.len()
            && let Some(ws) = text[last..end].rfind(char::is_whitespace)
        {
            end = last + ws;
        }
        out.push(Highlight {
            field: value.field,
            fragment: text[start..end].to_owned(),
            ranges: group.iter().map(|&(s, e)| (s - start, e - start)).collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Query {
        Query::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Text from pieces that stress the tokenizer at chunk edges: case
    /// changes, connectors at either end, digits and hex, CJK runs,
    /// folding (`ß`, full-width), combining marks, and every kind of
    /// whitespace (ASCII and not).
    fn tricky_text() -> impl Strategy<Value = String> {
        const PIECES: &[&str] = &[
            "PoolTimeout",
            "connection_pool",
            "db.query",
            "/usr/lib/",
            "__init__",
            "ERROR:",
            "HTTPServer",
            "V2Api",
            "4bf92F35A77b34dA",
            "30s",
            "東京都",
            "データ",
            "Straße",
            "STRASSE",
            "ＰｏｏｌＴｉｍｅｏｕｔ",
            "e\u{301}",
            "quetzal",
            "refused",
            "a",
            "-",
            "#",
            "(",
            ")",
            "\"",
            ",",
        ];
        const GLUE: &[&str] = &[
            "", "", " ", "  ", "\t", "\n", "\r\n", "\u{0b}", "\u{0c}", "\u{3000}", "\u{a0}",
        ];
        let piece = (prop::sample::select(PIECES), prop::sample::select(GLUE));
        prop::collection::vec(piece, 0..12).prop_map(|p| p.into_iter().flat_map(|(a, b)| [a, b]).collect())
    }

    fn tricky_query() -> impl Strategy<Value = String> {
        const LEAVES: &[&str] = &[
            "pool",
            "timeout",
            "PoolTimeout",
            "pooltimeout",
            "connection_pool",
            "ConnectionPool",
            "query",
            "db.query",
            "usr/lib",
            "init",
            "error",
            "http",
            "server",
            "v2",
            "4bf92f35a77b34da",
            "30s",
            "東京",
            "京都",
            "strasse",
            "quetzal",
            "refused",
            "é",
            "poo*",
            "time*",
            "東*",
            "str*",
            "body:pool",
            "name:timeout",
            "\"connection refused\"",
            "\"pool timeout\"",
            "\"db.query 30s\"",
        ];
        let leaf = prop::sample::select(LEAVES).prop_map(str::to_owned);
        leaf.prop_recursive(3, 8, 3, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} AND {b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} OR {b})")),
                (inner.clone(), inner).prop_map(|(a, b)| format!("({a} AND NOT {b})")),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        /// What `eval_lazily` rests on: a value's tokens are its ASCII-
        /// whitespace chunks' tokens, one after another.
        #[test]
        fn tokens_never_cross_ascii_whitespace(text in tricky_text()) {
            let whole: Vec<(String, Vec<String>)> =
                tokenize(&text).into_iter().map(|t| (t.text, t.pieces.into_iter().map(|p| p.text).collect())).collect();
            let chunked: Vec<(String, Vec<String>)> = text
                .split_ascii_whitespace()
                .flat_map(tokenize)
                .map(|t| (t.text, t.pieces.into_iter().map(|p| p.text).collect()))
                .collect();
            prop_assert_eq!(whole, chunked);
        }

        /// `matches` (lazy, a chunk at a time) answers as evaluating the
        /// whole values' tokens does.
        #[test]
        fn lazy_evaluation_answers_as_whole_values_do(
            query in tricky_query(),
            body in tricky_text(),
            name in tricky_text(),
        ) {
            let query = q(&query);
            let doc = [(Field::Body, body.as_str()), (Field::Name, name.as_str())];
            let whole = eval(&query.root, &analyze(&query, &doc), None);
            prop_assert_eq!(eval_lazily(&query.root, &doc), whole);
            prop_assert_eq!(query.matches(&doc), whole);
        }
    }

    #[test]
    fn identifier_terms_match_pieces_and_word_runs() {
        let doc = [(Field::Message, "at com.example.PoolTimeoutException: timed out")];
        for yes in [
            "PoolTimeout",
            "pool",
            "timeout",
            "PoolTimeoutException",
            "example.PoolTimeout",
            "com.example",
        ] {
            assert!(q(yes).matches(&doc), "{yes}");
        }
        for no in [
            "pooltimeout",
            "TimeoutPool",
            "body:pool",
            "\"pool timeout\"",
            "examplepool",
        ] {
            assert!(!q(no).matches(&doc), "{no}");
        }
        assert!(q("connection_pool").matches(&[(Field::Body, "ConnectionPool exhausted")]));
        assert!(q("\"Timeout: connection refused\"").matches(&[(Field::Body, "PoolTimeout: connection refused")]));
    }

    #[test]
    fn phrases_stay_within_one_value_and_terms_do_not() {
        let doc = [(Field::Body, "connection"), (Field::Body, "refused")];
        assert!(!q("\"connection refused\"").matches(&doc));
        assert!(q("connection refused").matches(&doc));
        assert!(q("\"connection refused\"").matches(&[(Field::Body, "Connection  refused!")]));
    }

    #[test]
    fn prefixes_and_not() {
        let doc = [(Field::Message, "PoolTimeout after 30s"), (Field::Body, "will retry")];
        assert!(q("PoolTime*").matches(&doc));
        assert!(q("message:timeout AND NOT body:fatal").matches(&doc));
        assert!(!q("message:timeout AND NOT body:retry").matches(&doc));
        assert!(q("message:timeout AND NOT message:retry").matches(&doc));
    }

    #[test]
    fn highlights_cover_the_matched_terms_only() {
        let text = "ERROR pool exhausted: PoolTimeout after 30s, retry scheduled";
        let doc = [(Field::Body, text)];
        let hs = q("timeout OR missing AND NOT fatal").highlights(&doc);
        assert_eq!(hs.len(), 1);
        let h = &hs[0];
        let marked: Vec<&str> = h.ranges.iter().map(|&(s, e)| &h.fragment[s..e]).collect();
        assert_eq!(marked, ["Timeout"]);
        assert!(q("fatal").highlights(&doc).is_empty());
    }
}
