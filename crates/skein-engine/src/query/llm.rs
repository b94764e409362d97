//! LLM and agent telemetry, aggregated: usage and cost by a dimension, tool
//! calls by tool, and sessions (conversations).
//!
//! Parts answer from their calls tables (the GenAI and session rows of the
//! part's typed columns `llm_*`, `session_id`, …, written from each span's
//! [`LlmCall`]; see `part::calls`), never from attribute JSON; the hot
//! tier derives the same view from its spans; a part written before those
//! columns existed is decoded instead. Costs are computed at query time from
//! tokens and the price table, so a corrected price applies to old data
//! too; a cost the client reported wins.
//!
//! A session is the set of traces in which some span carries the session
//! id; its calls, tokens and cost are those of every GenAI span in those
//! traces (OTel GenAI instrumentations put `gen_ai.conversation.id` on the
//! agent span only, not on each model call below it).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int8Type, Int64Type, TimestampNanosecondType, UInt32Type};
use arrow_array::{Array, BooleanArray, FixedSizeBinaryArray, PrimitiveArray, RecordBatch, StringArray};
use serde::Serialize;
use skein_model::Span;
use skein_model::genai::{CallKind, CostInput, CostSource, LlmCall, PriceMemo, Pricing, Tokens, pricing::date_of};

use super::explain::{Explain, SourceExplain};
use super::search::Source;
use super::shadow::{ShadowCache, shadowed_span_rows};
use super::sketch::{BatchedSketch, Sketch};
use super::window::Window;
use crate::error::Result;
use crate::hash::{FastMap, FastSet};
use crate::part::Part;
use crate::part::calls::{self, CallsTable};
use crate::part::columns::SPAN_LLM_COLUMNS;

/// One GenAI span as the aggregations see it, borrowed from a part's
/// columns or from a hot span's [`LlmCall`].
#[derive(Debug, Clone, Copy)]
pub struct CallRow<'a> {
    pub time: u64,
    pub duration_ns: u64,
    pub error: bool,
    pub trace_id: u128,
    pub service: &'a str,
    pub kind: Option<CallKind>,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    pub request_model: Option<&'a str>,
    pub tokens: Tokens,
    pub reported_usd: Option<f64>,
    pub flagged: bool,
    pub ttft_ns: Option<u64>,
    pub session: Option<&'a str>,
    pub user: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub tool: Option<&'a str>,
}

impl<'a> CallRow<'a> {
    fn of_span(s: &'a Span, c: &'a LlmCall) -> CallRow<'a> {
        CallRow {
            time: s.start_time_unix_nano,
            duration_ns: s.duration_ns(),
            error: s.is_error(),
            trace_id: s.trace_id.as_u128(),
            service: s.service_name(),
            kind: c.kind,
            provider: c.provider.as_deref(),
            model: c.model.as_deref(),
            request_model: c.request_model.as_deref(),
            tokens: c.tokens(),
            reported_usd: c.reported_cost_usd,
            flagged: !c.warnings.is_empty(),
            ttft_ns: c.time_to_first_token_ns,
            session: c.session_id.as_deref(),
            user: c.user_id.as_deref(),
            agent: c.agent_name.as_deref(),
            tool: c.tool_name.as_deref(),
        }
    }

    pub fn is_llm(&self) -> bool {
        self.kind == Some(CallKind::Llm)
    }

    /// Whether it is a GenAI call or part of a session: what the typed
    /// columns mark (a span with a stray `gen_ai.usage.cost` and nothing
    /// else is neither).
    fn counts(&self) -> bool {
        self.kind.is_some() || self.session.is_some()
    }

    /// Whether its token figures count: a model call whose figures do not
    /// contradict each other.
    fn counts_tokens(&self) -> bool {
        self.is_llm() && !self.flagged
    }

    fn cost_input(&self) -> CostInput<'a> {
        CostInput {
            provider: self.provider,
            model: self.model,
            request_model: self.request_model,
            tokens: self.tokens,
            reported_usd: self.reported_usd,
            priceable: self.counts_tokens() && (self.tokens.input.is_some() || self.tokens.output.is_some()),
        }
    }
}

/// The dense columns a visit needs besides the GenAI ones: reading a
/// part's trace ids and service names costs more than all of its sparse
/// GenAI columns together, so a visit that needs neither leaves them out
/// (its rows then carry trace 0 and an empty service).
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    pub trace: bool,
    pub service: bool,
}

/// Calls `f` with every GenAI span in `w` (the newest copy of each).
pub fn visit_calls(
    sources: &[Source<Span>],
    w: Window,
    needs: Needs,
    cache: &ShadowCache,
    explain: &mut Explain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    let shadowed = shadowed_span_rows(sources, w, cache)?;
    visit_unshadowed_calls(sources, w, needs, &shadowed, explain, f)
}

/// [`visit_calls`], given each source's superseded rows
/// ([`shadowed_span_rows`] for `w`).
fn visit_unshadowed_calls(
    sources: &[Source<Span>],
    w: Window,
    needs: Needs,
    shadowed: &[FastSet<u32>],
    explain: &mut Explain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    for (s, shadowed) in sources.iter().zip(shadowed) {
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut ex = SourceExplain::new("hot", None);
                for (row, call) in m.llm_calls().iter() {
                    if !m.is_live(row) || shadowed.contains(&row) {
                        continue;
                    }
                    let sp = m.row(row);
                    ex.rows_examined += 1;
                    if !w.contains(sp.start_time_unix_nano) {
                        continue;
                    }
                    let r = CallRow::of_span(sp, call);
                    if r.counts() {
                        f(&r);
                    }
                }
                explain.add(ex);
            }
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                } else {
                    visit_part(p, w, needs, shadowed, &mut ex, f)?;
                }
                explain.add(ex);
            }
        }
    }
    Ok(())
}

