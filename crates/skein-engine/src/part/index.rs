//! A part's sidecar index, kept in memory while the part is open: which rows
//! hold which trace, postings of index terms, coarse time marks, and
//! pre-aggregated statistics. It only ever narrows the rows a query reads;
//! the rows themselves decide the answer.
//!
//! It is stored beside the part as `<id>.idx` (magic, version, CRC, zstd
//! postcard) but is derived data: a missing or damaged sidecar is rebuilt
//! from the Parquet file.

use std::collections::HashSet;
use std::io::Cursor;

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use skein_text::Ascending;

use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::hash::FastMap;
use crate::payload::PayloadRef;
use crate::query::Window;
use crate::record::{Record, TermCache};
use crate::stats::{PartStats, StatsBuilder};
use crate::terms::{IndexTerm, Term};

/// A time mark is kept for every this-many rows.
pub const TIME_MARK_STRIDE: u32 = 1024;

/// Rows of each trace: `rows[offsets[i]..offsets[i+1]]` belong to `ids[i]`.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceIndex {
    ids: Vec<u128>,
    offsets: Vec<u32>,
    rows: Vec<u32>,
}

impl TraceIndex {
    /// Builds from (trace, row) pairs in any order.
    pub fn build(mut pairs: Vec<(u128, u32)>) -> TraceIndex {
        pairs.sort_unstable();
        let mut t = TraceIndex::default();
        for (id, row) in pairs {
            if t.ids.last() != Some(&id) {
                t.ids.push(id);
                t.offsets.push(t.rows.len() as u32);
            }
            t.rows.push(row);
        }
        t.offsets.push(t.rows.len() as u32);
        t
    }

    /// Builds from each trace's rows, every trace given once, in any order,
    /// with its rows in any order (a trace without rows is left out):
    /// sorting the traces rather than every (trace, row) pair.
    pub fn from_traces<I: Iterator<Item = u32>>(traces: impl IntoIterator<Item = (u128, I)>) -> TraceIndex {
        let mut traces: Vec<(u128, I)> = traces.into_iter().collect();
        traces.sort_unstable_by_key(|(id, _)| *id);
        let mut t = TraceIndex::default();
        t.ids.reserve(traces.len());
        t.offsets.reserve(traces.len() + 1);
        for (id, rows) in traces {
            let start = t.rows.len();
            t.rows.extend(rows);
            if t.rows.len() > start {
                t.rows[start..].sort_unstable();
                t.ids.push(id);
                t.offsets.push(start as u32);
            }
        }
        t.offsets.push(t.rows.len() as u32);
        t
    }

    /// Checks the shape `build` gives (ids strictly ascending, each with an
    /// ascending run of rows), which a decoded index must have for lookups
    /// to find every trace and not to slice out of bounds.
    fn check(&self) -> std::result::Result<(), &'static str> {
        let offsets_ok = match self.offsets.last() {
            None => self.ids.is_empty() && self.rows.is_empty(),
            Some(&last) => {
                self.offsets.len() == self.ids.len() + 1
                    && self.offsets[0] == 0
                    && last as usize == self.rows.len()
                    && self.offsets.windows(2).all(|w| w[0] < w[1])
            }
        };
        if !offsets_ok {
            return Err("trace offsets do not match the rows");
        }
        if !self.ids.windows(2).all(|w| w[0] < w[1]) {
            return Err("trace ids are not in ascending order");
        }
        let rows_ok = self
            .offsets
            .windows(2)
            .all(|w| self.rows[w[0] as usize..w[1] as usize].windows(2).all(|r| r[0] < r[1]));
        if !rows_ok {
            return Err("a trace's rows are not in ascending order");
        }
        Ok(())
    }

    pub fn rows_of(&self, trace: u128) -> &[u32] {
        match self.ids.binary_search(&trace) {
            Ok(i) => &self.rows[self.offsets[i] as usize..self.offsets[i + 1] as usize],
            Err(_) => &[],
        }
    }

    pub fn contains(&self, trace: u128) -> bool {
        self.ids.binary_search(&trace).is_ok()
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn ids(&self) -> &[u128] {
        &self.ids
    }

    pub fn memory_bytes(&self) -> usize {
        self.ids.len() * 16 + self.offsets.len() * 4 + self.rows.len() * 4
    }
}

