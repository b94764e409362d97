//! One typed view of an LLM, tool or agent span, read from whichever
//! convention its instrumentation speaks (docs/llm.md has the precedence).
//!
//! Every convention in use counts cached tokens *inside* the input figure
//! (OTel GenAI `gen_ai.usage.input_tokens`, the deprecated
//! `gen_ai.usage.prompt_tokens`, OpenInference `llm.token_count.prompt`
//! with its `prompt_details`, OpenLLMetry's underscore cache fields beside
//! `gen_ai.usage.*`), and reasoning tokens inside the output figure. So the
//! view keeps the figures as sent, and pricing takes the cached and
//! reasoning parts *out* before it prices the rest: nothing is counted
//! twice. Figures that contradict that (cache above input, reasoning above
//! output, negative or non-numeric counts) are kept, flagged in
//! `warnings`, and never priced.

use serde::Serialize;

use crate::value::{AnyValue, KeyValue, find_attr};

/// What kind of GenAI work a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A model call: chat, completion, embeddings, content generation.
    Llm,
    /// A tool the model asked for, executed.
    Tool,
    /// An agent's invocation (its model and tool calls are its children).
    Agent,
    /// Other GenAI-annotated work (a chain, a workflow, a retriever).
    Other,
}

impl CallKind {
    pub fn as_i8(self) -> i8 {
        match self {
            CallKind::Llm => 1,
            CallKind::Tool => 2,
            CallKind::Agent => 3,
            CallKind::Other => 4,
        }
    }

    pub fn from_i8(v: i8) -> Option<CallKind> {
        match v {
            1 => Some(CallKind::Llm),
            2 => Some(CallKind::Tool),
            3 => Some(CallKind::Agent),
            4 => Some(CallKind::Other),
            _ => None,
        }
    }
}

/// Token figures as sent: input includes cached tokens, output includes
/// reasoning tokens .
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    pub input: Option<i64>,
    pub output: Option<i64>,
    pub cache_read: Option<i64>,
    pub cache_write: Option<i64>,
    pub reasoning: Option<i64>,
}

/// The typed GenAI facts of one span.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LlmCall {
    #[serde(skip)]
    pub kind: Option<CallKind>,
    pub provider: Option<String>,
    /// The response model, else the request model.
    pub model: Option<String>,
    #[serde(skip)]
    pub request_model: Option<String>,
    pub operation: Option<String>,
    /// As sent: including cached tokens.
    pub input_tokens: Option<i64>,
    /// As sent: including reasoning tokens.
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    /// A cost the client reported, in USD.
    #[serde(skip)]
    pub reported_cost_usd: Option<f64>,
    pub session_id: Option<String>,
    pub user_id: Option<String>,
    pub agent_name: Option<String>,
    pub tool_name: Option<String>,
    pub finish_reasons: Vec<String>,
    pub time_to_first_token_ns: Option<u64>,
    /// Figures kept as sent but not trusted: such a call is never priced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

// Spellings, most authoritative first (docs/llm.md).
const PROVIDER: &[&str] = &["gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"];
const REQUEST_MODEL: &[&str] = &["gen_ai.request.model", "llm.request.model"];
const RESPONSE_MODEL: &[&str] = &["gen_ai.response.model", "llm.response.model", "llm.model_name"];
const OPERATION: &str = "gen_ai.operation.name";
const INPUT: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
];
const OUTPUT: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
];
const CACHE_READ: &[&str] = &[
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
];
const CACHE_WRITE: &[&str] = &[
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
];
const REASONING: &[&str] = &[
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
];
const COST: &[&str] = &["gen_ai.usage.cost", "llm.cost.total", "llm.usage.cost"];
const COST_PARTS: &[&str] = &["llm.cost.prompt", "llm.cost.completion"];
pub(crate) const SESSION: &[&str] = &[
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "traceloop.association.properties.session_id",
];
const USER: &[&str] = &[
    "user.id",
    "enduser.id",
    "langfuse.user.id",
    "traceloop.association.properties.user_id",
];
const AGENT: &[&str] = &["gen_ai.agent.name", "agent.name"];
const TOOL: &[&str] = &["gen_ai.tool.name", "tool.name"];
const FINISH: &[&str] = &["gen_ai.response.finish_reasons", "llm.finish_reason"];
/// Seconds (a double), as the GenAI conventions state it.
const TTFT_SECONDS: &[&str] = &[
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.server.time_to_first_token",
];

/// Whether a key can matter to [`LlmCall::from_attributes`]: spans with
/// none of these are not GenAI spans, and are skipped at a glance.
pub fn is_genai_key(key: &str) -> bool {
    key.starts_with("gen_ai.")
        || key.starts_with("llm.")
        || key.starts_with("openinference.")
        || key.starts_with("traceloop.")
        || key.starts_with("session.")
        || key.starts_with("langfuse.")
        || key == "tool.name"
        || key == "agent.name"
}