const ROW_COLUMNS: &[&str] = &["start_time_unix_nano", "duration_ns", "status_code"];

fn visit_part(
    p: &Part,
    w: Window,
    needs: Needs,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    if let Some(calls) = p.calls() {
        return visit_calls_table(calls, w, needs, shadowed, ex, f);
    }
    let range = p.index.row_range(p.rows(), w);
    // First the two sparse columns that say which rows are GenAI spans (a
    // few percent of rows, mostly nulls: cheap), then every column of just
    // those rows.
    let mut rows = Vec::new();
    let mut next_row = range.start;
    for b in p.read_columns(&["llm_kind", "session_id"], range.clone(), 65536)? {
        let first_row = next_row;
        next_row += b.num_rows() as u32;
        let (Some(kind), Some(session)) = (b.column_by_name("llm_kind"), b.column_by_name("session_id")) else {
            // Written before the typed GenAI columns: decode the spans.
            return visit_part_records(p, w, shadowed, ex, f);
        };
        ex.rows_examined += b.num_rows() as u64;
        for i in 0..b.num_rows() {
            let row = first_row + i as u32;
            if (kind.is_valid(i) || session.is_valid(i)) && !shadowed.contains(&row) {
                rows.push(row);
            }
        }
    }
    let columns = call_columns(needs);
    for chunk in rows.chunks(65536) {
        ex.rows_decoded += chunk.len() as u64;
        for b in p.read_row_columns(&columns, chunk)? {
            let cols = LlmBatch::new(&b).ok_or_else(|| {
                crate::error::Error::corrupt("span part", "a GenAI column is missing or of the wrong type")
            })?;
            for i in 0..b.num_rows() {
                let time = cols.start.value(i).max(0) as u64;
                if w.contains(time) {
                    f(&cols.row(i, time));
                }
            }
        }
    }
    Ok(())
}

/// The columns a visit reads of each call.
fn call_columns(needs: Needs) -> Vec<&'static str> {
    let mut columns: Vec<&str> = ROW_COLUMNS.iter().chain(SPAN_LLM_COLUMNS).copied().collect();
    if needs.trace {
        columns.push("trace_id");
    }
    if needs.service {
        columns.push("service_name");
    }
    columns
}

/// A part's calls from its calls table: every call row, densely.
fn visit_calls_table(
    calls: &CallsTable,
    w: Window,
    needs: Needs,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    ex.read_from = Some("calls table");
    for b in calls.read(&call_columns(needs))? {
        let cols = LlmBatch::new(&b).ok_or_else(|| {
            crate::error::Error::corrupt("calls table", "a GenAI column is missing or of the wrong type")
        })?;
        let rows = b
            .column_by_name(calls::ROW)
            .and_then(|c| c.as_primitive_opt::<UInt32Type>())
            .ok_or_else(|| crate::error::Error::corrupt("calls table", "no row column"))?;
        ex.rows_examined += b.num_rows() as u64;
        ex.rows_decoded += b.num_rows() as u64;
        for i in 0..b.num_rows() {
            let time = cols.start.value(i).max(0) as u64;
            if w.contains(time) && !shadowed.contains(&rows.value(i)) {
                f(&cols.row(i, time));
            }
        }
    }
    Ok(())
}

fn visit_part_records(
    p: &Part,
    w: Window,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    let mut row = 0u32;
    for batch in p.scan::<Span>(8192)? {
        for sp in batch? {
            let this = row;
            row += 1;
            ex.rows_decoded += 1;
            if shadowed.contains(&this) || !w.contains(sp.start_time_unix_nano) {
                continue;
            }
            if let Some(call) = LlmCall::from_attributes(&sp.attributes) {
                let r = CallRow::of_span(&sp, &call);
                if r.counts() {
                    f(&r);
                }
            }
        }
    }
    Ok(())
}

/// A batch of a part's GenAI columns.
struct LlmBatch<'b> {
    /// Absent when the visit does not need it ([`Needs`]).
    trace: Option<&'b FixedSizeBinaryArray>,
    start: &'b PrimitiveArray<TimestampNanosecondType>,
    duration: &'b PrimitiveArray<Int64Type>,
    status: &'b PrimitiveArray<Int8Type>,
    service: Option<&'b StringArray>,
    kind: &'b PrimitiveArray<Int8Type>,
    provider: &'b StringArray,
    model: &'b StringArray,
    request_model: &'b StringArray,
    input: &'b PrimitiveArray<Int64Type>,
    output: &'b PrimitiveArray<Int64Type>,
    cache_read: &'b PrimitiveArray<Int64Type>,
    cache_write: &'b PrimitiveArray<Int64Type>,
    reasoning: &'b PrimitiveArray<Int64Type>,
    reported: &'b PrimitiveArray<Float64Type>,
    flagged: &'b BooleanArray,
    ttft: &'b PrimitiveArray<Int64Type>,
    session: &'b StringArray,
    user: &'b StringArray,
    agent: &'b StringArray,
    tool: &'b StringArray,
}

