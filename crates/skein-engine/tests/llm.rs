//! LLM usage, tools and sessions against a naive computation over the spans
//! as they were sent: GenAI spans in each convention (OTel current and
//! deprecated, OpenInference, OpenLLMetry), some with reported costs, some
//! with contradictory figures, spread over hot tiers, flushed and compacted
//! parts and restarts, with re-sent spans that must count once; and scores
//! of those traces (and of traces that do not exist), whose means per
//! usage group (`include=scores`) must equal a naive computation too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::Config;
use skein_engine::UsageGroupBy;
use skein_engine::{Engine, EngineOptions, Window};
use skein_model::genai::score::Score;
use skein_model::genai::{CallKind, CostSource, LlmCall, Pricing};
use skein_model::{AnyValue, KeyValue, Resource, Span, SpanId, Status, StatusCode, TraceId};

const END_NS: u64 = skein_engine::testdata::END_NS;
const MODELS: [&str; 4] = [
    "gpt-4o-2024-08-06",
    "claude-3-5-sonnet-20241022",
    "no-such-model",
    "gemini-2.5-pro",
];

/// One generated span: (trace, span number in trace, convention, model,
/// tokens seed, session, flags).
#[derive(Debug, Clone)]
struct Gen {
    trace: u8,
    n: u8,
    convention: u8,
    model: u8,
    tokens: u16,
    session: u8,
    flags: u8,
}

fn kv(k: &str, v: impl Into<AnyValue>) -> KeyValue {
    KeyValue::new(k, v)
}

