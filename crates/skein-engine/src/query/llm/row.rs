//! One GenAI call as the aggregations see it: a row borrowed from a part's
//! calls table or from a hot span, with its names' dictionary keys.

use skein_model::Span;
use skein_model::genai::{CallKind, CostInput, LlmCall, ModelKey, Tokens};

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
    pub keys: NameKeys,
}

/// Where a row's names sit in its batch's dictionaries, so a visitor that
/// numbers names resolves each distinct value of a batch once rather than
/// each row. `batch` is unique to one batch; 0 (and no keys) for rows
/// without dictionaries: hot rows, and parts without a calls table.
#[derive(Debug, Clone, Copy, Default)]
pub struct NameKeys {
    pub batch: u64,
    pub session: Option<u32>,
    pub provider: Option<u32>,
    pub model: Option<u32>,
    pub request_model: Option<u32>,
    pub agent: Option<u32>,
}

impl NameKeys {
    /// The row's (provider, model, request model) for
    /// [`PriceMemo::cost_keyed`](skein_model::genai::PriceMemo::cost_keyed).
    pub fn model_key(&self) -> Option<ModelKey> {
        (self.batch != 0).then(|| ModelKey {
            scope: self.batch,
            provider: self.provider.unwrap_or(u32::MAX),
            model: self.model.unwrap_or(u32::MAX),
            request_model: self.request_model.unwrap_or(u32::MAX),
        })
    }
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
            keys: NameKeys::default(),
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
