//! Diagnosis: from "something is wrong" to the cause, the evidence and the
//! next trace to read, in one answer.
//!
//! 1. Every operation's series over the look-back, per minute, from the
//!    parts' minute statistics ([`series`]).
//! 2. Change detection on each series: where its error rate or latency
//!    stepped up ([`change`]); then on each service's sum of its
//!    operations, which finds a regression spread thinly over many
//!    operations, each too quiet to show it alone. A service finding
//!    (`operation` null) is kept only where none of its operations has a
//!    finding of that kind.
//! 3. For each change, a few spans sampled after it (failing, or slower
//!    than the before p95) and before it, through the ordinary search, and
//!    their traces: for latency, the time each operation holds on the
//!    critical path below the changed span, before against after; for
//!    errors, where the errors under the failing span begin ([`tree`]).
//!    An operation whose own time grew (or where errors begin) is the
//!    `cause`; one that only inherited it is `affected`, with `caused_by`.
//! 4. Evidence from the same samples ([`evidence`]): error templates,
//!    attribute values that came with the change, exemplar traces.
//!
//! Findings are ranked causes first, then by impact: extra errors, or
//! extra time in units of the operation's mean duration before (both read
//! as "requests' worth").

pub mod change;
pub mod evidence;
pub mod series;
pub mod tree;

use std::sync::Arc;

use serde::Serialize;
use skein_model::{LogRecord, Span, StatusCode};

use self::change::{Change, Counts, Kind, Side, Split};
use self::evidence::{ChangedAttribute, ErrorTemplate, Templates};
use self::series::{Bucket, Buckets, OpSeries};
use self::tree::{OpKey, Tree};
use super::explain::Explain;
use super::filter::SpanQuery;
use super::search::{self, Source};
use super::shadow::ShadowCache;
use super::sketch::Sketch;
use super::window::Window;
use crate::error::Result;
use crate::hash::FastMap;

/// What to diagnose.
#[derive(Debug, Clone)]
pub struct DiagnoseRequest {
    /// The look-back (or, with `split_at`, baseline and current together).
    pub window: Window,
    /// A fixed change point (the `--last/--baseline` form); `None` searches
    /// the whole look-back for one.
    pub split_at: Option<u64>,
    /// Only this service's operations.
    pub service: Option<String>,
    /// Findings returned at most.
    pub limit: usize,
    /// Say how each finding was reached.
    pub explain: bool,
}

/// Changes examined in depth at most (sampling and traces), the strongest
/// by impact first.
pub const MAX_ANALYZED: usize = 16;
/// Spans sampled on each side of a change for evidence.
const SAMPLE: usize = 20;
/// Of those, traces read on each side for attribution.
const TRACES: usize = 6;
const TEMPLATES: usize = 5;
const ATTRIBUTES: usize = 5;
const EXEMPLARS: usize = 3;
/// A service's latency sample is drawn from this many times [`SAMPLE`]
/// spans, to find those slow for their own operation.
const WIDE_SAMPLE: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Cause,
    Affected,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpRef {
    pub service: String,
    pub operation: String,
}

/// One side of a change, as reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SideSummary {
    pub spans: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub mean_ns: u64,
}

impl From<&Side> for SideSummary {
    fn from(s: &Side) -> Self {
        SideSummary {
            spans: s.spans,
            errors: s.errors,
            error_rate: s.error_rate(),
            p50_ns: s.durations.quantile(0.5),
            p95_ns: s.durations.quantile(0.95),
            mean_ns: s.durations.mean() as u64,
        }
    }
}

/// Where the errors under a failing operation begin.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ErrorOrigin {
    pub service: String,
    pub operation: String,
    /// Share of the sampled failing spans whose errors begin there.
    pub share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub service: String,
    /// `None` for a change of the service as a whole that none of its
    /// operations shows alone.
    pub operation: Option<String>,
    pub kind: Kind,
    pub role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<OpRef>,
    pub started_at_unix_nano: u64,
    pub before: SideSummary,
    pub after: SideSummary,
    /// Extra errors, or extra seconds, since the change.
    pub impact: f64,
    /// `extra_errors` or `extra_seconds`.
    pub impact_unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_origin: Option<ErrorOrigin>,
    pub error_templates: Vec<ErrorTemplate>,
    pub changed_attributes: Vec<ChangedAttribute>,
    pub exemplar_trace_ids: Vec<String>,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explain: Vec<String>,
    /// Comparable across kinds: requests' worth of harm.
    #[serde(skip)]
    rank: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The time the buckets cover (the look-back, on whole minutes).
    pub window: Window,
    pub bucket_seconds: u64,
    /// Operations whose series were examined.
    pub operations_examined: usize,
    /// Services whose summed series were examined (those with more than
    /// one operation).
    pub services_examined: usize,
    /// Changes found before ranking and the limit.
    pub changes_found: usize,
    pub findings: Vec<Finding>,
}