fn span_of(g: &Gen) -> Span {
    let model = MODELS[g.model as usize % MODELS.len()];
    let input = 100 + g.tokens as i64;
    let cached = (g.tokens as i64) / 2;
    let output = 10 + (g.tokens as i64 % 97);
    let reasoning = output / 3;
    let mut attrs = match g.convention % 6 {
        0 => vec![
            kv("gen_ai.operation.name", "chat"),
            kv("gen_ai.provider.name", "openai"),
            kv("gen_ai.request.model", model),
            kv("gen_ai.usage.input_tokens", input),
            kv("gen_ai.usage.output_tokens", output),
            kv("gen_ai.usage.cache_read.input_tokens", cached),
            kv("gen_ai.usage.reasoning.output_tokens", reasoning),
        ],
        1 => vec![
            kv("gen_ai.system", "anthropic"),
            kv("gen_ai.request.model", model),
            kv("gen_ai.usage.prompt_tokens", input),
            kv("gen_ai.usage.completion_tokens", output),
            kv("gen_ai.usage.cache_creation_input_tokens", cached),
        ],
        2 => vec![
            kv("openinference.span.kind", "LLM"),
            kv("llm.model_name", model),
            kv("llm.token_count.prompt", input),
            kv("llm.token_count.completion", output),
            kv("llm.token_count.prompt_details.cache_read", cached),
        ],
        3 => vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", ["search", "sql"][g.tokens as usize % 2]),
        ],
        4 => vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", "planner"),
        ],
        _ => vec![kv("http.route", "/plain")],
    };
    if g.flags & 1 != 0 {
        attrs.push(kv("gen_ai.usage.cost", 0.01 * (g.tokens % 7) as f64));
    }
    if g.flags & 2 != 0 {
        // Contradictory: more cached than input.
        attrs.push(kv("gen_ai.usage.cache_read_input_tokens", input + 5));
        attrs.retain(|a| {
            a.key != "gen_ai.usage.cache_read.input_tokens" && a.key != "llm.token_count.prompt_details.cache_read"
        });
        attrs.push(kv("gen_ai.usage.cache_read.input_tokens", input + 5));
    }
    if !g.session.is_multiple_of(4) && g.n.is_multiple_of(2) {
        attrs.push(kv(
            ["gen_ai.conversation.id", "session.id"][g.n as usize % 2],
            format!("s{}", g.session % 4),
        ));
    }
    if g.flags & 4 != 0 {
        attrs.push(kv("user.id", format!("u{}", g.session % 3)));
    }
    let start = END_NS - 3_600_000_000_000 + (g.trace as u64) * 1_000_000_000 + (g.n as u64) * 1_000_000;
    Span {
        trace_id: TraceId::from_u128(1 + g.trace as u128),
        span_id: SpanId(((g.trace as u64) << 8 | g.n as u64 | 1 << 40).to_be_bytes()),
        parent_span_id: None,
        name: "op".into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 1_000 + g.tokens as u64,
        attributes: attrs,
        status: Status {
            code: if g.flags & 8 != 0 {
                StatusCode::Error
            } else {
                StatusCode::Unset
            },
            message: String::new(),
        },
        resource: std::sync::Arc::new(Resource {
            attributes: vec![kv("service.name", ["a", "b"][g.trace as usize % 2])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One generated score: (trace, name, value kind, value seed). Traces
/// 12 and 13 are never sent.
#[derive(Debug, Clone)]
struct ScoreGen {
    trace: u8,
    name: u8,
    kind: u8,
    seed: u8,
}

/// The value a score carries: a number (int or double), a bool, or a
/// string (which no mean counts).
fn score_value(g: &ScoreGen) -> AnyValue {
    match g.kind % 4 {
        0 => AnyValue::Int(g.seed as i64 % 5),
        1 => AnyValue::Double(g.seed as f64 / 255.0),
        2 => AnyValue::Bool(g.seed.is_multiple_of(2)),
        _ => AnyValue::Str(format!("label {}", g.seed % 3)),
    }
}

fn score_name(g: &ScoreGen) -> &'static str {
    ["relevance", "helpful"][g.name as usize % 2]
}

/// The score's log record; `n` numbers it, so no two are one record.
fn score_record(g: &ScoreGen, n: usize) -> skein_model::LogRecord {
    Score::record(
        &format!("score-{n}"),
        TraceId::from_u128(1 + g.trace as u128),
        None,
        None,
        score_name(g),
        &score_value(g),
        None,
        "eval",
        END_NS - 1_800_000_000_000 + n as u64,
    )
}

#[derive(Debug, Clone)]
enum Step {
    Spans(Vec<Gen>),
    Scores(Vec<ScoreGen>),
    Flush,
    Compact,
    Reopen,
    /// Reopen with every part's calls table deleted (rebuilt on open).
    LoseCallsTables,
    /// Check the answers now, not only at the end: the hot tier's GenAI
    /// views kept by this query must then follow the rows added (and the
    /// rows replaced) before the next.
    Check,
}

fn generated() -> impl Strategy<Value = Gen> {
    (0..12u8, 0..6u8, 0..6u8, 0..4u8, 0..2000u16, 0..8u8, 0..16u8).prop_map(
        |(trace, n, convention, model, tokens, session, flags)| Gen {
            trace,
            n,
            convention,
            model,
            tokens,
            session,
            flags,
        },
    )
}

fn score_generated() -> impl Strategy<Value = ScoreGen> {
    (0..14u8, 0..2u8, 0..4u8, any::<u8>()).prop_map(|(trace, name, kind, seed)| ScoreGen {
        trace,
        name,
        kind,
        seed,
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => prop::collection::vec(generated(), 1..15).prop_map(Step::Spans),
        2 => prop::collection::vec(score_generated(), 1..6).prop_map(Step::Scores),
        2 => Just(Step::Flush),
        1 => Just(Step::Compact),
        1 => Just(Step::Reopen),
        1 => Just(Step::LoseCallsTables),
        2 => Just(Step::Check),
    ]
}

fn options(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o
}

/// The naive usage by model: every newest copy of every span, its
/// `LlmCall` from its attributes, priced one at a time.
fn naive_usage(spans: &BTreeMap<(u128, [u8; 8]), Span>, pricing: &Pricing) -> ByModel {
    let mut out: ByModel = BTreeMap::new();
    for s in spans.values() {
        let Some(c) = LlmCall::from_attributes(&s.attributes) else {
            continue;
        };
        if c.kind != Some(CallKind::Llm) {
            continue;
        }
        let e = out.entry(c.model.clone()).or_default();
        e.0 += 1;
        e.1 += s.is_error() as u64;
        if c.warnings.is_empty() {
            e.2 += c.input_tokens.unwrap_or(0);
            e.3 += c.cache_read_tokens.unwrap_or(0);
        }
        let cost = pricing.cost(&c, s.start_time_unix_nano);
        match (cost.source, cost.usd) {
            (CostSource::Unpriced, _) | (_, None) => e.5 += 1,
            (_, Some(usd)) => e.4 += usd,
        }
    }
    out
}

/// Per score name: sum and count of numeric values (true = 1, false = 0).
type Means = BTreeMap<String, (f64, u64)>;

/// The naive `include=scores` of usage by model: each numeric score counts
/// once in the totals and once in each model group of its trace's model
/// calls, if the trace has any.
fn naive_score_means(
    spans: &BTreeMap<(u128, [u8; 8]), Span>,
    scores: &[(u128, String, AnyValue)],
) -> (Means, BTreeMap<Option<String>, Means>) {
    let mut models: BTreeMap<u128, BTreeSet<Option<String>>> = BTreeMap::new();
    for s in spans.values() {
        if let Some(c) = LlmCall::from_attributes(&s.attributes)
            && c.kind == Some(CallKind::Llm)
        {
            models.entry(s.trace_id.as_u128()).or_default().insert(c.model.clone());
        }
    }
    let mut totals = Means::new();
    let mut groups: BTreeMap<Option<String>, Means> = BTreeMap::new();
    for (trace, name, value) in scores {
        let v = match value {
            AnyValue::Int(i) => *i as f64,
            AnyValue::Double(d) => *d,
            AnyValue::Bool(b) => *b as u8 as f64,
            _ => continue,
        };
        let Some(keys) = models.get(trace) else { continue };
        let e = totals.entry(name.clone()).or_default();
        e.0 += v;
        e.1 += 1;
        for k in keys {
            let e = groups.entry(k.clone()).or_default().entry(name.clone()).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    (totals, groups)
}

/// Means as usage reports them (every group gets a map, maybe empty).
fn means_of(u: &skein_engine::UsageFigures) -> BTreeMap<String, (f64, u64)> {
    u.scores
        .as_ref()
        .expect("include=scores gives every group a scores map")
        .iter()
        .map(|(k, v)| (k.clone(), (v.mean, v.count)))
        .collect()
}

fn means_equal(got: &BTreeMap<String, (f64, u64)>, sums: &Means) -> bool {
    got.len() == sums.len()
        && sums.iter().all(|(k, (sum, n))| {
            got.get(k)
                .is_some_and(|(mean, count)| count == n && close(*mean, sum / *n as f64))
        })
}

struct NaiveSession {
    traces: BTreeSet<u128>,
    spans: u64,
    llm_calls: u64,
    input: i64,
}

fn naive_sessions(spans: &BTreeMap<(u128, [u8; 8]), Span>) -> BTreeMap<String, NaiveSession> {
    let mut trace_session: BTreeMap<u128, String> = BTreeMap::new();
    // A trace belongs to the session of its earliest-seen carrying span;
    // the generator gives each trace's carriers one session at most often,
    // and the engine takes the first it visits, so traces with carriers of
    // two sessions are left out of the comparison (see `ambiguous`).
    for s in spans.values() {
        if let Some(id) = LlmCall::from_attributes(&s.attributes).and_then(|c| c.session_id) {
            trace_session.entry(s.trace_id.as_u128()).or_insert(id);
        }
    }
    let mut out: BTreeMap<String, NaiveSession> = BTreeMap::new();
    for s in spans.values() {
        let t = s.trace_id.as_u128();
        let Some(id) = trace_session.get(&t) else { continue };
        let e = out.entry(id.clone()).or_insert(NaiveSession {
            traces: BTreeSet::new(),
            spans: 0,
            llm_calls: 0,
            input: 0,
        });
        e.traces.insert(t);
        e.spans += 1;
        if let Some(c) = LlmCall::from_attributes(&s.attributes)
            && c.kind == Some(CallKind::Llm)
        {
            e.llm_calls += 1;
            if c.warnings.is_empty() {
                e.input += c.input_tokens.unwrap_or(0);
            }
        }
    }
    out
}

/// Traces whose spans carry more than one session id.
fn ambiguous(spans: &BTreeMap<(u128, [u8; 8]), Span>) -> BTreeSet<u128> {
    let mut ids: BTreeMap<u128, BTreeSet<String>> = BTreeMap::new();
    for s in spans.values() {
        if let Some(id) = LlmCall::from_attributes(&s.attributes).and_then(|c| c.session_id) {
            ids.entry(s.trace_id.as_u128()).or_default().insert(id);
        }
    }
    ids.into_iter().filter(|(_, v)| v.len() > 1).map(|(t, _)| t).collect()
}

/// Per model: calls, errors, input tokens, cache read tokens, cost, unpriced calls.
type ByModel = BTreeMap<Option<String>, (u64, u64, i64, i64, f64, u64)>;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

fn check(engine: &Engine, sent: &BTreeMap<(u128, [u8; 8]), Span>, scores: &[(u128, String, AnyValue)]) {
    let pricing = Pricing::built_in();
    let (usage, _) = engine.llm_usage(Window::ALL, UsageGroupBy::Model, false).unwrap();
    assert!(usage.totals.scores.is_none() && usage.groups.iter().all(|g| g.usage.scores.is_none()));

    // With scores: the same figures, and each group's means.
    let (scored, _) = engine.llm_usage(Window::ALL, UsageGroupBy::Model, true).unwrap();
    let (want_totals, want_groups) = naive_score_means(sent, scores);
    let got_totals = means_of(&scored.totals);
    assert!(
        means_equal(&got_totals, &want_totals),
        "totals: {got_totals:?} vs sums {want_totals:?}"
    );
    assert_eq!(scored.groups.len(), usage.groups.len());
    for g in &scored.groups {
        let plain = usage.groups.iter().find(|u| u.key == g.key).expect("same groups");
        let mut figures = g.usage.clone();
        figures.scores = None;
        assert_eq!(figures.calls, plain.usage.calls, "{:?}", g.key);
        assert_eq!(figures.input_tokens, plain.usage.input_tokens, "{:?}", g.key);
        let got = means_of(&g.usage);
        let want = want_groups.get(&g.key).cloned().unwrap_or_default();
        assert!(means_equal(&got, &want), "{:?}: {got:?} vs sums {want:?}", g.key);
    }
    let want = naive_usage(sent, &pricing);
    let got: ByModel = usage
        .groups
        .iter()
        .map(|g| {
            let u = &g.usage;
            (
                g.key.clone(),
                (
                    u.calls,
                    u.errors,
                    u.input_tokens,
                    u.cache_read_tokens,
                    u.cost_usd,
                    u.unpriced_calls,
                ),
            )
        })
        .collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (k, w) in &want {
        let g = &got[k];
        assert_eq!((g.0, g.1, g.2, g.3, g.5), (w.0, w.1, w.2, w.3, w.5), "{k:?}");
        assert!(close(g.4, w.4), "{k:?}: cost {} vs {}", g.4, w.4);
    }
    assert_eq!(usage.totals.calls, want.values().map(|w| w.0).sum::<u64>());

    let (tools, _) = engine.llm_tools(Window::ALL).unwrap();
    let mut want_tools: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for s in sent.values() {
        if let Some(c) = LlmCall::from_attributes(&s.attributes)
            && c.kind == Some(CallKind::Tool)
        {
            *want_tools.entry(c.tool_name).or_default() += 1;
        }
    }
    let got_tools: BTreeMap<Option<String>, u64> = tools.into_iter().map(|t| (t.tool, t.calls)).collect();
    assert_eq!(got_tools, want_tools);

    let skip = ambiguous(sent);
    let want = naive_sessions(sent);
    let mut cursor: Option<String> = None;
    let mut got = Vec::new();
    loop {
        let (page, _) = engine.sessions(Window::ALL, 2, cursor.as_deref()).unwrap();
        got.extend(page.sessions);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let ids: BTreeSet<&str> = got.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids.len(), got.len(), "pages repeat a session");
    let mut ordered = got.clone();
    ordered.sort_by_key(|s| std::cmp::Reverse(s.end_time_unix_nano));
    assert_eq!(
        ordered.iter().map(|s| s.end_time_unix_nano).collect::<Vec<_>>(),
        got.iter().map(|s| s.end_time_unix_nano).collect::<Vec<_>>(),
        "most recent first"
    );
    if skip.is_empty() {
        assert_eq!(ids, want.keys().map(String::as_str).collect::<BTreeSet<_>>());
        for s in &got {
            let w = &want[&s.session_id];
            assert_eq!(
                (s.traces, s.spans, s.llm_calls, s.input_tokens),
                (w.traces.len() as u64, w.spans, w.llm_calls, w.input),
                "{}",
                s.session_id
            );
            let detail = engine.session(&s.session_id, Window::ALL).unwrap().unwrap();
            let mut d = detail.summary.clone();
            assert!(close(d.cost_usd, s.cost_usd), "{} vs {}", d.cost_usd, s.cost_usd);
            d.cost_usd = s.cost_usd;
            assert_eq!(d, *s);
            assert_eq!(
                detail
                    .turns
                    .iter()
                    .filter(|t| t.call.kind == Some(CallKind::Llm))
                    .count() as u64,
                w.llm_calls
            );
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: 24, ..Config::default() })]

    #[test]
    fn llm_aggregates_equal_a_naive_computation(steps in prop::collection::vec(step(), 1..10)) {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(options(dir.path())).unwrap();
        let mut sent: BTreeMap<(u128, [u8; 8]), Span> = BTreeMap::new();
        let mut scores: Vec<(u128, String, AnyValue)> = Vec::new();
        for st in steps {
            match st {
                Step::Scores(gens) => {
                    let mut records = Vec::new();
                    for g in &gens {
                        records.push(score_record(g, scores.len()));
                        scores.push((1 + g.trace as u128, score_name(g).to_string(), score_value(g)));
                    }
                    engine.ingest_logs(records).unwrap();
                }
                Step::Spans(gens) => {
                    let spans: Vec<Span> = gens.iter().map(span_of).collect();
                    for s in &spans {
                        sent.insert((s.trace_id.as_u128(), s.span_id.0), s.clone());
                    }
                    engine.ingest_spans(spans).unwrap();
                }
                Step::Check => check(&engine, &sent, &scores),
                Step::Flush => engine.flush().unwrap(),
                Step::Compact => {
                    engine.flush().unwrap();
                    engine.compact().unwrap();
                }
                Step::Reopen => {
                    engine.close().unwrap();
                    drop(engine);
                    engine = Engine::open(options(dir.path())).unwrap();
                }
                Step::LoseCallsTables => {
                    engine.close().unwrap();
                    drop(engine);
                    for f in calls_tables(dir.path()) {
                        std::fs::remove_file(f).unwrap();
                    }
                    engine = Engine::open(options(dir.path())).unwrap();
                }
            }
        }
        check(&engine, &sent, &scores);
    }
}

#[test]
fn unknown_session_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(options(dir.path())).unwrap();
    assert!(engine.session("nope", Window::ALL).unwrap().is_none());
    assert!(engine.sessions(Window::ALL, 10, Some("garbage")).is_err());
}

#[test]
fn evaluation_events_in_spans_are_scores_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(options(dir.path())).unwrap();
    let mut span = span_of(&Gen {
        trace: 1,
        n: 0,
        convention: 0,
        model: 0,
        tokens: 10,
        session: 1,
        flags: 0,
    });
    span.events.push(skein_model::Event {
        time_unix_nano: span.start_time_unix_nano + 5,
        name: "gen_ai.evaluation.result".into(),
        attributes: vec![
            kv("gen_ai.evaluation.name", "relevance"),
            kv("gen_ai.evaluation.score.value", 0.75),
        ],
        ..Default::default()
    });
    // Sent twice (a retry), with a flush and a compaction between.
    engine.ingest_spans(vec![span.clone()]).unwrap();
    engine.flush().unwrap();
    engine.ingest_spans(vec![span.clone()]).unwrap();
    engine.flush().unwrap();
    engine.compact().unwrap();
    let scores = engine.scores(None, None, Some("relevance"), Window::ALL, 10).unwrap();
    assert_eq!(scores.len(), 1, "{scores:?}");
    assert_eq!(scores[0].value, serde_json::json!(0.75));
    assert_eq!(scores[0].trace_id, Some(span.trace_id.to_hex()));
    assert_eq!(scores[0].span_id, Some(span.span_id.to_hex()));
    let (usage, _) = engine.llm_usage(Window::ALL, UsageGroupBy::Model, true).unwrap();
    let s = usage.totals.scores.as_ref().unwrap();
    assert_eq!((s["relevance"].mean, s["relevance"].count), (0.75, 1));
}

/// The calls tables under a data directory.
fn calls_tables(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "calls") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn parts_of(dir: &Path) -> usize {
    calls_tables(dir)
        .iter()
        .filter(|p| p.with_extension("parquet").exists())
        .count()
}

#[test]
fn parts_answer_from_their_calls_tables_which_are_rebuilt_when_lost_and_go_with_their_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::open(options(dir.path())).unwrap();
    let gens: Vec<Gen> = (0..40u8)
        .map(|i| Gen {
            trace: i % 7,
            n: i,
            convention: i % 4,
            model: i % 3,
            tokens: 100 + i as u16 * 13,
            session: i % 5,
            flags: i,
        })
        .collect();
    let mut sent = BTreeMap::new();
    for chunk in gens.chunks(10) {
        let spans: Vec<Span> = chunk.iter().map(span_of).collect();
        for s in &spans {
            sent.insert((s.trace_id.as_u128(), s.span_id.0), s.clone());
        }
        engine.ingest_spans(spans).unwrap();
        engine.flush().unwrap();
    }
    // One calls table per span part, and every part read through it.
    assert_eq!(calls_tables(dir.path()).len(), 4);
    assert_eq!(parts_of(dir.path()), 4);
    let (_, explain) = engine.llm_usage(Window::ALL, UsageGroupBy::Model, false).unwrap();
    let v = serde_json::to_value(&explain).unwrap();
    let parts: Vec<&serde_json::Value> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "part")
        .collect();
    assert_eq!(parts.len(), 4, "{v}");
    assert!(parts.iter().all(|s| s["read_from"] == "calls table"), "{v}");
    check(&engine, &sent, &[]);

    // Compaction: the replaced parts' tables go with them.
    engine.compact().unwrap();
    let after = calls_tables(dir.path());
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(parts_of(dir.path()), 1);
    check(&engine, &sent, &[]);

    // Lost (or damaged): rebuilt from the part on open, same answers.
    engine.close().unwrap();
    drop(engine);
    std::fs::remove_file(&after[0]).unwrap();
    engine = Engine::open(options(dir.path())).unwrap();
    assert_eq!(calls_tables(dir.path()), after);
    check(&engine, &sent, &[]);
    engine.close().unwrap();
    drop(engine);
    std::fs::write(&after[0], b"not parquet").unwrap();
    engine = Engine::open(options(dir.path())).unwrap();
    assert!(std::fs::metadata(&after[0]).unwrap().len() > 100);
    check(&engine, &sent, &[]);

    // An orphan (a crash between the table and its part) is removed.
    engine.close().unwrap();
    drop(engine);
    let orphan = after[0].with_file_name("00000000000fffff.calls");
    std::fs::copy(&after[0], &orphan).unwrap();
    engine = Engine::open(options(dir.path())).unwrap();
    assert!(!orphan.exists());
    check(&engine, &sent, &[]);
}