impl LlmCall {
    /// The GenAI view of a span's attributes, or `None` when it carries no
    /// GenAI facts at all (a plain HTTP span, say). A span that has only a
    /// session or user id is not a GenAI call, but it belongs to that
    /// session: it is returned with `kind: None`.
    pub fn from_attributes(attrs: &[KeyValue]) -> Option<LlmCall> {
        if !attrs.iter().any(|kv| is_genai_key(&kv.key)) {
            return None;
        }
        let mut c = LlmCall {
            provider: first_str(attrs, PROVIDER).map(|p| p.to_ascii_lowercase()),
            request_model: first_str(attrs, REQUEST_MODEL).map(str::to_string),
            session_id: first_str(attrs, SESSION).map(str::to_string),
            user_id: first_str(attrs, USER).map(str::to_string),
            agent_name: first_str(attrs, AGENT).map(str::to_string),
            tool_name: first_str(attrs, TOOL).map(str::to_string),
            ..Default::default()
        };
        c.model = first_str(attrs, RESPONSE_MODEL)
            .map(str::to_string)
            .or_else(|| c.request_model.clone());
        c.operation = operation(attrs);
        c.kind = kind(attrs, c.operation.as_deref(), &c);
        if c.tool_name.is_none() && c.kind == Some(CallKind::Tool) {
            c.tool_name = find_str(attrs, "traceloop.entity.name").map(str::to_string);
        }
        if c.agent_name.is_none() && c.kind == Some(CallKind::Agent) {
            c.agent_name = find_str(attrs, "traceloop.entity.name").map(str::to_string);
        }
        c.input_tokens = c.read_tokens(attrs, INPUT, "input");
        c.output_tokens = c.read_tokens(attrs, OUTPUT, "output");
        c.cache_read_tokens = c.read_tokens(attrs, CACHE_READ, "cache read");
        c.cache_write_tokens = c.read_tokens(attrs, CACHE_WRITE, "cache write");
        c.reasoning_tokens = c.read_tokens(attrs, REASONING, "reasoning");
        let cached = c
            .cache_read_tokens
            .unwrap_or(0)
            .saturating_add(c.cache_write_tokens.unwrap_or(0));
        if cached > 0 && cached > c.input_tokens.unwrap_or(0) {
            c.warnings.push(format!(
                "cache tokens ({cached}) above input tokens ({}): input tokens include cached ones",
                c.input_tokens.unwrap_or(0)
            ));
        }
        if let Some(r) = c.reasoning_tokens
            && r > c.output_tokens.unwrap_or(0)
        {
            c.warnings.push(format!(
                "reasoning tokens ({r}) above output tokens ({}): output tokens include reasoning",
                c.output_tokens.unwrap_or(0)
            ));
        }
        c.reported_cost_usd = reported_cost(attrs);
        c.finish_reasons = finish_reasons(attrs);
        c.time_to_first_token_ns = first(attrs, TTFT_SECONDS)
            .and_then(AnyValue::as_f64)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| (s * 1e9).round() as u64);
        Some(c)
    }

    /// Whether this is a model call (what usage and cost count).
    pub fn is_llm(&self) -> bool {
        self.kind == Some(CallKind::Llm)
    }

    /// Whether the token figures can be priced.
    pub fn priceable(&self) -> bool {
        self.warnings.is_empty() && (self.input_tokens.is_some() || self.output_tokens.is_some())
    }

    /// The token figures, as sent.
    pub fn tokens(&self) -> Tokens {
        Tokens {
            input: self.input_tokens,
            output: self.output_tokens,
            cache_read: self.cache_read_tokens,
            cache_write: self.cache_write_tokens,
            reasoning: self.reasoning_tokens,
        }
    }

    fn read_tokens(&mut self, attrs: &[KeyValue], keys: &[&str], what: &str) -> Option<i64> {
        let (key, v) = keys.iter().find_map(|k| find_attr(attrs, k).map(|v| (*k, v)))?;
        let n = match v {
            AnyValue::Int(n) => Some(*n),
            AnyValue::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
            _ => None,
        };
        match n {
            Some(n) if n >= 0 => Some(n),
            Some(n) => {
                self.warnings.push(format!("{what} tokens negative ({key} = {n})"));
                Some(n)
            }
            None => {
                self.warnings.push(format!(
                    "{what} tokens not a whole number ({key} is a {})",
                    v.type_name()
                ));
                None
            }
        }
    }
}

fn find_str<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    find_attr(attrs, key)
        .and_then(AnyValue::as_str)
        .filter(|s| !s.is_empty())
}