impl<'b> LlmBatch<'b> {
    /// `None` when the batch lacks a column (an older part).
    fn new(b: &'b RecordBatch) -> Option<LlmBatch<'b>> {
        let col = |n: &str| b.column_by_name(n);
        let s = |n: &str| col(n).and_then(|c| c.as_string_opt::<i32>());
        let i64s = |n: &str| col(n).and_then(|c| c.as_primitive_opt::<Int64Type>());
        Some(LlmBatch {
            trace: col("trace_id").and_then(|c| c.as_fixed_size_binary_opt()),
            start: col("start_time_unix_nano")?.as_primitive_opt::<TimestampNanosecondType>()?,
            duration: i64s("duration_ns")?,
            status: col("status_code")?.as_primitive_opt::<Int8Type>()?,
            service: s("service_name"),
            kind: col("llm_kind")?.as_primitive_opt::<Int8Type>()?,
            provider: s("llm_provider")?,
            model: s("llm_model")?,
            request_model: s("llm_request_model")?,
            input: i64s("llm_input_tokens")?,
            output: i64s("llm_output_tokens")?,
            cache_read: i64s("llm_cache_read_tokens")?,
            cache_write: i64s("llm_cache_write_tokens")?,
            reasoning: i64s("llm_reasoning_tokens")?,
            reported: col("llm_reported_cost_usd")?.as_primitive_opt::<Float64Type>()?,
            flagged: col("llm_flagged")?.as_boolean_opt()?,
            ttft: i64s("llm_ttft_ns")?,
            session: s("session_id")?,
            user: s("user_id")?,
            agent: s("agent_name")?,
            tool: s("tool_name")?,
        })
    }

    fn row(&self, i: usize, time: u64) -> CallRow<'b> {
        let s = |a: &'b StringArray| (!a.is_null(i)).then(|| a.value(i));
        let n = |a: &'b PrimitiveArray<Int64Type>| (!a.is_null(i)).then(|| a.value(i));
        CallRow {
            time,
            duration_ns: self.duration.value(i).max(0) as u64,
            error: self.status.value(i) == skein_model::StatusCode::Error as i8,
            trace_id: self
                .trace
                .map_or(0, |t| u128::from_be_bytes(t.value(i).try_into().unwrap_or_default())),
            service: self.service.map_or("", |s| s.value(i)),
            kind: (!self.kind.is_null(i))
                .then(|| CallKind::from_i8(self.kind.value(i)))
                .flatten(),
            provider: s(self.provider),
            model: s(self.model),
            request_model: s(self.request_model),
            tokens: Tokens {
                input: n(self.input),
                output: n(self.output),
                cache_read: n(self.cache_read),
                cache_write: n(self.cache_write),
                reasoning: n(self.reasoning),
            },
            reported_usd: (!self.reported.is_null(i)).then(|| self.reported.value(i)),
            flagged: !self.flagged.is_null(i) && self.flagged.value(i),
            ttft_ns: n(self.ttft).map(|v| v.max(0) as u64),
            session: s(self.session),
            user: s(self.user),
            agent: s(self.agent),
            tool: s(self.tool),
        }
    }
}

// ------------------------------------------------------------------ usage

/// What usage is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageGroupBy {
    Model,
    Provider,
    Service,
    Session,
    Agent,
    User,
    Day,
}

impl UsageGroupBy {
    pub const NAMES: &'static str = "model, provider, service, session, agent, user or day";

    pub fn parse(s: &str) -> Option<UsageGroupBy> {
        Some(match s {
            "model" => UsageGroupBy::Model,
            "provider" => UsageGroupBy::Provider,
            "service" => UsageGroupBy::Service,
            "session" => UsageGroupBy::Session,
            "agent" => UsageGroupBy::Agent,
            "user" => UsageGroupBy::User,
            "day" => UsageGroupBy::Day,
            _ => return None,
        })
    }

    fn key<'a>(self, r: &CallRow<'a>) -> Option<Cow<'a, str>> {
        match self {
            UsageGroupBy::Model => r.model.or(r.request_model).map(Cow::Borrowed),
            UsageGroupBy::Provider => r.provider.map(Cow::Borrowed),
            UsageGroupBy::Service => Some(Cow::Borrowed(r.service)),
            UsageGroupBy::Session => r.session.map(Cow::Borrowed),
            UsageGroupBy::Agent => r.agent.map(Cow::Borrowed),
            UsageGroupBy::User => r.user.map(Cow::Borrowed),
            UsageGroupBy::Day => Some(Cow::Owned(date_of(r.time))),
        }
    }
}

/// Usage by group key, found without allocating a key per call.
#[derive(Default)]
struct Groups {
    named: FastMap<String, UsageAcc>,
    /// Calls without the key (no session, say).
    none: Option<UsageAcc>,
}

impl Groups {
    fn get(&mut self, key: Option<&str>) -> &mut UsageAcc {
        let Some(k) = key else {
            return self.none.get_or_insert_with(UsageAcc::default);
        };
        if !self.named.contains_key(k) {
            self.named.insert(k.to_string(), UsageAcc::default());
        }
        self.named.get_mut(k).expect("inserted above")
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut UsageAcc> {
        self.named.values_mut().chain(self.none.as_mut())
    }

    /// Every group, keyless first, unordered.
    fn into_vec(self) -> Vec<(Option<String>, UsageAcc)> {
        let mut out: Vec<(Option<String>, UsageAcc)> = self.none.map(|a| (None, a)).into_iter().collect();
        out.extend(self.named.into_iter().map(|(k, a)| (Some(k), a)));
        out
    }
}

/// Usage of one group.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageGroup {
    /// The group's value; `null` for calls that lack it (no session, say).
    pub key: Option<String>,
    #[serde(flatten)]
    pub usage: UsageFigures,
}

/// Usage of some calls. Token sums leave out calls whose figures
/// contradict each other (they count as unpriced).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageFigures {
    pub calls: u64,
    pub errors: u64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
    pub cost_usd: f64,
    pub unpriced_calls: u64,
    pub latency_p50_ns: u64,
    pub latency_p95_ns: u64,
    pub ttft_p50_ns: Option<u64>,
    /// With `include=scores`: per score name, the mean of the numeric
    /// scores (true = 1, false = 0) of the traces whose calls these are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<BTreeMap<String, ScoreMean>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ScoreMean {
    pub mean: f64,
    pub count: u64,
}

