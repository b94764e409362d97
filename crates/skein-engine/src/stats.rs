//! Pre-aggregated statistics of a set of records: per (service, operation)
//! span counts, errors and duration sketches, traces per service, log
//! counts by severity, metric series and names. Built as records arrive (by
//! part writers, and by the hot tier so that aggregations need not scan
//! it) and stored in each part's sidecar.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use skein_model::MetricPoint;
use xxhash_rust::xxh3::Xxh3;

use crate::hash::{FastMap, FastSet, HashWriter};
use crate::query::sketch::{Sketch, SketchBuilder, coarse};

/// Per (service, operation) span statistics of a part.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpStats {
    pub service: String,
    pub name: String,
    pub count: u64,
    pub errors: u64,
    pub roots: u64,
    pub durations: Sketch,
    pub error_durations: u64,
    /// The same counts minute by minute, ascending: what change detection
    /// reads (see [`MinuteStats`]).
    pub minutes: Vec<MinuteStats>,
}

/// One minute of one operation: spans started in it, errors and roots
/// among them, the longest duration exactly, and the durations as
/// [`coarse`] values (within 6.25%), which keeps a minute to a few dozen
/// buckets. Change detection reads them, and so do aggregations over a
/// window that cuts through the part (its whole minutes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MinuteStats {
    /// Minutes since the Unix epoch.
    pub minute: u32,
    pub count: u32,
    pub errors: u32,
    pub roots: u32,
    /// The longest duration, exact (the sketch's own maximum is coarse).
    pub max_ns: u64,
    pub durations: Sketch,
}

pub const NS_PER_MINUTE: u64 = 60_000_000_000;

/// The minute a time falls in.
pub fn minute_of(t: u64) -> u32 {
    (t / NS_PER_MINUTE).min(u32::MAX as u64) as u32
}

impl MinuteStats {
    /// Counts one span into the minute list `minutes` (ascending). Spans
    /// mostly arrive in time order, so the last minute is tried first.
    pub fn add(minutes: &mut Vec<MinuteStats>, start_time: u64, duration_ns: u64, error: bool, root: bool) {
        let minute = minute_of(start_time);
        let pos = match minutes.last() {
            Some(m) if m.minute == minute => minutes.len() - 1,
            Some(m) if m.minute < minute => {
                minutes.push(MinuteStats::new(minute));
                minutes.len() - 1
            }
            None => {
                minutes.push(MinuteStats::new(minute));
                0
            }
            Some(_) => match minutes.binary_search_by_key(&minute, |m| m.minute) {
                Ok(i) => i,
                Err(i) => {
                    minutes.insert(i, MinuteStats::new(minute));
                    i
                }
            },
        };
        let m = &mut minutes[pos];
        m.count = m.count.saturating_add(1);
        m.errors = m.errors.saturating_add(error as u32);
        m.roots = m.roots.saturating_add(root as u32);
        m.max_ns = m.max_ns.max(duration_ns);
        m.durations.add(coarse(duration_ns));
    }

    fn new(minute: u32) -> MinuteStats {
        MinuteStats {
            minute,
            ..Default::default()
        }
    }
}

/// Per service: distinct traces in this part.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServiceStats {
    pub service: String,
    pub traces: u64,
    /// `(minute, n)`, ascending: `n` distinct traces have a span of this
    /// service starting in that minute. A window of whole minutes counts
    /// the traces it holds from them, a trace whose spans fall in several
    /// minutes once per minute (never fewer than the distinct traces, and
    /// never more than the spans).
    pub trace_minutes: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PartStats {
    pub ops: Vec<OpStats>,
    pub services: Vec<ServiceStats>,
    /// Logs: (service, severity number, count).
    pub log_counts: Vec<(String, i32, u64)>,
    /// Metrics: distinct series ids, sorted.
    pub series: Vec<u64>,
    /// Metrics: (metric name, points).
    pub metric_names: Vec<(String, u64)>,
}

/// Pre-aggregated statistics of a set of records, built as they arrive (by
/// part writers, and by the hot tier so that aggregations need not scan it).
#[derive(Default, Clone)]
pub struct StatsBuilder {
    /// By service (nested maps: lookups by `&str` never allocate).
    services: FastMap<String, ServiceBuilder>,
    log_counts: HashMap<(String, i32), u64>,
    series: HashSet<u64>,
    metric_names: HashMap<String, u64>,
}

#[derive(Default, Clone)]
struct ServiceBuilder {
    /// Span name → stats, with the durations in a builder until a snapshot.
    ops: FastMap<String, (OpStats, SketchBuilder)>,
    traces: FastSet<u128>,
    /// (trace, minute) of every span of this service.
    trace_minutes: FastSet<(u128, u32)>,
}