#[derive(Debug, Default)]
pub struct PartIndex {
    pub traces: TraceIndex,
    pub postings: FastMap<Term, RoaringBitmap>,
    /// Attribute keys (their exists-terms) with too many distinct values in
    /// this part to index: equality on them scans.
    pub unindexed_keys: HashSet<Term>,
    /// Time of rows 0, STRIDE, 2·STRIDE, … (rows are time-sorted).
    pub time_marks: Vec<u64>,
    pub stats: PartStats,
    /// Every payload the part's rows refer to, sorted: what payload garbage
    /// collection must keep.
    pub payload_refs: Vec<PayloadRef>,
}

impl PartIndex {
    /// Rows whose time may fall in `w`: a superset, to be re-checked.
    pub fn row_range(&self, rows: u32, w: Window) -> std::ops::Range<u32> {
        let Window { start, end } = w;
        // First mark > start-ish: rows before mark k all have time ≤ marks[k].
        let lo_mark = self.time_marks.partition_point(|t| *t < start);
        let lo = (lo_mark.saturating_sub(1) as u32) * TIME_MARK_STRIDE;
        let hi_mark = self.time_marks.partition_point(|t| *t < end);
        let hi = ((hi_mark as u32) * TIME_MARK_STRIDE).min(rows);
        lo.min(hi)..hi
    }

    pub fn posting(&self, term: Term) -> Option<&RoaringBitmap> {
        self.postings.get(&term)
    }

    pub fn memory_bytes(&self) -> usize {
        self.traces.memory_bytes()
            + self.postings.values().map(|b| b.serialized_size() + 32).sum::<usize>()
            + self.time_marks.len() * 8
            + self.stats.ops.len() * 256
            + self
                .stats
                .ops
                .iter()
                .flat_map(|o| &o.minutes)
                .map(|m| 48 + m.durations.buckets() * 16)
                .sum::<usize>()
            + self.stats.series.len() * 8
            + self.payload_refs.len() * 32
    }
}

/// Accumulates a part's index as its rows are written in time order.
#[derive(Default)]
pub struct IndexBuilder {
    rows: u32,
    trace_pairs: Vec<(u128, u32)>,
    postings: FastMap<Term, AppendedRows>,
    /// The attribute key of each attribute-value term, recorded when the
    /// term is first seen (once per term, not per row).
    key_of_value: FastMap<Term, Term>,
    time_marks: Vec<u64>,
    terms_buf: Vec<IndexTerm>,
    term_cache: TermCache,
    pub stats: StatsBuilder,
    payload_refs: crate::hash::FastSet<PayloadRef>,
}

/// Keys with more distinct values than this (and than a tenth of the rows)
/// lose their value postings.
const MAX_VALUES_PER_KEY: usize = 10_000;

impl IndexBuilder {
    pub fn add<R: Record>(&mut self, r: &R) {
        let row = self.rows;
        if row.is_multiple_of(TIME_MARK_STRIDE) {
            self.time_marks.push(r.time());
        }
        if let Some(t) = r.trace_id() {
            self.trace_pairs.push((t.as_u128(), row));
        }
        let mut terms = std::mem::take(&mut self.terms_buf);
        terms.clear();
        self.term_cache.terms(r, &mut terms);
        for t in &terms {
            match self.postings.get_mut(&t.term) {
                Some(b) => b.push(row),
                None => {
                    let mut b = AppendedRows::default();
                    b.push(row);
                    self.postings.insert(t.term, b);
                    if let Some(key) = t.attr_key {
                        self.key_of_value.insert(t.term, key);
                    }
                }
            }
        }
        self.terms_buf = terms;
        r.add_stats(&mut self.stats);
        crate::payload::refs_of(r, &mut self.payload_refs);
        self.rows += 1;
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }

    pub fn finish(self) -> PartIndex {
        let stats = self.stats.snapshot();
        let postings = self.postings.into_iter().map(|(t, b)| (t, b.rows)).collect();
        let mut index = PartIndex::assemble(
            self.rows,
            TraceIndex::build(self.trace_pairs),
            postings,
            &self.key_of_value,
            self.time_marks,
            stats,
        );
        index.set_payload_refs(self.payload_refs);
        index
    }
}

/// A postings list built by appending rows in increasing order (see
/// [`Ascending`] for why not roaring's `push`).
#[derive(Default)]
struct AppendedRows {
    rows: RoaringBitmap,
    order: Ascending,
}

impl AppendedRows {
    /// Adds `row`, which is no less than any added before: a record
    /// repeating a term adds its row again, which is already there.
    fn push(&mut self, row: u32) {
        self.order.append(&mut self.rows, row);
    }
}

impl PartIndex {
    /// Records the payloads the part's rows refer to.
    pub fn set_payload_refs(&mut self, refs: crate::hash::FastSet<PayloadRef>) {
        let mut refs: Vec<PayloadRef> = refs.into_iter().collect();
        refs.sort_unstable();
        self.payload_refs = refs;
    }