#[derive(Default)]
struct UsageAcc {
    calls: u64,
    errors: u64,
    tokens: [i64; 5],
    cost_usd: f64,
    unpriced: u64,
    latency: BatchedSketch,
    ttft: BatchedSketch,
    /// Per score name: sum and count.
    scores: Option<BTreeMap<String, (f64, u64)>>,
}

impl UsageAcc {
    fn add_score(&mut self, name: &str, value: f64) {
        let e = self
            .scores
            .get_or_insert_with(BTreeMap::new)
            .entry(name.to_string())
            .or_default();
        e.0 += value;
        e.1 += 1;
    }

    fn add(&mut self, r: &CallRow<'_>, cost: Option<f64>) {
        self.calls += 1;
        self.errors += r.error as u64;
        if r.counts_tokens() {
            let t = r.tokens;
            for (sum, v) in self
                .tokens
                .iter_mut()
                .zip([t.input, t.output, t.cache_read, t.cache_write, t.reasoning])
            {
                *sum += v.unwrap_or(0);
            }
        }
        match cost {
            Some(usd) => self.cost_usd += usd,
            None => self.unpriced += 1,
        }
        self.latency.add(r.duration_ns);
        if let Some(t) = r.ttft_ns {
            self.ttft.add(t);
        }
    }

    fn finish(self) -> UsageFigures {
        let [input, output, cache_read, cache_write, reasoning] = self.tokens;
        let (latency, ttft) = (self.latency.finish(), self.ttft.finish());
        UsageFigures {
            calls: self.calls,
            errors: self.errors,
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            reasoning_tokens: reasoning,
            cost_usd: self.cost_usd,
            unpriced_calls: self.unpriced,
            latency_p50_ns: latency.quantile(0.5),
            latency_p95_ns: latency.quantile(0.95),
            ttft_p50_ns: (ttft.count() > 0).then(|| ttft.quantile(0.5)),
            scores: self.scores.as_ref().map(|m| {
                m.iter()
                    .map(|(k, (sum, n))| {
                        (
                            k.clone(),
                            ScoreMean {
                                mean: sum / *n as f64,
                                count: *n,
                            },
                        )
                    })
                    .collect()
            }),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub window: Window,
    pub group_by: UsageGroupBy,
    pub groups: Vec<UsageGroup>,
    pub totals: UsageFigures,
}

/// Model calls in `w`, grouped, most expensive group first (days in order).
/// With `scores`, each group also gets the mean of the numeric scores of
/// the traces its calls belong to (a trace's score counts once per group).
pub fn usage(
    sources: &[Source<Span>],
    w: Window,
    group_by: UsageGroupBy,
    pricing: &Pricing,
    scores: Option<&[skein_model::genai::score::Score]>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Usage> {
    let mut memo = PriceMemo::new(pricing);
    let mut groups = Groups::default();
    let mut totals = UsageAcc::default();
    // The groups of each trace's calls, when scores are asked for.
    let mut trace_groups: FastMap<u128, Vec<Option<String>>> = FastMap::default();
    let needs = Needs {
        trace: scores.is_some(),
        service: group_by == UsageGroupBy::Service,
    };
    visit_calls(sources, w, needs, cache, explain, &mut |r| {
        if !r.is_llm() {
            return;
        }
        let cost = memo.cost(&r.cost_input(), r.time);
        let usd = (cost.source != CostSource::Unpriced).then_some(cost.usd).flatten();
        let key = group_by.key(r);
        if scores.is_some() {
            let keys = trace_groups.entry(r.trace_id).or_default();
            if !keys.iter().any(|k| k.as_deref() == key.as_deref()) {
                keys.push(key.as_deref().map(str::to_string));
            }
        }
        groups.get(key.as_deref()).add(r, usd);
        totals.add(r, usd);
    })?;
    if let Some(scores) = scores {
        totals.scores.get_or_insert_with(BTreeMap::new);
        for g in groups.values_mut() {
            g.scores.get_or_insert_with(BTreeMap::new);
        }
        for s in scores {
            let value = match &s.value {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::Bool(b) => Some(*b as u8 as f64),
                _ => None,
            };
            let (Some(value), Some(trace)) = (value, s.trace_id.as_deref()) else {
                continue;
            };
            let Ok(trace) = skein_model::TraceId::from_hex(trace) else {
                continue;
            };
            let Some(keys) = trace_groups.get(&trace.as_u128()) else {
                continue;
            };
            totals.add_score(&s.name, value);
            for k in keys {
                groups.get(k.as_deref()).add_score(&s.name, value);
            }
        }
    }
    let mut out: Vec<UsageGroup> = groups
        .into_vec()
        .into_iter()
        .map(|(key, acc)| UsageGroup {
            key,
            usage: acc.finish(),
        })
        .collect();
    if group_by == UsageGroupBy::Day {
        out.sort_by(|a, b| a.key.cmp(&b.key));
    } else {
        out.sort_by(|a, b| {
            b.usage
                .cost_usd
                .total_cmp(&a.usage.cost_usd)
                .then(b.usage.calls.cmp(&a.usage.calls))
                .then_with(|| a.key.cmp(&b.key))
        });
    }
    Ok(Usage {
        window: w,
        group_by,
        groups: out,
        totals: totals.finish(),
    })
}

// ------------------------------------------------------------------ tools

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolSummary {
    /// `null` for tool spans that do not name their tool.
    pub tool: Option<String>,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
}

/// Tool executions in `w` by tool name, most called first.
pub fn tools(
    sources: &[Source<Span>],
    w: Window,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Vec<ToolSummary>> {
    let mut by_tool: BTreeMap<Option<String>, (u64, u64, Sketch)> = BTreeMap::new();
    visit_calls(sources, w, Needs::default(), cache, explain, &mut |r| {
        if r.kind != Some(CallKind::Tool) {
            return;
        }
        let e = by_tool.entry(r.tool.map(str::to_string)).or_default();
        e.0 += 1;
        e.1 += r.error as u64;
        e.2.add(r.duration_ns);
    })?;
    let mut out: Vec<ToolSummary> = by_tool
        .into_iter()
        .map(|(tool, (calls, errors, d))| ToolSummary {
            tool,
            calls,
            errors,
            error_rate: if calls == 0 { 0.0 } else { errors as f64 / calls as f64 },
            p50_ns: d.quantile(0.5),
            p95_ns: d.quantile(0.95),
        })
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));
    Ok(out)
}

// --------------------------------------------------------------- sessions

/// One session's summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionSummary {
    pub session_id: String,
    pub traces: u64,
    /// Every span of the session's traces.
    pub spans: u64,
    pub llm_calls: u64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// Failed model and tool calls.
    pub errors: u64,
    pub models: Vec<String>,
    pub agents: Vec<String>,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
}

impl SessionSummary {
    /// A session with nothing counted yet.
    #[cfg(test)]
    fn empty(session_id: String) -> SessionSummary {
        SessionSummary {
            session_id,
            traces: 0,
            spans: 0,
            llm_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            errors: 0,
            models: Vec::new(),
            agents: Vec::new(),
            start_time_unix_nano: u64::MAX,
            end_time_unix_nano: 0,
        }
    }
}

/// Strings seen, each numbered once, stored back to back (a session list
/// interns tens of thousands of ids: one allocation each was a tenth of
/// its time).
#[derive(Default)]
struct Names {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
    /// A name's hash → its number. A second name with the same 64-bit hash
    /// (vanishingly rare) is numbered in `clashes` instead.
    by_hash: FastMap<u64, u32>,
    clashes: Vec<u32>,
    /// The last few names numbered, compared before hashing, when the
    /// names are few and come up again and again (models, agents); empty
    /// for many (session ids).
    recent: Vec<u32>,
    next_recent: usize,
}

impl Names {
    /// Names that are few: the last eight are compared before hashing.
    fn few() -> Names {
        Names {
            recent: vec![u32::MAX; 8],
            ..Names::default()
        }
    }

