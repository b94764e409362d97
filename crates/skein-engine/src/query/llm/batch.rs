//! A batch of a part's GenAI columns, read row by row as [`CallRow`]s.

use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int8Type, Int32Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, PrimitiveArray, RecordBatch, StringArray};
use skein_model::genai::{CallKind, Tokens};

use super::row::{CallRow, NameKeys};

/// A string column of a batch: plain, or dictionary-encoded as calls
/// tables are read (their strings repeat: models, providers, agents, the
/// session of a trace's spans), where a row's key names its value without
/// a copy or a comparison.
#[derive(Clone, Copy)]
pub(super) enum Strs<'b> {
    Plain(&'b StringArray),
    Dict {
        keys: &'b PrimitiveArray<Int32Type>,
        values: &'b StringArray,
    },
}

impl<'b> Strs<'b> {
    pub(super) fn of(a: &'b ArrayRef) -> Option<Strs<'b>> {
        if let Some(s) = a.as_string_opt::<i32>() {
            return Some(Strs::Plain(s));
        }
        let d = a.as_dictionary_opt::<Int32Type>()?;
        Some(Strs::Dict {
            keys: d.keys(),
            values: d.values().as_string_opt::<i32>()?,
        })
    }

    pub(super) fn get(&self, i: usize) -> Option<&'b str> {
        match self {
            Strs::Plain(a) => (!a.is_null(i)).then(|| a.value(i)),
            Strs::Dict { values, .. } => self.key(i).map(|k| values.value(k as usize)),
        }
    }

    /// Row `i`'s dictionary key, if the column is a dictionary and the row
    /// holds a value.
    pub(super) fn key(&self, i: usize) -> Option<u32> {
        match self {
            Strs::Plain(_) => None,
            Strs::Dict { keys, values } => {
                let k = keys.is_valid(i).then(|| keys.value(i))?;
                (k >= 0 && values.is_valid(k as usize)).then_some(k as u32)
            }
        }
    }

    fn is_dict(&self) -> bool {
        matches!(self, Strs::Dict { .. })
    }
}

/// Numbers batches read as dictionaries, so a key is known to be a key of
/// one batch ([`NameKeys::batch`]); 0 is no batch.
static BATCHES: AtomicU64 = AtomicU64::new(1);

/// A value's key in one batch's dictionary: (batch, key).
pub(super) type BatchKey = (u64, u32);

/// A number no other batch has.
pub(super) fn next_batch() -> u64 {
    BATCHES.fetch_add(1, Ordering::Relaxed)
}

/// A batch of a part's GenAI columns.
pub(super) struct LlmBatch<'b> {
    /// Absent when the visit does not need it ([`Needs`](super::calls::Needs)).
    trace: Option<&'b FixedSizeBinaryArray>,
    pub(super) start: &'b PrimitiveArray<TimestampNanosecondType>,
    duration: &'b PrimitiveArray<Int64Type>,
    status: &'b PrimitiveArray<Int8Type>,
    service: Option<Strs<'b>>,
    kind: &'b PrimitiveArray<Int8Type>,
    provider: Strs<'b>,
    model: Strs<'b>,
    request_model: Strs<'b>,
    input: &'b PrimitiveArray<Int64Type>,
    output: &'b PrimitiveArray<Int64Type>,
    cache_read: &'b PrimitiveArray<Int64Type>,
    cache_write: &'b PrimitiveArray<Int64Type>,
    reasoning: &'b PrimitiveArray<Int64Type>,
    reported: &'b PrimitiveArray<Float64Type>,
    flagged: &'b BooleanArray,
    ttft: &'b PrimitiveArray<Int64Type>,
    session: Strs<'b>,
    user: Strs<'b>,
    agent: Strs<'b>,
    tool: Strs<'b>,
    /// This batch's number if its names are dictionaries, else 0.
    batch: u64,
}

impl<'b> LlmBatch<'b> {
    /// `None` when the batch lacks a column (an older part).
    pub(super) fn new(b: &'b RecordBatch) -> Option<LlmBatch<'b>> {
        let col = |n: &str| b.column_by_name(n);
        let s = |n: &str| col(n).and_then(Strs::of);
        let i64s = |n: &str| col(n).and_then(|c| c.as_primitive_opt::<Int64Type>());
        let mut out = LlmBatch {
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
            batch: 0,
        };
        let keyed = [out.session, out.provider, out.model, out.request_model, out.agent];
        if keyed.iter().all(Strs::is_dict) {
            out.batch = next_batch();
        }
        Some(out)
    }

    pub(super) fn row(&self, i: usize, time: u64) -> CallRow<'b> {
        let n = |a: &'b PrimitiveArray<Int64Type>| (!a.is_null(i)).then(|| a.value(i));
        CallRow {
            time,
            duration_ns: self.duration.value(i).max(0) as u64,
            error: self.status.value(i) == skein_model::StatusCode::Error as i8,
            trace_id: self
                .trace
                .map_or(0, |t| u128::from_be_bytes(t.value(i).try_into().unwrap_or_default())),
            service: self.service.and_then(|s| s.get(i)).unwrap_or(""),
            kind: (!self.kind.is_null(i))
                .then(|| CallKind::from_i8(self.kind.value(i)))
                .flatten(),
            provider: self.provider.get(i),
            model: self.model.get(i),
            request_model: self.request_model.get(i),
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
            session: self.session.get(i),
            user: self.user.get(i),
            agent: self.agent.get(i),
            tool: self.tool.get(i),
            keys: if self.batch == 0 {
                NameKeys::default()
            } else {
                NameKeys {
                    batch: self.batch,
                    session: self.session.key(i),
                    provider: self.provider.key(i),
                    model: self.model.key(i),
                    request_model: self.request_model.key(i),
                    agent: self.agent.key(i),
                }
            },
        }
    }
}
