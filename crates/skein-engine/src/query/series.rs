//! A streaming scan of metric points by name, attribute filters and time
//! window, for the PromQL evaluator (`skein-promql`), which groups the
//! points into series itself.
//!
//! Nothing is collected here: each point is handed to the caller as it is
//! decoded, a part at most [`CHUNK`] rows at a time, so memory is the
//! caller's (the series a query needs), not the scan's. The name and
//! attribute postings only narrow: every point's name, attributes and time
//! are checked again before the caller sees it.
//!
//! A point may be seen twice when the same record sits in two sources at
//! once (a frozen hot table and the part it was just flushed to): metric
//! points are keyed by their content, so both copies are equal, and the
//! caller keeps one sample per series and timestamp.

use roaring::RoaringBitmap;
use skein_model::MetricPoint;

use super::filter::AttrFilter;
use super::search::{Source, both, candidates};
use super::window::Window;
use crate::error::Result;
use crate::record::Record;
use crate::terms;

/// Rows decoded from a part per read.
const CHUNK: usize = 4096;

/// Calls `f` with every point in `w` whose metric name is one of `names`
/// (`None`: every metric) and that every filter matches, across `sources`.
pub fn scan_points(
    sources: &[Source<MetricPoint>],
    names: Option<&[String]>,
    filters: &[AttrFilter],
    w: Window,
    f: &mut dyn FnMut(&MetricPoint),
) -> Result<u64> {
    let wanted = |p: &MetricPoint| {
        w.contains(p.time())
            && names.is_none_or(|ns| ns.iter().any(|n| *n == p.metric.name))
            && filters.iter().all(|f| f.matches_point(p))
    };
    let groups: Vec<_> = filters.iter().filter_map(AttrFilter::group_without_events).collect();
    let mut used = Vec::new();
    let mut examined = 0u64;
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut visit = |row: u32| {
                    examined += 1;
                    if m.is_live(row) && w.contains(m.time(row)) {
                        let p = m.row(row);
                        if wanted(p) {
                            f(p);
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
                let rows: Vec<u32> = rows.iter().collect();
                for chunk in rows.chunks(CHUNK) {
                    examined += chunk.len() as u64;
                    for point in p.read_rows::<MetricPoint>(chunk)? {
                        if wanted(&point) {
                            f(&point);
                        }
                    }
                }
            }
        }
    }
    Ok(examined)
}
