//! OpenTelemetry GenAI semantic-convention attribute names, with the
//! OpenInference and OpenLLMetry spellings that mean the same thing. The
//! engine reserves part columns for these (see skein-engine's part schema);
//! interpreting them (tokens, cost, sessions) comes with the LLM features.

pub const REQUEST_MODEL: &[&str] = &["gen_ai.request.model", "llm.model_name", "llm.request.model"];
pub const INPUT_TOKENS: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "llm.token_count.prompt",
    "gen_ai.usage.prompt_tokens",
];
pub const OUTPUT_TOKENS: &[&str] = &[
    "gen_ai.usage.output_tokens",
    "llm.token_count.completion",
    "gen_ai.usage.completion_tokens",
];
pub const SESSION_ID: &[&str] = &["gen_ai.conversation.id", "session.id"];

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

/// Whether `key` may be one of the spellings above: a cheap test that lets
/// a writer skip looking each spelling up in attributes that have none.
pub fn may_be_genai_key(key: &str) -> bool {
    key.starts_with("gen_ai.") || key.starts_with("llm.") || key.starts_with("session.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_passes_the_prefix_test() {
        for key in [REQUEST_MODEL, INPUT_TOKENS, OUTPUT_TOKENS, SESSION_ID].concat() {
            assert!(may_be_genai_key(key), "{key}");
        }
        assert!(!may_be_genai_key("http.method"));
    }
}
