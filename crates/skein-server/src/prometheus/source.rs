//! The evaluator's series source over the engine: metric points read by a
//! streaming scan (narrowed by the name postings of the OTLP names that can
//! carry the asked Prometheus name), turned into Prometheus samples by
//! [`naming`] (once per series for number points), and kept when every
//! matcher matches the final labels.

use std::collections::HashMap;

use std::sync::Arc;

use skein_engine::{AttrFilter, AttrPredicate, AttrScope, Engine, SeriesSink, Window};
use skein_model::{AnyValue, KeyValue, MetricDesc, MetricPoint, PointValue, Resource};
use skein_promql::{Labels, MatchOp, Matcher, NAME, SampleValue, Series, SeriesSource, naming};

use super::label_cache::LabelCache;
use crate::tenancy::Space;

pub struct EngineSource<'a> {
    pub engine: &'a Engine,
    /// The engine's series' labels, kept across queries.
    pub labels: &'a LabelCache,
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
    /// The source over a space's engine.
    pub fn of(space: &Space) -> EngineSource<'_> {
        EngineSource {
            engine: &space.engine,
            labels: &space.prometheus_labels,
        }
    }

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

    /// Hands `to` each Prometheus sample matching `matchers` in
    /// `[start, end]`; its series are numbered from 0, in the order first
    /// seen.
    pub fn visit(&self, matchers: &[Matcher], start: i64, end: i64, to: &mut dyn Visitor) -> Result<(), String> {
        let w = window(start, end);
        let names = self.candidate_names(matchers, w);
        if names.as_ref().is_some_and(Vec::is_empty) {
            return Ok(());
        }
        let target_info = matchers.iter().all(|m| m.name != NAME || m.is_match("target_info"));
        // target_info's labels come from resources, not point attributes.
        let filters = if target_info {
            Vec::new()
        } else {
            narrowing_filters(matchers)
        };
        let mut sink = Sink {
            matchers,
            target_info,
            cache: self.labels,
            memo: LabelMemo::default(),
            handles: Vec::new(),
            visit_numbers: Vec::new(),
            seen: 0,
            floats: Vec::new(),
            to,
        };
        self.engine
            .scan_metric_series(names.as_deref(), &filters, w, &mut sink)
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// What [`EngineSource::visit`] hands its samples to.
pub trait Visitor {
    /// A sample of the visit's series numbered `series`, labelled `labels`.
    fn sample(&mut self, series: usize, labels: &Labels, t: i64, v: SampleValue);

    /// Float samples of one series, ascending by time: a sample table's
    /// chunk at a time.
    fn floats(&mut self, series: usize, labels: &Labels, samples: &[(i64, f64)]) {
        for &(t, v) in samples {
            self.sample(series, labels, t, SampleValue::Float(v));
        }
    }
}

impl<F: FnMut(usize, &Labels, i64, SampleValue)> Visitor for F {
    fn sample(&mut self, series: usize, labels: &Labels, t: i64, v: SampleValue) {
        self(series, labels, t, v)
    }
}

/// A visit's [`SeriesSink`]: points and samples to Prometheus samples,
/// handed on when their labels match.
struct Sink<'m, 'f> {
    matchers: &'m [Matcher],
    target_info: bool,
    cache: &'m LabelCache,
    memo: LabelMemo,
    /// The label sets of each series the scan described, by handle.
    handles: Vec<SeriesLabels>,
    /// A label set's number in this visit, by its number in `memo`: the
    /// memo numbers a series' sets when the scan describes it, which may be
    /// before any of its samples falls in the window, or never; the visit
    /// numbers them in the order their first sample is handed on.
    visit_numbers: Vec<Option<usize>>,
    seen: usize,
    /// A batch of samples as Prometheus floats, reused.
    floats: Vec<(i64, f64)>,
    to: &'f mut dyn Visitor,
}

impl Sink<'_, '_> {
    fn emit(&mut self, series: SeriesLabels, t: i64, v: Option<f64>) {
        if let (Some(i), Some(v)) = (series.sample, v) {
            self.call(i, t, SampleValue::Float(v));
        }
        if let Some(i) = series.target_info {
            self.call(i, t, SampleValue::Float(1.0));
        }
    }

    /// Hands on a sample of the memo's label set `i`.
    fn call(&mut self, i: usize, t: i64, v: SampleValue) {
        let n = self.visit_number(i);
        self.to.sample(n, &self.memo.labels[i], t, v);
    }

    /// The visit's number of the memo's label set `i`.
    fn visit_number(&mut self, i: usize) -> usize {
        if i >= self.visit_numbers.len() {
            self.visit_numbers.resize(i + 1, None);
        }
        *self.visit_numbers[i].get_or_insert_with(|| {
            self.seen += 1;
            self.seen - 1
        })
    }
}

fn ms(time_unix_nano: u64) -> i64 {
    (time_unix_nano / 1_000_000) as i64
}

impl SeriesSink for Sink<'_, '_> {
    fn point(&mut self, p: &MetricPoint) {
        let t = ms(p.time_unix_nano);
        if let PointValue::Number(_) = p.value {
            // Labels found once per series, not per point.
            let series = self.memo.of(p, self.matchers, self.target_info);
            self.emit(series, t, naming::number_value(p));
            return;
        }
        for (l, v) in naming::samples(p) {
            if l.matches(self.matchers) {
                let i = self.memo.number(l);
                self.call(i, t, SampleValue::Float(v));
            }
        }
        if let Some((l, h)) = naming::native_histogram(p)
            && l.matches(self.matchers)
        {
            let i = self.memo.number(l);
            let v = match h {
                Some(h) => SampleValue::Histogram(Arc::new(h)),
                None => SampleValue::Float(f64::from_bits(skein_promql::STALE_NAN_BITS)),
            };
            self.call(i, t, v);
        }
        if self.target_info
            && let Some(l) = naming::target_info(p)
            && l.matches(self.matchers)
        {
            let i = self.memo.number(l);
            self.call(i, t, SampleValue::Float(1.0));
        }
    }

    fn series(&mut self, key: u64, p: &MetricPoint) -> Option<u32> {
        // Called once per series key: no identity lookup needed, and the
        // labels may be known from an earlier query.
        let derived = self.cache.of(key, p, self.target_info);
        let series = self
            .memo
            .keep(derived.sample, derived.target_info.flatten(), self.matchers);
        if series.sample.is_none() && series.target_info.is_none() {
            return None;
        }
        self.handles.push(series);
        Some((self.handles.len() - 1) as u32)
    }

    fn samples(&mut self, series: u32, samples: &[skein_engine::Sample]) {
        let labels = self.handles[series as usize];
        if let Some(i) = labels.sample {
            self.floats.clear();
            let floats = samples
                .iter()
                .filter_map(|s| Some((ms(s.time), naming::number_sample(s.value, s.flags)?)));
            self.floats.extend(floats);
            if !self.floats.is_empty() {
                let n = self.visit_number(i);
                self.to.floats(n, &self.memo.labels[i], &self.floats);
            }
        }
        if let Some(i) = labels.target_info {
            for s in samples {
                self.call(i, ms(s.time), SampleValue::Float(1.0));
            }
        }
    }
}

/// Attribute filters every point a matcher keeps passes, for the scan's
/// postings to narrow by: an equality matcher on a label that can come
/// from one attribute key only (letters and digits, so no other key
/// sanitizes to it; not one naming adds), with every value whose label
/// spelling is the matcher's. The matchers still decide, on each point's
/// labels.
fn narrowing_filters(matchers: &[Matcher]) -> Vec<AttrFilter> {
    const ADDED: &[&str] = &[NAME, "job", "instance", "le", "quantile"];
    matchers
        .iter()
        .filter(|m| matches!(m.op, MatchOp::Equal) && !ADDED.contains(&m.name.as_str()))
        .filter(|m| {
            m.name.starts_with(|c: char| c.is_ascii_alphabetic()) && m.name.chars().all(|c| c.is_ascii_alphanumeric())
        })
        .filter_map(|m| {
            let values = spelled(&m.value)?;
            Some(AttrFilter {
                scope: AttrScope::Record,
                key: m.name.clone(),
                predicate: AttrPredicate::AnyOf(values),
            })
        })
        .collect()
}

/// The attribute values whose label value ([`naming::label_value`]) is
/// `v`, if they are few and indexable: `None` for the empty value (an
/// absent label), a JSON array or map, or hex that bytes could spell.
fn spelled(v: &str) -> Option<Vec<AnyValue>> {
    let hex = v.len().is_multiple_of(2) && v.bytes().all(|b| b.is_ascii_hexdigit());
    if v.is_empty() || v.starts_with(['[', '{']) || hex {
        return None;
    }
    let mut out = vec![AnyValue::Str(v.to_string())];
    if let Ok(i) = v.parse::<i64>()
        && i.to_string() == v
    {
        out.push(AnyValue::Int(i));
    }
    if let Ok(d) = v.parse::<f64>()
        && skein_promql::format_float(d) == v
    {
        out.push(AnyValue::Double(d));
    }
    if let Ok(b) = v.parse::<bool>() {
        out.push(AnyValue::Bool(b));
    }
    Some(out)
}

/// What a number point's Prometheus labels are made of: all of the point
/// but its time, value and flags (see [`naming`]).
struct Identity {
    metric: Arc<MetricDesc>,
    attributes: Vec<KeyValue>,
    resource: Arc<Resource>,
    scope_name: String,
    scope_version: String,
}

impl Identity {
    fn of(p: &MetricPoint) -> Identity {
        Identity {
            metric: p.metric.clone(),
            attributes: p.attributes.clone(),
            resource: p.resource.clone(),
            scope_name: p.scope.name.clone(),
            scope_version: p.scope.version.clone(),
        }
    }

    fn is(&self, p: &MetricPoint) -> bool {
        let (a, b) = (&self.metric, &p.metric);
        a.name == b.name
            && a.unit == b.unit
            && a.kind == b.kind
            && self.attributes == p.attributes
            && self.resource.attributes == p.resource.attributes
            && self.scope_name == p.scope.name
            && self.scope_version == p.scope.version
    }

    /// A hash of what [`Identity::is`] compares.
    fn hash(p: &MetricPoint) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        skein_engine::stats::series_id(p).hash(&mut h);
        (&p.metric.unit, &p.metric.kind, &p.scope.name, &p.scope.version).hash(&mut h);
        h.finish()
    }
}

