//! A streaming scan of metric points by name, attribute filters and time
//! window, for the PromQL evaluator (`skein-promql`), which groups the
//! points into series itself.
//!
//! Nothing is collected here: each point is handed to the caller as it is
//! decoded, a part at most [`CHUNK`] rows at a time, so memory is the
//! caller's (the series a query needs) and one key per series met, not the
//! scan's. The name and attribute postings only narrow: every point's name,
//! attributes and time are checked again before the caller sees it.
//!
//! A part's rows are first read as samples: time, value, flags and series
//! key only ([`sample_rows`], no string). The first row of each series key
//! is read whole: a number series (gauge or sum) is checked and described
//! to the caller ([`SeriesSink::series`]), and its other rows carry the
//! caller's answer, so a series' attributes, resource and scope are parsed
//! once per scan, not once per point. The points of other series, of parts
//! written before series keys, and of the hot tier are handed over whole.
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
use crate::part::columns::metrics::{SAMPLE_COLUMNS, sample_rows};
use crate::record::Record;
use crate::terms;

/// Rows decoded from a part per read.
const CHUNK: usize = 4096;

/// What [`scan_series`] hands its caller.
pub trait SeriesSink {
    /// A point handed over whole: from the hot tier, from a part written
    /// before series keys, or not a number point.
    fn point(&mut self, p: &MetricPoint);
    /// The first point the scan meets of a part's number series: the
    /// handle its samples will carry, or `None` to skip them. The series'
    /// points share this one's metric name, kind and unit, attributes,
    /// resource attributes and scope (`stats::series_key`).
    fn series(&mut self, p: &MetricPoint) -> Option<u32>;
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
    let wanted = |p: &MetricPoint| {
        w.contains(p.time())
            && names.is_none_or(|ns| ns.iter().any(|n| *n == p.metric.name))
            && filters.iter().all(|f| f.matches_point(p))
    };
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
                        if wanted(p) {
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
                read_part(p, &rows, w, &wanted, sink, &mut known)?;
            }
        }
    }
    Ok(examined)
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

/// Hands `sink` the points of `rows` of part `p` that are in `w` and
/// `wanted`: number points as samples of the series in `known` (by series
/// key), which grows by the series met here; other points whole.
fn read_part(
    p: &Part,
    rows: &RoaringBitmap,
    w: Window,
    wanted: &dyn Fn(&MetricPoint) -> bool,
    sink: &mut dyn SeriesSink,
    known: &mut FastMap<u64, Known>,
) -> Result<()> {
    let mut ids = rows.iter();
    for batch in p.stream_row_columns(SAMPLE_COLUMNS, rows, CHUNK)? {
        let samples = sample_rows(&batch?)?;
        let ids: Vec<u32> = ids.by_ref().take(samples.len()).collect();
        // The first row of each key not met yet, read whole to learn what
        // the series is (ascending, as `read_rows` asks).
        let mut first = Vec::new();
        let mut keys = Vec::new();
        let mut met = FastSet::default();
        for (s, &row) in samples.iter().zip(&ids) {
            if let Some(key) = s.key
                && w.contains(s.time)
                && !known.contains_key(&key)
                && met.insert(key)
            {
                first.push(row);
                keys.push(key);
            }
        }
        for (point, key) in p.read_rows::<MetricPoint>(&first)?.iter().zip(keys) {
            let is = match point.value {
                PointValue::Number(_) if wanted(point) => sink.series(point).map_or(Known::Skipped, Known::Samples),
                PointValue::Number(_) => Known::Skipped,
                _ => Known::Whole,
            };
            known.insert(key, is);
        }
        let mut whole = Vec::new();
        for (s, &row) in samples.iter().zip(&ids) {
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
            if wanted(&point) {
                sink.point(&point);
            }
        }
    }
    Ok(())
}
