//! Newest-first search across the hot tier and parts, with a lazy k-way
//! merge: each source yields its matches in `(time, key)` descending order,
//! and a source is only read when its best possible next match could be the
//! next result. A part's candidate rows are bounded in time by the sidecar's
//! time marks, so parts older than the results found so far are never
//! decoded.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::explain::{Explain, SourceExplain};
use super::filter::{Cursor, RecordQuery, TermGroup};
use super::window::Window;
use crate::error::Result;
use crate::hot::MemTable;
use crate::part::index::TIME_MARK_STRIDE;
use crate::part::{Columnar, Part};
use crate::record::{Record, RecordKey, Signal};
use crate::text_index;

/// One place records can come from, newest first in a source list.
pub enum Source<R: Record> {
    Mem(Arc<parking_lot::RwLock<MemTable<R>>>),
    Part(Arc<Part>),
}

impl<R: Record> Clone for Source<R> {
    fn clone(&self) -> Self {
        match self {
            Source::Mem(m) => Source::Mem(m.clone()),
            Source::Part(p) => Source::Part(p.clone()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Hit<R> {
    pub time: u64,
    pub key: RecordKey,
    pub record: Arc<R>,
    source: usize,
}

/// Results of a search.
#[derive(Debug)]
pub struct SearchResult<R> {
    pub records: Vec<Arc<R>>,
    /// Set when more results may follow.
    pub next_cursor: Option<Cursor>,
    pub explain: Explain,
}

/// Rows a part stream still has to visit, newest first.
enum Pending {
    /// Candidate rows, visited from the last: never listed out, since a
    /// common word's candidates can be most of a part while a page needs a
    /// hundred of them.
    Rows {
        rows: RoaringBitmap,
        len: u64,
    },
    Range {
        lo: u32,
        next: u32,
    },
}

impl Pending {
    fn peek(&self, pos: usize) -> Option<u32> {
        match self {
            Pending::Rows { rows, len } => rows.select(u32::try_from(len.checked_sub(pos as u64 + 1)?).ok()?),
            Pending::Range { lo, next } => {
                let r = next.checked_sub(pos as u32 + 1)?;
                (r >= *lo).then_some(r)
            }
        }
    }
}

struct PartStream {
    part: Arc<Part>,
    /// The rows to visit next, newest last; `pos` of them are visited.
    pending: Pending,
    /// The rows still to be narrowed by the text index, below `pending`'s.
    text: Option<TextWindows>,
    pos: usize,
    chunk: usize,
}

/// A part's rows that the text index narrows a window at a time, newest
/// first, as the stream reaches them: a page of a common word's newest hits
/// needs the candidates of a few thousand rows, and making those of a whole
/// part of ten million rows took ~70 ms.
struct TextWindows {
    /// The rows the other filters leave; those below `below` are still to
    /// be narrowed.
    bound: Pending,
    /// No row below this is in `bound`.
    lo: u32,
    below: u32,
    /// Rows in the next window; each is larger than the last (the postings
    /// are read again for each, so their number stays logarithmic).
    size: u32,
}

/// Rows in a part's first text window.
const FIRST_TEXT_WINDOW: u32 = 4096;
/// The largest text window.
const MAX_TEXT_WINDOW: u32 = 1 << 24;

impl TextWindows {
    fn new(bound: Pending) -> TextWindows {
        let (lo, below) = match &bound {
            Pending::Rows { rows, .. } => (rows.min().unwrap_or(0), rows.max().map_or(0, |m| m + 1)),
            Pending::Range { lo, next } => (*lo, (*next).max(*lo)),
        };
        TextWindows {
            bound,
            lo,
            below,
            size: FIRST_TEXT_WINDOW,
        }
    }

    /// The highest row still to be narrowed.
    fn top(&self) -> Option<u32> {
        (self.below > self.lo).then(|| self.below - 1)
    }

    /// The next window's candidates (in `bound`); `None` once every row was
    /// narrowed. An index that fails narrows nothing.
    fn next(&mut self, part: &Part, q: &crate::text::TextQuery) -> Option<RoaringBitmap> {
        let top = self.top()?;
        let window = self.below.saturating_sub(self.size).max(self.lo)..top + 1;
        self.below = window.start;
        self.size = self.size.saturating_mul(4).min(MAX_TEXT_WINDOW);
        let text = part.text_index().map(|ti| ti.search_within(q, window.clone()));
        let mut rows = match text {
            Some(Ok(rows)) => rows,
            failed => {
                if let Some(Err(e)) = failed {
                    tracing::warn!("full-text index of part {} not used: {e}", part.meta.id);
                }
                let mut all = RoaringBitmap::new();
                all.insert_range(window.clone());
                all
            }
        };
        // A range bound holds the whole window already.
        if let Pending::Rows { rows: bound, .. } = &self.bound {
            rows &= bound;
        }
        Some(rows)
    }
}

impl PartStream {
    /// The next row to visit, narrowing windows of rows by the text index
    /// until one holds a candidate; `None` when no row is left.
    fn next_row(&mut self, q: Option<&crate::text::TextQuery>) -> Option<u32> {
        loop {
            if let Some(r) = self.pending.peek(self.pos) {
                return Some(r);
            }
            let (windows, q) = (self.text.as_mut()?, q?);
            let rows = windows.next(&self.part, q)?;
            self.pending = Pending::Rows { len: rows.len(), rows };
            self.pos = 0;
        }
    }

    /// The highest row that may still be visited (none: the stream is
    /// done), without narrowing anything.
    fn top(&self) -> Option<u32> {
        self.pending
            .peek(self.pos)
            .or_else(|| self.text.as_ref().and_then(TextWindows::top))
    }
}

enum StreamKind<R: Record> {
    /// Hits found already (none: a pruned part).
    Mem(Vec<Hit<R>>),
    Hot(HotStream<R>),
    Part(PartStream),
}

/// A hot table's candidates, checked newest first a chunk at a time.
struct HotStream<R> {
    table: Arc<parking_lot::RwLock<MemTable<R>>>,
    /// `(time, row)` of the candidates; `order[pos..]` are still to check,
    /// in no order.
    order: Vec<(u64, u32)>,
    pos: usize,
    /// Above the time of every candidate still to check.
    bound: u64,
    chunk: usize,
}

impl<R> HotStream<R> {
    /// Takes the newest `chunk` candidates still to check, and every other
    /// one with the oldest time among them (so that all that remain are
    /// older than all taken), in no order; lowers `bound`.
    fn take_newest(&mut self) -> std::ops::Range<usize> {
        let rest = &mut self.order[self.pos..];
        let mut take = self.chunk.min(rest.len());
        if take == 0 {
            return self.pos..self.pos;
        }
        if take < rest.len() {
            rest.select_nth_unstable_by(take - 1, |a, b| b.0.cmp(&a.0));
            let oldest = rest[take - 1].0;
            let mut end = take;
            for j in take..rest.len() {
                if rest[j].0 == oldest {
                    rest.swap(end, j);
                    end += 1;
                }
            }
            take = end;
            self.bound = oldest;
        }
        let start = self.pos;
        self.pos += take;
        self.chunk = (self.chunk * 2).min(4096);
        start..self.pos
    }
}

struct Stream<R: Record> {
    kind: StreamKind<R>,
    buffer: VecDeque<Hit<R>>,
    explain: SourceExplain,
}

fn in_bounds(time: u64, key: RecordKey, window: Window, cursor: Option<Cursor>) -> bool {
    window.contains(time) && cursor.is_none_or(|c| (time, key) < (c.time, c.key))
}

/// Intersects posting groups; `None` means "no narrowing".
pub(crate) fn candidates(
    groups: &[TermGroup],
    posting: impl Fn(u64) -> Option<RoaringBitmap>,
    unindexed: impl Fn(u64) -> bool,
    used: &mut Vec<String>,
) -> Option<RoaringBitmap> {
    let mut acc: Option<RoaringBitmap> = None;
    for g in groups {
        if g.attr_key.is_some_and(&unindexed) {
            continue;
        }
        let mut union = RoaringBitmap::new();
        for t in &g.terms {
            if let Some(b) = posting(*t) {
                union |= b;
            }
        }
        used.push(format!(
            "postings({} term{})",
            g.terms.len(),
            if g.terms.len() == 1 { "" } else { "s" }
        ));
        acc = Some(match acc {
            None => union,
            Some(a) => a & union,
        });
        if acc.as_ref().is_some_and(RoaringBitmap::is_empty) {
            break;
        }
    }
    acc
}

/// Rows in both candidate sets; `None` is "no narrowing".
pub(crate) fn both(a: Option<RoaringBitmap>, b: Option<RoaringBitmap>) -> Option<RoaringBitmap> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a & b),
        (a, b) => a.or(b),
    }
}

/// A bitmap of rows known to ascend.
fn ascending_bitmap(rows: &[u32]) -> RoaringBitmap {
    RoaringBitmap::from_sorted_iter(rows.iter().copied()).unwrap_or_else(|_| rows.iter().copied().collect())
}

impl<R: Columnar> Stream<R> {
    fn mem<Q: RecordQuery<R>>(
        table_lock: Arc<parking_lot::RwLock<MemTable<R>>>,
        q: &Q,
        indexes: &mut Vec<String>,
    ) -> Self {
        let guard = table_lock.read();
        let table = &*guard;
        let window = q.window();
        let cursor = q.cursor();
        let explain = SourceExplain::new("hot", None);
        let cands = candidates(
            &q.term_groups(),
            |t| Some(table.posting(t).map(ascending_bitmap).unwrap_or_default()),
            |_| false,
            indexes,
        );
        let trace_rows: Option<RoaringBitmap> = q
            .trace()
            .map(|t| table.trace_rows(t.as_u128()).iter().copied().collect());
        let text_rows = match (q.text(), table.text_index()) {
            (Some(tq), Some(ti)) => {
                indexes.push("text index".into());
                Some(text_index::hot_candidates(ti, tq, table.total_rows()))
            }
            _ => None,
        };
        let cands = both(both(cands, trace_rows), text_rows);
        // Candidates live at this moment, in the window by time; the rest of
        // the predicate is decided lazily, newest first, as the merge asks
        // for more (a page of 100 need not check a whole tier).
        let mut order = Vec::new();
        let mut add = |row: u32| {
            let time = table.time(row);
            if table.is_live(row) && window.contains(time) && cursor.is_none_or(|c| time <= c.time) {
                order.push((time, row));
            }
        };
        match &cands {
            Some(b) => b.iter().for_each(&mut add),
            None => (0..table.total_rows()).for_each(&mut add),
        }
        drop(guard);
        Stream {
            kind: StreamKind::Hot(HotStream {
                table: table_lock,
                order,
                pos: 0,
                bound: u64::MAX,
                chunk: (q.limit() + 1).clamp(16, 257),
            }),
            buffer: VecDeque::new(),
            explain,
        }
    }

