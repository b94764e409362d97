//! The hot tier: recent records of one signal in memory, indexed, until a
//! flush turns them into a part.
//!
//! Rows are append-only. A record whose key is already present replaces the
//! older version if its sequence number is higher (the newer write wins,
//! whatever order concurrent ingests apply in); the old row is marked dead
//! and skipped by every read.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use roaring::RoaringBitmap;
use skein_model::Span;
use skein_model::genai::LlmCall;

use crate::hash::FastMap;
use crate::part::index::{PartIndex, TIME_MARK_STRIDE, TraceIndex};
use crate::record::{Record, RecordKey, TermCache};
use crate::stats::{PartStats, StatsBuilder};
use crate::terms::{IndexTerm, Term};
use crate::text::{PayloadText, TextRecord};
use crate::text_index::SharedHotText;

pub struct MemTable<R> {
    rows: Vec<Arc<R>>,
    seqs: Vec<u64>,
    /// Each row's time, so a flush orders rows without visiting them.
    times: Vec<u64>,
    /// Each row's key, so a flush orders rows sharing a time without
    /// hashing them again (a metric's series share every scrape's time: a
    /// sort that hashed in its comparisons was a fifth of remote-write
    /// intake).
    row_keys: Vec<RecordKey>,
    dead: RoaringBitmap,
    keys: FastMap<RecordKey, u32>,
    traces: FastMap<u128, Vec<u32>>,
    /// The rows of each term, ascending. Rows only grow, so an insert is an
    /// append; a roaring bitmap here cost a search per term and row, a
    /// fifth of all insert work. Parts keep roaring bitmaps.
    postings: FastMap<Term, Vec<u32>>,
    /// The attribute key of each attribute-value term in `postings`.
    key_of_value: FastMap<Term, Term>,
    bytes: usize,
    min_time: u64,
    max_time: u64,
    max_seq: u64,
    terms_buf: Vec<IndexTerm>,
    term_cache: TermCache,
    /// Statistics of every row ever inserted; exact while no row is dead.
    stats: StatsBuilder,
    /// The full-text index, built lazily by queries (`None`: full-text
    /// indexes are off, and text queries scan).
    text: Option<SharedHotText>,
    /// The GenAI view of the rows that have one, built lazily by the LLM
    /// queries ([`MemTable::llm_calls`]); empty in tables of other signals.
    llm: parking_lot::RwLock<HotCalls>,
}

/// The GenAI view ([`LlmCall::from_attributes`]) of a span tier's rows.
///
/// Why: the LLM aggregations (usage, tools, the session list) read parts
/// from their dense calls tables, but a hot tier only has its spans, and
/// deriving the view of every span on every query (to find the few percent
/// that are GenAI calls) was half of a session list over 1M spans with 10%
/// of them hot. A row's record never changes (a replacement is a new row,
/// the old one dies), so a view, once derived, stays right: each query
/// derives it only for rows inserted since the last, and asks whether a row
/// is live itself. It costs a few hundred bytes per GenAI row of the tier,
/// and goes with the tier.
#[derive(Default)]
pub struct HotCalls {
    /// Rows below this one have been looked at.
    upto: u32,
    /// The rows with a GenAI view, ascending, dead ones included.
    calls: Vec<(u32, LlmCall)>,
}

impl HotCalls {
    /// Each row with a GenAI view and that view, in row order (dead rows
    /// included: callers check [`MemTable::is_live`]).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &LlmCall)> {
        self.calls.iter().map(|(r, c)| (*r, c))
    }

    fn memory_bytes(&self) -> usize {
        let strings = |c: &LlmCall| {
            [
                &c.provider,
                &c.model,
                &c.request_model,
                &c.operation,
                &c.session_id,
                &c.user_id,
                &c.agent_name,
                &c.tool_name,
            ]
            .iter()
            .map(|s| s.as_ref().map_or(0, String::capacity))
            .sum::<usize>()
        };
        self.calls.capacity() * std::mem::size_of::<(u32, LlmCall)>()
            + self.calls.iter().map(|(_, c)| strings(c)).sum::<usize>()
    }
}

impl<R> Default for MemTable<R> {
    fn default() -> Self {
        MemTable {
            rows: Vec::new(),
            seqs: Vec::new(),
            times: Vec::new(),
            row_keys: Vec::new(),
            dead: RoaringBitmap::new(),
            keys: FastMap::default(),
            traces: FastMap::default(),
            postings: FastMap::default(),
            key_of_value: FastMap::default(),
            bytes: 0,
            min_time: u64::MAX,
            max_time: 0,
            max_seq: 0,
            terms_buf: Vec::new(),
            term_cache: TermCache::default(),
            stats: StatsBuilder::default(),
            text: Some(SharedHotText::default()),
            llm: Default::default(),
        }
    }
}

