//! A streaming scan of metric points by name, attribute filters and time
//! window, for the PromQL evaluator (`skein-promql`), which groups the
//! points into series itself.
//!
//! Nothing is collected here: each point is handed to the caller as it is
//! decoded, a part at most [`CHUNK`] rows at a time (a few such batches in
//! flight when decoding is shared among threads), so memory is the
//! caller's (the series a query needs) and one key per series met, not the
//! scan's. The name and attribute postings only narrow: every point's name,
//! attributes and time are checked again before the caller sees it.
//!
//! A part's rows are first read as samples: time, value, flags and series
//! key only ([`sample_rows`], no string). The first row of each series key
//! is read whole: a number series (gauge or sum) is checked and described
//! to the caller ([`SeriesSink::series`]), and its other rows carry the
//! caller's answer, so a series' attributes, resource and scope are parsed
//! once per scan, not once per point; the part's memo
//! (`part::series_memo`) keeps it for later scans, which skip even that
//! read. The points of other series, of parts written before series keys,
//! and of the hot tier are handed over whole.
//!
//! A point may be seen twice when the same record sits in two sources at
//! once (a frozen hot table and the part it was just flushed to): metric
//! points are keyed by their content, so both copies are equal, and the
//! caller keeps one sample per series and timestamp.

use roaring::RoaringBitmap;
use skein_model::metric::Number;
use skein_model::{MetricPoint, PointValue};

use super::filter::AttrFilter;
use super::search::{Source, both, candidates};
use super::window::Window;
use crate::error::Result;
use crate::hash::{FastMap, FastSet};
use crate::part::Part;
use crate::part::columns::metrics::{SAMPLE_COLUMNS, SampleRow, sample_rows};
use crate::record::Record;
use crate::terms;

/// Rows decoded from a part per read.
const CHUNK: usize = 4096;

/// What [`scan_series`] hands its caller.
pub trait SeriesSink {
    /// A point handed over whole: from the hot tier, from a part written
    /// before series keys, or not a number point.
    fn point(&mut self, p: &MetricPoint);
    /// A point of a part's number series, the first time the scan meets
    /// the series there: the handle its samples will carry, or `None` to
    /// skip them. The series' points share this one's metric name, kind
    /// and unit, attributes, resource attributes and scope, all that `key`
    /// hashes (`stats::series_key`, the same in every part); its time and
    /// value are not the series' samples.
    fn series(&mut self, key: u64, p: &MetricPoint) -> Option<u32>;
    /// A sample of a series [`SeriesSink::series`] kept.
    fn sample(&mut self, series: u32, time_unix_nano: u64, value: Option<Number>, flags: u32);
}

/// Hands `sink` every point in `w` whose metric name is one of `names`
/// (`None`: every metric) and that every filter matches, across `sources`;
/// returns the rows examined.
pub fn scan_series(
    sources: &[Source<MetricPoint>],
    names: Option<&[String]>,
    filters: &[AttrFilter],
    w: Window,
    sink: &mut dyn SeriesSink,
) -> Result<u64> {
    scan_split(sources, names, filters, w, sink, Split::machine())
}

/// [`scan_series`], a part's decoding split as `split` says.
fn scan_split(
    sources: &[Source<MetricPoint>],
    names: Option<&[String]>,
    filters: &[AttrFilter],
    w: Window,
    sink: &mut dyn SeriesSink,
    split: Split,
) -> Result<u64> {
    let want = Want { w, names, filters };
    let groups: Vec<_> = filters.iter().filter_map(AttrFilter::group_without_events).collect();
    let mut used = Vec::new();
    let mut examined = 0u64;
    let mut known = FastMap::default();
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut visit = |row: u32| {
                    examined += 1;
                    if m.is_live(row) && w.contains(m.time(row)) {
                        let p = m.row(row);
                        if want.point(p) {
                            sink.point(p);
                        }
                    }
                };
                let by_name = names.map(|ns| {
                    let mut rows = RoaringBitmap::new();
                    for n in ns {
                        if let Some(r) = m.posting(terms::name(n)) {
                            rows.extend(r.iter().copied());
                        }
                    }
                    rows
                });
                let by_attrs = candidates(
                    &groups,
                    |t| Some(m.posting(t).map(|r| r.iter().copied().collect()).unwrap_or_default()),
                    |_| false,
                    &mut used,
                );
                match both(by_name, by_attrs) {
                    Some(rows) => rows.iter().for_each(&mut visit),
                    None => (0..m.total_rows()).for_each(&mut visit),
                }
            }
            Source::Part(p) => {
                if p.misses(w) {
                    continue;
                }
                let range = p.index.row_range(p.rows(), w.starting_by(p.meta.min_time));
                let mut rows = match names {
                    Some(ns) => {
                        let mut rows = RoaringBitmap::new();
                        for n in ns {
                            if let Some(b) = p.index.posting(terms::name(n)) {
                                rows |= b;
                            }
                        }
                        rows
                    }
                    None => {
                        let mut all = RoaringBitmap::new();
                        all.insert_range(range.clone());
                        all
                    }
                };
                if let Some(c) = candidates(
                    &groups,
                    |t| Some(p.index.posting(t).cloned().unwrap_or_default()),
                    |k| p.index.unindexed_keys.contains(&k),
                    &mut used,
                ) {
                    rows &= c;
                }
                rows.remove_range(..range.start);
                rows.remove_range(range.end..);
                examined += rows.len();
                read_part(p, &rows, &want, sink, &mut known, split)?;
            }
        }
    }
    Ok(examined)
}

