//! Aggregations over spans, logs and metrics: service health (RED),
//! operations, and the summary an agent reads first.
//!
//! Parts wholly inside the window answer from their pre-aggregated
//! statistics. A span part that straddles it answers its whole minutes
//! inside the window from its per-minute statistics (durations rounded to
//! within 6.25%) and scans the partial minutes at the edges through a
//! handful of narrow columns (never the JSON ones), so a window costs its
//! minutes, not its rows; other straddling parts are scanned; the hot tier
//! is scanned in memory. Percentiles come from mergeable sketches (±1%
//! relative, ±6.25% over per-minute statistics); counts and maxima are
//! exact. Trace counts are exact per source (per minute over per-minute
//! statistics) and summed, so a trace split across two parts counts in both
//! until compaction merges them.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::shadow::{ShadowCache, shadowed_span_rows};
use super::window::Window;
use crate::hash::{FastMap, FastSet};

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int8Type, Int64Type, TimestampNanosecondType, UInt64Type};
use serde::Serialize;
use skein_model::log::severity_band;
use skein_model::{LogRecord, MetricPoint, Span, StatusCode};

use super::explain::{Explain, SourceExplain};
use super::search::Source;
use super::sketch::{Sketch, SketchSum};
use crate::error::Result;
use crate::part::Part;
use crate::part::columns::SPAN_SUMMARY_COLUMNS;
use crate::record::Record;
use crate::stats::{NS_PER_MINUTE, OpStats, PartStats, minute_of, series_id};

/// Health of one service over a window.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServiceSummary {
    pub service: String,
    pub spans: u64,
    pub traces: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Spans per second over the window (or the data's span within it).
    pub rate_per_sec: f64,
}

/// RED metrics of one operation (span name) of a service.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OperationSummary {
    pub service: String,
    pub name: String,
    pub spans: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub rate_per_sec: f64,
}

#[derive(Default, Clone)]
struct OpAcc {
    count: u64,
    errors: u64,
    roots: u64,
    durations: SketchSum,
}

impl OpAcc {
    fn add_stats(&mut self, s: &OpStats) {
        self.count += s.count;
        self.errors += s.errors;
        self.roots += s.roots;
        self.durations.merge(&s.durations);
    }
}

/// Span aggregates gathered over a window.
#[derive(Default)]
struct SpanAgg {
    /// service → operation → accumulator (nested so lookups by `&str` never
    /// allocate; a key is copied only the first time it is seen).
    ops: FastMap<String, FastMap<String, OpAcc>>,
    traces: HashMap<String, u64>,
    min_time: u64,
    max_time: u64,
}

impl SpanAgg {
    fn op(&mut self, service: &str, name: &str) -> &mut OpAcc {
        if !self.ops.contains_key(service) {
            self.ops.insert(service.to_string(), FastMap::default());
        }
        let by_name = self.ops.get_mut(service).expect("inserted above");
        if !by_name.contains_key(name) {
            by_name.insert(name.to_string(), OpAcc::default());
        }
        by_name.get_mut(name).expect("inserted above")
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &String, &OpAcc)> {
        self.ops
            .iter()
            .flat_map(|(svc, m)| m.iter().map(move |(n, a)| (svc, n, a)))
    }
}

