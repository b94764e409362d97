//! The hot tier: recent records of one signal in memory, indexed, until a
//! flush turns them into a part.
//!
//! Rows are append-only. A record whose key is already present replaces the
//! older version if its sequence number is higher (the newer write wins,
//! whatever order concurrent ingests apply in); the old row is marked dead
//! and skipped by every read.

use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::hash::FastMap;
use crate::part::index::{PartStats, StatsBuilder};
use crate::record::{Record, RecordKey, TermCache};
use crate::terms::{IndexTerm, Term};

pub struct MemTable<R> {
    rows: Vec<Arc<R>>,
    seqs: Vec<u64>,
    dead: RoaringBitmap,
    keys: FastMap<RecordKey, u32>,
    traces: FastMap<u128, Vec<u32>>,
    postings: FastMap<Term, RoaringBitmap>,
    bytes: usize,
    min_time: u64,
    max_time: u64,
    max_seq: u64,
    terms_buf: Vec<IndexTerm>,
    term_cache: TermCache,
    /// Statistics of every row ever inserted; exact while no row is dead.
    stats: StatsBuilder,
}

impl<R> Default for MemTable<R> {
    fn default() -> Self {
        MemTable {
            rows: Vec::new(),
            seqs: Vec::new(),
            dead: RoaringBitmap::new(),
            keys: FastMap::default(),
            traces: FastMap::default(),
            postings: FastMap::default(),
            bytes: 0,
            min_time: u64::MAX,
            max_time: 0,
            max_seq: 0,
            terms_buf: Vec::new(),
            term_cache: TermCache::default(),
            stats: StatsBuilder::default(),
        }
    }
}

/// Index bytes per row beyond the record itself (keys, postings, traces).
const ROW_OVERHEAD: usize = 160;

impl<R: Record> MemTable<R> {
    /// Inserts records whose sequence numbers are `seq_base..`.
    pub fn insert(&mut self, records: Vec<R>, seq_base: u64) {
        for (i, r) in records.into_iter().enumerate() {
            self.insert_one(r, seq_base + i as u64);
        }
    }

    fn insert_one(&mut self, r: R, seq: u64) {
        let key = r.key();
        let row = self.rows.len() as u32;
        if let Some(&old) = self.keys.get(&key) {
            if self.seqs[old as usize] > seq {
                return; // a newer version is already here
            }
            self.dead.insert(old);
        }
        self.keys.insert(key, row);
        if let Some(t) = r.trace_id() {
            self.traces.entry(t.as_u128()).or_default().push(row);
        }
        let mut terms = std::mem::take(&mut self.terms_buf);
        terms.clear();
        self.term_cache.terms(&r, &mut terms);
        for t in &terms {
            self.postings.entry(t.term).or_default().insert(row);
        }
        self.terms_buf = terms;
        let time = r.time();
        self.min_time = self.min_time.min(time);
        self.max_time = self.max_time.max(time);
        self.max_seq = self.max_seq.max(seq);
        self.bytes += r.approx_size() + ROW_OVERHEAD;
        r.add_stats(&mut self.stats);
        self.rows.push(Arc::new(r));
        self.seqs.push(seq);
    }

    /// Pre-aggregated statistics of the live rows and the time range they
    /// cover, when they are exact (no row was replaced).
    pub fn stats(&self) -> Option<(PartStats, u64, u64)> {
        (self.dead.is_empty() && !self.rows.is_empty()).then(|| (self.stats.snapshot(), self.min_time, self.max_time))
    }

    pub fn is_live(&self, row: u32) -> bool {
        !self.dead.contains(row)
    }

    pub fn live_rows(&self) -> usize {
        self.rows.len() - self.dead.len() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.live_rows() == 0
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn time_range(&self) -> Option<(u64, u64)> {
        (!self.rows.is_empty()).then_some((self.min_time, self.max_time))
    }

    pub fn row(&self, row: u32) -> &Arc<R> {
        &self.rows[row as usize]
    }

    pub fn seq(&self, row: u32) -> u64 {
        self.seqs[row as usize]
    }

    pub fn total_rows(&self) -> u32 {
        self.rows.len() as u32
    }

    pub fn posting(&self, term: Term) -> Option<&RoaringBitmap> {
        self.postings.get(&term)
    }

    pub fn trace_rows(&self, trace: u128) -> &[u32] {
        self.traces.get(&trace).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every trace with its rows (dead rows included).
    pub fn traces(&self) -> impl Iterator<Item = (&u128, &Vec<u32>)> {
        self.traces.iter()
    }

    pub fn contains_key(&self, key: &RecordKey) -> bool {
        self.keys.contains_key(key)
    }

    /// The live row holding `key`, if any.
    pub fn row_of(&self, key: &RecordKey) -> Option<u32> {
        self.keys.get(key).copied()
    }

    /// Live records sorted by (time, key): the order parts are written in.
    pub fn sorted_live(&self) -> Vec<Arc<R>> {
        let mut rows: Vec<(u64, RecordKey, u32)> = (0..self.rows.len() as u32)
            .filter(|r| self.is_live(*r))
            .map(|r| {
                let rec = &self.rows[r as usize];
                (rec.time(), rec.key(), r)
            })
            .collect();
        rows.sort_unstable();
        rows.into_iter()
            .map(|(_, _, r)| self.rows[r as usize].clone())
            .collect()
    }

    pub fn max_seq(&self) -> u64 {
        self.max_seq
    }

    pub fn min_seq(&self) -> u64 {
        self.seqs.iter().copied().min().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn newer_versions_replace_older_whatever_the_apply_order() {
        let mut spans = testdata::spans(1, 2);
        let mut m = MemTable::default();
        m.insert(spans.clone(), 10);
        assert_eq!(m.live_rows(), 2);
        // A retry of the first span with a later seq replaces it…
        spans[0].name = "renamed".into();
        m.insert(vec![spans[0].clone()], 20);
        assert_eq!(m.live_rows(), 2);
        let live: Vec<_> = m.sorted_live().iter().map(|s| s.name.clone()).collect();
        assert!(live.contains(&"renamed".to_string()));
        // …and a stale version applied late (lower seq) does not.
        spans[0].name = "stale".into();
        m.insert(vec![spans[0].clone()], 15);
        let live: Vec<_> = m.sorted_live().iter().map(|s| s.name.clone()).collect();
        assert!(!live.contains(&"stale".to_string()));
        assert_eq!(
            m.trace_rows(spans[0].trace_id.as_u128()).len(),
            3,
            "dead rows stay indexed"
        );
    }

    #[test]
    fn identical_logs_are_one_record() {
        let logs = testdata::logs(5);
        let mut m = MemTable::default();
        m.insert(logs.clone(), 1);
        m.insert(logs, 100);
        assert_eq!(m.live_rows(), 5);
    }
}
