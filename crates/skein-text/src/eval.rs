//! Candidate rows of a query from an index's term postings, shared by the
//! part index and the hot-tier index so both narrow the same way.
//!
//! Each sub-query yields a set of rows and whether that set is *exact* (the
//! rows where the naive model says it matches) or only a superset. Term and
//! prefix postings are exact when the index holds exactly the terms the naive
//! model compares, row by row (the hot index; a part's holds blocks of
//! rows, a superset). A phrase, or an identifier term matched by its words, is
//! the AND of its terms' postings: a superset. `NOT x` may remove `x`'s rows
//! only when they are exact; removing a superset could lose a hit, so then
//! it narrows nothing.

use std::borrow::Cow;

use roaring::RoaringBitmap;

use crate::field::{Field, FieldSet};
use crate::query::{Node, QueryToken};

/// What an index answers: the rows holding a term, or any term with a prefix,
/// in a field; and every row it holds.
pub(crate) trait TermSource {
    type Error;
    fn term(&self, field: Field, term: &str) -> Result<Cow<'_, RoaringBitmap>, Self::Error>;
    fn prefix(&self, field: Field, prefix: &str) -> Result<RoaringBitmap, Self::Error>;
    fn universe(&self) -> &RoaringBitmap;
    /// Whether `term` and `prefix` give exactly the rows holding a term
    /// (else a superset of them, and `NOT` may not subtract them).
    fn exact(&self) -> bool {
        true
    }
}

/// Candidate rows for `node`, and whether they are exact.
pub(crate) fn candidates<S: TermSource>(node: &Node, src: &S) -> Result<(RoaringBitmap, bool), S::Error> {
    Ok(match node {
        Node::Term { fields, token } => {
            let mut rows = RoaringBitmap::new();
            for f in fields.iter() {
                rows |= token_rows(src, f, token)?;
            }
            (rows, token.words.is_empty() && src.exact())
        }
        Node::Phrase { fields, tokens } => (phrase_rows(src, *fields, tokens)?, false),
        Node::Prefix { fields, prefix } => {
            let mut rows = RoaringBitmap::new();
            for f in fields.iter() {
                rows |= src.prefix(f, prefix)?;
            }
            (rows, src.exact())
        }
        Node::And(nodes) => {
            let mut positive = Vec::new();
            let mut exact = true;
            let mut minus = RoaringBitmap::new();
            for n in nodes {
                if let Node::Not(inner) = n {
                    let (rows, inner_exact) = candidates(inner, src)?;
                    if inner_exact {
                        minus |= rows;
                    } else {
                        exact = false;
                    }
                } else {
                    let (rows, e) = candidates(n, src)?;
                    exact &= e;
                    positive.push(rows);
                }
            }
            // Intersect smallest first: the result is never larger.
            positive.sort_unstable_by_key(RoaringBitmap::len);
            let mut iter = positive.into_iter();
            let mut rows = match iter.next() {
                Some(first) => first,
                None => src.universe().clone(),
            };
            for other in iter {
                if rows.is_empty() {
                    break;
                }
                rows &= other;
            }
            rows -= minus;
            (rows, exact)
        }
        Node::Or(nodes) => {
            let mut rows = RoaringBitmap::new();
            let mut exact = true;
            for n in nodes {
                let (r, e) = candidates(n, src)?;
                rows |= r;
                exact &= e;
            }
            (rows, exact)
        }
        Node::Not(inner) => {
            let (rows, exact) = candidates(inner, src)?;
            if exact {
                (src.universe() - rows, true)
            } else {
                (src.universe().clone(), false)
            }
        }
    })
}

/// Rows where `token` may match in `field`: the rows holding it as a term
/// (exact), and for an identifier also the rows holding all its words.
fn token_rows<S: TermSource>(src: &S, field: Field, token: &QueryToken) -> Result<RoaringBitmap, S::Error> {
    let mut rows = src.term(field, &token.text)?.into_owned();
    if token.words.len() >= 2 {
        let mut all: Option<RoaringBitmap> = None;
        for w in &token.words {
            let r = src.term(field, w)?;
            all = Some(match all {
                None => r.into_owned(),
                Some(mut acc) => {
                    acc &= r.as_ref();
                    acc
                }
            });
            if all.as_ref().is_some_and(RoaringBitmap::is_empty) {
                break;
            }
        }
        if let Some(all) = all {
            rows |= all;
        }
    }
    Ok(rows)
}

/// Rows where a phrase may match: in some field, every term may match.
fn phrase_rows<S: TermSource>(src: &S, fields: FieldSet, tokens: &[QueryToken]) -> Result<RoaringBitmap, S::Error> {
    let mut rows = RoaringBitmap::new();
    for f in fields.iter() {
        let mut in_field: Option<RoaringBitmap> = None;
        for t in tokens {
            let r = token_rows(src, f, t)?;
            in_field = Some(match in_field {
                None => r,
                Some(acc) => acc & r,
            });
            if in_field.as_ref().is_some_and(RoaringBitmap::is_empty) {
                break;
            }
        }
        if let Some(r) = in_field {
            rows |= r;
        }
    }
    Ok(rows)
}
