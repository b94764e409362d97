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
use crate::links::Links;
use crate::query::Query;
use crate::tokenize::tokenize;

/// Adds `number` to the postings of every term of `text`; returns the
/// estimated bytes this added.
fn post(map: &mut BTreeMap<String, RoaringBitmap>, number: u32, text: &str) -> usize {
    let mut memory = 0;
    for token in tokenize(text) {
        for term in token.terms() {
            // Array containers hold 2 bytes a row; a new term pays its key
            // and entry besides.
            match map.get_mut(term) {
                Some(postings) => {
                    if postings.insert(number) {
                        memory += 2;
                    }
                }
                None => {
                    memory += ENTRY_OVERHEAD + term.len() + 2;
                    map.insert(term.to_owned(), RoaringBitmap::from_iter([number]));
                }
            }
        }
    }
    memory
}

/// Estimated bytes of a map entry besides its key and postings: the B-tree
/// node slot, the `String` and the bitmap headers.
const ENTRY_OVERHEAD: usize = 96;

/// Full-text postings of the hot tier. Rows are the caller's row numbers.
#[derive(Debug, Default, Clone)]
pub struct MemTextIndex {
    /// Per field, term → rows holding it.
    fields: [BTreeMap<String, RoaringBitmap>; 4],
    /// Per field, term → keys of the shared texts holding it.
    shared: [BTreeMap<String, RoaringBitmap>; 4],
    links: Links,
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
            self.memory += post(&mut self.fields[field.index()], row, text);
        }
    }

    /// Indexes a shared text (see [`links`](crate::links)) in `field`
    /// once, and returns its key for [`link`](Self::link).
    pub fn add_shared(&mut self, field: Field, text: &str) -> u32 {
        // Keys are dense from 0; more than u32::MAX shared texts cannot fit
        // a hot tier, so the last key is reused rather than failing ingest
        // (a superset of candidates stays correct).
        let key = self.links.new_key().unwrap_or(u32::MAX);
        self.memory += ENTRY_OVERHEAD + post(&mut self.shared[field.index()], key, text);
        key
    }

    /// Row `row` holds the shared text `key`: it matches that text's terms.
    /// A key never returned by [`add_shared`](Self::add_shared) links nothing.
    pub fn link(&mut self, row: u32, key: u32) {
        if self.rows.insert(row) {
            self.memory += 4;
        }
        if self.links.link(key, row) == Some(true) {
            self.memory += 2;
        }
    }

    /// Shared texts added.
    pub fn num_shared(&self) -> usize {
        self.links.len()
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
        self.fields.iter().chain(&self.shared).map(BTreeMap::len).sum()
    }
}

impl TermSource for MemTextIndex {
    type Error = Infallible;

    fn term(&self, field: Field, term: &str) -> Result<Cow<'_, RoaringBitmap>, Infallible> {
        let own = self.fields[field.index()].get(term);
        Ok(match self.shared[field.index()].get(term) {
            None => match own {
                Some(postings) => Cow::Borrowed(postings),
                None => Cow::Owned(RoaringBitmap::new()),
            },
            Some(keys) => {
                let mut rows = self.links.rows_of(keys);
                if let Some(own) = own {
                    rows |= own;
                }
                Cow::Owned(rows)
            }
        })
    }

    fn prefix(&self, field: Field, prefix: &str) -> Result<RoaringBitmap, Infallible> {
        let starting = |map: &BTreeMap<String, RoaringBitmap>| {
            let mut numbers = RoaringBitmap::new();
            let range = map.range::<str, _>((Bound::Included(prefix), Bound::Unbounded));
            for (_, postings) in range.take_while(|(term, _)| term.starts_with(prefix)) {
                numbers |= postings;
            }
            numbers
        };
        let mut rows = starting(&self.fields[field.index()]);
        rows |= self.links.rows_of(starting(&self.shared[field.index()]));
        Ok(rows)
    }

    fn universe(&self) -> &RoaringBitmap {
        &self.rows
    }
}