    fn part<Q: RecordQuery<R>>(part: Arc<Part>, q: &Q, indexes: &mut Vec<String>) -> Option<Self> {
        let mut window = q.window();
        if let Some(c) = q.cursor() {
            window = window.ending_by(c.time.saturating_add(1));
        }
        let mut explain = SourceExplain::new("part", Some(part.meta.id));
        if part.misses(window) {
            explain.pruned = Some("time range".into());
            return Some(Stream {
                kind: StreamKind::Mem(Vec::new()),
                buffer: VecDeque::new(),
                explain,
            });
        }
        let range = part
            .index
            .row_range(part.rows(), window.starting_by(part.meta.min_time));
        let ix = &part.index;
        let cands = candidates(
            &q.term_groups(),
            |t| Some(ix.posting(t).cloned().unwrap_or_default()),
            |k| ix.unindexed_keys.contains(&k),
            indexes,
        );
        let trace_rows: Option<RoaringBitmap> = q
            .trace()
            .map(|t| ix.traces.rows_of(t.as_u128()).iter().copied().collect());
        // The text index narrows as the part is read, newest rows first
        // (see `TextWindows`), not now: a page of newest hits rarely reaches
        // the older parts, nor the older rows of one.
        let text_deferred = q.text().is_some() && part.text_index().is_some();
        if text_deferred {
            indexes.push("text index".into());
        }
        let cands = both(cands, trace_rows);
        let pending = match cands {
            Some(mut b) => {
                b.remove_range(..range.start);
                b.remove_range(range.end..);
                if b.is_empty() {
                    explain.pruned = Some("index".into());
                }
                Pending::Rows { len: b.len(), rows: b }
            }
            None => Pending::Range {
                lo: range.start,
                next: range.end,
            },
        };
        let (pending, text) = if text_deferred {
            let none = Pending::Rows {
                rows: RoaringBitmap::new(),
                len: 0,
            };
            (none, Some(TextWindows::new(pending)))
        } else {
            (pending, None)
        };
        Some(Stream {
            kind: StreamKind::Part(PartStream {
                part,
                pending,
                text,
                pos: 0,
                // One more than the limit: telling whether a next page
                // exists must not cost a second, doubled read.
                chunk: (q.limit() + 1).clamp(16, 257),
            }),
            buffer: VecDeque::new(),
            explain,
        })
    }

