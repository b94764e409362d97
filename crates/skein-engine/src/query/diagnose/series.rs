//! Per-operation time series over a look-back: for each (service,
//! operation), spans, errors and a duration sketch per time bucket.
//!
//! Parts and a hot tier without superseded rows answer from their
//! per-minute statistics (`OpStats::minutes`), so building the series
//! costs O(operations × minutes), not O(spans); other sources (a hot tier
//! with deleted rows, rows shadowed by a newer copy) are scanned through
//! the narrow span columns. Buckets are whole minutes, so a part's minute
//! is either inside the look-back or outside it.

use skein_model::Span;

use crate::error::Result;
use crate::hash::{FastMap, FastSet};
use crate::part::Part;
use crate::query::aggregate::scan_summary_rows;
use crate::query::explain::{Explain, SourceExplain};
use crate::query::search::Source;
use crate::query::shadow::{ShadowCache, shadowed_span_rows};
use crate::query::sketch::{Sketch, coarse};
use crate::query::window::Window;
use crate::stats::{MinuteStats, NS_PER_MINUTE, OpStats, minute_of};

/// The buckets of a look-back: `count` buckets of `minutes` minutes each,
/// the first starting at minute `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    pub first: u32,
    pub minutes: u32,
    pub count: usize,
}

/// At most this many buckets: a look-back longer than this many minutes
/// gets wider buckets.
pub const MAX_BUCKETS: u32 = 360;

impl Buckets {
    /// Whole-minute buckets covering `w` (its start rounded down, its end
    /// up), no more than [`MAX_BUCKETS`] of them.
    pub fn covering(w: Window) -> Buckets {
        let first = minute_of(w.start);
        let last = minute_of(w.end.saturating_sub(1)).max(first);
        let span = last - first + 1;
        let minutes = span.div_ceil(MAX_BUCKETS).max(1);
        Buckets {
            first,
            minutes,
            count: span.div_ceil(minutes) as usize,
        }
    }

    /// The bucket of a minute, if inside.
    pub fn of_minute(&self, minute: u32) -> Option<usize> {
        let i = (minute.checked_sub(self.first)? / self.minutes) as usize;
        (i < self.count).then_some(i)
    }

    /// Start of bucket `i` in ns since the epoch.
    pub fn start_of(&self, i: usize) -> u64 {
        (self.first as u64 + i as u64 * self.minutes as u64) * NS_PER_MINUTE
    }

    /// The time the buckets cover.
    pub fn window(&self) -> Window {
        Window::new(self.start_of(0), self.start_of(self.count))
    }

    pub fn width_ns(&self) -> u64 {
        self.minutes as u64 * NS_PER_MINUTE
    }
}

/// One bucket of one operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bucket {
    pub count: u64,
    pub errors: u64,
    /// Durations as coarse values (within 6.25%).
    pub durations: Sketch,
}

impl Bucket {
    fn add_minute(&mut self, m: &MinuteStats) {
        self.count += m.count as u64;
        self.errors += m.errors as u64;
        self.durations.merge(&m.durations);
    }

    fn add_span(&mut self, duration_ns: u64, error: bool) {
        self.count += 1;
        self.errors += error as u64;
        self.durations.add(coarse(duration_ns));
    }
}

/// The series of every operation with spans in the look-back.
pub struct OpSeries {
    pub buckets: Buckets,
    /// service → operation → one bucket per time bucket.
    pub ops: FastMap<String, FastMap<String, Vec<Bucket>>>,
}

impl OpSeries {
    fn op(&mut self, service: &str, name: &str) -> &mut Vec<Bucket> {
        if !self.ops.contains_key(service) {
            self.ops.insert(service.to_string(), FastMap::default());
        }
        let by_name = self.ops.get_mut(service).expect("inserted above");
        if !by_name.contains_key(name) {
            by_name.insert(name.to_string(), vec![Bucket::default(); self.buckets.count]);
        }
        by_name.get_mut(name).expect("inserted above")
    }

    fn add_stats(&mut self, ops: &[OpStats], service: Option<&str>) {
        for op in ops {
            if service.is_some_and(|s| s != op.service) {
                continue;
            }
            let b = self.buckets;
            // Only minutes inside: an operation wholly outside adds no series.
            let first = op.minutes.partition_point(|m| m.minute < b.first);
            let inside = op.minutes[first..]
                .iter()
                .take_while(|m| b.of_minute(m.minute).is_some());
            let mut inside = inside.peekable();
            if inside.peek().is_none() {
                continue;
            }
            let series = self.op(&op.service, &op.name);
            for m in inside {
                if let Some(i) = b.of_minute(m.minute) {
                    series[i].add_minute(m);
                }
            }
        }
    }