/// A number series' label sets, by number: its sample's and its
/// `target_info`'s, each if it matches.
#[derive(Clone, Copy)]
struct SeriesLabels {
    sample: Option<usize>,
    target_info: Option<usize>,
}

/// The label sets of one visit, numbered, and which a number point's
/// series has: converting a point's attributes to labels (and hashing
/// them) once per series rather than per point.
#[derive(Default)]
struct LabelMemo {
    labels: Vec<Labels>,
    numbers: HashMap<Labels, usize>,
    /// By [`Identity::hash`]; a clash keeps both.
    series: HashMap<u64, Vec<(Identity, SeriesLabels)>>,
}

impl LabelMemo {
    fn number(&mut self, l: Labels) -> usize {
        if let Some(&i) = self.numbers.get(&l) {
            return i;
        }
        let i = self.labels.len();
        self.labels.push(l.clone());
        self.numbers.insert(l, i);
        i
    }

    /// The label sets of `p`'s series, derived once per series.
    fn of(&mut self, p: &MetricPoint, matchers: &[Matcher], target_info: bool) -> SeriesLabels {
        let h = Identity::hash(p);
        if let Some(found) = self.series.get(&h).and_then(|v| v.iter().find(|(id, _)| id.is(p))) {
            return found.1;
        }
        let labels = self.derive(p, matchers, target_info);
        self.series.entry(h).or_default().push((Identity::of(p), labels));
        labels
    }