/// What a scan hands over: points in its window, of its metric names,
/// that every filter matches.
struct Want<'a> {
    w: Window,
    names: Option<&'a [String]>,
    filters: &'a [AttrFilter],
}

impl Want<'_> {
    fn point(&self, p: &MetricPoint) -> bool {
        self.w.contains(p.time()) && self.series(p)
    }

    /// Whether the points of `p`'s series are wanted, their times aside:
    /// what a series' points share decides.
    fn series(&self, p: &MetricPoint) -> bool {
        self.names.is_none_or(|ns| ns.iter().any(|n| *n == p.metric.name))
            && self.filters.iter().all(|f| f.matches_point(p))
    }
}

/// What a scan knows of a series key once it has read the key's first
/// point whole.
#[derive(Debug, Clone, Copy)]
enum Known {
    /// A number series the sink takes samples of, by its handle.
    Samples(u32),
    /// A number series the sink skips, or one the names or filters leave
    /// out.
    Skipped,
    /// Not a number series: its points are read whole.
    Whole,
}

/// How a part's read shares its decoding among threads.
#[derive(Debug, Clone, Copy)]
struct Split {
    threads: usize,
    /// Rows a read must select to be shared: below this, starting threads
    /// costs more than they save.
    min_rows: u64,
}

impl Split {
    /// A thread per core, for reads of 256k rows or more.
    fn machine() -> Split {
        Split {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            min_rows: 1 << 18,
        }
    }
}

/// Sample rows decoded from a part, with their row numbers.
type Decoded = (Vec<u32>, Vec<SampleRow>);

/// Hands `sink` the points of `rows` of part `p` that `want` takes:
/// number points as samples of the series in `known` (by series
/// key), which grows by the series met here; other points whole.
///
/// Decoding the sample columns is most of the work of a large read, so
/// for one it is shared among threads, each decoding the rows of some
/// row groups, while this thread hands their batches to `sink` (which
/// is not shared). A batch's order does not matter: a sink gets samples,
/// not a sequence, and `known` holds whichever row of a key came first.
fn read_part(
    p: &Part,
    rows: &RoaringBitmap,
    want: &Want,
    sink: &mut dyn SeriesSink,
    known: &mut FastMap<u64, Known>,
    split: Split,
) -> Result<()> {
    let Some(shares) = shares(p, rows, split) else {
        for batch in decode(p, rows)? {
            let (ids, samples) = batch?;
            hand_over(p, &ids, &samples, want, sink, known)?;
        }
        return Ok(());
    };
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Decoded>>(2 * shares.len());
        for share in &shares {
            let tx = tx.clone();
            scope.spawn(move || {
                let batches = match decode(p, share) {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                for b in batches {
                    let failed = b.is_err();
                    // A closed channel: the reader stopped on an error.
                    if tx.send(b).is_err() || failed {
                        return;
                    }
                }
            });
        }
        drop(tx);
        // Returning early drops the receiver, so every decoder stops at
        // its next batch and the scope's end waits for nothing long.
        for batch in rx {
            let (ids, samples) = batch?;
            hand_over(p, &ids, &samples, want, sink, known)?;
        }
        Ok(())
    })
}

