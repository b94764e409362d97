//! The evaluator's series source over the engine: metric points read by a
//! streaming scan (narrowed by the name postings of the OTLP names that can
//! carry the asked Prometheus name), turned into Prometheus samples by
//! [`naming`], and kept when every matcher matches the final labels.

use std::collections::HashMap;

use skein_engine::{Engine, Window};
use skein_promql::{Labels, MatchOp, Matcher, NAME, Series, SeriesSource, naming};

pub struct EngineSource<'a> {
    pub engine: &'a Engine,
}

/// Milliseconds to the engine's nanoseconds (before the epoch: the epoch).
pub fn ns(ms: i64) -> u64 {
    (ms.max(0) as u64).saturating_mul(1_000_000)
}

/// The window of `[start, end]` milliseconds, both inclusive.
pub fn window(start: i64, end: i64) -> Window {
    Window::new(ns(start), ns(end.saturating_add(1)).max(ns(start)))
}

impl EngineSource<'_> {
    /// The OTLP metric names whose points may match `matchers` (`None`:
    /// any may).
    fn candidate_names(&self, matchers: &[Matcher], w: Window) -> Option<Vec<String>> {
        let name = matchers
            .iter()
            .find(|m| m.name == NAME && matches!(m.op, MatchOp::Equal))
            .map(|m| m.value.as_str())?;
        if name == "target_info" {
            return None;
        }
        Some(
            self.engine
                .metric_names(w)
                .into_iter()
                .map(|m| m.name)
                .filter(|o| naming::may_be_named(o, name))
                .collect(),
        )
    }

    /// Calls `f` with each Prometheus sample `(labels, ms, value)` matching
    /// `matchers` in `[start, end]`.
    pub fn visit(
        &self,
        matchers: &[Matcher],
        start: i64,
        end: i64,
        f: &mut dyn FnMut(Labels, i64, f64),
    ) -> Result<(), String> {
        let w = window(start, end);
        let names = self.candidate_names(matchers, w);
        if names.as_ref().is_some_and(Vec::is_empty) {
            return Ok(());
        }
        let target_info = matchers.iter().all(|m| m.name != NAME || m.is_match("target_info"));
        self.engine
            .scan_metric_points(names.as_deref(), w, &mut |p| {
                let t = (p.time_unix_nano / 1_000_000) as i64;
                for (l, v) in naming::samples(p) {
                    if l.matches(matchers) {
                        f(l, t, v);
                    }
                }
                if target_info
                    && let Some(l) = naming::target_info(p)
                    && l.matches(matchers)
                {
                    f(l, t, 1.0);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl SeriesSource for EngineSource<'_> {
    fn select(&self, matchers: &[Matcher], start: i64, end: i64) -> Result<Vec<Series>, String> {
        let mut by: HashMap<Labels, Vec<(i64, f64)>> = HashMap::new();
        self.visit(matchers, start, end, &mut |l, t, v| {
            by.entry(l).or_default().push((t, v))
        })?;
        Ok(by
            .into_iter()
            .map(|(labels, mut samples)| {
                // One sample per timestamp: a point seen in two tiers at
                // once is the same point.
                samples.sort_by_key(|s| s.0);
                samples.dedup_by_key(|s| s.0);
                Series { labels, samples }
            })
            .collect())
    }
}
