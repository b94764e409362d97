//! The hot tier's index: built record by record, term → roaring postings
//! per field, exact row by row. No tantivy: a part's index is built once,
//! when the part is written.
//!
//! Terms live in hash maps (a prefix is a scan of a field's terms: the hot
//! tier holds at most a few million), and text is cut at ASCII whitespace
//! first, each chunk's terms remembered: log lines repeat most of their
//! words, so most chunks are tokenized once, not once per row (the
//! tokenizer never joins across whitespace, so a value's terms are the union
//! of its chunks').

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;

use roaring::RoaringBitmap;
use rustc_hash::FxBuildHasher;

use crate::eval::{self, TermSource};
use crate::field::Field;
use crate::links::Links;
use crate::query::Query;
use crate::tokenize::tokenize;

/// Estimated bytes of a map entry besides its key and postings: the slot,
/// the boxed key and the bitmap headers.
const ENTRY_OVERHEAD: usize = 96;

/// Chunks whose terms are remembered, per index; past this the memo starts
/// over (ids and numbers make most chunks unique, and it must stay small).
const CHUNK_MEMO: usize = 1 << 16;

/// Term → postings of one field: rows, or keys of shared texts.
#[derive(Debug, Default, Clone)]
struct Postings {
    ids: HashMap<Box<str>, u32, FxBuildHasher>,
    lists: Vec<RoaringBitmap>,
    /// Each chunk seen lately, with the ids of its terms.
    chunks: HashMap<Box<str>, Vec<u32>, FxBuildHasher>,
}

impl Postings {
    /// Adds `number` to the postings of every term of `text`; returns the
    /// estimated bytes this added.
    fn post(&mut self, number: u32, text: &str) -> usize {
        let mut memory = 0;
        for chunk in text.split_ascii_whitespace() {
            if !self.chunks.contains_key(chunk) {
                if self.chunks.len() >= CHUNK_MEMO {
                    self.chunks.clear();
                }
                let mut ids = Vec::new();
                for token in tokenize(chunk) {
                    for term in token.terms() {
                        let id = match self.ids.get(term) {
                            Some(&id) => id,
                            None => {
                                let id = self.lists.len() as u32;
                                self.ids.insert(term.into(), id);
                                self.lists.push(RoaringBitmap::new());
                                memory += ENTRY_OVERHEAD + term.len();
                                id
                            }
                        };
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                    }
                }
                self.chunks.insert(chunk.into(), ids);
            }
            for &id in self.chunks.get(chunk).map(Vec::as_slice).unwrap_or_default() {
                let list = &mut self.lists[id as usize];
                // Rows mostly arrive in order: an append (`push`) is cheap.
                let added = list.push(number) || list.insert(number);
                if added {
                    // Array containers hold 2 bytes a row.
                    memory += 2;
                }
            }
        }
        memory
    }

    fn get(&self, term: &str) -> Option<&RoaringBitmap> {
        self.ids.get(term).map(|&id| &self.lists[id as usize])
    }

    /// The union of the postings of every term starting with `prefix`.
    fn prefix(&self, prefix: &str) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        for (term, &id) in &self.ids {
            if term.starts_with(prefix) {
                out |= &self.lists[id as usize];
            }
        }
        out
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Full-text postings of the hot tier. Rows are the caller's row numbers.
#[derive(Debug, Default, Clone)]
pub struct MemTextIndex {
    /// Per field, term → rows holding it.
    fields: [Postings; 4],
    /// Per field, term → keys of the shared texts holding it.
    shared: [Postings; 4],
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
            self.memory += self.fields[field.index()].post(row, text);
        }
    }

    /// Indexes a shared text (see [`links`](crate::links)) in `field`
    /// once, and returns its key for [`link`](Self::link).
    pub fn add_shared(&mut self, field: Field, text: &str) -> u32 {
        // Keys are dense from 0; more than u32::MAX shared texts cannot fit
        // a hot tier, so the last key is reused rather than failing ingest
        // (a superset of candidates stays correct).
        let key = self.links.new_key().unwrap_or(u32::MAX);
        self.memory += ENTRY_OVERHEAD + self.shared[field.index()].post(key, text);
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
        self.fields.iter().chain(&self.shared).map(Postings::len).sum()
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
        let mut rows = self.fields[field.index()].prefix(prefix);
        rows |= self.links.rows_of(self.shared[field.index()].prefix(prefix));
        Ok(rows)
    }

    fn universe(&self) -> &RoaringBitmap {
        &self.rows
    }
}