    /// The label sets of `p`'s series, derived now: for a point whose
    /// series the caller already tells apart (the scan's series key).
    fn derive(&mut self, p: &MetricPoint, matchers: &[Matcher], target_info: bool) -> SeriesLabels {
        let sample = naming::samples(p).into_iter().next().map(|(l, _)| l);
        let info = if target_info { naming::target_info(p) } else { None };
        self.keep(sample, info, matchers)
    }

    /// A series' label sets numbered, each kept if `matchers` match it.
    fn keep(&mut self, sample: Option<Labels>, info: Option<Labels>, matchers: &[Matcher]) -> SeriesLabels {
        let mut keep = |l: Option<Labels>| l.filter(|l| l.matches(matchers)).map(|l| self.number(l));
        SeriesLabels {
            sample: keep(sample),
            target_info: keep(info),
        }
    }
}

impl SeriesSource for EngineSource<'_> {
    fn select(&self, matchers: &[Matcher], start: i64, end: i64) -> Result<Vec<Series>, String> {
        let mut got = Selected::default();
        self.visit(matchers, start, end, &mut got)?;
        let mut series = got.series;
        for s in &mut series {
            // The scan hands samples over oldest first, so sorting is for
            // tiers or parts that overlap in time. One sample per
            // timestamp: a point seen in two tiers at once is the same
            // point.
            if !s.samples.is_sorted_by_key(|s| s.0) {
                s.samples.sort_by_key(|s| s.0);
            }
            s.samples.dedup_by_key(|s| s.0);
            if !s.histograms.is_sorted_by_key(|s| s.0) {
                s.histograms.sort_by_key(|s| s.0);
            }
            s.histograms.dedup_by_key(|s| s.0);
        }
        Ok(series)
    }
}