fn rate(count: u64, w: Window, min_time: u64, max_time: u64) -> f64 {
    let start = w.start.max(min_time);
    let end = if w.end == u64::MAX {
        max_time.saturating_add(1)
    } else {
        w.end
    };
    let secs = end.saturating_sub(start) as f64 / 1e9;
    if secs <= 0.0 { count as f64 } else { count as f64 / secs }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn gather_spans(
    sources: &[Source<Span>],
    w: Window,
    service: Option<&str>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<SpanAgg> {
    let mut agg = SpanAgg {
        min_time: u64::MAX,
        ..Default::default()
    };
    let shadowed = shadowed_span_rows(sources, w, cache)?;
    for (s, shadowed) in sources.iter().zip(&shadowed) {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut ex = SourceExplain::new("hot", None);
                if shadowed.is_empty()
                    && let Some((stats, min, max)) = m.stats()
                    && w.contains(min)
                    && w.contains(max)
                {
                    ex.pruned = Some("answered from hot-tier statistics".into());
                    add_span_stats(&mut agg, &stats, service, min, max);
                    explain.add(ex);
                    continue;
                }
                let mut traces: FastMap<&str, FastSet<u128>> = FastMap::default();
                for row in 0..m.total_rows() {
                    if !m.is_live(row) || shadowed.contains(&row) {
                        continue;
                    }
                    let sp = m.row(row);
                    ex.rows_examined += 1;
                    if !w.contains(sp.start_time_unix_nano) || service.is_some_and(|v| v != sp.service_name()) {
                        continue;
                    }
                    let acc = agg.op(sp.service_name(), &sp.name);
                    acc.count += 1;
                    acc.errors += sp.is_error() as u64;
                    acc.roots += sp.is_root() as u64;
                    acc.durations.add(sp.duration_ns());
                    traces
                        .entry(sp.service_name())
                        .or_default()
                        .insert(sp.trace_id.as_u128());
                    agg.min_time = agg.min_time.min(sp.start_time_unix_nano);
                    agg.max_time = agg.max_time.max(sp.start_time_unix_nano);
                }
                for (svc, t) in traces {
                    *agg.traces.entry(svc.to_string()).or_default() += t.len() as u64;
                }
                explain.add(ex);
            }
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                } else if p.within(w) && shadowed.is_empty() {
                    ex.pruned = Some("answered from part statistics".into());
                    explain.parts_from_stats += 1;
                    add_span_stats(&mut agg, &p.index.stats, service, p.meta.min_time, p.meta.max_time);
                } else if let Some(inner) = whole_minutes(w, p).filter(|_| shadowed.is_empty()) {
                    // The window cuts through the part: its whole minutes
                    // from the per-minute statistics, the partial minutes
                    // at the window's edges scanned.
                    ex.pruned = Some(MINUTES_FROM_STATS.into());
                    add_minute_stats(&mut agg, p, inner, service);
                    for edge in [Window::new(w.start, inner.start), Window::new(inner.end, w.end)] {
                        if edge.start < edge.end && !p.misses(edge) {
                            scan_part_spans(p, edge, service, shadowed, &mut agg, &mut ex)?;
                        }
                    }
                } else {
                    scan_part_spans(p, w, service, shadowed, &mut agg, &mut ex)?;
                }
                explain.add(ex);
            }
        }
    }
    Ok(agg)
}

/// Adds pre-aggregated statistics (of a part or a hot tier wholly inside
/// the window) to the aggregate.
fn add_span_stats(agg: &mut SpanAgg, stats: &PartStats, service: Option<&str>, min: u64, max: u64) {
    for op in &stats.ops {
        if service.is_none_or(|v| v == op.service) {
            agg.op(&op.service, &op.name).add_stats(op);
        }
    }
    for st in &stats.services {
        if service.is_none_or(|v| v == st.service) {
            *agg.traces.entry(st.service.clone()).or_default() += st.traces;
        }
    }
    agg.min_time = agg.min_time.min(min);
    agg.max_time = agg.max_time.max(max);
}

/// How `explain` names a part cut by the window whose whole minutes were
/// answered from its per-minute statistics.
const MINUTES_FROM_STATS: &str = "whole minutes answered from part statistics, edges scanned";

/// The whole minutes of `w` that hold rows of `p`, as a window on minute
/// boundaries inside `w` (an open end takes every minute of the part);
/// `None` when `w` holds no whole minute.
fn whole_minutes(w: Window, p: &Part) -> Option<Window> {
    let start = w.start.div_ceil(NS_PER_MINUTE).checked_mul(NS_PER_MINUTE)?;
    let end = if w.end == u64::MAX {
        (p.meta.max_time / NS_PER_MINUTE + 1).saturating_mul(NS_PER_MINUTE)
    } else {
        w.end / NS_PER_MINUTE * NS_PER_MINUTE
    };
    (start < end).then(|| Window::new(start, end))
}