    fn hash(s: &str) -> u64 {
        use std::hash::BuildHasher;
        std::hash::BuildHasherDefault::<crate::hash::WordHasher>::default().hash_one(s)
    }

    fn name(&self, i: u32) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i as usize - 1] as usize };
        &self.text[start..self.ends[i as usize] as usize]
    }

    fn find(&self, h: u64, s: &str) -> Option<u32> {
        match self.by_hash.get(&h) {
            Some(&i) if self.name(i) == s => Some(i),
            Some(_) => self.clashes.iter().copied().find(|&i| self.name(i) == s),
            None => None,
        }
    }

    fn get(&self, s: &str) -> Option<u32> {
        self.find(Self::hash(s), s)
    }

    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.recent.iter().find(|&&i| i != u32::MAX && self.name(i) == s) {
            return i;
        }
        let i = self.id_hashed(Self::hash(s), s);
        if !self.recent.is_empty() {
            self.recent[self.next_recent] = i;
            self.next_recent = (self.next_recent + 1) % self.recent.len();
        }
        i
    }

    fn id_hashed(&mut self, h: u64, s: &str) -> u32 {
        if let Some(i) = self.find(h, s) {
            return i;
        }
        let i = self.ends.len() as u32;
        self.text.push_str(s);
        self.ends.push(self.text.len() as u32);
        match self.by_hash.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(_) => self.clashes.push(i),
        }
        i
    }

    /// Adds `s`'s number to `ids` unless there: the names already there
    /// are compared first, so a session's calls of one model hash it once.
    fn add_to(&mut self, ids: &mut Vec<u32>, s: &str) {
        if ids.iter().any(|&i| self.name(i) == s) {
            return;
        }
        let i = self.id(s);
        if !ids.contains(&i) {
            ids.push(i);
        }
    }

    /// The names of `ids`, sorted.
    fn sorted(&self, ids: &[u32]) -> Vec<String> {
        let mut v: Vec<String> = ids.iter().map(|&i| self.name(i).to_string()).collect();
        v.sort_unstable();
        v
    }
}

/// A sum of dollar amounts that does not depend on the order they are
/// added in: each is rounded to 10⁻¹⁵ USD and summed exactly, so a session
/// costs the same whichever order its calls were visited in (sources, merges).
#[derive(Default, Clone, Copy)]
struct UsdSum(i128);

impl UsdSum {
    const SCALE: f64 = 1e15;

    fn add(&mut self, usd: f64) {
        self.0 += (usd * Self::SCALE).round() as i128;
    }

    fn usd(self) -> f64 {
        self.0 as f64 / Self::SCALE
    }
}

/// One session's figures, its strings still interned.
struct SessionAgg {
    traces: u64,
    llm_calls: u64,
    input: i64,
    output: i64,
    cost: UsdSum,
    errors: u64,
    models: Vec<u32>,
    agents: Vec<u32>,
    start: u64,
    end: u64,
}

impl Default for SessionAgg {
    fn default() -> Self {
        SessionAgg {
            traces: 0,
            llm_calls: 0,
            input: 0,
            output: 0,
            cost: UsdSum::default(),
            errors: 0,
            models: Vec::new(),
            agents: Vec::new(),
            start: u64::MAX,
            end: 0,
        }
    }
}