    /// Upper bound of the next hit's time, exact when one is buffered.
    fn head(&self) -> Option<(u64, RecordKey, bool)> {
        if let Some(h) = self.buffer.front() {
            return Some((h.time, h.key, true));
        }
        match &self.kind {
            StreamKind::Mem(hits) => hits.first().map(|_| {
                (
                    u64::MAX,
                    RecordKey {
                        hi: u128::MAX,
                        lo: u64::MAX,
                    },
                    false,
                )
            }),
            StreamKind::Hot(hs) => (hs.pos < hs.order.len()).then_some((
                hs.bound,
                RecordKey {
                    hi: u128::MAX,
                    lo: u64::MAX,
                },
                false,
            )),
            StreamKind::Part(ps) => {
                let row = ps.top()?;
                let mark = (row / TIME_MARK_STRIDE + 1) as usize;
                let bound = ps
                    .part
                    .index
                    .time_marks
                    .get(mark)
                    .copied()
                    .unwrap_or(ps.part.meta.max_time);
                Some((
                    bound,
                    RecordKey {
                        hi: u128::MAX,
                        lo: u64::MAX,
                    },
                    false,
                ))
            }
        }
    }

    /// Loads more hits into the buffer.
    fn fill<Q: RecordQuery<R>>(&mut self, source: usize, q: &Q) -> Result<()> {
        match &mut self.kind {
            StreamKind::Mem(hits) => {
                self.buffer.extend(hits.drain(..));
                Ok(())
            }
            StreamKind::Hot(hs) => {
                let taken = hs.take_newest();
                let table = hs.table.read();
                let (window, cursor) = (q.window(), q.cursor());
                let mut hits = Vec::new();
                for &(time, row) in &hs.order[taken] {
                    self.explain.rows_examined += 1;
                    let r = table.row(row);
                    let key = r.key();
                    if in_bounds(time, key, window, cursor) && q.matches(r) {
                        hits.push(Hit {
                            time,
                            key,
                            record: r.clone(),
                            source,
                        });
                    }
                }
                hits.sort_unstable_by_key(|h| std::cmp::Reverse((h.time, h.key)));
                self.buffer.extend(hits);
                Ok(())
            }
            StreamKind::Part(ps) => {
                let mut rows = Vec::with_capacity(ps.chunk);
                while rows.len() < ps.chunk {
                    match ps.next_row(q.text()) {
                        Some(r) => rows.push(r),
                        None => break,
                    }
                    ps.pos += 1;
                }
                ps.chunk = (ps.chunk * 2).min(4096);
                if rows.is_empty() {
                    if ps.text.is_some() && self.explain.rows_examined == 0 {
                        // The text index left no candidate in the part.
                        self.explain.pruned = Some("index".into());
                    }
                    return Ok(());
                }
                rows.reverse();
                self.explain.rows_examined += rows.len() as u64;
                if q.has_prefilter() {
                    let batches = ps.part.read_row_columns(q.prefilter_columns(), &rows)?;
                    let mut keep = Vec::with_capacity(rows.len());
                    let mut i = 0;
                    for b in &batches {
                        for r in 0..b.num_rows() {
                            if q.prefilter(b, r) {
                                keep.push(rows[i]);
                            }
                            i += 1;
                        }
                    }
                    rows = keep;
                }
                self.explain.rows_decoded += rows.len() as u64;
                let recs: Vec<R> = ps.part.read_rows(&rows)?;
                let (window, cursor) = (q.window(), q.cursor());
                let mut hits: Vec<Hit<R>> = recs
                    .into_iter()
                    .filter(|r| in_bounds(r.time(), r.key(), window, cursor) && q.matches(r))
                    .map(|r| Hit {
                        time: r.time(),
                        key: r.key(),
                        record: Arc::new(r),
                        source,
                    })
                    .collect();
                hits.sort_unstable_by_key(|h| std::cmp::Reverse((h.time, h.key)));
                self.buffer.extend(hits);
                Ok(())
            }
        }
    }
}

/// Is there a newer version of `hit`'s span in a newer source? (Only spans
/// can have versions: logs and metric points are keyed by content.)
struct Shadows<'a, R: Record> {
    sources: &'a [Source<R>],
    part_traces: HashMap<(usize, u128), HashSet<u64>>,
}