fn first<'a>(attrs: &'a [KeyValue], keys: &[&str]) -> Option<&'a AnyValue> {
    keys.iter().find_map(|k| find_attr(attrs, k))
}

fn first_str<'a>(attrs: &'a [KeyValue], keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| find_str(attrs, k))
}

/// `gen_ai.operation.name`, else what the other conventions' span kinds
/// mean in its vocabulary.
fn operation(attrs: &[KeyValue]) -> Option<String> {
    if let Some(op) = find_str(attrs, OPERATION) {
        return Some(op.to_string());
    }
    let oi = find_str(attrs, "openinference.span.kind").map(str::to_ascii_uppercase);
    let from_oi = match oi.as_deref() {
        Some("LLM") => Some("chat"),
        Some("EMBEDDING") => Some("embeddings"),
        Some("TOOL") => Some("execute_tool"),
        Some("AGENT") => Some("invoke_agent"),
        Some("RETRIEVER") => Some("retrieval"),
        _ => None,
    };
    if let Some(op) = from_oi {
        return Some(op.to_string());
    }
    let tl = find_str(attrs, "traceloop.span.kind").map(str::to_ascii_lowercase);
    let from_tl = match tl.as_deref() {
        Some("tool") => Some("execute_tool"),
        Some("agent") => Some("invoke_agent"),
        Some("workflow") => Some("invoke_workflow"),
        _ => None,
    };
    if let Some(op) = from_tl {
        return Some(op.to_string());
    }
    // OpenLLMetry before it adopted gen_ai.operation.name.
    match find_str(attrs, "llm.request.type") {
        Some("chat") => Some("chat".into()),
        Some("completion") => Some("text_completion".into()),
        Some("embedding") => Some("embeddings".into()),
        _ => None,
    }
}

fn kind(attrs: &[KeyValue], operation: Option<&str>, c: &LlmCall) -> Option<CallKind> {
    match operation {
        Some("chat" | "text_completion" | "generate_content" | "embeddings" | "completion" | "responses") => {
            return Some(CallKind::Llm);
        }
        Some("execute_tool") => return Some(CallKind::Tool),
        Some("invoke_agent" | "create_agent") => return Some(CallKind::Agent),
        Some(_) => return Some(CallKind::Other),
        None => {}
    }
    let has_usage = [INPUT, OUTPUT].iter().any(|keys| first(attrs, keys).is_some());
    if c.model.is_some() || has_usage {
        return Some(CallKind::Llm);
    }
    if c.tool_name.is_some() || find_attr(attrs, "gen_ai.tool.call.id").is_some() {
        return Some(CallKind::Tool);
    }
    if c.provider.is_some() || find_attr(attrs, "openinference.span.kind").is_some() {
        return Some(CallKind::Other);
    }
    None
}

fn reported_cost(attrs: &[KeyValue]) -> Option<f64> {
    let valid = |v: f64| v.is_finite() && v >= 0.0;
    if let Some(v) = first(attrs, COST).and_then(AnyValue::as_f64).filter(|v| valid(*v)) {
        return Some(v);
    }
    let parts: Vec<f64> = COST_PARTS
        .iter()
        .filter_map(|k| find_attr(attrs, k).and_then(AnyValue::as_f64))
        .filter(|v| valid(*v))
        .collect();
    (!parts.is_empty()).then(|| parts.iter().sum())
}