    /// Puts an index together from its pieces, dropping the value postings
    /// of attribute keys with too many distinct values in these `rows`.
    /// `key_of_value` maps each attribute-value term present in `postings`
    /// to its key's exists-term.
    pub(crate) fn assemble(
        rows: u32,
        traces: TraceIndex,
        mut postings: FastMap<Term, RoaringBitmap>,
        key_of_value: &FastMap<Term, Term>,
        time_marks: Vec<u64>,
        stats: PartStats,
    ) -> PartIndex {
        let mut values_per_key: FastMap<Term, Vec<Term>> = Default::default();
        for (value, key) in key_of_value {
            if postings.contains_key(value) {
                values_per_key.entry(*key).or_default().push(*value);
            }
        }
        let mut unindexed_keys = HashSet::new();
        for (key, values) in &values_per_key {
            if values.len() > MAX_VALUES_PER_KEY && values.len() > rows as usize / 10 {
                unindexed_keys.insert(*key);
                for v in values {
                    postings.remove(v);
                }
            }
        }
        PartIndex {
            traces,
            postings,
            unindexed_keys,
            time_marks,
            stats,
            payload_refs: Vec::new(),
        }
    }
}

// ------------------------------------------------------------ persistence

/// The sidecar file: `SKEINIDX`, version 4, zstd postcard of [`Wire`]
/// (version 1 had no payload references, version 2 no per-minute
/// operation statistics, version 3 no per-minute roots, exact maxima or
/// trace counts; such a sidecar is rebuilt from its part, as a damaged one
/// is).
pub const SIDECAR: Envelope = Envelope {
    magic: b"SKEINIDX",
    version: 4,
    what: "part index",
    max_body: 1 << 31,
};

#[derive(Serialize, Deserialize)]
struct Wire {
    traces: TraceIndex,
    postings: Vec<(Term, Vec<u8>)>,
    unindexed_keys: Vec<Term>,
    time_marks: Vec<u64>,
    stats: PartStats,
    payload_refs: Vec<PayloadRef>,
}

/// zstd level of an index rebuilt when a part opens. A part writer uses its
/// part's level: a flush's index is written fast, as compaction soon
/// replaces it.
pub const INDEX_ZSTD_LEVEL: i32 = 3;

pub fn encode(index: &PartIndex, zstd_level: i32) -> Result<Vec<u8>> {
    let mut postings = Vec::with_capacity(index.postings.len());
    for (t, b) in &index.postings {
        let mut bytes = Vec::with_capacity(b.serialized_size());
        b.serialize_into(&mut bytes)
            .map_err(|e| Error::io("serialize postings", e))?;
        postings.push((*t, bytes));
    }
    postings.sort_unstable_by_key(|(t, _)| *t);
    let wire = Wire {
        traces: index.traces.clone(),
        postings,
        unindexed_keys: index.unindexed_keys.iter().copied().collect(),
        time_marks: index.time_marks.clone(),
        stats: index.stats.clone(),
        payload_refs: index.payload_refs.clone(),
    };
    let raw = postcard::to_stdvec(&wire).map_err(|e| Error::Other(format!("encode index: {e}")))?;
    SIDECAR.seal(&raw, zstd_level)
}

