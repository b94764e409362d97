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
//! A part with a sample table (`part::samples`) is read through it
//! instead ([`read_table`]): only the chunks of the series the postings
//! keep, within the window, are decoded, and only the rows the table does
//! not hold (distribution points) are read from the part as above.
//!
//! A point may be seen twice when the same record sits in two sources at
//! once (a frozen hot table and the part it was just flushed to): metric
//! points are keyed by their content, so both copies are equal, and the
//! caller keeps one sample per series and timestamp.

use roaring::RoaringBitmap;
use skein_model::{MetricPoint, PointValue};

use super::filter::AttrFilter;
use super::search::{Source, both, candidates};
use super::window::Window;
use crate::error::{Error, Result};
use crate::hash::{FastMap, FastSet};
use crate::part::Part;
use crate::part::columns::metrics::{SAMPLE_COLUMNS, SampleRow, sample_rows};
pub use crate::part::samples::Sample;
use crate::part::samples::{CHUNK_SAMPLES, SampleTable, SeriesEntry};
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
    /// Samples of a series [`SeriesSink::series`] kept, all in the
    /// window: a sample table's chunk at a time (ascending by time), or one
    /// row of a part.
    fn samples(&mut self, series: u32, samples: &[Sample]);
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
    for s in oldest_first(sources) {
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
                // The rows the postings leave (`None`: all of them).
                let mut narrowed = names.map(|ns| {
                    let mut rows = RoaringBitmap::new();
                    for n in ns {
                        if let Some(b) = p.index.posting(terms::name(n)) {
                            rows |= b;
                        }
                    }
                    rows
                });
                if let Some(c) = candidates(
                    &groups,
                    |t| Some(p.index.posting(t).cloned().unwrap_or_default()),
                    |k| p.index.unindexed_keys.contains(&k),
                    &mut used,
                ) {
                    narrowed = Some(match narrowed {
                        Some(rows) => rows & c,
                        None => c,
                    });
                }
                let mut rows = match p.samples() {
                    Some(table) => {
                        examined += read_table(p, table, narrowed.as_ref(), &want, sink, &mut known)?;
                        let mut rest = table.uncovered().clone();
                        if let Some(n) = &narrowed {
                            rest &= n;
                        }
                        rest
                    }
                    None => narrowed.unwrap_or_else(|| {
                        let mut all = RoaringBitmap::new();
                        all.insert_range(range.clone());
                        all
                    }),
                };
                rows.remove_range(..range.start);
                rows.remove_range(range.end..);
                examined += rows.len();
                read_part(p, &rows, &want, sink, &mut known, split)?;
            }
        }
    }
    Ok(examined)
}

/// `sources` in the order their samples are oldest: parts by their first
/// time, then the hot tier's tables, frozen ones (oldest first, as the
/// engine lists them newest first) before the active one. A series'
/// samples then usually reach the sink in time order, and its caller need
/// not sort them; any order gives the same samples.
fn oldest_first(sources: &[Source<MetricPoint>]) -> Vec<&Source<MetricPoint>> {
    let mut order: Vec<_> = sources.iter().rev().collect();
    // Stable: the tables keep their (reversed) order.
    order.sort_by_key(|s| match s {
        Source::Part(p) => (0, p.meta.min_time),
        Source::Mem(_) => (1, 0),
    });
    order
}

/// Hands `sink` the samples in the window of the number series of part
/// `p`'s sample table whose first row `narrowed` holds (`None`: every
/// series): each wanted series' chunks that reach into the window, and
/// nothing of the others. Returns the samples decoded.
///
/// A series' rows share its name and attributes, so the postings keep its
/// first row exactly when they keep every row of it; the names and filters
/// are checked again on that first row, and every sample's time.
fn read_table(
    p: &Part,
    table: &SampleTable,
    narrowed: Option<&RoaringBitmap>,
    want: &Want,
    sink: &mut dyn SeriesSink,
    known: &mut FastMap<u64, Known>,
) -> Result<u64> {
    let w = want.w;
    let chosen: Vec<&SeriesEntry> = table
        .series()
        .iter()
        .filter(|s| table.spans(s, w) && narrowed.is_none_or(|n| n.contains(s.first_row)))
        .collect();
    let mut unknown: Vec<(u32, u64)> = chosen
        .iter()
        .filter(|s| !known.contains_key(&s.key))
        .map(|s| (s.first_row, s.key))
        .collect();
    unknown.sort_unstable();
    describe(p, &unknown, want, sink, known)?;
    let mut decoded = 0u64;
    let mut buf = Vec::with_capacity(CHUNK_SAMPLES);
    for s in chosen {
        let series = match known.get(&s.key) {
            Some(Known::Samples(series)) => *series,
            Some(Known::Skipped) | None => continue,
            Some(Known::Whole) => {
                return Err(Error::corrupt(
                    format!("metric part {}", p.meta.id),
                    format!(
                        "its sample table holds series {:#x}, whose points are not numbers",
                        s.key
                    ),
                ));
            }
        };
        for c in table.chunks(s).iter().filter(|c| !w.misses(c.min_time, c.max_time)) {
            buf.clear();
            table.read(c, &mut buf)?;
            decoded += buf.len() as u64;
            if !w.covers(c.min_time, c.max_time) {
                buf.retain(|x| w.contains(x.time));
            }
            sink.samples(series, &buf);
        }
    }
    Ok(decoded)
}

