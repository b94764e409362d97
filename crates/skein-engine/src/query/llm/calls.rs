//! Every GenAI call in a window, as the aggregations see it: from a part's
//! calls table, its typed columns, or its decoded spans, and from the hot
//! tier's spans.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int8Type, Int64Type, TimestampNanosecondType, UInt32Type};
use arrow_array::{Array, BooleanArray, FixedSizeBinaryArray, PrimitiveArray, RecordBatch, StringArray};
use skein_model::Span;
use skein_model::genai::{CallKind, CostInput, LlmCall, Tokens};

use crate::error::Result;
use crate::hash::FastSet;
use crate::part::Part;
use crate::part::calls::{self, CallsTable};
use crate::part::columns::SPAN_LLM_COLUMNS;
use crate::query::explain::{Explain, SourceExplain};
use crate::query::search::Source;
use crate::query::shadow::{ShadowCache, shadowed_span_rows};
use crate::query::window::Window;

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
    pub(super) fn of_span(s: &'a Span, c: &'a LlmCall) -> CallRow<'a> {
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
    pub(super) fn counts(&self) -> bool {
        self.kind.is_some() || self.session.is_some()
    }

    /// Whether its token figures count: a model call whose figures do not
    /// contradict each other.
    pub(super) fn counts_tokens(&self) -> bool {
        self.is_llm() && !self.flagged
    }

    pub(super) fn cost_input(&self) -> CostInput<'a> {
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
pub(super) fn visit_unshadowed_calls(
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

pub(super) fn visit_part(
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
