//! A streaming scan of metric points by name and time window, for the
//! PromQL evaluator (`skein-promql`), which groups the points into series
//! itself.
//!
//! Nothing is collected here: each point is handed to the caller as it is
//! decoded, a part at most [`CHUNK`] rows at a time, so memory is the
//! caller's (the series a query needs), not the scan's. The name postings
//! only narrow: every point's name and time are checked again before the
//! caller sees it.
//!
//! A point may be seen twice when the same record sits in two sources at
//! once (a frozen hot table and the part it was just flushed to): metric
//! points are keyed by their content, so both copies are equal, and the
//! caller keeps one sample per series and timestamp.

use roaring::RoaringBitmap;
use skein_model::MetricPoint;

use super::search::Source;
use super::window::Window;
use crate::error::Result;
use crate::record::Record;
use crate::terms;

/// Rows decoded from a part per read.
const CHUNK: usize = 4096;

/// Calls `f` with every point in `w` whose metric name is one of `names`
/// (`None`: every metric), across `sources`.
pub fn scan_points(
    sources: &[Source<MetricPoint>],
    names: Option<&[String]>,
    w: Window,
    f: &mut dyn FnMut(&MetricPoint),
) -> Result<u64> {
    let wanted =
        |p: &MetricPoint| w.contains(p.time()) && names.is_none_or(|ns| ns.iter().any(|n| *n == p.metric.name));
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
                match names {
                    Some(ns) => {
                        let mut rows = RoaringBitmap::new();
                        for n in ns {
                            if let Some(r) = m.posting(terms::name(n)) {
                                rows.extend(r.iter().copied());
                            }
                        }
                        rows.iter().for_each(&mut visit);
                    }
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
