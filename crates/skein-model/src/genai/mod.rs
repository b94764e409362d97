//! OpenTelemetry GenAI semantic conventions and the OpenInference and
//! OpenLLMetry spellings of the same facts: which attributes carry message
//! content (the payload store keeps them), the typed view of a GenAI span
//! ([`call`]) and what it cost ([`pricing`]).

pub mod call;
pub mod pricing;
pub mod score;

pub use call::{CallKind, LlmCall, Tokens};
pub use pricing::{Cost, CostInput, CostSource, ModelKey, PriceMemo, Pricing, PricingError};

/// Attributes that carry message content (prompts, completions, tool
/// arguments and results), in every spelling: the engine stores these in
/// its payload store from a small size on, however short the threshold for
/// other strings.
pub const CONTENT: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.prompt",
    "gen_ai.completion",
    "input.value",
    "output.value",
    "traceloop.entity.input",
    "traceloop.entity.output",
];

/// Whether `key` is one of [`CONTENT`].
pub fn is_content_key(key: &str) -> bool {
    CONTENT.contains(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_keys_are_genai_keys() {
        for key in CONTENT {
            assert!(is_content_key(key));
            assert!(call::is_genai_key(key) || key.ends_with(".value"), "{key}");
        }
        assert!(!is_content_key("http.method"));
    }
}