/// Folds GenAI spans into sessions: first which session each trace is in
/// ([`SessionAcc::mark`]), then every call of those traces into its
/// session ([`SessionAcc::add`]); calls of other traces are passed over.
struct SessionAcc<'p> {
    memo: PriceMemo<'p>,
    /// Each marked trace's session.
    traces: FastMap<u128, u32>,
    /// Session ids, numbered; `aggs[i]` is session `i`'s figures.
    sessions: Names,
    aggs: Vec<SessionAgg>,
    models: Names,
    agents: Names,
    /// The session last marked or added to: spans of one session come in
    /// runs, so it is compared before any lookup.
    last: Option<u32>,
    /// Whether some trace has spans of two sessions (the first noted then
    /// owns it). If none has, a call that carries a session is in that
    /// session, found by name without looking its trace up.
    ambiguous: bool,
}

impl<'p> SessionAcc<'p> {
    fn new(pricing: &'p Pricing) -> Self {
        SessionAcc {
            memo: PriceMemo::new(pricing),
            traces: FastMap::default(),
            sessions: Names::default(),
            aggs: Vec::new(),
            models: Names::few(),
            agents: Names::few(),
            last: None,
            ambiguous: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.traces.is_empty()
    }

    /// Notes that `trace` has a span of `session`: the first noted wins.
    fn mark(&mut self, trace: u128, session: &str) {
        let v = match self.traces.entry(trace) {
            std::collections::hash_map::Entry::Vacant(v) => v,
            std::collections::hash_map::Entry::Occupied(o) => {
                self.ambiguous |= self.sessions.name(*o.get()) != session;
                return;
            }
        };
        let s = match self.last {
            Some(s) if self.sessions.name(s) == session => s,
            _ => self.sessions.id(session),
        };
        self.last = Some(s);
        v.insert(s);
        if s as usize == self.aggs.len() {
            self.aggs.push(SessionAgg::default());
        }
        self.aggs[s as usize].traces += 1;
    }

    fn add(&mut self, r: &CallRow<'_>) {
        if !r.counts() {
            return;
        }
        // Both passes see the same rows (in the window, not superseded), so
        // a call that carries a session was noted under it; by name is a
        // lookup among sessions, far fewer than traces.
        let s = match r.session {
            Some(name) if !self.ambiguous => match self.last {
                Some(s) if self.sessions.name(s) == name => s,
                _ => match self.sessions.get(name) {
                    Some(s) => s,
                    None => return,
                },
            },
            _ => match self.traces.get(&r.trace_id) {
                Some(&s) => s,
                None => return,
            },
        };
        self.last = Some(s);
        let a = &mut self.aggs[s as usize];
        a.start = a.start.min(r.time);
        a.end = a.end.max(r.time.saturating_add(r.duration_ns));
        a.errors += (r.error && matches!(r.kind, Some(CallKind::Llm | CallKind::Tool))) as u64;
        if let Some(name) = r.agent {
            self.agents.add_to(&mut a.agents, name);
        }
        if r.is_llm() {
            a.llm_calls += 1;
            if let Some(m) = r.model.or(r.request_model) {
                self.models.add_to(&mut a.models, m);
            }
            if r.counts_tokens() {
                a.input += r.tokens.input.unwrap_or(0);
                a.output += r.tokens.output.unwrap_or(0);
            }
            if let Some(usd) = self.memo.cost(&r.cost_input(), r.time).usd {
                a.cost.add(usd);
            }
        }
    }

    /// The traces of each of `sessions`, sorted, in their order.
    fn traces_of(&self, sessions: &[u32]) -> Vec<Vec<u128>> {
        let place: FastMap<u32, usize> = sessions.iter().enumerate().map(|(k, &s)| (s, k)).collect();
        let mut out = vec![Vec::new(); sessions.len()];
        for (&t, s) in &self.traces {
            if let Some(&k) = place.get(s) {
                out[k].push(t);
            }
        }
        for v in &mut out {
            v.sort_unstable();
        }
        out
    }

    /// Session `s`'s summary, spelled out; `spans` counts its spans.
    fn summary(&self, s: u32, spans: u64) -> SessionSummary {
        let a = &self.aggs[s as usize];
        SessionSummary {
            session_id: self.sessions.name(s).to_string(),
            traces: a.traces,
            spans,
            llm_calls: a.llm_calls,
            input_tokens: a.input,
            output_tokens: a.output,
            cost_usd: a.cost.usd(),
            errors: a.errors,
            models: self.models.sorted(&a.models),
            agents: self.agents.sorted(&a.agents),
            start_time_unix_nano: a.start,
            end_time_unix_nano: a.end,
        }
    }
}

/// One session: the traces in which a span in `w` carries its id (found
/// from the typed `session_id` column, a few sparse bytes a row), then
/// those traces' spans, whole.
pub fn session(
    sources: &[Source<Span>],
    id: &str,
    w: Window,
    pricing: &Pricing,
    explain: &mut Explain,
) -> Result<Option<SessionDetail>> {
    let traces = session_traces(sources, id, w, explain)?;
    if traces.is_empty() {
        return Ok(None);
    }
    // First which session each trace is in (the first span noted wins,
    // as in the list), then the calls.
    let mut acc = SessionAcc::new(pricing);
    let mut span_counts: FastMap<u128, u64> = FastMap::default();
    let mut calls = Vec::new();
    for t in &traces {
        let spans = super::search::trace_records(sources, *t, explain)?;
        span_counts.insert(*t, spans.len() as u64);
        for span in spans {
            let Some(call) = LlmCall::from_attributes(&span.attributes) else {
                continue;
            };
            if let Some(s) = &call.session_id {
                acc.mark(*t, s);
            }
            calls.push((span, call));
        }
    }
    let Some(session) = acc.sessions.get(id) else {
        return Ok(None);
    };
    let mut turns = Vec::new();
    for (span, call) in calls {
        acc.add(&CallRow::of_span(&span, &call));
        // A trace found through a superseded copy of a span (re-sent
        // without the session) is not the session's: its turns go too.
        if matches!(call.kind, Some(CallKind::Llm | CallKind::Tool))
            && acc.traces.get(&span.trace_id.as_u128()) == Some(&session)
        {
            let cost = pricing.cost(&call, span.start_time_unix_nano);
            turns.push(SessionTurn { span, call, cost });
        }
    }
    let traces = acc.traces_of(&[session]).pop().unwrap_or_default();
    let spans = traces.iter().map(|t| span_counts.get(t).copied().unwrap_or(0)).sum();
    let summary = acc.summary(session, spans);
    turns.sort_by_key(|t| (t.span.start_time_unix_nano, t.span.span_id));
    Ok(Some(SessionDetail {
        summary,
        traces: traces.into_iter().map(skein_model::TraceId::from_u128).collect(),
        turns,
    }))
}

/// The traces in which a span in `w` belongs to session `id`.
fn session_traces(sources: &[Source<Span>], id: &str, w: Window, explain: &mut Explain) -> Result<Vec<u128>> {
    let mut traces: BTreeSet<u128> = BTreeSet::new();
    visit_session_marks(sources, w, None, explain, &mut |t, s| {
        if s == id {
            traces.insert(t);
        }
    })?;
    Ok(traces.into_iter().collect())
}

/// Calls `f(trace, session)` for every span in `w` that carries a session
/// id, but the rows `shadowed` names (a set per source, when given). Parts
/// answer from three columns of their calls tables.
fn visit_session_marks(
    sources: &[Source<Span>],
    w: Window,
    shadowed: Option<&[FastSet<u32>]>,
    explain: &mut Explain,
    f: &mut dyn FnMut(u128, &str),
) -> Result<()> {
    let none = FastSet::default();
    for (k, s) in sources.iter().enumerate() {
        let shadowed = shadowed.and_then(|v| v.get(k)).unwrap_or(&none);
        match s {
            Source::Mem(m) => {
                let m = m.read();
                let mut ex = SourceExplain::new("hot", None);
                for (row, call) in m.llm_calls().iter() {
                    if !m.is_live(row) || shadowed.contains(&row) {
                        continue;
                    }
                    let sp = m.row(row);
                    ex.rows_examined += 1;
                    if w.contains(sp.start_time_unix_nano)
                        && let Some(session) = &call.session_id
                    {
                        f(sp.trace_id.as_u128(), session);
                    }
                }
                explain.add(ex);
            }
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                } else if let Some(calls) = p.calls() {
                    ex.read_from = Some("calls table");
                    for b in calls.read(&["session_id", "trace_id", "start_time_unix_nano"])? {
                        let (Some(rows), Some(session), Some(tid), Some(start)) = (
                            b.column_by_name(calls::ROW)
                                .and_then(|c| c.as_primitive_opt::<UInt32Type>()),
                            b.column_by_name("session_id").and_then(|c| c.as_string_opt::<i32>()),
                            b.column_by_name("trace_id").and_then(|c| c.as_fixed_size_binary_opt()),
                            b.column_by_name("start_time_unix_nano")
                                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>()),
                        ) else {
                            return Err(crate::error::Error::corrupt(
                                "calls table",
                                "a session column is missing",
                            ));
                        };
                        ex.rows_examined += b.num_rows() as u64;
                        for i in 0..b.num_rows() {
                            if session.is_valid(i)
                                && w.contains(start.value(i).max(0) as u64)
                                && !shadowed.contains(&rows.value(i))
                            {
                                let t = u128::from_be_bytes(tid.value(i).try_into().unwrap_or_default());
                                f(t, session.value(i));
                            }
                        }
                    }
                } else {
                    let needs = Needs {
                        trace: true,
                        service: false,
                    };
                    visit_part(p, w, needs, shadowed, &mut ex, &mut |r| {
                        if let Some(s) = r.session {
                            f(r.trace_id, s);
                        }
                    })?;
                }
                explain.add(ex);
            }
        }
    }
    Ok(())
}