    fn add_span(&mut self, service: &str, name: &str, start: u64, duration_ns: u64, error: bool) {
        if let Some(i) = self.buckets.of_minute(minute_of(start)) {
            self.op(service, name)[i].add_span(duration_ns, error);
        }
    }

    /// Every service's operations and their series.
    pub fn services(&self) -> impl Iterator<Item = (&str, &FastMap<String, Vec<Bucket>>)> {
        self.ops.iter().map(|(s, m)| (s.as_str(), m))
    }

    /// One operation's series.
    pub fn get(&self, service: &str, name: &str) -> Option<&[Bucket]> {
        self.ops.get(service)?.get(name).map(Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.ops.values().map(|m| m.len()).sum()
    }
}

/// Builds the series of every operation (of `service`, if given) over the
/// buckets.
pub fn op_series(
    sources: &[Source<Span>],
    buckets: Buckets,
    service: Option<&str>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<OpSeries> {
    let w = buckets.window();
    let mut out = OpSeries {
        buckets,
        ops: FastMap::default(),
    };
    let shadowed = shadowed_span_rows(sources, w, cache)?;
    for (s, shadowed) in sources.iter().zip(&shadowed) {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut ex = SourceExplain::new("hot", None);
                if shadowed.is_empty()
                    && let Some((stats, _, _)) = m.stats()
                {
                    ex.pruned = Some("answered from hot-tier minute statistics".into());
                    out.add_stats(&stats.ops, service);
                    explain.add(ex);
                    continue;
                }
                for row in 0..m.total_rows() {
                    if !m.is_live(row) || shadowed.contains(&row) {
                        continue;
                    }
                    let sp = m.row(row);
                    ex.rows_examined += 1;
                    if service.is_none_or(|v| v == sp.service_name()) {
                        out.add_span(
                            sp.service_name(),
                            &sp.name,
                            sp.start_time_unix_nano,
                            sp.duration_ns(),
                            sp.is_error(),
                        );
                    }
                }
                explain.add(ex);
            }
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                } else if shadowed.is_empty() && has_minutes(&p.index.stats.ops) {
                    ex.pruned = Some("answered from part minute statistics".into());
                    explain.parts_from_stats += 1;
                    out.add_stats(&p.index.stats.ops, service);
                } else {
                    scan_part(p, w, service, shadowed, &mut out, &mut ex)?;
                }
                explain.add(ex);
            }
        }
    }
    Ok(out)
}

/// Whether the statistics carry minutes (every sidecar since version 3
/// does; an operation with spans and no minutes is from an older one).
fn has_minutes(ops: &[OpStats]) -> bool {
    ops.iter().all(|o| o.count == 0 || !o.minutes.is_empty())
}

fn scan_part(
    p: &Part,
    w: Window,
    service: Option<&str>,
    shadowed: &FastSet<u32>,
    out: &mut OpSeries,
    ex: &mut SourceExplain,
) -> Result<()> {
    scan_summary_rows(p, w, service, shadowed, ex, |r| {
        out.add_span(r.service, r.name, r.start, r.duration_ns, r.error)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = NS_PER_MINUTE;

    #[test]
    fn buckets_cover_whole_minutes_and_widen_past_the_cap() {
        let b = Buckets::covering(Window::new(10 * MIN + 5, 70 * MIN));
        assert_eq!((b.first, b.minutes, b.count), (10, 1, 60));
        assert_eq!(b.window(), Window::new(10 * MIN, 70 * MIN));
        assert_eq!(b.of_minute(9), None);
        assert_eq!(b.of_minute(10), Some(0));
        assert_eq!(b.of_minute(69), Some(59));
        assert_eq!(b.of_minute(70), None);
        // A day: 1440 minutes in 360 buckets of 4.
        let day = Buckets::covering(Window::new(0, 1440 * MIN));
        assert_eq!((day.minutes, day.count), (4, 360));
        assert_eq!(day.of_minute(1439), Some(359));
        // A partial last minute still gets its bucket.
        let b = Buckets::covering(Window::new(10 * MIN, 20 * MIN + 1));
        assert_eq!(b.count, 11);
    }
}