impl ServiceBuilder {
    fn add(&mut self, service_name: &str, s: &skein_model::Span) {
        let trace = s.trace_id.as_u128();
        // A pair seen before means its trace was too: a trace's spans
        // mostly start in one minute, so most spans probe one set, not two.
        if self.trace_minutes.insert((trace, minute_of(s.start_time_unix_nano))) {
            self.traces.insert(trace);
        }
        let (op, durations) = match self.ops.get_mut(&s.name) {
            Some(op) => op,
            None => {
                let op = OpStats {
                    service: service_name.to_string(),
                    name: s.name.clone(),
                    ..Default::default()
                };
                self.ops.entry(s.name.clone()).or_insert((op, SketchBuilder::default()))
            }
        };
        op.count += 1;
        if s.is_error() {
            op.errors += 1;
        }
        if s.is_root() {
            op.roots += 1;
        }
        durations.add(s.duration_ns());
        MinuteStats::add(
            &mut op.minutes,
            s.start_time_unix_nano,
            s.duration_ns(),
            s.is_error(),
            s.is_root(),
        );
    }
}

impl ServiceBuilder {
    /// Distinct traces per minute, ascending.
    fn trace_minutes(&self) -> Vec<(u32, u32)> {
        let mut by: std::collections::BTreeMap<u32, u32> = std::collections::BTreeMap::new();
        for &(_, minute) in &self.trace_minutes {
            *by.entry(minute).or_default() += 1;
        }
        by.into_iter().collect()
    }
}

impl StatsBuilder {
    pub fn span_stats(&mut self, s: &skein_model::Span) {
        // One lookup for a service seen before, which is nearly every span.
        let service_name = s.service_name();
        match self.services.get_mut(service_name) {
            Some(service) => service.add(service_name, s),
            None => self
                .services
                .entry(service_name.to_string())
                .or_default()
                .add(service_name, s),
        }
    }

    pub fn log_stats(&mut self, l: &skein_model::LogRecord) {
        *self
            .log_counts
            .entry((l.service_name().to_string(), l.severity_number))
            .or_default() += 1;
    }

    pub fn metric_stats(&mut self, p: &skein_model::MetricPoint) {
        self.series.insert(series_id(p));
        *self.metric_names.entry(p.metric.name.clone()).or_default() += 1;
    }

    /// The statistics so far.
    pub fn snapshot(&self) -> PartStats {
        let mut ops: Vec<OpStats> = self
            .services
            .values()
            .flat_map(|m| m.ops.values())
            .map(|(op, durations)| OpStats {
                durations: durations.sketch(),
                ..op.clone()
            })
            .collect();
        ops.sort_by(|a, b| (&a.service, &a.name).cmp(&(&b.service, &b.name)));
        let mut services: Vec<ServiceStats> = self
            .services
            .iter()
            .map(|(service, b)| ServiceStats {
                service: service.clone(),
                traces: b.traces.len() as u64,
                trace_minutes: b.trace_minutes(),
            })
            .collect();
        services.sort_by(|a, b| a.service.cmp(&b.service));
        let mut log_counts: Vec<_> = self.log_counts.iter().map(|((s, v), n)| (s.clone(), *v, *n)).collect();
        log_counts.sort();
        let mut series: Vec<u64> = self.series.iter().copied().collect();
        series.sort_unstable();
        let mut metric_names: Vec<_> = self.metric_names.iter().map(|(k, v)| (k.clone(), *v)).collect();
        metric_names.sort();
        PartStats {
            ops,
            services,
            log_counts,
            series,
            metric_names,
        }
    }
}

/// Identity of a metric series: name, resource and point attributes.
pub fn series_id(p: &MetricPoint) -> u64 {
    let mut h = Xxh3::new();
    h.update(p.metric.name.as_bytes());
    let mut w = HashWriter::default();
    let _ = postcard::to_io(&p.resource.attributes, &mut w);
    let _ = postcard::to_io(&p.attributes, &mut w);
    h.update(&w.digest128().to_le_bytes());
    h.digest()
}

/// Identity of a metric series as a series scan reads it (a metric part's
/// `series_key` column): the point's [`series_id`] with its metric's kind
/// and unit and its scope. Two points share a key exactly when they differ
/// at most in time, start time, value, flags, exemplars, description and
/// metadata, up to a 64-bit hash clash (about n²/2⁶⁵ among n series:
/// 10⁻⁸ at a million).
pub fn series_key(p: &MetricPoint, series_id: u64) -> u64 {
    let mut w = HashWriter::default();
    let _ = postcard::to_io(&(series_id, &p.metric.kind, &p.metric.unit, &*p.scope), &mut w);
    let d = w.digest128();
    (d as u64) ^ ((d >> 64) as u64)
}