/// Adds `p`'s per-minute statistics of the whole minutes `inner` (of
/// `service`, if given) to the aggregate: counts, errors, roots and maxima
/// exact, durations rounded (within 6.25%), traces counted per minute.
fn add_minute_stats(agg: &mut SpanAgg, p: &Part, inner: Window, service: Option<&str>) {
    let (first, end) = (minute_of(inner.start), minute_of(inner.end));
    let (mut min_t, mut max_t) = (u64::MAX, 0u64);
    for op in &p.index.stats.ops {
        if service.is_some_and(|v| v != op.service) {
            continue;
        }
        let from = op.minutes.partition_point(|m| m.minute < first);
        let to = op.minutes.partition_point(|m| m.minute < end);
        let minutes = &op.minutes[from..to];
        let (Some(earliest), Some(latest)) = (minutes.first(), minutes.last()) else {
            continue;
        };
        let mut durations = Sketch::merged(minutes.iter().map(|m| &m.durations));
        durations.set_max(minutes.iter().map(|m| m.max_ns).max().unwrap_or(0));
        let acc = agg.op(&op.service, &op.name);
        for m in minutes {
            acc.count += u64::from(m.count);
            acc.errors += u64::from(m.errors);
            acc.roots += u64::from(m.roots);
        }
        acc.durations.merge(&durations);
        min_t = min_t.min(u64::from(earliest.minute) * NS_PER_MINUTE);
        max_t = max_t.max((u64::from(latest.minute) + 1) * NS_PER_MINUTE - 1);
    }
    for st in &p.index.stats.services {
        if service.is_some_and(|v| v != st.service) {
            continue;
        }
        let from = st.trace_minutes.partition_point(|(m, _)| *m < first);
        let to = st.trace_minutes.partition_point(|(m, _)| *m < end);
        let n: u64 = st.trace_minutes[from..to].iter().map(|(_, n)| u64::from(*n)).sum();
        if n > 0 {
            *agg.traces.entry(st.service.clone()).or_default() += n;
        }
    }
    if min_t <= max_t {
        agg.min_time = agg.min_time.min(min_t.max(p.meta.min_time));
        agg.max_time = agg.max_time.max(max_t.min(p.meta.max_time));
    }
}

/// One span row as the narrow summary columns hold it.
pub(crate) struct SummaryRow<'a> {
    pub trace: u128,
    pub is_root: bool,
    pub service: &'a str,
    pub name: &'a str,
    pub start: u64,
    pub duration_ns: u64,
    pub error: bool,
}

/// Calls `f` with every row of `p` in `w` (of `service`, if given) that
/// `shadowed` does not hold, read through the narrow summary columns
/// (never the JSON ones).
pub(crate) fn scan_summary_rows(
    p: &Part,
    w: Window,
    service: Option<&str>,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    mut f: impl FnMut(&SummaryRow),
) -> Result<()> {
    let range = p.index.row_range(p.rows(), w);
    let mut next_row = range.start;
    for b in p.read_columns(SPAN_SUMMARY_COLUMNS, range, 65536)? {
        let first_row = next_row;
        next_row += b.num_rows() as u32;
        let (Some(tid), Some(parent), Some(name), Some(start), Some(dur), Some(status), Some(svc)) = (
            b.column_by_name("trace_id").and_then(|c| c.as_fixed_size_binary_opt()),
            b.column_by_name("parent_span_id")
                .and_then(|c| c.as_fixed_size_binary_opt()),
            b.column_by_name("name").and_then(|c| c.as_string_opt::<i32>()),
            b.column_by_name("start_time_unix_nano")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>()),
            b.column_by_name("duration_ns")
                .and_then(|c| c.as_primitive_opt::<Int64Type>()),
            b.column_by_name("status_code")
                .and_then(|c| c.as_primitive_opt::<Int8Type>()),
            b.column_by_name("service_name").and_then(|c| c.as_string_opt::<i32>()),
        ) else {
            continue;
        };
        ex.rows_examined += b.num_rows() as u64;
        for i in 0..b.num_rows() {
            if shadowed.contains(&(first_row + i as u32)) {
                continue;
            }
            let t = start.value(i).max(0) as u64;
            let s = svc.value(i);
            if !w.contains(t) || service.is_some_and(|v| v != s) {
                continue;
            }
            f(&SummaryRow {
                trace: u128::from_be_bytes(tid.value(i).try_into().unwrap_or_default()),
                is_root: parent.is_null(i),
                service: s,
                name: name.value(i),
                start: t,
                duration_ns: dur.value(i).max(0) as u64,
                error: status.value(i) == StatusCode::Error as i8,
            });
        }
    }
    Ok(())
}