fn finish_reasons(attrs: &[KeyValue]) -> Vec<String> {
    match first(attrs, FINISH) {
        Some(AnyValue::Array(vs)) => vs.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(AnyValue::Str(s)) if !s.is_empty() => vec![s.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: impl Into<AnyValue>) -> KeyValue {
        KeyValue::new(k, v)
    }

    #[test]
    fn plain_spans_are_not_genai() {
        assert_eq!(LlmCall::from_attributes(&[kv("http.route", "/x")]), None);
    }

    #[test]
    fn otel_current_convention() {
        let c = LlmCall::from_attributes(&[
            kv("gen_ai.operation.name", "chat"),
            kv("gen_ai.provider.name", "OpenAI"),
            kv("gen_ai.request.model", "gpt-4o"),
            kv("gen_ai.response.model", "gpt-4o-2024-08-06"),
            kv("gen_ai.usage.input_tokens", 1200i64),
            kv("gen_ai.usage.output_tokens", 300i64),
            kv("gen_ai.usage.cache_read.input_tokens", 1000i64),
            kv("gen_ai.usage.reasoning.output_tokens", 120i64),
            kv("gen_ai.conversation.id", "conv-1"),
            kv(
                "gen_ai.response.finish_reasons",
                AnyValue::Array(vec![AnyValue::Str("tool_calls".into())]),
            ),
            kv("gen_ai.response.time_to_first_chunk", 0.25),
        ])
        .unwrap();
        assert_eq!(c.kind, Some(CallKind::Llm));
        assert_eq!(c.provider.as_deref(), Some("openai"));
        assert_eq!(c.model.as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!((c.input_tokens, c.output_tokens), (Some(1200), Some(300)));
        assert_eq!((c.cache_read_tokens, c.reasoning_tokens), (Some(1000), Some(120)));
        assert_eq!(c.session_id.as_deref(), Some("conv-1"));
        assert_eq!(c.finish_reasons, vec!["tool_calls"]);
        assert_eq!(c.time_to_first_token_ns, Some(250_000_000));
        assert!(c.priceable());
    }

    #[test]
    fn openinference_convention() {
        let c = LlmCall::from_attributes(&[
            kv("openinference.span.kind", "LLM"),
            kv("llm.system", "openai"),
            kv("llm.model_name", "gpt-4o-2024-08-06"),
            kv("llm.token_count.prompt", 1200i64),
            kv("llm.token_count.completion", 300i64),
            kv("llm.token_count.prompt_details.cache_read", 1000i64),
            kv("llm.token_count.completion_details.reasoning", 120i64),
            kv("session.id", "s-9"),
            kv("user.id", "u-1"),
            kv("llm.cost.prompt", 0.5),
            kv("llm.cost.completion", 0.25),
        ])
        .unwrap();
        assert_eq!(c.operation.as_deref(), Some("chat"));
        assert_eq!(c.kind, Some(CallKind::Llm));
        assert_eq!(c.input_tokens, Some(1200));
        assert_eq!(c.cache_read_tokens, Some(1000));
        assert_eq!(c.reported_cost_usd, Some(0.75));
        assert_eq!(c.user_id.as_deref(), Some("u-1"));
    }

    #[test]
    fn openllmetry_and_deprecated_spellings() {
        let c = LlmCall::from_attributes(&[
            kv("gen_ai.system", "Anthropic"),
            kv("llm.request.type", "chat"),
            kv("gen_ai.request.model", "claude-3-5-sonnet-20241022"),
            kv("gen_ai.usage.prompt_tokens", 5000i64),
            kv("gen_ai.usage.completion_tokens", 100i64),
            kv("gen_ai.usage.cache_read_input_tokens", 4000i64),
            kv("gen_ai.usage.cache_creation_input_tokens", 500i64),
            kv("traceloop.association.properties.session_id", "tl-s"),
        ])
        .unwrap();
        assert_eq!(c.kind, Some(CallKind::Llm));
        assert_eq!(c.provider.as_deref(), Some("anthropic"));
        assert_eq!(c.model.as_deref(), Some("claude-3-5-sonnet-20241022"));
        assert_eq!((c.cache_read_tokens, c.cache_write_tokens), (Some(4000), Some(500)));
        assert_eq!(c.session_id.as_deref(), Some("tl-s"));
        assert!(c.priceable());
    }

    #[test]
    fn tools_and_agents() {
        let t = LlmCall::from_attributes(&[kv("traceloop.span.kind", "tool"), kv("traceloop.entity.name", "search")])
            .unwrap();
        assert_eq!((t.kind, t.tool_name.as_deref()), (Some(CallKind::Tool), Some("search")));
        let t = LlmCall::from_attributes(&[
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", "sql"),
        ])
        .unwrap();
        assert_eq!((t.kind, t.tool_name.as_deref()), (Some(CallKind::Tool), Some("sql")));
        let a = LlmCall::from_attributes(&[
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", "planner"),
        ])
        .unwrap();
        assert_eq!(
            (a.kind, a.agent_name.as_deref()),
            (Some(CallKind::Agent), Some("planner"))
        );
        // A session id alone: part of a session, not a call.
        let s = LlmCall::from_attributes(&[kv("session.id", "s")]).unwrap();
        assert_eq!(s.kind, None);
    }

    #[test]
    fn bad_figures_are_kept_and_flagged() {
        let c = LlmCall::from_attributes(&[
            kv("gen_ai.request.model", "gpt-4o"),
            kv("gen_ai.usage.input_tokens", 10i64),
            kv("gen_ai.usage.cache_read.input_tokens", 4000i64),
        ])
        .unwrap();
        assert_eq!((c.input_tokens, c.cache_read_tokens), (Some(10), Some(4000)));
        assert!(!c.priceable(), "{:?}", c.warnings);
        let c = LlmCall::from_attributes(&[
            kv("gen_ai.request.model", "gpt-4o"),
            kv("gen_ai.usage.input_tokens", -5i64),
            kv("gen_ai.usage.output_tokens", "many"),
        ])
        .unwrap();
        assert_eq!((c.input_tokens, c.output_tokens), (Some(-5), None));
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(!c.priceable());
    }
}