/// The series of a visit, as [`SeriesSource::select`] answers them.
#[derive(Default)]
struct Selected {
    series: Vec<Series>,
}

impl Selected {
    fn at(&mut self, i: usize, labels: &Labels) -> &mut Series {
        if i == self.series.len() {
            self.series.push(Series {
                labels: labels.clone(),
                samples: Vec::new(),
                histograms: Vec::new(),
            });
        }
        &mut self.series[i]
    }
}

impl Visitor for Selected {
    fn sample(&mut self, series: usize, labels: &Labels, t: i64, v: SampleValue) {
        let s = self.at(series, labels);
        match v {
            SampleValue::Float(v) => s.samples.push((t, v)),
            SampleValue::Histogram(h) => s.histograms.push((t, h)),
        }
    }

    fn floats(&mut self, series: usize, labels: &Labels, samples: &[(i64, f64)]) {
        self.at(series, labels).samples.extend_from_slice(samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_spelled_by_every_attribute_value_they_can_come_from() {
        assert_eq!(spelled("g0"), Some(vec![AnyValue::Str("g0".into())]));
        assert_eq!(
            spelled("5"),
            Some(vec![AnyValue::Str("5".into()), AnyValue::Int(5), AnyValue::Double(5.0)])
        );
        assert_eq!(spelled("0.5").map(|v| v.len()), Some(2));
        assert_eq!(spelled("007").map(|v| v.len()), Some(1), "007 is no int's spelling");
        assert_eq!(spelled("true").map(|v| v.len()), Some(2));
        for v in ["", "ab", "[1]", "{}"] {
            assert_eq!(spelled(v), None, "{v}");
        }
    }

    #[test]
    fn only_labels_one_attribute_key_makes_narrow() {
        let m = |name: &str, op: MatchOp, value: &str| Matcher::new(op, name, value);
        let filters = narrowing_filters(&[
            m(NAME, MatchOp::Equal, "x"),
            m("job", MatchOp::Equal, "a"),
            m("le", MatchOp::Equal, "1"),
            m("http_method", MatchOp::Equal, "GET"),
            m("status", MatchOp::NotEqual, "500"),
            m("zone", MatchOp::Equal, ""),
            m("group", MatchOp::Equal, "g0"),
        ]);
        let keys: Vec<&str> = filters.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["group"]);
    }
}