/// Index bytes per row beyond the record itself (keys, postings, traces,
/// sequence numbers and times), roughly.
const ROW_OVERHEAD: usize = 160;

impl<R: Record> MemTable<R> {
    /// An empty table with room for what `previous` held: under steady
    /// ingest each tier fills like the last, and growing the key map by
    /// rehashing was a tenth of insert work.
    pub fn sized_like(previous: &MemTable<R>) -> Self {
        let mut t = MemTable::default().with_text_index(previous.text.is_some());
        t.rows.reserve(previous.rows.len());
        t.seqs.reserve(previous.rows.len());
        t.times.reserve(previous.rows.len());
        t.row_keys.reserve(previous.rows.len());
        t.keys.reserve(previous.keys.len());
        t.traces.reserve(previous.traces.len());
        t.postings.reserve(previous.postings.len());
        t
    }

    /// The table with a full-text index (the default) or without one.
    pub fn with_text_index(mut self, on: bool) -> Self {
        self.text = on.then(SharedHotText::default);
        self
    }

    /// The full-text index, if kept.
    pub fn text_index(&self) -> Option<&SharedHotText> {
        self.text.as_ref()
    }

    /// The rows the full-text index does not cover yet, from the first of
    /// them, with the index to add them to.
    pub fn text_backlog(&self) -> Option<(SharedHotText, u32, Vec<Arc<R>>)> {
        let text = self.text.as_ref()?;
        let upto = text.lock().upto();
        let start = upto.min(self.rows.len() as u32);
        Some((text.clone(), start, self.rows[start as usize..].to_vec()))
    }

    /// Brings `table`'s text index up to its newest row. The rows are taken
    /// under a short read lock and indexed without it, so ingest into the
    /// table goes on meanwhile; the text index's own lock is never held
    /// while the table's is taken (a search takes the table's, then the
    /// index's).
    pub fn catch_up_text(table: &parking_lot::RwLock<MemTable<R>>, read: Option<&PayloadText>)
    where
        R: TextRecord,
    {
        let Some((text, start, rows)) = table.read().text_backlog() else {
            return;
        };
        if !rows.is_empty() {
            text.lock().index_rows(start, &rows, read);
        }
    }

    /// Estimated heap bytes of the full-text index.
    pub fn text_memory_bytes(&self) -> usize {
        self.text.as_ref().map_or(0, |t| t.lock().memory_bytes())
    }

    /// Estimated heap bytes of the GenAI views kept ([`HotCalls`]).
    pub fn llm_memory_bytes(&self) -> usize {
        self.llm.read().memory_bytes()
    }

    /// Inserts records whose sequence numbers are `seq_base..`.
    pub fn insert(&mut self, records: Vec<R>, seq_base: u64) {
        for (i, r) in records.into_iter().enumerate() {
            self.insert_one(r, seq_base + i as u64);
        }
    }