/// How many spans each of `traces` has across sources, the newest copy of
/// each. A trace held by one source (almost every trace) is counted from
/// its index alone; one held by several is read, to count a span re-sent
/// into a newer source once. This is the page's traces only: the shadowed
/// rows of every source ([`shadowed_span_rows`]) over all time cost more
/// than the whole page.
fn trace_span_counts(sources: &[Source<Span>], traces: &[u128]) -> Result<FastMap<u128, u64>> {
    // Reading a shared trace is a detail of counting, not a source the
    // query scanned: its explain is dropped.
    let mut scratch = Explain::new(crate::record::Signal::Spans);
    let mut out = FastMap::default();
    for &t in traces {
        let mut holders = 0;
        let mut n = 0u64;
        for s in sources {
            match s {
                Source::Mem(m) => {
                    let m = m.read();
                    let rows = m.trace_rows(t);
                    holders += !rows.is_empty() as u32;
                    n += rows.iter().filter(|r| m.is_live(**r)).count() as u64;
                }
                Source::Part(p) => {
                    let rows = p.index.traces.rows_of(t).len() as u64;
                    holders += (rows > 0) as u32;
                    n += rows;
                }
            }
        }
        if holders > 1 {
            n = super::search::trace_records(sources, t, &mut scratch)?.len() as u64;
        }
        out.insert(t, n);
    }
    Ok(out)
}