fn scan_part_spans(
    p: &Part,
    w: Window,
    service: Option<&str>,
    shadowed: &FastSet<u32>,
    agg: &mut SpanAgg,
    ex: &mut SourceExplain,
) -> Result<()> {
    let mut traces: FastMap<String, FastSet<u128>> = FastMap::default();
    scan_summary_rows(p, w, service, shadowed, ex, |r| {
        let acc = agg.op(r.service, r.name);
        acc.count += 1;
        acc.errors += r.error as u64;
        acc.roots += r.is_root as u64;
        acc.durations.add(r.duration_ns);
        if let Some(set) = traces.get_mut(r.service) {
            set.insert(r.trace);
        } else {
            traces.insert(r.service.to_string(), FastSet::from_iter([r.trace]));
        }
        agg.min_time = agg.min_time.min(r.start);
        agg.max_time = agg.max_time.max(r.start);
    })?;
    for (svc, t) in traces {
        *agg.traces.entry(svc).or_default() += t.len() as u64;
    }
    Ok(())
}

fn services_of(agg: &SpanAgg, w: Window) -> Vec<ServiceSummary> {
    let mut by_service: BTreeMap<&str, OpAcc> = BTreeMap::new();
    for (svc, _, acc) in agg.iter() {
        let e = by_service.entry(svc).or_default();
        e.count += acc.count;
        e.errors += acc.errors;
        e.roots += acc.roots;
        e.durations.merge_sum(&acc.durations);
    }
    by_service
        .into_iter()
        .map(|(svc, acc)| {
            let durations = acc.durations.sketch();
            ServiceSummary {
                service: svc.to_string(),
                spans: acc.count,
                traces: agg.traces.get(svc).copied().unwrap_or(0),
                errors: acc.errors,
                error_rate: ratio(acc.errors, acc.count),
                p50_ns: durations.quantile(0.5),
                p95_ns: durations.quantile(0.95),
                p99_ns: durations.quantile(0.99),
                max_ns: durations.max(),
                rate_per_sec: rate(acc.count, w, agg.min_time, agg.max_time),
            }
        })
        .collect()
}

fn operations_of(agg: &SpanAgg, w: Window) -> Vec<OperationSummary> {
    let mut ops: Vec<OperationSummary> = agg
        .iter()
        .map(|(svc, name, acc)| {
            let durations = acc.durations.sketch();
            OperationSummary {
                service: svc.clone(),
                name: name.clone(),
                spans: acc.count,
                errors: acc.errors,
                error_rate: ratio(acc.errors, acc.count),
                p50_ns: durations.quantile(0.5),
                p95_ns: durations.quantile(0.95),
                p99_ns: durations.quantile(0.99),
                rate_per_sec: rate(acc.count, w, agg.min_time, agg.max_time),
            }
        })
        .collect();
    ops.sort_by(|a, b| (&a.service, &a.name).cmp(&(&b.service, &b.name)));
    ops
}