pub fn decode(bytes: &[u8]) -> Result<PartIndex> {
    let bad = |d: &str| Error::corrupt(SIDECAR.what, d.to_string());
    let raw = SIDECAR.open(bytes)?;
    let wire: Wire = postcard::from_bytes(&raw).map_err(|e| bad(&e.to_string()))?;
    wire.traces.check().map_err(bad)?;
    if !wire.time_marks.is_sorted() {
        return Err(bad("time marks are not in ascending order"));
    }
    if !wire.payload_refs.is_sorted() {
        return Err(bad("payload references are not in ascending order"));
    }
    let mut postings = FastMap::with_capacity_and_hasher(wire.postings.len(), Default::default());
    for (t, b) in wire.postings {
        let bitmap = RoaringBitmap::deserialize_from(Cursor::new(b)).map_err(|e| bad(&e.to_string()))?;
        postings.insert(t, bitmap);
    }
    Ok(PartIndex {
        traces: wire.traces,
        postings,
        unindexed_keys: wire.unindexed_keys.into_iter().collect(),
        time_marks: wire.time_marks,
        stats: wire.stats,
        payload_refs: wire.payload_refs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_index_finds_rows() {
        let t = TraceIndex::build(vec![(5, 1), (3, 0), (5, 9), (7, 2)]);
        assert_eq!(t.rows_of(5), &[1, 9]);
        assert_eq!(t.rows_of(3), &[0]);
        assert!(t.rows_of(4).is_empty());
        assert_eq!(t.len(), 3);
    }

    proptest::proptest! {
        /// Grouped by trace or as loose pairs, the same rows give the same
        /// index (traces left without rows are absent from both).
        #[test]
        fn traces_grouped_or_paired_build_alike(
            traces in proptest::collection::hash_map(0u128..50, proptest::collection::hash_set(0u32..500, 0..6), 0..20)
        ) {
            let pairs: Vec<(u128, u32)> = traces.iter().flat_map(|(t, rows)| rows.iter().map(move |r| (*t, *r))).collect();
            let grouped = TraceIndex::from_traces(traces.iter().map(|(t, rows)| (*t, rows.iter().copied())));
            proptest::prop_assert_eq!(&grouped, &TraceIndex::build(pairs));
            proptest::prop_assert!(grouped.check().is_ok());
        }
    }

    #[test]
    fn row_range_covers_the_window() {
        let idx = PartIndex {
            time_marks: vec![0, 100, 200, 300],
            ..Default::default()
        };
        let rows = 4 * TIME_MARK_STRIDE - 10;
        // Rows in [1024, 2048) have times in [100, 200].
        let r = idx.row_range(rows, Window::new(150, 160));
        assert!(r.start <= TIME_MARK_STRIDE && r.end >= 2 * TIME_MARK_STRIDE, "{r:?}");
        let all = idx.row_range(rows, Window::ALL);
        assert_eq!(all, 0..rows);
        let none = idx.row_range(rows, Window::new(1000, 2000));
        assert!(none.end - none.start <= TIME_MARK_STRIDE);
    }

    // ------------------------------------------- damaged sidecar files

    use crate::part::Columnar;
    use crate::testdata;
    use proptest::prelude::*;
    use proptest::sample::Index;

    fn index_of<R: Columnar>(records: &[R]) -> PartIndex {
        let mut b = IndexBuilder::default();
        for r in records {
            b.add(r);
        }
        b.finish()
    }

    fn valid_index(which: usize) -> PartIndex {
        match which {
            0 => index_of(&testdata::spans(3, 4)),
            1 => index_of(&testdata::logs(8)),
            _ => index_of(&testdata::metric_points(8)),
        }
    }

    /// A sidecar file around `body` (a zstd frame) with a matching checksum.
    fn framed(body: &[u8]) -> Vec<u8> {
        SIDECAR.wrap(body)
    }

    /// Everything queries ask of a loaded index, rendered for comparison.
    fn exercise(ix: &PartIndex) -> String {
        for id in ix.traces.ids() {
            assert!(ix.traces.contains(*id));
            let _ = ix.traces.rows_of(*id);
        }
        let _ = (ix.traces.rows_of(0), ix.memory_bytes(), ix.row_range(5000, Window::ALL));
        // Sizes, not rows: a few bytes of runs can hold billions of rows.
        let mut postings: Vec<_> = ix
            .postings
            .iter()
            .map(|(t, b)| (*t, b.len(), b.min(), b.max()))
            .collect();
        postings.sort_unstable();
        let mut unindexed: Vec<_> = ix.unindexed_keys.iter().collect();
        unindexed.sort_unstable();
        format!(
            "{:?} {postings:?} {unindexed:?} {:?} {:?}",
            ix.traces, ix.time_marks, ix.stats
        )
    }

    /// Decodes `file`; whatever decodes must be usable and re-encode to the
    /// same index.
    fn decode_checked(file: &[u8]) {
        let Ok(ix) = decode(file) else { return };
        let seen = exercise(&ix);
        let again = decode(&encode(&ix, INDEX_ZSTD_LEVEL).unwrap()).unwrap();
        assert_eq!(exercise(&again), seen);
    }

    /// XORs bytes at the given positions, then maybe truncates.
    fn mutate(mut bytes: Vec<u8>, edits: &[(Index, u8)], cut: Option<Index>) -> Vec<u8> {
        if !bytes.is_empty() {
            for (at, x) in edits {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        bytes
    }

    /// Regression (found by proptest `damaged_sidecars_never_panic` and
    /// fuzz/part_index): a sidecar whose checksum matches but whose trace
    /// index is out of shape decoded, and then lookups missed traces (ids
    /// out of order) or sliced out of bounds (offsets past the rows).
    #[test]
    fn misshapen_trace_index_is_rejected() {
        let reject = |traces: TraceIndex, what: &str| {
            let ix = PartIndex {
                traces,
                ..Default::default()
            };
            let err = decode(&encode(&ix, INDEX_ZSTD_LEVEL).unwrap()).unwrap_err();
            assert!(err.to_string().contains(what), "{err}");
        };
        let good = TraceIndex::build(vec![(5, 1), (3, 0), (5, 9), (7, 2)]);
        let mut t = good.clone();
        t.ids.swap(0, 1);
        reject(t, "trace ids are not in ascending order");
        let mut t = good.clone();
        t.offsets[1] = 100;
        reject(t, "trace offsets do not match the rows");
        let mut t = good.clone();
        t.offsets.pop();
        reject(t, "trace offsets do not match the rows");
        let mut t = good.clone();
        t.rows.swap(1, 2);
        reject(t, "a trace's rows are not in ascending order");
        let ix = PartIndex {
            time_marks: vec![5, 3],
            ..Default::default()
        };
        let err = decode(&encode(&ix, INDEX_ZSTD_LEVEL).unwrap()).unwrap_err();
        assert!(err.to_string().contains("time marks"), "{err}");
        // Empty indexes, built or default, load.
        for traces in [TraceIndex::build(Vec::new()), TraceIndex::default()] {
            let ix = PartIndex {
                traces,
                ..Default::default()
            };
            decode(&encode(&ix, INDEX_ZSTD_LEVEL).unwrap()).unwrap();
        }
        // The fuzzer's first find, `[0x0a]`: an empty body with a matching
        // checksum (it used to reserve 2 GiB before failing).
        assert!(decode(&framed(&[])).is_err());
    }

    #[test]
    fn sidecars_round_trip() {
        for which in 0..3 {
            let ix = valid_index(which);
            let back = decode(&encode(&ix, INDEX_ZSTD_LEVEL).unwrap()).unwrap();
            assert_eq!(exercise(&back), exercise(&ix));
        }
        let err = decode(b"SKEINIDX\x04\0\0\0\0\0\0\0junk").unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        // A sidecar of the previous version is refused (and so rebuilt
        // from its part when the part opens).
        let old = Envelope { version: 3, ..SIDECAR }.seal(b"", 1).unwrap();
        let err = decode(&old).unwrap_err();
        assert!(err.to_string().contains("version 3 (expected 4)"), "{err}");
    }

    /// The payloads a part's rows refer to are in its index, sorted, and
    /// survive the sidecar round trip.
    #[test]
    fn payload_references_are_indexed() {
        let mut logs = testdata::logs(4);
        let (a, b) = ("a".repeat(5000), "b".repeat(5000));
        logs[0].body = crate::payload::ref_value(PayloadRef::of(a.as_bytes()), &a);
        logs[1].body = crate::payload::ref_value(PayloadRef::of(b.as_bytes()), &b);
        logs[2].body = logs[0].body.clone();
        let ix = index_of(&logs);
        let mut want = vec![PayloadRef::of(a.as_bytes()), PayloadRef::of(b.as_bytes())];
        want.sort();
        assert_eq!(ix.payload_refs, want);
        let back = decode(&encode(&ix, INDEX_ZSTD_LEVEL).unwrap()).unwrap();
        assert_eq!(back.payload_refs, want);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
            decode_checked(&data);
            // The same bytes past the checksum: as the zstd body, and as
            // the postcard inside it.
            decode_checked(&framed(&data));
            decode_checked(&framed(&zstd::bulk::compress(&data, 1).unwrap()));
        }

        #[test]
        fn damaged_sidecars_never_panic(
            which in 0..3usize,
            layer in 0..3usize,
            edits in prop::collection::vec((any::<Index>(), 1..=255u8), 1..4),
            cut in prop::option::of(any::<Index>()),
        ) {
            let file = encode(&valid_index(which), INDEX_ZSTD_LEVEL).unwrap();
            let damaged = match layer {
                // The file as stored: the checksum catches almost everything.
                0 => mutate(file, &edits, cut),
                // The zstd body, with a checksum that matches it.
                1 => framed(&mutate(file[Envelope::HEADER_LEN..].to_vec(), &edits, cut)),
                // The postcard bytes, in a well-formed frame.
                _ => {
                    let raw = zstd::bulk::decompress(&file[Envelope::HEADER_LEN..], 1 << 20).unwrap();
                    framed(&zstd::bulk::compress(&mutate(raw, &edits, cut), 1).unwrap())
                }
            };
            decode_checked(&damaged);
        }
    }
}
