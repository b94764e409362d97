//! The hot tier's index: built record by record, term → roaring postings
//! per field, exact row by row. No tantivy: a part's index is built once,
//! when the part is written.
//!
//! Terms get ids from one [`Vocabulary`] (a prefix is a scan of its terms:
//! the hot tier holds at most a few million), whose memo of chunks and
//! pieces keeps repeated words and prompts from being tokenized once per
//! row. Its ids are never reset here: postings are keyed by them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;

use roaring::RoaringBitmap;
use rustc_hash::FxBuildHasher;

use crate::ascending::Ascending;
use crate::eval::{self, TermSource};
use crate::field::Field;
use crate::links::Links;
use crate::query::Query;
use crate::vocabulary::Vocabulary;

/// Estimated bytes of a postings entry besides its bitmap's rows: the map
/// slot and the bitmap headers.
const ENTRY_OVERHEAD: usize = 64;
/// Estimated bytes of a new term besides its text: its vocabulary entries.
const TERM_OVERHEAD: usize = 48;

/// Term id → postings of one field: rows, or keys of shared texts.
#[derive(Debug, Default, Clone)]
struct Postings {
    lists: HashMap<u32, (RoaringBitmap, Ascending), FxBuildHasher>,
}

impl Postings {
    /// Adds `number` to the postings of `ids`; returns the estimated bytes
    /// this added.
    fn post(&mut self, number: u32, ids: &[u32]) -> usize {
        let mut memory = 0;
        for &id in ids {
            let (list, order) = self.lists.entry(id).or_insert_with(|| {
                memory += ENTRY_OVERHEAD;
                Default::default()
            });
            // Rows mostly arrive in order: an append is cheap.
            if order.append(list, number) || list.insert(number) {
                // Array containers hold 2 bytes a row.
                memory += 2;
            }
        }
        memory
    }

    fn get(&self, id: Option<u32>) -> Option<&RoaringBitmap> {
        self.lists.get(&id?).map(|(list, _)| list)
    }

    /// The union of the postings of `ids`.
    fn union(&self, ids: &[u32]) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        for id in ids {
            if let Some((list, _)) = self.lists.get(id) {
                out |= list;
            }
        }
        out
    }
}

/// Full-text postings of the hot tier. Rows are the caller's row numbers.
#[derive(Debug, Default, Clone)]
pub struct MemTextIndex {
    vocabulary: Vocabulary,
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
            let ids = self.term_ids(text);
            self.memory += self.fields[field.index()].post(row, &ids);
        }
    }

    /// Indexes a shared text (see [`links`](crate::links)) in `field`
    /// once, and returns its key for [`link`](Self::link).
    pub fn add_shared(&mut self, field: Field, text: &str) -> u32 {
        let key = self.new_shared();
        self.set_shared(key, field, text);
        key
    }

    /// A key for a shared text whose text comes later, with
    /// [`set_shared`](Self::set_shared): rows may be linked to it
    /// meanwhile.
    pub fn new_shared(&mut self) -> u32 {
        // Keys are dense from 0; more than u32::MAX shared texts cannot fit
        // a hot tier, so the last key is reused rather than failing ingest
        // (a superset of candidates stays correct).
        self.links.new_key().unwrap_or(u32::MAX)
    }

    /// Indexes `text`, in `field`, as the text of `key` (from
    /// [`new_shared`](Self::new_shared)).
    pub fn set_shared(&mut self, key: u32, field: Field, text: &str) {
        let ids = self.term_ids(text);
        self.memory += ENTRY_OVERHEAD + self.shared[field.index()].post(key, &ids);
    }

    /// Row `row` holds the shared text `key`: it matches that text's terms.
    /// A key never returned by [`add_shared`](Self::add_shared) or
    /// [`new_shared`](Self::new_shared) links nothing.
    pub fn link(&mut self, row: u32, key: u32) {
        if self.rows.insert(row) {
            self.memory += 4;
        }
        if self.links.link(key, row) == Some(true) {
            self.memory += 2;
        }
    }

    /// The distinct term ids of `text`, counting the memory of new terms.
    fn term_ids(&mut self, text: &str) -> Vec<u32> {
        let before = self.vocabulary.len();
        let mut ids = Vec::new();
        self.vocabulary.text(text, &mut ids);
        self.vocabulary.dedup(&mut ids);
        for id in before..self.vocabulary.len() {
            self.memory += TERM_OVERHEAD + self.vocabulary.term(id as u32).len();
        }
        ids
    }

    /// The ids of every term starting with `prefix`.
    fn ids_starting(&self, prefix: &str) -> Vec<u32> {
        self.vocabulary
            .terms()
            .filter(|(_, t)| t.starts_with(prefix))
            .map(|(id, _)| id)
            .collect()
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
        self.vocabulary.len()
    }
}

impl TermSource for MemTextIndex {
    type Error = Infallible;

    fn term(&self, field: Field, term: &str) -> Result<Cow<'_, RoaringBitmap>, Infallible> {
        let id = self.vocabulary.id(term);
        let own = self.fields[field.index()].get(id);
        Ok(match self.shared[field.index()].get(id) {
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
        let ids = self.ids_starting(prefix);
        let mut rows = self.fields[field.index()].union(&ids);
        rows |= self.links.rows_of(self.shared[field.index()].union(&ids));
        Ok(rows)
    }

    fn universe(&self) -> &RoaringBitmap {
        &self.rows
    }
}