/// Every service with spans in the window, by name.
pub fn services(
    sources: &[Source<Span>],
    w: Window,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Vec<ServiceSummary>> {
    let agg = gather_spans(sources, w, None, cache, explain)?;
    Ok(services_of(&agg, w))
}

/// Operations (span names) of one service (or all), by name.
pub fn operations(
    sources: &[Source<Span>],
    w: Window,
    service: Option<&str>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Vec<OperationSummary>> {
    let agg = gather_spans(sources, w, service, cache, explain)?;
    Ok(operations_of(&agg, w))
}

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// What happened in a window, at a glance.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub window: Window,
    pub service: Option<String>,
    pub spans: u64,
    /// Root spans: one per complete trace.
    pub traces: u64,
    pub error_spans: u64,
    pub error_rate: f64,
    pub latency: Latency,
    pub services: u64,
    pub top_services: Vec<ServiceSummary>,
    pub top_error_operations: Vec<OperationSummary>,
    pub logs: u64,
    /// Log counts by severity band (trace, debug, info, warn, error, fatal).
    pub logs_by_severity: BTreeMap<String, u64>,
    pub metric_series: u64,
    pub metric_points: u64,
}

pub const TOP_N: usize = 10;

/// What happened in `w`; each signal counts its records from its own
/// retention line on (`floors`, in `Signal::ALL` order, 0 for none).
#[allow(clippy::too_many_arguments)]
pub fn summary(
    spans: &[Source<Span>],
    logs: &[Source<LogRecord>],
    metrics: &[Source<MetricPoint>],
    w: Window,
    floors: [u64; 3],
    service: Option<&str>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Summary> {
    // Each signal's records from its own retention floor on (`floors` in
    // `Signal::ALL` order; 0 for none).
    let from = |floor: u64| w.starting_by(floor.min(w.end));
    let (sw, lw, mw) = (from(floors[0]), from(floors[1]), from(floors[2]));
    let agg = gather_spans(spans, sw, service, cache, explain)?;
    let mut all = OpAcc::default();
    for (_, _, acc) in agg.iter() {
        all.count += acc.count;
        all.errors += acc.errors;
        all.roots += acc.roots;
        all.durations.merge_sum(&acc.durations);
    }
    let mut top_services = services_of(&agg, sw);
    let service_count = top_services.len() as u64;
    top_services.sort_by(|a, b| b.spans.cmp(&a.spans).then(a.service.cmp(&b.service)));
    top_services.truncate(TOP_N);
    let mut top_errors: Vec<OperationSummary> = operations_of(&agg, sw).into_iter().filter(|o| o.errors > 0).collect();
    top_errors.sort_by(|a, b| {
        b.errors
            .cmp(&a.errors)
            .then((&a.service, &a.name).cmp(&(&b.service, &b.name)))
    });
    top_errors.truncate(TOP_N);
    let (logs_total, by_sev) = log_counts(logs, lw, service, explain)?;
    let (series, points) = metric_counts(metrics, mw, service, explain)?;
    Ok(Summary {
        window: w,
        service: service.map(str::to_string),
        spans: all.count,
        traces: all.roots,
        error_spans: all.errors,
        error_rate: ratio(all.errors, all.count),
        latency: {
            let all = all.durations.sketch();
            Latency {
                p50_ns: all.quantile(0.5),
                p95_ns: all.quantile(0.95),
                p99_ns: all.quantile(0.99),
                max_ns: all.max(),
            }
        },
        services: service_count,
        top_services,
        top_error_operations: top_errors,
        logs: logs_total,
        logs_by_severity: by_sev,
        metric_series: series,
        metric_points: points,
    })
}

fn log_counts(
    sources: &[Source<LogRecord>],
    w: Window,
    service: Option<&str>,
    explain: &mut Explain,
) -> Result<(u64, BTreeMap<String, u64>)> {
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    let mut total = 0;
    let mut add = |sev: i32, n: u64| {
        *by.entry(severity_band(sev).to_string()).or_default() += n;
        total += n;
    };
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                if let Some((stats, min, max)) = m.stats()
                    && w.contains(min)
                    && w.contains(max)
                {
                    for (svc, sev, n) in &stats.log_counts {
                        if service.is_none_or(|v| v == svc) {
                            add(*sev, *n);
                        }
                    }
                    continue;
                }
                for row in 0..m.total_rows() {
                    let l = m.row(row);
                    if m.is_live(row) && w.contains(l.time()) && service.is_none_or(|v| v == l.service_name()) {
                        add(l.severity_number, 1);
                    }
                }
            }
            Source::Part(p) => {
                if p.misses(w) {
                    continue;
                }
                if p.within(w) {
                    explain.parts_from_stats += 1;
                    for (svc, sev, n) in &p.index.stats.log_counts {
                        if service.is_none_or(|v| v == svc) {
                            add(*sev, *n);
                        }
                    }
                    continue;
                }
                scan_log_rows(p, w, |t, svc, sev| {
                    if w.contains(t) && service.is_none_or(|v| v == svc) {
                        add(sev, 1);
                    }
                })?;
            }
        }
    }
    Ok((total, by))
}

