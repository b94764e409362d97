//! The engine's time series for charts (see [`crate::query::timeline`]).

use skein_model::{LogRecord, MetricPoint, Span};

use super::Engine;
use crate::error::Result;
use crate::query::diagnose::series::Buckets;
use crate::query::timeline::{self, BandCounts, MetricName, ServiceSeries};
use crate::query::{Explain, LogQuery, Window};
use crate::record::Signal;

impl Engine {
    /// Per service, spans, errors and p95 in at most `points` whole-minute
    /// buckets covering `w`.
    pub fn service_series(
        &self,
        w: Window,
        points: usize,
        service: Option<&str>,
    ) -> Result<(Buckets, Vec<ServiceSeries>, Explain)> {
        let mut ex = Explain::new(Signal::Spans);
        let b = timeline::buckets(w, points);
        let mut r = timeline::service_series(
            &self.state().sources::<Span>(),
            b,
            service,
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        let expired = expired_buckets(&b, self.inner.floor(Signal::Spans));
        for s in &mut r {
            for v in [&mut s.spans, &mut s.errors, &mut s.p95_ns] {
                v.iter_mut().take(expired).for_each(|x| *x = 0);
            }
        }
        r.retain(|s| s.spans.iter().any(|n| *n > 0));
        Ok((b, r, ex))
    }

    /// Log counts per severity band in at most `points` whole-minute
    /// buckets covering `q.window`, of the logs that match `q` (its limit
    /// and cursor aside). A query of service and severity alone is counted
    /// from three narrow columns; any other filter (text, body, trace,
    /// attributes) visits its matches, narrowed by the same indexes as a
    /// search and each re-checked, so the histogram counts exactly the
    /// lines a search with the same filters would page through.
    pub fn log_series(&self, q: &LogQuery, points: usize) -> Result<(Buckets, BandCounts, Explain)> {
        let b = timeline::buckets(q.window, points);
        let (mut bands, ex) = if timeline::is_service_and_severity_only(q) {
            let mut ex = Explain::new(Signal::Logs);
            let sources = self.state().sources::<LogRecord>();
            let bands = timeline::log_series(&sources, b, q.service.as_deref(), q.min_severity, &mut ex)?;
            (bands, ex)
        } else {
            let mut counts = timeline::BandCounter::new(b);
            let ex = self.visit_logs(q, &mut |l| counts.add(l.effective_time(), l.severity_number))?;
            (counts.finish(), ex)
        };
        let expired = expired_buckets(&b, self.inner.floor(Signal::Logs));
        for v in bands.values_mut() {
            v.iter_mut().take(expired).for_each(|x| *x = 0);
        }
        bands.retain(|_, v| v.iter().any(|n| *n > 0));
        Ok((b, bands, ex))
    }

    /// The metric names with points in `w`.
    pub fn metric_names(&self, w: Window) -> Vec<MetricName> {
        timeline::metric_names(
            &self.state().sources::<MetricPoint>(),
            w.starting_by(self.inner.floor(Signal::Metrics).min(w.end)),
        )
    }
}

/// How many leading buckets start before the retention `floor`: they are
/// counted from whole minutes (per-minute statistics), so any of them may
/// hold expired records, and they are answered as empty. A bucket holding
/// both sides of the line is empty too: an expired record is never
/// counted, at the cost of the live part of one bucket.
fn expired_buckets(b: &Buckets, floor: u64) -> usize {
    if floor == 0 {
        return 0;
    }
    (0..b.count).take_while(|&i| b.start_of(i) < floor).count()
}

impl Engine {
    /// Streams every metric point in `w` named one of `names` (`None`:
    /// all) that every filter matches to `sink`, number points of parts as
    /// samples of their series, across the hot tier and the parts (see
    /// [`crate::query::series`]); returns the rows examined.
    pub fn scan_metric_series(
        &self,
        names: Option<&[String]>,
        filters: &[crate::query::AttrFilter],
        w: Window,
        sink: &mut dyn crate::query::series::SeriesSink,
    ) -> Result<u64> {
        // Retention: nothing before the metrics' line (the scan re-checks
        // every point against the window).
        let w = self.live(crate::record::Signal::Metrics, w);
        crate::query::series::scan_series(&self.state().sources::<MetricPoint>(), names, filters, w, sink)
    }
}

impl Engine {
    /// Streams `signal`'s rows in `req.window` as Arrow batches in the part
    /// layout (see [`crate::query::scan`]): `f` gets each batch as it is
    /// read and returns `false` to stop. The request only narrows; the
    /// caller re-checks its predicates.
    pub fn scan_batches(
        &self,
        signal: crate::record::Signal,
        req: &crate::query::scan::ScanRequest,
        f: &mut dyn FnMut(arrow_array::RecordBatch) -> bool,
    ) -> Result<crate::query::scan::ScanStats> {
        // Retention: nothing before the signal's line.
        let mut req = req.clone();
        req.window = self.live(signal, req.window);
        crate::query::scan::scan(signal, &self.state(), &self.inner.shadow_cache, &req, f)
    }
}