/// `rows` cut at row group boundaries into one share per thread, of about
/// as many rows each; `None` when a read this small is best left whole.
fn shares(p: &Part, rows: &RoaringBitmap, split: Split) -> Option<Vec<RoaringBitmap>> {
    if split.threads < 2 || rows.len() < split.min_rows.max(1) {
        return None;
    }
    let per_share = rows.len().div_ceil(split.threads as u64);
    let mut shares = Vec::new();
    let (mut from, mut taken) = (0u32, 0u64);
    let starts = p.row_group_starts();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(u32::MAX);
        taken += rows.range_cardinality(start..end);
        if taken >= per_share || i + 1 == starts.len() {
            let mut share = rows.clone();
            share.remove_range(..from);
            if i + 1 < starts.len() {
                share.remove_range(end..);
            }
            if !share.is_empty() {
                shares.push(share);
            }
            (from, taken) = (end, 0);
        }
    }
    (shares.len() > 1).then_some(shares)
}

/// The sample rows of `rows` of part `p`, a batch of at most [`CHUNK`]
/// rows at a time.
fn decode<'r>(p: &Part, rows: &'r RoaringBitmap) -> Result<impl Iterator<Item = Result<Decoded>> + 'r> {
    let mut ids = rows.iter();
    let batches = p.stream_row_columns(SAMPLE_COLUMNS, rows, CHUNK)?;
    Ok(batches.map(move |batch| {
        let samples = sample_rows(&batch?)?;
        let ids: Vec<u32> = ids.by_ref().take(samples.len()).collect();
        Ok((ids, samples))
    }))
}