/// Calls `f(time, service, severity)` with every log row of `p` in the row
/// range of `w` (rows near its edges may fall outside it: callers check),
/// read through the time, service and severity columns only; the rows
/// read.
pub(crate) fn scan_log_rows(p: &Part, w: Window, mut f: impl FnMut(u64, &str, i32)) -> Result<u64> {
    let range = p.index.row_range(p.rows(), w);
    let mut rows = 0;
    for b in p.read_columns(&["timestamp", "service_name", "severity_number"], range, 65536)? {
        let (Some(ts), Some(svc), Some(sev)) = (
            b.column_by_name("timestamp")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>()),
            b.column_by_name("service_name").and_then(|c| c.as_string_opt::<i32>()),
            b.column_by_name("severity_number")
                .and_then(|c| c.as_primitive_opt::<Int8Type>()),
        ) else {
            continue;
        };
        rows += b.num_rows() as u64;
        for i in 0..b.num_rows() {
            f(ts.value(i).max(0) as u64, svc.value(i), sev.value(i) as i32);
        }
    }
    Ok(rows)
}

fn metric_counts(
    sources: &[Source<MetricPoint>],
    w: Window,
    service: Option<&str>,
    explain: &mut Explain,
) -> Result<(u64, u64)> {
    let mut series: HashSet<u64> = HashSet::new();
    let mut points = 0u64;
    for s in sources {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                if service.is_none()
                    && let Some((stats, min, max)) = m.stats()
                    && w.contains(min)
                    && w.contains(max)
                {
                    series.extend(stats.series.iter().copied());
                    points += stats.metric_names.iter().map(|(_, n)| n).sum::<u64>();
                    continue;
                }
                for row in 0..m.total_rows() {
                    let p = m.row(row);
                    if m.is_live(row) && w.contains(p.time()) && service.is_none_or(|v| v == p.service_name()) {
                        series.insert(series_id(p));
                        points += 1;
                    }
                }
            }
            Source::Part(p) => {
                if p.misses(w) {
                    continue;
                }
                if p.within(w) && service.is_none() {
                    explain.parts_from_stats += 1;
                    series.extend(p.index.stats.series.iter().copied());
                    points += p.meta.rows;
                    continue;
                }
                let range = p.index.row_range(p.rows(), w);
                for b in p.read_columns(&["time_unix_nano", "service_name", "series_id"], range, 65536)? {
                    let (Some(ts), Some(svc), Some(sid)) = (
                        b.column_by_name("time_unix_nano")
                            .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>()),
                        b.column_by_name("service_name").and_then(|c| c.as_string_opt::<i32>()),
                        b.column_by_name("series_id")
                            .and_then(|c| c.as_primitive_opt::<UInt64Type>()),
                    ) else {
                        continue;
                    };
                    for i in 0..b.num_rows() {
                        if w.contains(ts.value(i).max(0) as u64) && service.is_none_or(|v| v == svc.value(i)) {
                            series.insert(sid.value(i));
                            points += 1;
                        }
                    }
                }
            }
        }
    }
    Ok((series.len() as u64, points))
}