/// One model or tool call of a session, with its span (whose attributes
/// hold the messages, tool arguments and results).
#[derive(Debug, Clone)]
pub struct SessionTurn {
    pub span: std::sync::Arc<Span>,
    pub call: LlmCall,
    pub cost: skein_model::genai::Cost,
}

#[derive(Debug, Clone)]
pub struct SessionDetail {
    pub summary: SessionSummary,
    pub traces: Vec<skein_model::TraceId>,
    pub turns: Vec<SessionTurn>,
}

/// A page of sessions, most recent (latest activity) first.
#[derive(Debug, Clone, Serialize)]
pub struct SessionPage {
    pub sessions: Vec<SessionSummary>,
    pub next_cursor: Option<String>,
}

/// Where a page of sessions starts: after this (end time, id).
fn encode_cursor(s: &SessionSummary) -> String {
    format!("{}.{}", s.end_time_unix_nano, hex::encode(s.session_id.as_bytes()))
}

pub fn decode_cursor(c: &str) -> Option<(u64, String)> {
    let (end, id) = c.split_once('.')?;
    Some((end.parse().ok()?, String::from_utf8(hex::decode(id).ok()?).ok()?))
}

/// Sessions with activity in `w`, most recent first, `limit` a page.
pub fn sessions(
    sources: &[Source<Span>],
    w: Window,
    limit: usize,
    after: Option<(u64, String)>,
    pricing: &Pricing,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<SessionPage> {
    // Two passes: which traces are sessions' (three columns of each calls
    // table), then those traces' calls alone (most calls are not in a
    // session).
    let mut acc = SessionAcc::new(pricing);
    let shadowed = shadowed_span_rows(sources, w, cache)?;
    visit_session_marks(sources, w, Some(&shadowed), explain, &mut |t, s| acc.mark(t, s))?;
    if acc.is_empty() {
        return Ok(SessionPage {
            sessions: Vec::new(),
            next_cursor: None,
        });
    }
    let needs = Needs {
        trace: true,
        service: false,
    };
    visit_unshadowed_calls(sources, w, needs, &shadowed, explain, &mut |r| acc.add(r))?;
    // Most recent first; ties by id.
    let order = |s: u32| (std::cmp::Reverse(acc.aggs[s as usize].end), acc.sessions.name(s));
    let cmp = |a: &u32, b: &u32| order(*a).cmp(&order(*b));
    let mut page: Vec<u32> = (0..acc.aggs.len() as u32).collect();
    if let Some((end, id)) = &after {
        let cut = (std::cmp::Reverse(*end), id.as_str());
        page.retain(|&s| order(s) > cut);
    }
    let more = page.len() > limit;
    // The page only: a partial sort, then summaries (and span counts, a
    // lookup per trace) for it alone.
    if more && limit > 0 {
        page.select_nth_unstable_by(limit - 1, cmp);
    }
    page.truncate(limit);
    page.sort_by(cmp);
    let traces = acc.traces_of(&page);
    let all: Vec<u128> = traces.iter().flatten().copied().collect();
    let spans = trace_span_counts(sources, &all)?;
    let sessions: Vec<SessionSummary> = page
        .iter()
        .zip(&traces)
        .map(|(&s, ts)| acc.summary(s, ts.iter().map(|t| spans.get(t).copied().unwrap_or(0)).sum()))
        .collect();
    let next_cursor = if more { sessions.last().map(encode_cursor) } else { None };
    Ok(SessionPage { sessions, next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_once_even_when_hashes_clash() {
        let mut n = Names::default();
        let a = n.id_hashed(7, "alpha");
        let b = n.id_hashed(7, "beta");
        let c = n.id("gamma");
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(n.id_hashed(7, "beta"), b);
        assert_eq!(n.id_hashed(7, "alpha"), a);
        assert_eq!(n.find(7, "beta"), Some(b));
        assert_eq!(n.find(7, "delta"), None);
        assert_eq!((n.name(a), n.name(b), n.name(c)), ("alpha", "beta", "gamma"));
        assert_eq!(n.get("gamma"), Some(c));
        let mut ids = Vec::new();
        n.add_to(&mut ids, "gamma");
        n.add_to(&mut ids, "alpha");
        n.add_to(&mut ids, "gamma");
        assert_eq!(n.sorted(&ids), ["alpha", "gamma"]);

        // Remembering the last few changes no number.
        let mut few = Names::few();
        let names: Vec<String> = (0..20).map(|i| format!("model-{i}")).collect();
        for round in 0..3 {
            for (i, name) in names.iter().enumerate().take(5 + 5 * round) {
                assert_eq!(few.id(name), i as u32);
            }
        }
        assert_eq!(few.get("model-9"), Some(9));
    }

    #[test]
    fn dollar_sums_do_not_depend_on_order() {
        let xs = [0.1, 1e-9, 3.3, 2.5e-7, 0.2, 7.0];
        let (mut fwd, mut back) = (UsdSum::default(), UsdSum::default());
        xs.iter().for_each(|&x| fwd.add(x));
        xs.iter().rev().for_each(|&x| back.add(x));
        assert_eq!(fwd.0, back.0);
        assert!((fwd.usd() - xs.iter().sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn cursors_round_trip() {
        let s = SessionSummary {
            end_time_unix_nano: 42,
            ..SessionSummary::empty("a.b/c".into())
        };
        assert_eq!(decode_cursor(&encode_cursor(&s)), Some((42, "a.b/c".into())));
        assert_eq!(decode_cursor("zz"), None);
    }

    #[test]
    fn group_keys() {
        assert_eq!(UsageGroupBy::parse("day"), Some(UsageGroupBy::Day));
        assert_eq!(UsageGroupBy::parse("nope"), None);
    }
}