/// Hands `sink` one decoded batch of part `p` (see [`read_part`]).
fn hand_over(
    p: &Part,
    ids: &[u32],
    samples: &[SampleRow],
    want: &Want,
    sink: &mut dyn SeriesSink,
    known: &mut FastMap<u64, Known>,
) -> Result<()> {
    let w = want.w;
    // The first row of each key not met yet (ascending, as `read_rows`
    // asks), unless the part's memo describes its series already.
    let mut first = Vec::new();
    let mut keys = Vec::new();
    let mut met = FastSet::default();
    for (s, &row) in samples.iter().zip(ids) {
        if let Some(key) = s.key
            && w.contains(s.time)
            && !known.contains_key(&key)
            && met.insert(key)
        {
            first.push(row);
            keys.push(key);
        }
    }
    let mut describe = |point: &MetricPoint, key: u64| {
        let is = match point.value {
            PointValue::Number(_) if want.series(point) => {
                sink.series(key, point).map_or(Known::Skipped, Known::Samples)
            }
            PointValue::Number(_) => Known::Skipped,
            _ => Known::Whole,
        };
        known.insert(key, is);
    };
    if !keys.is_empty() {
        let memo = p.series_memo();
        let mut unread = (Vec::new(), Vec::new());
        for ((kept, key), row) in memo.get(&keys).into_iter().zip(keys).zip(first) {
            match kept {
                Some(point) => describe(&point, key),
                None => {
                    unread.0.push(row);
                    unread.1.push(key);
                }
            }
        }
        for (point, key) in p.read_rows::<MetricPoint>(&unread.0)?.iter().zip(unread.1) {
            if let PointValue::Number(_) = point.value {
                memo.keep(key, point);
            }
            describe(point, key);
        }
    }
    let mut whole = Vec::new();
    for (s, &row) in samples.iter().zip(ids) {
        if !w.contains(s.time) {
            continue;
        }
        match s.key.and_then(|k| known.get(&k)) {
            Some(Known::Samples(series)) => sink.sample(*series, s.time, s.value, s.flags),
            Some(Known::Skipped) => {}
            Some(Known::Whole) | None => whole.push(row),
        }
    }
    for point in p.read_rows::<MetricPoint>(&whole)? {
        if want.point(&point) {
            sink.point(&point);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::part::{PartMeta, PartWriter, WriterOptions};
    use crate::record::Signal;
    use crate::storage::{LocalStore, PartStore};
    use crate::testdata;

    /// What a scan handed over, in a canonical order.
    #[derive(Default)]
    struct Recorder {
        described: Vec<MetricPoint>,
        seen: Vec<String>,
    }

    impl SeriesSink for Recorder {
        fn point(&mut self, p: &MetricPoint) {
            self.seen.push(format!("whole {p:?}"));
        }
        fn series(&mut self, key: u64, p: &MetricPoint) -> Option<u32> {
            assert_eq!(key, crate::stats::series_key(p, crate::stats::series_id(p)));
            self.described.push(p.clone());
            Some((self.described.len() - 1) as u32)
        }
        fn sample(&mut self, series: u32, time_unix_nano: u64, value: Option<Number>, flags: u32) {
            let d = &self.described[series as usize];
            let key = (&d.metric, &d.attributes, &d.resource, &d.scope);
            self.seen
                .push(format!("sample {key:?} {time_unix_nano} {value:?} {flags}"));
        }
    }

    fn part(points: &[MetricPoint], row_group_rows: usize) -> (tempfile::TempDir, Arc<Part>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["metrics"]).unwrap());
        let opts = WriterOptions {
            row_group_rows,
            ..WriterOptions::default()
        };
        let mut w = PartWriter::<MetricPoint>::new(store, PartMeta::new(Signal::Metrics, 1), &opts).unwrap();
        let mut sorted = points.to_vec();
        sorted.sort_by_key(|p| (p.time(), p.key()));
        for p in sorted {
            w.push(Arc::new(p)).unwrap();
        }
        (dir, Arc::new(w.finish().unwrap()))
    }

    #[test]
    fn shares_cut_at_row_groups_and_cover_the_rows_once() {
        let (_dir, p) = part(&testdata::metric_points(1000), 64);
        let rows: RoaringBitmap = (0..1000u32).filter(|r| r % 3 != 0).collect();
        let split = Split {
            threads: 3,
            min_rows: 1,
        };
        let shares = shares(&p, &rows, split).expect("split");
        assert_eq!(shares.len(), 3);
        let starts = p.row_group_starts();
        let mut union = RoaringBitmap::new();
        for (a, b) in shares.iter().zip(shares.iter().skip(1)) {
            assert!(a.max() < b.min(), "shares ascend, disjoint");
            // No row group holds rows of both.
            let group = |r: u32| starts.partition_point(|s| *s <= r);
            assert_ne!(group(a.max().unwrap()), group(b.min().unwrap()));
        }
        for s in &shares {
            union |= s;
        }
        assert_eq!(union, rows);
        // Too few rows, or one thread: left whole.
        assert!(shares_none(
            &p,
            &rows,
            Split {
                threads: 3,
                min_rows: 10_000
            }
        ));
        assert!(shares_none(
            &p,
            &rows,
            Split {
                threads: 1,
                min_rows: 1
            }
        ));
    }

    fn shares_none(p: &Part, rows: &RoaringBitmap, split: Split) -> bool {
        shares(p, rows, split).is_none()
    }

    fn scan_sorted(p: &Arc<Part>, filters: &[AttrFilter], w: Window) -> Vec<String> {
        let mut r = Recorder::default();
        scan_split(&[Source::Part(p.clone())], None, filters, w, &mut r, Split::machine()).unwrap();
        r.seen.sort();
        r.seen
    }

    #[test]
    fn later_scans_describe_series_from_the_memo_with_the_same_answers() {
        let points = testdata::metric_points(3000);
        let t0 = points[0].time_unix_nano;
        let s = 1_000_000_000;
        let (early, late) = (
            Window::new(t0, t0 + 1000 * s),
            Window::new(t0 + 2000 * s, t0 + 3000 * s),
        );
        let host = [AttrFilter::eq(crate::AttrScope::Record, "host", "h1")];
        let (_dir, p) = part(&points, 100);
        let first = scan_sorted(&p, &[], early);
        // Gauges and sums, by three hosts.
        assert_eq!(p.series_memo().kept(), 6);
        // A kept point's time (in `early`) must not keep its series out of
        // `late`, nor its first scan's verdict decide another's filters.
        for (filters, w) in [(&host[..], late), (&[][..], late), (&[][..], early)] {
            let (_fresh_dir, fresh) = part(&points, 100);
            let answer = scan_sorted(&p, filters, w);
            assert!(answer.iter().any(|a| a.starts_with("sample")));
            assert_eq!(answer, scan_sorted(&fresh, filters, w));
        }
        assert_eq!(first, scan_sorted(&p, &[], early));
    }

    #[test]
    fn a_scan_shared_among_threads_hands_over_what_one_thread_does() {
        let points = testdata::metric_points(3000);
        let (_dir, p) = part(&points, 100);
        let sources = [Source::Part(p)];
        let w = Window::new(0, u64::MAX);
        let mut answers = Vec::new();
        for split in [
            Split {
                threads: 1,
                min_rows: 1,
            },
            Split {
                threads: 4,
                min_rows: 1,
            },
        ] {
            let mut r = Recorder::default();
            scan_split(&sources, None, &[], w, &mut r, split).unwrap();
            r.seen.sort();
            answers.push(r.seen);
        }
        assert_eq!(answers[0].len(), points.len());
        assert_eq!(answers[0], answers[1]);
    }
}
