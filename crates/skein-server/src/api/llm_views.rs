//! The JSON of GenAI facts: a span's `llm` object, and a session's turns
//! with their messages and tool calls (docs/llm.md).

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value, json};
use skein_engine::{SessionDetail, SessionTurn};
use skein_model::genai::{CallKind, Cost, LlmCall, Pricing};
use skein_model::plain::any_value_to_plain_json;
use skein_model::{AnyValue, KeyValue, Span};

static PRICING: OnceLock<Arc<Pricing>> = OnceLock::new();

/// Sets the price table that span views price their `llm` objects with:
/// the engine's, set once when the server starts.
pub fn set_pricing(p: Arc<Pricing>) {
    let _ = PRICING.set(p);
}

fn pricing() -> &'static Pricing {
    PRICING.get_or_init(|| Arc::new(Pricing::built_in()))
}

/// The `llm` object of a GenAI span (none for other spans).
pub fn llm_of(span: &Span) -> Option<LlmJson> {
    let call = LlmCall::from_attributes(&span.attributes)?;
    call.kind?;
    let cost = pricing().cost(&call, span.start_time_unix_nano);
    Some(LlmJson { call, cost })
}

pub struct LlmJson {
    pub call: LlmCall,
    pub cost: Cost,
}

fn kind_name(k: Option<CallKind>) -> &'static str {
    match k {
        Some(CallKind::Llm) => "llm",
        Some(CallKind::Tool) => "tool",
        Some(CallKind::Agent) => "agent",
        _ => "other",
    }
}

impl Serialize for LlmJson {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let c = &self.call;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("agent_name", &c.agent_name)?;
        m.serialize_entry("cache_read_tokens", &c.cache_read_tokens)?;
        m.serialize_entry("cache_write_tokens", &c.cache_write_tokens)?;
        m.serialize_entry("cost_source", self.cost.source.as_str())?;
        m.serialize_entry("cost_usd", &self.cost.usd)?;
        m.serialize_entry("finish_reasons", &c.finish_reasons)?;
        m.serialize_entry("input_tokens", &c.input_tokens)?;
        m.serialize_entry("kind", kind_name(c.kind))?;
        m.serialize_entry("model", &c.model)?;
        m.serialize_entry("operation", &c.operation)?;
        m.serialize_entry("output_tokens", &c.output_tokens)?;
        m.serialize_entry("provider", &c.provider)?;
        m.serialize_entry("reasoning_tokens", &c.reasoning_tokens)?;
        m.serialize_entry("session_id", &c.session_id)?;
        m.serialize_entry("time_to_first_token_ns", &c.time_to_first_token_ns)?;
        m.serialize_entry("tool_name", &c.tool_name)?;
        m.serialize_entry("user_id", &c.user_id)?;
        if !c.warnings.is_empty() {
            m.serialize_entry("warnings", &c.warnings)?;
        }
        m.end()
    }
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
}

/// A content attribute as JSON: a JSON string (as the conventions send
/// messages) is parsed, anything else (a payload reference, plain text)
/// is shown as it is.
fn content(v: &AnyValue) -> Value {
    if let AnyValue::Str(s) = v {
        let t = s.trim_start();
        if (t.starts_with('[') || t.starts_with('{'))
            && let Ok(parsed) = serde_json::from_str::<Value>(s)
        {
            return parsed;
        }
    }
    any_value_to_plain_json(v)
}

fn first_content(attrs: &[KeyValue], keys: &[&str]) -> Option<Value> {
    keys.iter().find_map(|k| attr(attrs, k)).map(content)
}

/// OpenInference's flattened `llm.input_messages.N.message.role` /
/// `.content` as `[{"role", "content"}]`.
fn flattened_messages(attrs: &[KeyValue], prefix: &str) -> Option<Value> {
    let mut msgs: std::collections::BTreeMap<usize, Map<String, Value>> = Default::default();
    for kv in attrs {
        let Some(rest) = kv.key.strip_prefix(prefix) else {
            continue;
        };
        let Some((n, field)) = rest.split_once('.') else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else { continue };
        let field = field.strip_prefix("message.").unwrap_or(field);
        msgs.entry(n)
            .or_default()
            .insert(field.to_string(), any_value_to_plain_json(&kv.value));
    }
    (!msgs.is_empty()).then(|| Value::Array(msgs.into_values().map(Value::Object).collect()))
}

/// Older instrumentations' per-message events (`gen_ai.user.message`,
/// `gen_ai.choice`, …) as messages.
fn event_messages(span: &Span, output: bool) -> Option<Value> {
    let msgs: Vec<Value> = span
        .events
        .iter()
        .filter(|e| {
            let is_choice = e.name == "gen_ai.choice";
            e.name.starts_with("gen_ai.") && (e.name.ends_with(".message") && !output || is_choice && output)
        })
        .map(|e| {
            let mut m = Map::new();
            let role = e
                .name
                .strip_prefix("gen_ai.")
                .and_then(|r| r.strip_suffix(".message"))
                .unwrap_or("assistant");
            m.insert("role".into(), Value::from(role));
            for kv in &e.attributes {
                m.insert(kv.key.clone(), content(&kv.value));
            }
            Value::Object(m)
        })
        .collect();
    (!msgs.is_empty()).then_some(Value::Array(msgs))
}

/// One turn of a session: a model call with its messages, or a tool call
/// with its arguments and result.
pub fn turn(t: &SessionTurn) -> Value {
    let s = &t.span;
    let a = &s.attributes;
    let mut v = json!({
        "trace_id": s.trace_id.to_hex(),
        "span_id": s.span_id.to_hex(),
        "name": s.name,
        "service": s.service_name(),
        "kind": kind_name(t.call.kind),
        "start_time_unix_nano": s.start_time_unix_nano,
        "duration_ns": s.duration_ns(),
        "status": s.status.code.as_str(),
        "llm": LlmJson { call: t.call.clone(), cost: t.cost },
    });
    if t.call.kind == Some(CallKind::Tool) {
        v["tool"] = json!({
            "name": t.call.tool_name,
            "call_id": attr(a, "gen_ai.tool.call.id").and_then(AnyValue::as_str),
            "arguments": first_content(a, &["gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input"]),
            "result": first_content(a, &["gen_ai.tool.call.result", "output.value", "traceloop.entity.output"]),
        });
    } else {
        let input = first_content(a, &["gen_ai.input.messages", "gen_ai.prompt"])
            .or_else(|| flattened_messages(a, "llm.input_messages."))
            .or_else(|| event_messages(s, false))
            .or_else(|| first_content(a, &["input.value", "traceloop.entity.input"]));
        let output = first_content(a, &["gen_ai.output.messages", "gen_ai.completion"])
            .or_else(|| flattened_messages(a, "llm.output_messages."))
            .or_else(|| event_messages(s, true))
            .or_else(|| first_content(a, &["output.value", "traceloop.entity.output"]));
        v["messages"] = json!({
            "system": first_content(a, &["gen_ai.system_instructions"]),
            "input": input,
            "output": output,
        });
    }
    v
}

/// `GET /api/v1/sessions/{id}`: the summary's fields, its traces and turns.
pub fn session(d: &SessionDetail) -> Value {
    let mut v = serde_json::to_value(&d.summary).unwrap_or(Value::Null);
    v["traces"] = Value::Array(d.traces.iter().map(|t| Value::from(t.to_hex())).collect());
    v["turns"] = Value::Array(d.turns.iter().map(turn).collect());
    v
}
