//! A quick rejection: records a query cannot match, told from their raw
//! text without tokenizing it.
//!
//! A part's index narrows to blocks of [`BLOCK_ROWS`](crate::BLOCK_ROWS)
//! rows, so a rare word's block holds one hit and 31 rows the naive model
//! tokenizes only to reject: a fifth of such a search. On ASCII text,
//! folding is ASCII lower-casing, and every token and piece the tokenizer
//! makes is a substring of the value, so of the lower-cased value. A term
//! can therefore match a value only if the value holds the term's text, or
//! (when it is an identifier matched by its words) each of its words; a
//! prefix, only if the value holds the prefix. Values that are not ASCII
//! are never rejected here: folding may turn their letters into others.

use std::borrow::Cow;

use crate::field::{Field, FieldSet};
use crate::query::{Node, Query, QueryToken};

impl Query {
    /// False only when [`Query::matches`] is false for `doc`; cheaper than
    /// it for ASCII values, which it reads without tokenizing.
    pub fn may_match(&self, doc: &[(Field, &str)]) -> bool {
        let mut lowered: Vec<Option<Option<Cow<'_, str>>>> = vec![None; doc.len()];
        may(&self.root, doc, &mut lowered)
    }
}

/// Whether `node` may match. `lowered` caches each value lower-cased
/// (`Some(None)`: not ASCII, so anything may match it).
fn may<'a>(node: &Node, doc: &[(Field, &'a str)], lowered: &mut [Option<Option<Cow<'a, str>>>]) -> bool {
    match node {
        Node::Term { fields, token } => leaf(doc, lowered, *fields, |v| term_may(token, v)),
        Node::Phrase { fields, tokens } => leaf(doc, lowered, *fields, |v| tokens.iter().all(|t| term_may(t, v))),
        Node::Prefix { fields, prefix } => leaf(doc, lowered, *fields, |v| v.contains(prefix.as_str())),
        Node::And(nodes) => nodes.iter().all(|n| may(n, doc, lowered)),
        Node::Or(nodes) => nodes.iter().any(|n| may(n, doc, lowered)),
        // Rejecting under NOT would accept: a NOT may always match.
        Node::Not(_) => true,
    }
}

/// Whether `value`, ASCII and lower-cased, may hold a token `q` matches:
/// it holds the term, or every word of an identifier term.
pub(crate) fn term_may(q: &QueryToken, value: &str) -> bool {
    value.contains(q.text.as_str()) || (q.words.len() >= 2 && q.words.iter().all(|w| value.contains(w.as_str())))
}

/// Whether some value of `fields` may hold what `holds` looks for.
fn leaf<'a>(
    doc: &[(Field, &'a str)],
    lowered: &mut [Option<Option<Cow<'a, str>>>],
    fields: FieldSet,
    holds: impl Fn(&str) -> bool,
) -> bool {
    for (i, &(field, text)) in doc.iter().enumerate() {
        if !fields.contains(field) {
            continue;
        }
        let value = lowered[i].get_or_insert_with(|| {
            text.is_ascii().then(|| {
                if text.bytes().any(|b| b.is_ascii_uppercase()) {
                    Cow::Owned(text.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(text)
                }
            })
        });
        match value {
            None => return true,
            Some(v) if holds(v) => return true,
            Some(_) => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn may(q: &str, doc: &[(Field, &str)]) -> bool {
        Query::parse(q).unwrap().may_match(doc)
    }

    #[test]
    fn rejects_ascii_values_without_the_terms() {
        let doc = [
            (Field::Body, "upstream PoolTimeout after 30s"),
            (Field::Name, "GET /cart"),
        ];
        assert!(may("pooltimeout", &doc));
        assert!(may("timeout", &doc));
        assert!(may("POOL*", &doc));
        assert!(may("\"after 30s\"", &doc));
        assert!(may("name:cart OR quetzal", &doc));
        assert!(may("timeout -quetzal", &doc), "a NOT is never rejected");
        assert!(!may("quetzal", &doc));
        assert!(!may("body:cart", &doc), "only the field's values count");
        assert!(!may("timeout quetzal", &doc));
        assert!(!may("quetz*", &doc));
        assert!(!may("\"after quetzal\"", &doc));
        // An identifier matched by its words: `pool_timeout` in `PoolTimeout`.
        assert!(may("pool_timeout", &doc));
        assert!(!may("pool_quetzal", &doc));
    }

    #[test]
    fn never_rejects_values_folding_may_change() {
        // `ＰｏｏｌＴｉｍｅｏｕｔ` folds to `pooltimeout`; `STRAẞE` to `strasse`.
        assert!(may("pooltimeout", &[(Field::Body, "ＰｏｏｌＴｉｍｅｏｕｔ")]));
        assert!(may("quetzal", &[(Field::Body, "Straße")]));
        // An ASCII value does hold a non-ASCII query's folded form.
        assert!(may("Straße", &[(Field::Body, "STRASSE")]));
        assert!(!may("Straße", &[(Field::Body, "street")]));
    }
}