/// Runs a diagnosis over span and log sources (newest first).
pub fn diagnose(
    spans: &[Source<Span>],
    logs: &[Source<LogRecord>],
    req: &DiagnoseRequest,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Diagnosis> {
    let buckets = Buckets::covering(req.window);
    let series = series::op_series(spans, buckets, req.service.as_deref(), cache, explain)?;
    let split = match req.split_at {
        None => Split::Search,
        Some(t) => Split::At(buckets.of_minute(crate::stats::minute_of(t)).unwrap_or(buckets.count)),
    };
    let mut changes: Vec<(String, Option<String>, Change)> = Vec::new();
    let mut services_examined = 0;
    for (service, ops) in series.services() {
        let whole = ops.len() > 1;
        let mut sum = vec![Counts::default(); if whole { buckets.count } else { 0 }];
        let mut op_found = [false; 2];
        for (op, s) in ops {
            let counts = change::counts(s);
            for c in change::detect_counts(&counts, split, |k| change::sides(&[s], k)) {
                op_found[c.kind as usize] = true;
                changes.push((service.to_string(), Some(op.clone()), c));
            }
            for (total, c) in sum.iter_mut().zip(&counts) {
                total.add(c);
            }
        }
        if whole {
            services_examined += 1;
            let all: Vec<&[Bucket]> = ops.values().map(Vec::as_slice).collect();
            for c in change::detect_counts(&sum, split, |k| change::sides(&all, k)) {
                if !op_found[c.kind as usize] {
                    changes.push((service.to_string(), None, c));
                }
            }
        }
    }
    let changes_found = changes.len();
    changes.sort_by(|a, b| rank(&b.2).total_cmp(&rank(&a.2)).then((&a.0, &a.1).cmp(&(&b.0, &b.1))));
    // Ranking puts causes first, which takes the analysis: analyse twice
    // the findings asked for, the strongest first.
    changes.truncate((2 * req.limit).clamp(4, MAX_ANALYZED));
    let mut findings = Vec::with_capacity(changes.len());
    for (service, op, c) in changes {
        findings.push(analyze(spans, logs, &series, req, &service, op.as_deref(), &c)?);
    }
    findings.sort_by(|a, b| {
        (a.role != Role::Cause)
            .cmp(&(b.role != Role::Cause))
            .then(b.rank.total_cmp(&a.rank))
            .then((&a.service, &a.operation).cmp(&(&b.service, &b.operation)))
    });
    findings.truncate(req.limit);
    Ok(Diagnosis {
        window: buckets.window(),
        bucket_seconds: buckets.width_ns() / 1_000_000_000,
        operations_examined: series.len(),
        services_examined,
        changes_found,
        findings,
    })
}

/// Harm of a change in requests' worth: extra errors, or extra time over
/// the mean duration before.
fn rank(c: &Change) -> f64 {
    match c.kind {
        Kind::Errors => extra_errors(c),
        Kind::Latency => extra_ns(c) / c.before.durations.mean().max(1.0),
    }
}

fn extra_errors(c: &Change) -> f64 {
    ((c.after.error_rate() - c.before.error_rate()) * c.after.spans as f64).max(0.0)
}

fn extra_ns(c: &Change) -> f64 {
    ((c.after.durations.mean() - c.before.durations.mean()) * c.after.spans as f64).max(0.0)
}

fn ms(ns: f64) -> String {
    let ms = ns / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

fn analyze(
    spans: &[Source<Span>],
    logs: &[Source<LogRecord>],
    series: &OpSeries,
    req: &DiagnoseRequest,
    service: &str,
    op: Option<&str>,
    c: &Change,
) -> Result<Finding> {
    let started = series.buckets.start_of(c.at);
    let end = series.buckets.window().end;
    let (b, a) = (SideSummary::from(&c.before), SideSummary::from(&c.after));
    let mut explain = Vec::new();
    if req.explain {
        explain.push(match req.split_at {
            None => format!(
                "{} change point: of every split of the {} buckets of {} min, the best scoring (z = {:.1}) starts at bucket {}",
                match c.kind {
                    Kind::Errors => "error-rate",
                    Kind::Latency => "latency",
                },
                series.buckets.count,
                series.buckets.minutes,
                c.z,
                c.at
            ),
            Some(_) => format!("fixed split between baseline and current window (z = {:.1})", c.z),
        });
        if op.is_none() {
            explain.push(format!(
                "no operation of {service} changed enough alone; the sum of its operations' series did (latency counted against each operation's own quantiles)"
            ));
        }
    }
    // Samples: bad spans after the change (failing, or slow), and spans
    // just before it.
    let slow_from = if a.p95_ns as f64 >= change::LATENCY_FACTOR * b.p95_ns as f64 {
        b.p95_ns
    } else {
        a.p50_ns.max(b.p50_ns)
    };
    let base = SpanQuery {
        service: Some(service.to_string()),
        name: op.map(str::to_string),
        limit: SAMPLE,
        ..Default::default()
    };
    let bad_q = SpanQuery {
        window: Window::new(started, end),
        status: (c.kind == Kind::Errors).then_some(StatusCode::Error),
        min_duration_ns: (c.kind == Kind::Latency && op.is_some()).then_some(slow_from),
        ..base.clone()
    };
    let before_q = SpanQuery {
        window: Window::new(req.window.start.min(started), started),
        ..base
    };
    let (mut bad, mut before);
    if c.kind == Kind::Latency && op.is_none() {
        // A service's spans are of many operations, some slow by nature:
        // a span is slow against its own operation's p95 before the
        // change, and the earlier spans compared are of the same
        // operations.
        let wide = |q: &SpanQuery| SpanQuery {
            limit: SAMPLE * WIDE_SAMPLE,
            ..q.clone()
        };
        let p95_before = |name: &str| {
            series
                .get(service, name)
                .map(|b| Sketch::merged(b[..c.at].iter().map(|x| &x.durations)).quantile(0.95))
        };
        let mut slow: Vec<(f64, Arc<Span>)> = search::search(spans, &wide(&bad_q))?
            .records
            .into_iter()
            .filter_map(|s| {
                let p95 = p95_before(&s.name)?;
                (s.duration_ns() > p95).then(|| (s.duration_ns() as f64 / p95.max(1) as f64, s))
            })
            .collect();
        slow.sort_by(|x, y| y.0.total_cmp(&x.0));
        bad = slow.into_iter().take(SAMPLE).map(|(_, s)| s).collect::<Vec<_>>();
        let names: Vec<&str> = bad.iter().map(|s| s.name.as_str()).collect();
        before = search::search(spans, &wide(&before_q))?.records;
        before.retain(|s| names.contains(&s.name.as_str()));
        before.truncate(SAMPLE);
    } else {
        bad = search::search(spans, &bad_q)?.records;
        before = search::search(spans, &before_q)?.records;
        if c.kind == Kind::Latency {
            bad.sort_by_key(|s| std::cmp::Reverse(s.duration_ns()));
        }
    }
    let mut traces: FastMap<u128, Vec<Arc<Span>>> = FastMap::default();
    let mut trace_of = |s: &Span| -> Result<Vec<Arc<Span>>> {
        let id = s.trace_id.as_u128();
        if let Some(t) = traces.get(&id) {
            return Ok(t.clone());
        }
        let mut ex = Explain::new(crate::record::Signal::Spans);
        let t = search::trace_records(spans, id, &mut ex)?;
        traces.insert(id, t.clone());
        Ok(t)
    };

    // The changed subject's own spans: the operation's, or any of the
    // service's.
    let own = |k: OpKey| k.0 == service && op.is_none_or(|o| o == k.1);
    let mut role = Role::Cause;
    let mut caused_by = None;
    let mut error_origin = None;
    match c.kind {
        Kind::Latency => {
            // Critical-path time per operation under the changed span,
            // mean per sampled trace, after minus before.
            let mut delta: FastMap<(String, String), f64> = FastMap::default();
            let mut sampled = [0usize; 2];
            let mut self_ns = [0u64; 2];
            for (side, list, sign) in [(0, &bad, 1.0), (1, &before, -1.0)] {
                let mut per: FastMap<(String, String), u64> = FastMap::default();
                for s in list.iter().take(TRACES) {
                    let t = trace_of(s)?;
                    let tree = Tree::new(&t);
                    let Some(i) = (0..t.len()).find(|&i| t[i].span_id == s.span_id) else {
                        continue;
                    };
                    sampled[side] += 1;
                    self_ns[side] += tree.self_time(i);
                    for ((sv, o), ns) in tree.critical_path(i) {
                        *per.entry((sv.to_string(), o.to_string())).or_default() += ns;
                    }
                }
                let n = sampled[side].max(1) as f64;
                for (k, ns) in per {
                    *delta.entry(k).or_default() += sign * ns as f64 / n;
                }
            }
            if sampled[0] > 0 && sampled[1] > 0 {
                if req.explain {
                    explain.push(format!(
                        "self time (duration less its children's, overlap once): {} before, {} after",
                        ms(self_ns[1] as f64 / sampled[1] as f64),
                        ms(self_ns[0] as f64 / sampled[0] as f64)
                    ));
                }
                let total: f64 = delta.values().sum();
                let own_delta: f64 = delta
                    .iter()
                    .filter(|((sv, o), _)| own((sv.as_str(), o.as_str())))
                    .map(|(_, d)| d)
                    .sum();
                let top = delta
                    .iter()
                    .max_by(|x, y| x.1.total_cmp(y.1).then_with(|| y.0.cmp(x.0)))
                    .map(|(k, v)| (k.clone(), *v));
                if let Some(((sv, o), top_delta)) = top
                    && !own((sv.as_str(), o.as_str()))
                    && own_delta < 0.5 * total
                {
                    role = Role::Affected;
                    if req.explain {
                        explain.push(format!(
                            "critical path over {} slow and {} earlier traces: {} {} grew {} of the {} added, own time {}",
                            sampled[0],
                            sampled[1],
                            sv,
                            o,
                            ms(top_delta),
                            ms(total),
                            ms(own_delta)
                        ));
                    }
                    caused_by = Some(OpRef {
                        service: sv,
                        operation: o,
                    });
                } else if req.explain {
                    explain.push(format!(
                        "critical path over {} slow and {} earlier traces: own time grew {} of the {} added",
                        sampled[0],
                        sampled[1],
                        ms(own_delta),
                        ms(total)
                    ));
                }
            } else if req.explain {
                explain.push("no traces sampled on both sides: own time assumed".into());
            }
        }
        Kind::Errors => {
            let mut origins: FastMap<(String, String), usize> = FastMap::default();
            let mut sampled = 0;
            for s in bad.iter().take(TRACES) {
                let t = trace_of(s)?;
                let tree = Tree::new(&t);
                let Some(i) = (0..t.len()).find(|&i| t[i].span_id == s.span_id) else {
                    continue;
                };
                sampled += 1;
                let mut keys: Vec<OpKey> = tree.error_origins(i).into_iter().map(|j| tree.key(j)).collect();
                keys.sort_unstable();
                keys.dedup();
                for (sv, o) in keys {
                    *origins.entry((sv.to_string(), o.to_string())).or_default() += 1;
                }
            }
            if let Some(((sv, o), n)) = origins
                .iter()
                .max_by(|x, y| x.1.cmp(y.1).then_with(|| y.0.cmp(x.0)))
                .map(|(k, n)| (k.clone(), *n))
            {
                let share = n as f64 / sampled.max(1) as f64;
                if req.explain {
                    explain.push(format!(
                        "errors traced to their deepest failing span in {sampled} sampled traces: {sv} {o} in {:.0}%",
                        share * 100.0
                    ));
                }
                if !own((sv.as_str(), o.as_str())) {
                    role = Role::Affected;
                    caused_by = Some(OpRef {
                        service: sv.clone(),
                        operation: o.clone(),
                    });
                }
                error_origin = Some(ErrorOrigin {
                    service: sv,
                    operation: o,
                    share,
                });
            }
        }
    }

    // Evidence.
    let mut templates = Templates::default();
    for s in &bad {
        templates.add_span(s);
    }
    if c.kind == Kind::Errors {
        for t in bad.iter().take(TRACES).map(|s| s.trace_id.as_u128()) {
            let mut ex = Explain::new(crate::record::Signal::Logs);
            for l in search::trace_records(logs, t, &mut ex)? {
                templates.add_log(&l);
            }
        }
    }
    let error_templates = templates.top(TEMPLATES);
    let bad_refs: Vec<&Span> = bad.iter().map(|s| s.as_ref()).collect();
    let before_refs: Vec<&Span> = before.iter().map(|s| s.as_ref()).collect();
    let changed_attributes = evidence::changed_attributes(&bad_refs, &before_refs, ATTRIBUTES);
    let mut exemplar_trace_ids: Vec<String> = Vec::new();
    for s in &bad {
        let id = s.trace_id.to_hex();
        if !exemplar_trace_ids.contains(&id) {
            exemplar_trace_ids.push(id);
        }
        if exemplar_trace_ids.len() == EXEMPLARS {
            break;
        }
    }
    if req.explain {
        explain.push(format!(
            "evidence from {} spans after the change ({}) and {} before it",
            bad.len(),
            match c.kind {
                Kind::Errors => "failing".to_string(),
                Kind::Latency if op.is_none() => "slower than their operation's p95 before".to_string(),
                Kind::Latency => format!("slower than {}", ms(slow_from as f64)),
            },
            before.len()
        ));
    }

    let (impact, impact_unit) = match c.kind {
        Kind::Errors => (extra_errors(c).round(), "extra_errors"),
        Kind::Latency => ((extra_ns(c) / 1e9 * 1000.0).round() / 1000.0, "extra_seconds"),
    };
    let message = message(
        started,
        service,
        op,
        c,
        &b,
        &a,
        role,
        caused_by.as_ref(),
        &changed_attributes,
        &error_templates,
    );
    Ok(Finding {
        service: service.to_string(),
        operation: op.map(str::to_string),
        kind: c.kind,
        role,
        caused_by,
        started_at_unix_nano: started,
        before: b,
        after: a,
        impact,
        impact_unit,
        error_origin,
        error_templates,
        changed_attributes,
        exemplar_trace_ids,
        message,
        explain,
        rank: rank(c),
    })
}

#[allow(clippy::too_many_arguments)]
fn message(
    started: u64,
    service: &str,
    op: Option<&str>,
    c: &Change,
    b: &SideSummary,
    a: &SideSummary,
    role: Role,
    caused_by: Option<&OpRef>,
    changed: &[ChangedAttribute],
    templates: &[ErrorTemplate],
) -> String {
    let what = match c.kind {
        Kind::Errors => format!(
            "error rate {:.1}% (was {:.1}%)",
            a.error_rate * 100.0,
            b.error_rate * 100.0
        ),
        Kind::Latency => {
            let (label, now, was) = if a.p95_ns as f64 >= change::LATENCY_FACTOR * b.p95_ns as f64 {
                ("p95", a.p95_ns, b.p95_ns)
            } else {
                ("p50", a.p50_ns, b.p50_ns)
            };
            format!(
                "{label} {} (was {}, {:.1}x)",
                ms(now as f64),
                ms(was as f64),
                now as f64 / was.max(1) as f64
            )
        }
    };
    let secs = started / 1_000_000_000;
    let subject = match op {
        Some(op) => format!("{service} {op}"),
        None => format!("{service} (across its operations, none alone)"),
    };
    let mut m = format!(
        "{subject}: {what} since {:02}:{:02} UTC",
        secs / 3600 % 24,
        secs / 60 % 60
    );
    match (role, caused_by) {
        (Role::Affected, Some(by)) => m.push_str(&format!("; inherited from {} {}", by.service, by.operation)),
        _ => m.push_str(match c.kind {
            Kind::Latency => "; its own time grew",
            Kind::Errors => "; errors begin here",
        }),
    }
    if let Some(ch) = changed.first() {
        match &ch.before_value {
            Some(old) => m.push_str(&format!(
                "; {} {} → {} on {:.0}% of bad spans",
                ch.key,
                old,
                ch.value,
                ch.share_of_bad * 100.0
            )),
            None => m.push_str(&format!(
                "; {}={} on {:.0}% of bad spans",
                ch.key,
                ch.value,
                ch.share_of_bad * 100.0
            )),
        }
    }
    if c.kind == Kind::Errors
        && let Some(t) = templates.first()
    {
        m.push_str(&format!("; top error: {}", t.template));
    }
    m
}
