//! Aggregations over a window that cuts through parts: the parts' whole
//! minutes inside the window answer from their per-minute statistics, the
//! partial minutes at the edges are scanned. Checked against a naive model
//! over random spans spread across a quarter of an hour, in parts flushed
//! at random points (and some left hot), with windows that start and end
//! anywhere: spans, errors and maxima exact, roots (a summary's traces)
//! exact, traces between the distinct traces and the spans, percentiles
//! within the rounding of per-minute durations.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use skein_engine::{Durability, Engine, EngineOptions, Window, testdata};
use skein_model::{Resource, Span, SpanId, Status, StatusCode, TraceId};

const MINUTE: u64 = 60_000_000_000;
/// The data's quarter hour starts on a minute boundary plus 17 s, so that
/// minute boundaries fall inside parts.
const T0: u64 = (testdata::END_NS / MINUTE - 20) * MINUTE + 17_000_000_000;
const SPAN_OF_DATA: u64 = 15 * MINUTE;

/// Within the rounding of per-minute durations (4 significant bits, ±6.25%)
/// and the sketch's buckets (±0.4%).
const PERCENTILE_TOLERANCE: f64 = 0.07;

#[derive(Debug, Clone)]
struct SpanSpec {
    trace: u8,
    service: u8,
    op: u8,
    root: bool,
    error: bool,
    /// Offset into the quarter hour, in ms.
    at_ms: u64,
    duration_us: u64,
}

fn span_spec() -> impl Strategy<Value = SpanSpec> {
    (
        0u8..40,
        0u8..3,
        0u8..4,
        any::<bool>(),
        prop::bool::weighted(0.2),
        0..SPAN_OF_DATA / 1_000_000,
        prop_oneof![1u64..50, 50u64..5_000, 5_000u64..2_000_000],
    )
        .prop_map(|(trace, service, op, root, error, at_ms, duration_us)| SpanSpec {
            trace,
            service,
            op,
            root,
            error,
            at_ms,
            duration_us,
        })
}

fn build(specs: &[SpanSpec]) -> Vec<Span> {
    let resources: Vec<Arc<Resource>> = (0..3)
        .map(|i| Arc::new(Resource::with_service(&format!("svc-{i}"))))
        .collect();
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let start = T0 + s.at_ms * 1_000_000;
            Span {
                trace_id: TraceId::from_u128(u128::from(s.trace) + 1),
                span_id: SpanId::from_u64(i as u64 + 1),
                parent_span_id: (!s.root).then(|| SpanId::from_u64(u64::MAX)),
                name: format!("op-{}", s.op),
                start_time_unix_nano: start,
                end_time_unix_nano: start + s.duration_us * 1_000,
                status: Status {
                    code: if s.error { StatusCode::Error } else { StatusCode::Unset },
                    message: String::new(),
                },
                resource: resources[usize::from(s.service)].clone(),
                ..Default::default()
            }
        })
        .collect()
}

fn options(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.durability = Durability::None;
    o
}

fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn check(e: &Engine, spans: &[Span], w: Window) -> Result<bool, TestCaseError> {
    let inside: Vec<&Span> = spans.iter().filter(|s| w.contains(s.start_time_unix_nano)).collect();
    let mut by_service: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    let mut by_op: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for s in &inside {
        by_service.entry(s.service_name()).or_default().push(s);
        let o = by_op.entry((s.service_name(), s.name.as_str())).or_default();
        o.0 += 1;
        o.1 += s.is_error() as u64;
    }
    let (ops, _) = e.operations(None, w).unwrap();
    let ops: BTreeMap<(&str, &str), (u64, u64)> = ops
        .iter()
        .map(|o| ((o.service.as_str(), o.name.as_str()), (o.spans, o.errors)))
        .collect();
    prop_assert_eq!(ops, by_op, "operations (spans, errors) in {:?}", w);

    let (services, ex) = e.services(w).unwrap();
    let from_minutes = ex
        .sources
        .iter()
        .any(|s| s.pruned.as_deref().is_some_and(|p| p.starts_with("whole minutes")));
    let names: Vec<&str> = services.iter().map(|s| s.service.as_str()).collect();
    prop_assert_eq!(
        names,
        by_service.keys().copied().collect::<Vec<_>>(),
        "services in {:?}",
        w
    );
    for svc in &services {
        let mine = &by_service[svc.service.as_str()];
        let ctx = format!("{} in {:?}", svc.service, w);
        prop_assert_eq!(svc.spans, mine.len() as u64, "spans of {}", ctx);
        prop_assert_eq!(
            svc.errors,
            mine.iter().filter(|s| s.is_error()).count() as u64,
            "errors of {}",
            ctx
        );
        let distinct: HashSet<TraceId> = mine.iter().map(|s| s.trace_id).collect();
        prop_assert!(
            svc.traces >= distinct.len() as u64 && svc.traces <= svc.spans,
            "traces of {}: {} for {} distinct",
            ctx,
            svc.traces,
            distinct.len()
        );
        let mut d: Vec<u64> = mine.iter().map(|s| s.duration_ns()).collect();
        d.sort_unstable();
        prop_assert_eq!(svc.max_ns, *d.last().unwrap(), "max of {}", ctx);
        for (q, got) in [(0.5, svc.p50_ns), (0.95, svc.p95_ns), (0.99, svc.p99_ns)] {
            let want = nearest_rank(&d, q) as f64;
            prop_assert!(
                (got as f64 - want).abs() <= want * PERCENTILE_TOLERANCE,
                "p{} of {}: {} vs exact {}",
                q * 100.0,
                ctx,
                got,
                want
            );
        }
    }

    let (summary, _) = e.summary(w, None).unwrap();
    prop_assert_eq!(summary.spans, inside.len() as u64, "summary spans in {:?}", w);
    let roots = inside.iter().filter(|s| s.is_root()).count() as u64;
    prop_assert_eq!(summary.traces, roots, "summary traces (roots) in {:?}", w);
    Ok(from_minutes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn windows_that_cut_parts_match_the_model(
        specs in prop::collection::vec(span_spec(), 1..400),
        cuts in prop::collection::vec(0usize..400, 0..4),
        hot_tail in 0usize..100,
        windows in prop::collection::vec((0..SPAN_OF_DATA + 2 * MINUTE, 0..SPAN_OF_DATA + 2 * MINUTE), 8),
    ) {
        let spans = build(&specs);
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(options(dir.path())).unwrap();
        // Parts out of batches cut at random, the last ones left hot.
        let hot_from = spans.len().saturating_sub(hot_tail);
        let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(hot_from)).collect();
        bounds.extend([0, hot_from]);
        bounds.sort_unstable();
        bounds.dedup();
        for pair in bounds.windows(2) {
            e.ingest_spans(spans[pair[0]..pair[1]].to_vec()).unwrap();
            e.flush().unwrap();
        }
        if hot_from < spans.len() {
            e.ingest_spans(spans[hot_from..].to_vec()).unwrap();
        }
        for (a, b) in windows {
            check(&e, &spans, Window::new(T0 - MINUTE + a.min(b), T0 - MINUTE + a.max(b) + 1))?;
        }
        // Open at the end (every minute of a cut part from the first whole
        // one on), and everything (every part whole).
        check(&e, &spans, Window::new(T0 + 30_000_000_000, u64::MAX))?;
        check(&e, &spans, Window::ALL)?;
    }
}

/// One part of a quarter hour, a window from 2m30s to 11m10s: it is
/// answered from whole minutes (explain says so) and matches the model.
#[test]
fn a_window_inside_a_part_is_answered_from_its_minutes() {
    let specs: Vec<SpanSpec> = (0..900u64)
        .map(|i| SpanSpec {
            trace: (i % 40) as u8,
            service: (i % 3) as u8,
            op: (i % 4) as u8,
            root: i % 5 == 0,
            error: i % 7 == 0,
            at_ms: i * 1_000,
            duration_us: 1 + (i * 7919) % 100_000,
        })
        .collect();
    let spans = build(&specs);
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(options(dir.path())).unwrap();
    e.ingest_spans(spans.clone()).unwrap();
    e.flush().unwrap();
    let w = Window::new(T0 + 150_000_000_000, T0 + 670_000_000_000);
    let used = check(&e, &spans, w).map_err(|e| e.to_string()).unwrap();
    assert!(used, "the part's whole minutes answered");
}