/// Describes to `sink` the series of `firsts` (each one's first row and
/// key, rows ascending), from the part's memo or by reading the row whole,
/// and notes in `known` what the sink answered.
fn describe(
    p: &Part,
    firsts: &[(u32, u64)],
    want: &Want,
    sink: &mut dyn SeriesSink,
    known: &mut FastMap<u64, Known>,
) -> Result<()> {
    if firsts.is_empty() {
        return Ok(());
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
    let memo = p.series_memo();
    let keys: Vec<u64> = firsts.iter().map(|(_, k)| *k).collect();
    let mut unread = (Vec::new(), Vec::new());
    for (kept, &(row, key)) in memo.get(&keys).into_iter().zip(firsts) {
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
    Ok(())
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
    let mut firsts = Vec::new();
    let mut met = FastSet::default();
    for (s, &row) in samples.iter().zip(ids) {
        if let Some(key) = s.key
            && w.contains(s.time)
            && !known.contains_key(&key)
            && met.insert(key)
        {
            firsts.push((row, key));
        }
    }
    describe(p, &firsts, want, sink, known)?;
    let mut whole = Vec::new();
    for (s, &row) in samples.iter().zip(ids) {
        if !w.contains(s.time) {
            continue;
        }
        match s.key.and_then(|k| known.get(&k)) {
            Some(Known::Samples(series)) => {
                let sample = Sample {
                    time: s.time,
                    value: s.value,
                    flags: s.flags,
                };
                sink.samples(*series, std::slice::from_ref(&sample));
            }
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
        fn samples(&mut self, series: u32, samples: &[Sample]) {
            let d = &self.described[series as usize];
            let key = (&d.metric, &d.attributes, &d.resource, &d.scope);
            for s in samples {
                self.seen
                    .push(format!("sample {key:?} {} {:?} {}", s.time, s.value, s.flags));
            }
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
    fn a_part_read_through_its_sample_table_answers_as_its_rows_do() {
        let mut points = testdata::metric_points(3000);
        // Some samples with flags (a staleness marker) and without a value.
        for p in points.iter_mut().step_by(37) {
            if let PointValue::Number(n) = &mut p.value {
                p.flags = 1;
                *n = None;
            }
        }
        let (dir, p) = part(&points, 100);
        let table = p.samples().expect("a metric part has a sample table");
        assert!(!table.series().is_empty());
        // Distribution points are left to the part, number points are not.
        let numbers = points
            .iter()
            .filter(|p| matches!(p.value, PointValue::Number(_)))
            .count();
        assert_eq!(table.uncovered().len() as usize, points.len() - numbers);
        // The same part without its table: read from its rows.
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["metrics"]).unwrap());
        store.remove(&crate::part::samples::samples_name(1)).unwrap();
        let bare = Arc::new(Part::open::<MetricPoint>(store, 1).unwrap());
        assert!(bare.samples().is_none());
        let t0 = points[0].time_unix_nano;
        let s = 1_000_000_000;
        let host = [AttrFilter::eq(crate::AttrScope::Record, "host", "h1")];
        let windows = [
            Window::new(0, u64::MAX),
            Window::new(t0 + 1000 * s, t0 + 1100 * s),
            Window::new(t0 + 2999 * s, t0 + 3000 * s),
            Window::new(t0 + 5000 * s, t0 + 6000 * s),
        ];
        for w in windows {
            for filters in [&host[..], &[][..]] {
                for names in [
                    None,
                    Some(vec!["metric.gauge".to_string()]),
                    Some(vec!["metric.histogram".to_string()]),
                ] {
                    let read = |p: &Arc<Part>| {
                        let mut r = Recorder::default();
                        scan_split(
                            &[Source::Part(p.clone())],
                            names.as_deref(),
                            filters,
                            w,
                            &mut r,
                            Split::machine(),
                        )
                        .unwrap();
                        r.seen.sort();
                        r.seen
                    };
                    assert_eq!(read(&p), read(&bare), "{w:?} {filters:?} {names:?}");
                }
            }
        }
        // The staleness markers came through the table.
        assert!(scan_sorted(&p, &[], windows[0]).iter().any(|a| a.ends_with(" None 1")));
    }

    #[test]
    fn a_damaged_sample_table_is_never_read_as_samples() {
        let points = testdata::metric_points(600);
        let (dir, p) = part(&points, 100);
        let answer = scan_sorted(&p, &[], Window::ALL);
        drop(p);
        let path = dir.path().join(crate::part::samples::samples_name(1));
        let bytes = std::fs::read(&path).unwrap();
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["metrics"]).unwrap());
        // A byte of the first chunk changed: reading it is an error naming
        // the table, not other samples.
        let mut hit = bytes.clone();
        hit[2] ^= 0x40;
        std::fs::write(&path, &hit).unwrap();
        let damaged = Arc::new(Part::open::<MetricPoint>(store.clone(), 1).unwrap());
        assert!(damaged.samples().is_some());
        let mut r = Recorder::default();
        let err = scan_split(
            &[Source::Part(damaged)],
            None,
            &[],
            Window::ALL,
            &mut r,
            Split::machine(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("sample table"), "{err}");
        // Its directory damaged: the part is read from its rows, with the
        // same answers.
        let mut hit = bytes.clone();
        let n = hit.len();
        hit[n - 30] ^= 0x40;
        std::fs::write(&path, &hit).unwrap();
        let fallen_back = Arc::new(Part::open::<MetricPoint>(store, 1).unwrap());
        assert!(fallen_back.samples().is_none());
        assert_eq!(scan_sorted(&fallen_back, &[], Window::ALL), answer);
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