    fn insert_one(&mut self, r: R, seq: u64) {
        let row = self.rows.len() as u32;
        let key = r.key();
        match self.keys.entry(key) {
            Entry::Occupied(mut e) => {
                let old = *e.get();
                if self.seqs[old as usize] > seq {
                    return; // a newer version is already here
                }
                self.dead.insert(old);
                e.insert(row);
            }
            Entry::Vacant(e) => {
                e.insert(row);
            }
        }
        if let Some(t) = r.trace_id() {
            self.traces.entry(t.as_u128()).or_default().push(row);
        }
        let mut terms = std::mem::take(&mut self.terms_buf);
        terms.clear();
        self.term_cache.terms(&r, &mut terms);
        for t in &terms {
            match self.postings.entry(t.term) {
                Entry::Occupied(mut e) => {
                    let rows = e.get_mut();
                    // A record may repeat a term (two events with one attribute).
                    if rows.last() != Some(&row) {
                        rows.push(row);
                    }
                }
                Entry::Vacant(e) => {
                    e.insert(vec![row]);
                    if let Some(key) = t.attr_key {
                        self.key_of_value.insert(t.term, key);
                    }
                }
            }
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
        self.times.push(time);
        self.row_keys.push(key);
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

    /// Marks every live row older than `floor` dead (retention), as a
    /// replaced row is: reads skip it and a flush leaves it out. Its key is
    /// forgotten, so the record can be stored again. Returns how many rows
    /// died.
    pub fn expire_before(&mut self, floor: u64) -> usize {
        if self.rows.is_empty() || self.min_time >= floor {
            return 0;
        }
        let mut n = 0;
        for (row, &time) in self.times.iter().enumerate() {
            let row = row as u32;
            if time < floor && !self.dead.contains(row) {
                self.dead.insert(row);
                let key = self.row_keys[row as usize];
                if self.keys.get(&key) == Some(&row) {
                    self.keys.remove(&key);
                }
                n += 1;
            }
        }
        n
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

    /// The time of row `row` (what `row(row).time()` returns, without
    /// visiting the record).
    pub fn time(&self, row: u32) -> u64 {
        self.times[row as usize]
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

    /// The rows holding `term`, ascending.
    pub fn posting(&self, term: Term) -> Option<&[u32]> {
        self.postings.get(&term).map(Vec::as_slice)
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

    /// Live rows sorted by (time, key): the order parts are written in.
    /// Sorted by time from `times`; only rows sharing a time are visited
    /// for their keys.
    fn live_order(&self) -> Vec<u32> {
        let mut rows: Vec<(u64, u32)> = (0..self.rows.len() as u32)
            .filter(|r| self.is_live(*r))
            .map(|r| (self.times[r as usize], r))
            .collect();
        rows.sort_unstable();
        for tied in rows.chunk_by_mut(|a, b| a.0 == b.0).filter(|run| run.len() > 1) {
            tied.sort_unstable_by_key(|&(_, r)| self.row_keys[r as usize]);
        }
        rows.into_iter().map(|(_, r)| r).collect()
    }

    /// The live records in part order, with the index of a part holding
    /// exactly them. The index is this table's own, renumbered, rather
    /// than derived again from every record: the same terms, trace rows,
    /// time marks and statistics a part writer would compute, for a
    /// fraction of the work.
    #[cfg(test)]
    pub fn sorted_live_indexed(&self) -> (Vec<Arc<R>>, PartIndex) {
        let (rows, index) = self.sorted_live_keyed();
        (rows.into_iter().map(|(r, _)| r).collect(), index)
    }

    /// [`sorted_live_indexed`](Self::sorted_live_indexed), each record
    /// with its key (for [`PartWriter::push_keyed`]).
    ///
    /// [`PartWriter::push_keyed`]: crate::part::PartWriter::push_keyed
    pub fn sorted_live_keyed(&self) -> (Vec<(Arc<R>, RecordKey)>, PartIndex) {
        const GONE: u32 = u32::MAX;
        let order = self.live_order();
        let mut new_row = vec![GONE; self.rows.len()];
        for (new, &old) in order.iter().enumerate() {
            new_row[old as usize] = new as u32;
        }
        let traces = TraceIndex::from_traces(self.traces.iter().map(|(trace, rows)| {
            let new_row = &new_row;
            (
                *trace,
                rows.iter().map(move |&r| new_row[r as usize]).filter(|&n| n != GONE),
            )
        }));
        let mut postings: FastMap<Term, RoaringBitmap> =
            FastMap::with_capacity_and_hasher(self.postings.len(), Default::default());
        let mut renumber = Renumber::new(order.len());
        for (term, rows) in &self.postings {
            let bitmap = renumber.bitmap(rows.iter().map(|&r| new_row[r as usize]).filter(|&n| n != GONE));
            if !bitmap.is_empty() {
                postings.insert(*term, bitmap); // else only dead rows had it
            }
        }
        let time_marks = order
            .iter()
            .step_by(TIME_MARK_STRIDE as usize)
            .map(|&r| self.rows[r as usize].time())
            .collect();
        let stats = match self.stats() {
            Some((stats, _, _)) => stats,
            None => {
                // Replaced rows are in the running statistics: recount.
                let mut b = StatsBuilder::default();
                for &r in &order {
                    self.rows[r as usize].add_stats(&mut b);
                }
                b.snapshot()
            }
        };
        let index = PartIndex::assemble(
            order.len() as u32,
            traces,
            postings,
            &self.key_of_value,
            time_marks,
            stats,
        );
        let rows = order
            .into_iter()
            .map(|r| (self.rows[r as usize].clone(), self.row_keys[r as usize]))
            .collect();
        (rows, index)
    }

    pub fn max_seq(&self) -> u64 {
        self.max_seq
    }

    pub fn min_seq(&self) -> u64 {
        self.seqs.iter().copied().min().unwrap_or(0)
    }
}

impl MemTable<Span> {
    /// The GenAI view of every row that has one, brought up to the newest
    /// row first ([`HotCalls`]). Rows are only inserted under the table's
    /// write lock, so while the caller holds a read lock (as it must, to
    /// call this) the view stays complete; two queries catching up at once
    /// take turns, and the second finds nothing left to do.
    pub fn llm_calls(&self) -> parking_lot::RwLockReadGuard<'_, HotCalls> {
        let total = self.rows.len() as u32;
        {
            let memo = self.llm.read();
            if memo.upto >= total {
                return memo;
            }
        }
        let mut memo = self.llm.write();
        for row in memo.upto..total {
            if let Some(call) = LlmCall::from_attributes(&self.rows[row as usize].attributes) {
                memo.calls.push((row, call));
            }
        }
        memo.upto = memo.upto.max(total);
        parking_lot::RwLockWriteGuard::downgrade(memo)
    }
}

/// Builds the bitmaps of renumbered postings. A dense posting's new rows
/// are set in a bitset, read back in order: linear, where sorting them
/// (they arrive nearly, not quite, in order) cost most of a flush's index
/// work. A sparse posting is sorted, which beats scanning the bitset.
struct Renumber {
    rows: u32,
    buf: Vec<u32>,
    bits: Vec<u8>,
}

impl Renumber {
    fn new(rows: usize) -> Self {
        Renumber {
            rows: rows as u32,
            buf: Vec::new(),
            bits: vec![0; rows.div_ceil(8)],
        }
    }

    fn bitmap(&mut self, rows: impl Iterator<Item = u32>) -> RoaringBitmap {
        self.buf.clear();
        self.buf.extend(rows);
        if self.buf.len() >= (self.rows / 16) as usize {
            for &r in &self.buf {
                self.bits[(r >> 3) as usize] |= 1 << (r & 7);
            }
            let bitmap = RoaringBitmap::from_lsb0_bytes(0, &self.bits);
            self.bits.fill(0);
            bitmap
        } else {
            self.buf.sort_unstable();
            RoaringBitmap::from_sorted_iter(self.buf.iter().copied())
                .unwrap_or_else(|_| self.buf.iter().copied().collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use skein_model::Span;

    use super::*;
    use crate::part::index::IndexBuilder;
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
        let live: Vec<_> = m.sorted_live_indexed().0.iter().map(|s| s.name.clone()).collect();
        assert!(live.contains(&"renamed".to_string()));
        // …and a stale version applied late (lower seq) does not.
        spans[0].name = "stale".into();
        m.insert(vec![spans[0].clone()], 15);
        let live: Vec<_> = m.sorted_live_indexed().0.iter().map(|s| s.name.clone()).collect();
        assert!(!live.contains(&"stale".to_string()));
        assert_eq!(
            m.trace_rows(spans[0].trace_id.as_u128()).len(),
            3,
            "dead rows stay indexed"
        );
    }

    #[test]
    fn expired_rows_die_and_their_keys_can_be_stored_again() {
        let mut spans = testdata::spans(4, 2);
        for (i, s) in spans.iter_mut().enumerate() {
            s.start_time_unix_nano = 1_000 + i as u64 * 100;
        }
        let mut m = MemTable::default();
        m.insert(spans.clone(), 1);
        assert_eq!(m.expire_before(1_000), 0);
        // Rows at 1000, 1100, 1200 are older than 1250.
        assert_eq!(m.expire_before(1_250), 3);
        assert_eq!(m.live_rows(), 5);
        assert_eq!(m.expire_before(1_250), 0, "already dead");
        let (rows, _) = m.sorted_live_indexed();
        assert!(rows.iter().all(|s| s.start_time_unix_nano >= 1_250));
        assert!(m.stats().is_none(), "statistics are no longer exact");
        assert!(m.row_of(&spans[0].key()).is_none());
        // The same key, sent again, is stored anew.
        m.insert(vec![spans[0].clone()], 100);
        assert_eq!(m.live_rows(), 6);
    }

    /// The renumbered hot-tier index must be the index a part writer
    /// builds from the same rows.
    fn assert_index_matches_a_rebuild<R: Record>(m: &MemTable<R>) -> PartIndex {
        let (rows, index) = m.sorted_live_indexed();
        let mut built = IndexBuilder::default();
        for r in &rows {
            built.add(&**r);
        }
        let built = built.finish();
        assert_eq!(index.traces, built.traces);
        assert_eq!(index.unindexed_keys, built.unindexed_keys);
        // (Not assert_eq: the maps are too big to print usefully.)
        assert_eq!(index.postings.len(), built.postings.len(), "posting terms");
        assert!(index.postings == built.postings, "postings differ");
        assert_eq!(index.time_marks, built.time_marks);
        assert_eq!(format!("{:?}", index.stats), format!("{:?}", built.stats));
        index
    }

    #[test]
    fn renumbered_index_equals_a_rebuild() {
        // Spans over several time marks, some replaced (dead rows that
        // stay in the hot postings) and one stale retry ignored.
        let mut spans = testdata::spans(300, 10);
        let mut m = MemTable::default();
        m.insert(spans.clone(), 1);
        for (i, s) in spans.iter_mut().enumerate().step_by(7) {
            s.name = format!("renamed-{}", i % 3);
            s.start_time_unix_nano += 1;
        }
        let replaced: Vec<Span> = spans.iter().step_by(7).cloned().collect();
        m.insert(replaced, 10_000);
        m.insert(vec![spans[1].clone()], 0);
        assert!(!m.dead.is_empty());
        let index = assert_index_matches_a_rebuild(&m);
        assert!(index.time_marks.len() > 2);

        // A value only a replaced row had does not count towards its key's
        // distinct values: 10,000 live ones stay indexed.
        let mut spans = testdata::spans(1001, 10);
        spans.truncate(10_001);
        for (i, s) in spans.iter_mut().enumerate() {
            s.attributes.push(skein_model::KeyValue::new("u", i as i64));
        }
        let mut m = MemTable::default();
        m.insert(spans.clone(), 1);
        let mut retry = spans[0].clone();
        retry.attributes.last_mut().expect("pushed above").value = skein_model::AnyValue::Int(1);
        m.insert(vec![retry], 20_000);
        let index = assert_index_matches_a_rebuild(&m);
        assert!(index.unindexed_keys.is_empty());

        // A key with a distinct value per row loses its value postings.
        let mut m = MemTable::default();
        m.insert(testdata::logs(12_000), 1);
        m.insert(testdata::logs(100), 20_000);
        let index = assert_index_matches_a_rebuild(&m);
        assert_eq!(index.unindexed_keys.len(), 1);

        let mut m = MemTable::default();
        m.insert(testdata::metric_points(50), 1);
        assert_index_matches_a_rebuild(&m);
    }

    proptest::proptest! {
        /// Dense postings (set in a bitset) and sparse ones (sorted) both
        /// become the bitmap of exactly their rows, whatever their order.
        #[test]
        fn renumbered_postings_hold_exactly_their_rows(
            rows in 1usize..3000,
            picks in proptest::collection::vec(0u32..3000, 0..3000),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut set: Vec<u32> = picks.into_iter().filter(|&r| (r as usize) < rows).collect();
            set.sort_unstable();
            set.dedup();
            let mut shuffled = set.clone();
            let mut x = seed | 1;
            for i in (1..shuffled.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                shuffled.swap(i, (x % (i as u64 + 1)) as usize);
            }
            // Twice, the second time with a subset: nothing of the first
            // posting may linger in the reused buffers.
            let mut renumber = Renumber::new(rows);
            let got: Vec<u32> = renumber.bitmap(shuffled.iter().copied()).iter().collect();
            proptest::prop_assert_eq!(&got, &set);
            let half: Vec<u32> = shuffled.iter().copied().step_by(2).collect();
            let mut want = half.clone();
            want.sort_unstable();
            let got: Vec<u32> = renumber.bitmap(half.into_iter()).iter().collect();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn rows_are_ordered_by_time_then_key() {
        // Many rows on few distinct times, inserted in descending key
        // order, some replaced: ties on time are broken by key.
        let mut spans = testdata::spans(40, 5);
        for (i, s) in spans.iter_mut().enumerate() {
            s.start_time_unix_nano = 1_000 + (i % 3) as u64;
        }
        spans.sort_by_key(|s| std::cmp::Reverse(s.key()));
        let mut m = MemTable::default();
        m.insert(spans.clone(), 1);
        m.insert(spans.iter().step_by(4).cloned().collect(), 1_000);
        let order: Vec<(u64, RecordKey)> = m.sorted_live_indexed().0.iter().map(|s| (s.time(), s.key())).collect();
        let mut want: Vec<(u64, RecordKey)> = spans.iter().map(|s| (s.time(), s.key())).collect();
        want.sort_unstable();
        assert_eq!(order, want);
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