impl<R: Columnar> Shadows<'_, R> {
    fn shadowed(&mut self, hit: &Hit<R>) -> Result<bool> {
        if R::SIGNAL != Signal::Spans {
            return Ok(false);
        }
        for (i, s) in self.sources[..hit.source].iter().enumerate() {
            match s {
                Source::Mem(m) => {
                    if m.read().row_of(&hit.key).is_some() {
                        return Ok(true);
                    }
                }
                Source::Part(p) => {
                    let trace = hit.key.hi;
                    if !p.index.traces.contains(trace) {
                        continue;
                    }
                    if let std::collections::hash_map::Entry::Vacant(e) = self.part_traces.entry((i, trace)) {
                        let mut rows = p.index.traces.rows_of(trace).to_vec();
                        rows.sort_unstable();
                        let recs: Vec<R> = p.read_rows(&rows)?;
                        e.insert(recs.iter().map(|r| r.key().lo).collect());
                    }
                    if self.part_traces[&(i, trace)].contains(&hit.key.lo) {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }
}

/// Runs a search over `sources` (newest first).
pub fn search<R: Columnar, Q: RecordQuery<R>>(sources: &[Source<R>], q: &Q) -> Result<SearchResult<R>> {
    let limit = q.limit().max(1);
    let mut indexes = Vec::new();
    let mut streams: Vec<Stream<R>> = Vec::with_capacity(sources.len());
    if q.text().is_some() {
        for s in sources {
            if let Source::Mem(m) = s {
                MemTable::catch_up_text(m, q.payload_text());
            }
        }
    }
    for s in sources {
        match s {
            Source::Mem(m) => streams.push(Stream::mem(m.clone(), q, &mut indexes)),
            Source::Part(p) => streams.extend(Stream::part(p.clone(), q, &mut indexes)),
        }
    }
    let mut shadows = Shadows {
        sources,
        part_traces: HashMap::new(),
    };
    let mut out: Vec<Arc<R>> = Vec::new();
    let mut seen: HashSet<RecordKey> = HashSet::new();
    let mut last: Option<(u64, RecordKey)> = None;
    let mut more = false;
    loop {
        let best = streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.head().map(|h| (h, i)))
            // Ties go to bounds (to be resolved first), then to newer sources.
            .max_by(|((ta, ka, ea), ia), ((tb, kb, eb), ib)| {
                (ta, ka, !ea, std::cmp::Reverse(ia)).cmp(&(tb, kb, !eb, std::cmp::Reverse(ib)))
            });
        let Some(((_, _, exact), i)) = best else { break };
        if !exact {
            streams[i].fill(i, q)?;
            continue;
        }
        if out.len() >= limit {
            more = true;
            break;
        }
        let Some(hit) = streams[i].buffer.pop_front() else {
            continue;
        };
        // A newer source's copy was emitted already, or exists and did not
        // match: either way this older copy must not be returned.
        if seen.contains(&hit.key) || shadows.shadowed(&hit)? {
            continue;
        }
        seen.insert(hit.key);
        last = Some((hit.time, hit.key));
        out.push(hit.record);
    }
    let mut explain = Explain::new(R::SIGNAL);
    indexes.sort();
    indexes.dedup();
    explain.index_used = indexes;
    for s in streams {
        explain.add(s.explain);
    }
    Ok(SearchResult {
        next_cursor: if more {
            last.map(|(time, key)| Cursor { time, key })
        } else {
            None
        },
        records: out,
        explain,
    })
}

/// Calls `f` with every record of `sources` that matches `q` (its limit and
/// cursor aside), in no particular order: for counting matches, where
/// [`search`]'s newest-first merge is wasted work. Sources are narrowed by
/// the same indexes and every candidate is re-checked by `q.matches`;
/// memory is one chunk of decoded rows at a time, never the matches.
///
/// Records are visited as stored: a span replaced by a newer version in a
/// newer source would be visited twice, so this is for logs and metric
/// points, which are keyed by their content and have no versions.
pub fn visit_matches<R: Columnar, Q: RecordQuery<R>>(
    sources: &[Source<R>],
    q: &Q,
    f: &mut dyn FnMut(&R),
) -> Result<Explain> {
    debug_assert!(R::SIGNAL != Signal::Spans, "spans have versions: use search");
    if q.text().is_some() {
        for s in sources {
            if let Source::Mem(m) = s {
                MemTable::catch_up_text(m, q.payload_text());
            }
        }
    }
    let mut indexes = Vec::new();
    let mut explain = Explain::new(R::SIGNAL);
    for (i, s) in sources.iter().enumerate() {
        let stream = match s {
            Source::Mem(m) => Some(Stream::mem(m.clone(), q, &mut indexes)),
            Source::Part(p) => Stream::part(p.clone(), q, &mut indexes),
        };
        let Some(mut stream) = stream else { continue };
        while stream.head().is_some() {
            stream.fill(i, q)?;
            for hit in stream.buffer.drain(..) {
                f(&hit.record);
            }
        }
        explain.add(stream.explain);
    }
    indexes.sort();
    indexes.dedup();
    explain.index_used = indexes;
    Ok(explain)
}

/// How many rows [`trace_records`] would look at for `trace`, from the
/// indexes alone (replaced versions included, so never less than the
/// records it returns).
pub fn trace_rows<R: Columnar>(sources: &[Source<R>], trace: u128) -> usize {
    sources
        .iter()
        .map(|s| match s {
            Source::Mem(m) => m.read().trace_rows(trace).len(),
            Source::Part(p) => p.index.traces.rows_of(trace).len(),
        })
        .sum()
}

/// Every record of one trace across sources, newest version of each key.
pub fn trace_records<R: Columnar>(sources: &[Source<R>], trace: u128, explain: &mut Explain) -> Result<Vec<Arc<R>>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut ex = SourceExplain::new("hot", None);
                for &row in m.trace_rows(trace) {
                    ex.rows_examined += 1;
                    if m.is_live(row) {
                        let r = m.row(row);
                        if seen.insert(r.key()) {
                            out.push(r.clone());
                        }
                    }
                }
                explain.add(ex);
            }
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                let rows = p.index.traces.rows_of(trace);
                if rows.is_empty() {
                    ex.pruned = Some("trace index".into());
                    explain.add(ex);
                    continue;
                }
                let mut rows = rows.to_vec();
                rows.sort_unstable();
                ex.rows_examined = rows.len() as u64;
                ex.rows_decoded = rows.len() as u64;
                for r in p.read_rows::<R>(&rows)? {
                    if seen.insert(r.key()) {
                        out.push(Arc::new(r));
                    }
                }
                explain.add(ex);
            }
        }
    }
    explain.index_used = vec!["trace index".into()];
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Chunks come newest first: every candidate taken is at least as
        /// new as every one left, ties included, and none is lost or taken
        /// twice; the bound stays above what is left.
        #[test]
        fn hot_chunks_come_newest_first(times in prop::collection::vec(0u64..6, 0..300), chunk in 1usize..40) {
            let mut hs = HotStream::<skein_model::LogRecord> {
                table: Default::default(),
                order: times.iter().enumerate().map(|(i, &t)| (t, i as u32)).collect(),
                pos: 0,
                bound: u64::MAX,
                chunk,
            };
            let mut seen = Vec::new();
            while hs.pos < hs.order.len() {
                let taken = hs.take_newest();
                prop_assert!(!taken.is_empty());
                let oldest_taken = hs.order[taken.clone()].iter().map(|e| e.0).min().unwrap();
                for &(t, _) in &hs.order[hs.pos..] {
                    prop_assert!(t < oldest_taken, "{} left behind a chunk reaching {}", t, oldest_taken);
                    prop_assert!(t <= hs.bound);
                }
                seen.extend(hs.order[taken].iter().map(|e| e.1));
            }
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..times.len() as u32).collect::<Vec<_>>());
        }
    }
}
