//! The hot tier's index: built record by record as they arrive, term →
//! roaring postings per field in sorted maps (so a prefix is a range scan).
//! No tantivy: a part's index is built once, at flush, from the part's rows.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ops::Bound;

use roaring::RoaringBitmap;

use crate::eval::{self, TermSource};
use crate::field::Field;
use crate::query::Query;
use crate::tokenize::tokenize;

/// Estimated bytes of a map entry besides its key and postings: the B-tree
/// node slot, the `String` and the bitmap headers.
const ENTRY_OVERHEAD: usize = 96;

/// Full-text postings of the hot tier. Rows are the caller's row numbers.
#[derive(Debug, Default, Clone)]
pub struct MemTextIndex {
    fields: [BTreeMap<String, RoaringBitmap>; 4],
    rows: RoaringBitmap,
    memory: usize,
}

impl MemTextIndex {
    pub fn new() -> MemTextIndex {
        MemTextIndex::default()
    }

    /// Indexes a record's text under `row`. Adding a row again adds its new
    /// terms; its old ones stay (a superset is still a correct candidate set,
    /// and every candidate is re-checked).
    pub fn add(&mut self, row: u32, doc: &[(Field, &str)]) {
        if self.rows.insert(row) {
            self.memory += 4;
        }
        for &(field, text) in doc {
            let map = &mut self.fields[field.index()];
            for token in tokenize(text) {
                for term in token.terms() {
                    // Array containers hold 2 bytes a row; a new term pays its
                    // key and entry besides.
                    match map.get_mut(term) {
                        Some(postings) => {
                            if postings.insert(row) {
                                self.memory += 2;
                            }
                        }
                        None => {
                            self.memory += ENTRY_OVERHEAD + term.len() + 2;
                            map.insert(term.to_owned(), RoaringBitmap::from_iter([row]));
                        }
                    }
                }
            }
        }
    }

    /// Candidate rows for `query`: every row it matches, maybe more; filter
    /// them with [`Query::matches`].
    pub fn search(&self, query: &Query) -> RoaringBitmap {
        match eval::candidates(&query.root, self) {
            Ok((rows, _)) => rows,
            Err(never) => match never {},
        }
    }

    /// Estimated heap bytes held (keys, postings, map entries).
    pub fn memory_bytes(&self) -> usize {
        self.memory
    }

    /// Every row added.
    pub fn rows(&self) -> &RoaringBitmap {
        &self.rows
    }

    /// Distinct terms held, over all fields.
    pub fn num_terms(&self) -> usize {
        self.fields.iter().map(BTreeMap::len).sum()
    }
}

impl TermSource for MemTextIndex {
    type Error = Infallible;

    fn term(&self, field: Field, term: &str) -> Result<Cow<'_, RoaringBitmap>, Infallible> {
        Ok(match self.fields[field.index()].get(term) {
            Some(postings) => Cow::Borrowed(postings),
            None => Cow::Owned(RoaringBitmap::new()),
        })
    }

    fn prefix(&self, field: Field, prefix: &str) -> Result<RoaringBitmap, Infallible> {
        let mut rows = RoaringBitmap::new();
        let range = self.fields[field.index()].range::<str, _>((Bound::Included(prefix), Bound::Unbounded));
        for (_, postings) in range.take_while(|(term, _)| term.starts_with(prefix)) {
            rows |= postings;
        }
        Ok(rows)
    }

    fn universe(&self) -> &RoaringBitmap {
        &self.rows
    }
}
