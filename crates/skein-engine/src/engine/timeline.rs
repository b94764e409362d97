//! The engine's time series for charts (see [`crate::query::timeline`]).

use skein_model::{LogRecord, MetricPoint, Span};

use super::Engine;
use crate::error::Result;
use crate::query::diagnose::series::Buckets;
use crate::query::timeline::{self, BandCounts, MetricName, ServiceSeries};
use crate::query::{Explain, Window};
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
        let r = timeline::service_series(
            &self.state().sources::<Span>(),
            b,
            service,
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        Ok((b, r, ex))
    }

    /// Log counts per severity band in at most `points` whole-minute
    /// buckets covering `w`.
    pub fn log_series(
        &self,
        w: Window,
        points: usize,
        service: Option<&str>,
        min_severity: Option<i32>,
    ) -> Result<(Buckets, BandCounts, Explain)> {
        let mut ex = Explain::new(Signal::Logs);
        let b = timeline::buckets(w, points);
        let r = timeline::log_series(&self.state().sources::<LogRecord>(), b, service, min_severity, &mut ex)?;
        Ok((b, r, ex))
    }

    /// The metric names with points in `w`.
    pub fn metric_names(&self, w: Window) -> Vec<MetricName> {
        timeline::metric_names(&self.state().sources::<MetricPoint>(), w)
    }
}

impl Engine {
    /// Streams every metric point in `w` named one of `names` (`None`:
    /// all) to `f`, across the hot tier and the parts (see
    /// [`crate::query::series`]); returns the rows examined.
    pub fn scan_metric_points(
        &self,
        names: Option<&[String]>,
        w: Window,
        f: &mut dyn FnMut(&MetricPoint),
    ) -> Result<u64> {
        crate::query::series::scan_points(&self.state().sources::<MetricPoint>(), names, w, f)
    }
}
