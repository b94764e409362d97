//! Time series for charts: spans per service (rate, errors, p95) and logs
//! per severity band, in a bounded number of whole-minute buckets, and the
//! catalogue of metric names.
//!
//! The span series come from the diagnosis's per-operation series (part and
//! hot-tier minute statistics, so O(operations × minutes), not O(spans)),
//! merged per service. Logs keep no per-minute statistics: their series
//! reads two narrow columns (time, severity) plus the service's, never a
//! record.

use std::collections::BTreeMap;

use serde::Serialize;
use skein_model::log::severity_band;
use skein_model::{LogRecord, MetricPoint, Span};

use super::aggregate::scan_log_rows;
use super::diagnose::series::{Bucket, Buckets, op_series};
use super::explain::{Explain, SourceExplain};
use super::filter::LogQuery;
use super::search::Source;
use super::shadow::ShadowCache;
use super::sketch::Sketch;
use super::window::Window;
use crate::error::Result;
use crate::hash::FastMap;
use crate::record::Record;
use crate::stats::minute_of;

/// Whole-minute buckets covering `w`, at most `points` of them (at least
/// one minute wide each).
pub fn buckets(w: Window, points: usize) -> Buckets {
    let first = minute_of(w.start);
    let last = minute_of(w.end.saturating_sub(1)).max(first);
    let span = last - first + 1;
    let minutes = span.div_ceil(points.max(1) as u32).max(1);
    Buckets {
        first,
        minutes,
        count: span.div_ceil(minutes) as usize,
    }
}

/// One service's series: one value per bucket.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServiceSeries {
    pub service: String,
    pub spans: Vec<u64>,
    pub errors: Vec<u64>,
    /// 95th percentile duration per bucket (0 where the bucket is empty),
    /// from per-minute sketches: within 6.25%.
    pub p95_ns: Vec<u64>,
}

/// Per service (of `service`, if given), spans, errors and p95 per bucket,
/// services by name.
pub fn service_series(
    sources: &[Source<Span>],
    buckets: Buckets,
    service: Option<&str>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Vec<ServiceSeries>> {
    let ops = op_series(sources, buckets, service, cache, explain)?;
    let mut by: BTreeMap<&str, Vec<Bucket>> = BTreeMap::new();
    for (svc, by_name) in ops.services() {
        let acc = by.entry(svc).or_insert_with(|| vec![Bucket::default(); buckets.count]);
        for series in by_name.values() {
            for (a, b) in acc.iter_mut().zip(series) {
                a.count += b.count;
                a.errors += b.errors;
                a.durations.merge(&b.durations);
            }
        }
    }
    Ok(by
        .into_iter()
        .map(|(svc, b)| ServiceSeries {
            service: svc.to_string(),
            spans: b.iter().map(|x| x.count).collect(),
            errors: b.iter().map(|x| x.errors).collect(),
            p95_ns: b.iter().map(|x| quantile(&x.durations, 0.95)).collect(),
        })
        .collect())
}

fn quantile(s: &Sketch, q: f64) -> u64 {
    if s.count() == 0 { 0 } else { s.quantile(q) }
}

/// Per severity band (trace … fatal, unspecified) with any logs, one count
/// per bucket.
pub type BandCounts = BTreeMap<&'static str, Vec<u64>>;

/// Counts logs into severity bands and buckets, one at a time.
pub struct BandCounter {
    buckets: Buckets,
    window: Window,
    by: BandCounts,
}

impl BandCounter {
    pub fn new(buckets: Buckets) -> Self {
        BandCounter {
            buckets,
            window: buckets.window(),
            by: BandCounts::new(),
        }
    }

    /// Counts a log at `time` of severity `sev` (nothing outside the
    /// buckets' window).
    pub fn add(&mut self, time: u64, sev: i32) {
        if !self.window.contains(time) {
            return;
        }
        if let Some(i) = self.buckets.of_minute(minute_of(time)) {
            let count = self.buckets.count;
            self.by.entry(severity_band(sev)).or_insert_with(|| vec![0; count])[i] += 1;
        }
    }

    pub fn finish(self) -> BandCounts {
        self.by
    }
}

/// Does `q` filter by nothing but service and minimum severity (so its
/// series can be counted from those columns alone, by [`log_series`])?
pub fn is_service_and_severity_only(q: &LogQuery) -> bool {
    let LogQuery {
        service: _,
        min_severity: _,
        trace_id,
        span_id,
        body_contains,
        attributes,
        text,
        window: _,
        limit: _,
        cursor: _,
        payload_text: _,
    } = q;
    trace_id.is_none() && span_id.is_none() && body_contains.is_none() && attributes.is_empty() && text.is_none()
}

/// Log counts per severity band (trace … fatal, unspecified): one count per
/// bucket for each band that has any.
pub fn log_series(
    sources: &[Source<LogRecord>],
    buckets: Buckets,
    service: Option<&str>,
    min_severity: Option<i32>,
    explain: &mut Explain,
) -> Result<BandCounts> {
    let w = buckets.window();
    let mut by = BandCounter::new(buckets);
    let mut add = |t: u64, svc: &str, sev: i32| {
        if service.is_none_or(|v| v == svc) && min_severity.is_none_or(|m| sev >= m) {
            by.add(t, sev);
        }
    };
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut ex = SourceExplain::new("hot", None);
                for row in 0..m.total_rows() {
                    if m.is_live(row) {
                        let l = m.row(row);
                        ex.rows_examined += 1;
                        add(l.time(), l.service_name(), l.severity_number);
                    }
                }
                explain.add(ex);
            }
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                    explain.add(ex);
                    continue;
                }
                ex.rows_examined += scan_log_rows(p, w, &mut add)?;
                explain.add(ex);
            }
        }
    }
    Ok(by.finish())
}

/// A metric name and how many points of it are stored (in sources that
/// overlap the window; a part's count is of all its points).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricName {
    pub name: String,
    pub points: u64,
}

/// Every metric name with points in the window (by part and hot-tier
/// statistics; a part that straddles the window counts whole), by name.
pub fn metric_names(sources: &[Source<MetricPoint>], w: Window) -> Vec<MetricName> {
    let mut by: FastMap<String, u64> = FastMap::default();
    let mut add = |name: &str, n: u64| {
        if let Some(c) = by.get_mut(name) {
            *c += n;
        } else {
            by.insert(name.to_string(), n);
        }
    };
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                for row in 0..m.total_rows() {
                    let p = m.row(row);
                    if m.is_live(row) && w.contains(p.time()) {
                        add(&p.metric.name, 1);
                    }
                }
            }
            Source::Part(p) => {
                if !p.misses(w) {
                    for (name, n) in &p.index.stats.metric_names {
                        add(name, *n);
                    }
                }
            }
        }
    }
    let mut out: Vec<MetricName> = by
        .into_iter()
        .map(|(name, points)| MetricName { name, points })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::NS_PER_MINUTE;

    #[test]
    fn buckets_are_whole_minutes_and_at_most_the_points_asked() {
        let b = buckets(Window::new(0, 60 * NS_PER_MINUTE), 30);
        assert_eq!((b.minutes, b.count), (2, 30));
        let b = buckets(Window::new(0, 10 * NS_PER_MINUTE), 60);
        assert_eq!((b.minutes, b.count), (1, 10));
        let b = buckets(Window::new(5, 6), 0);
        assert_eq!((b.minutes, b.count), (1, 1));
    }
}
