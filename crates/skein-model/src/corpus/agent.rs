//! The agent corpus: synthetic telemetry shaped like that of software
//! written with and by AI agents, beside the canonical [`super::Corpus`].
//!
//! Deterministic from its seed, and generated per trace and per log record
//! (every property of a span is a hash of its trace and position), so a
//! benchmark can generate any range without holding the corpus.
//!
//! Shape:
//! - 20 services drawn Zipf-wise (s = 1.1) per span;
//! - traces of 1 to 40 spans, heavy-tailed (P(k) ∝ k^-1.2, mean ≈ 7);
//! - trace start times at random over the hour before `end_ns` (not in
//!   trace order);
//! - a high-cardinality `user.id` span attribute (one user per trace, drawn
//!   from as many users as there are traces);
//! - 7% LLM spans (GenAI semantic conventions): `gen_ai.operation.name` =
//!   chat, provider, model, token usage (the system prompt's tokens read
//!   from the provider's cache), `gen_ai.conversation.id` (one session per
//!   four users' traces), `gen_ai.input.messages` holding 1–20 KiB of JSON
//!   messages (one of 4 shared system prompts plus a unique user turn) and a
//!   shorter `gen_ai.output.messages`;
//! - 3% error spans, each with an `exception` event carrying a Python, Java
//!   or Go stack trace;
//! - two log records per trace: one on the root span, one on the trace's
//!   first error span (an ERROR with the stack trace in its body) or on a
//!   span drawn at random; bodies mix fixed text with 4–12 words of a
//!   vocabulary drawn Zipf-wise, and one log record in [`RARE_EVERY`]
//!   carries [`RARE_WORD`].

use std::sync::Arc;

use super::words::{self, ExceptionKind};
use super::{HOUR_NS, Rng, Zipf};
use crate::ids::{SpanId, TraceId};
use crate::log::LogRecord;
use crate::resource::{Resource, Scope};
use crate::span::{Event, Span, SpanKind, Status, StatusCode};
use crate::value::{AnyValue, KeyValue};

pub use super::words::{MODELS, VOCABULARY};

pub const MAX_TRACE_LEN: u64 = 40;
pub const LOGS_PER_TRACE: u64 = 2;
/// A word no other text of the corpus contains: one log record in
/// `RARE_EVERY` carries it (which ones, [`AgentCorpus::has_rare_word`] says).
pub const RARE_WORD: &str = "quetzal";
pub const RARE_EVERY: u64 = 100_000;
pub const USER_KEY: &str = "user.id";
/// The session (conversation) of an LLM span: a user's traces, four users
/// to a session.
pub const SESSION_KEY: &str = "gen_ai.conversation.id";
pub const MODEL_KEY: &str = "gen_ai.request.model";
/// Sizes of the shared system prompts (bytes, approximate).
const SYSTEM_PROMPT_BYTES: [usize; 4] = [900, 3_000, 7_000, 14_000];

/// Salts of the independent per-span draws.
mod salt {
    pub const LEN: u64 = 1;
    pub const START: u64 = 2;
    pub const USER: u64 = 3;
    pub const SERVICE: u64 = 4;
    pub const KIND: u64 = 5;
    pub const TIMING: u64 = 6;
    pub const ERROR: u64 = 7;
    pub const LLM: u64 = 8;
    pub const DETAIL: u64 = 9;
    pub const LOG: u64 = 10;
    pub const RARE: u64 = 11;
    pub const IDS: u64 = 12;
}

#[derive(Debug, Clone)]
pub struct AgentCorpus {
    pub traces: u64,
    pub services: u64,
    pub seed: u64,
    pub end_ns: u64,
    pub window_ns: u64,
    pub users: u64,
    /// LLM and error spans, per thousand spans.
    pub llm_per_mille: u64,
    pub error_per_mille: u64,
    pub service_zipf_s: f64,
    spans: u64,
    len_dist: Zipf,
    service_dist: Zipf,
    vocab_dist: Zipf,
    model_dist: Zipf,
    resources: Vec<Arc<Resource>>,
    scope: Arc<Scope>,
    system_prompts: Vec<String>,
}

impl AgentCorpus {
    /// The fewest traces holding at least `spans` spans, ending at `end_ns`.
    pub fn new(spans: u64, end_ns: u64) -> AgentCorpus {
        let mut c = AgentCorpus::with_traces(0, end_ns);
        let mut total = 0;
        let mut t = 0;
        while total < spans {
            total += c.trace_len(t);
            t += 1;
        }
        c.traces = t;
        c.spans = total;
        c.users = t.max(1000);
        c
    }

    /// A corpus of `traces` traces (and so `2 × traces` log records).
    pub fn with_traces(traces: u64, end_ns: u64) -> AgentCorpus {
        let seed = 0xA6E7_5EED;
        let services = words::SERVICES.len() as u64;
        let resources = (0..services as usize)
            .map(|s| {
                Arc::new(Resource {
                    attributes: vec![
                        KeyValue::new("service.name", words::SERVICES[s]),
                        KeyValue::new("service.version", format!("2.{}.0", s % 7)),
                        KeyValue::new(
                            "host.name",
                            format!("pod-{}-{:04x}", words::SERVICES[s], s * 7919 % 65536),
                        ),
                        KeyValue::new("deployment.environment.name", "production"),
                        KeyValue::new("telemetry.sdk.language", ["python", "java", "go"][s % 3]),
                    ],
                    ..Default::default()
                })
            })
            .collect();
        let vocab_dist = Zipf::new(VOCABULARY.len(), 1.0);
        let mut rng = Rng::new(seed ^ 0x5157_E111);
        let system_prompts = SYSTEM_PROMPT_BYTES
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut s = format!(
                    "You are assistant number {i} of the shop's support team. Follow the policy below exactly.\n"
                );
                while s.len() < n {
                    s.push_str("Rule: ");
                    words_into(&mut s, &vocab_dist, &mut rng, 12);
                    s.push_str(".\n");
                }
                s
            })
            .collect();
        let mut c = AgentCorpus {
            traces,
            services,
            seed,
            end_ns,
            window_ns: HOUR_NS,
            users: traces.max(1000),
            llm_per_mille: 70,
            error_per_mille: 30,
            service_zipf_s: 1.1,
            spans: 0,
            len_dist: Zipf::new(MAX_TRACE_LEN as usize, 1.2),
            service_dist: Zipf::new(services as usize, 1.1),
            vocab_dist,
            model_dist: Zipf::new(MODELS.len(), 1.0),
            resources,
            scope: Arc::new(Scope {
                name: "skein-bench.agent".into(),
                version: "1.0".into(),
                ..Default::default()
            }),
            system_prompts,
        };
        c.spans = (0..traces).map(|t| c.trace_len(t)).sum();
        c
    }

    fn hash(&self, t: u64, j: u64, salt: u64) -> u64 {
        let mut r = Rng::new(
            self.seed
                ^ t.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ j.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                ^ salt.wrapping_mul(0x1656_67B1_9E37_79F9),
        );
        r.next_u64();
        r.next_u64()
    }

    fn rng(&self, t: u64, j: u64, salt: u64) -> Rng {
        Rng::new(self.hash(t, j, salt))
    }

    pub fn span_count(&self) -> u64 {
        self.spans
    }

    pub fn log_count(&self) -> u64 {
        self.traces * LOGS_PER_TRACE
    }

    pub fn trace_len(&self, t: u64) -> u64 {
        self.len_dist.sample(&mut self.rng(t, 0, salt::LEN)) as u64 + 1
    }

    pub fn trace_id(&self, t: u64) -> TraceId {
        let mut r = self.rng(t, 0, salt::IDS);
        let hi = r.next_u64() | 1;
        TraceId::from_u128(((hi as u128) << 64) | r.next_u64() as u128)
    }

    pub fn span_id(&self, t: u64, j: u64) -> SpanId {
        SpanId::from_u64(self.hash(t, j + 1, salt::IDS) | 1)
    }

    /// At random within the window (traces are not in time order).
    pub fn trace_start(&self, t: u64) -> u64 {
        // Leave 30 s at the end so every span starts inside the window.
        let span = self.window_ns - 30_000_000_000;
        self.end_ns - self.window_ns + self.hash(t, 0, salt::START) % span
    }

    pub fn user_of(&self, t: u64) -> u64 {
        self.hash(t, 0, salt::USER) % self.users
    }

    /// The session of trace `t`'s LLM spans.
    pub fn session_of(&self, t: u64) -> u64 {
        self.user_of(t) / 4
    }

    pub fn session_value(session: u64) -> String {
        format!("conv-{session:08x}")
    }

    pub fn user_value(user: u64) -> String {
        format!("u-{user:08x}")
    }

    pub fn service_of(&self, t: u64, j: u64) -> usize {
        self.service_dist.sample(&mut self.rng(t, j, salt::SERVICE))
    }

    pub fn service_name(&self, s: usize) -> &'static str {
        words::SERVICES[s]
    }

    pub fn is_error(&self, t: u64, j: u64) -> bool {
        self.hash(t, j, salt::ERROR) % 1000 < self.error_per_mille
    }

    /// LLM spans are never roots (an agent's request is).
    pub fn is_llm(&self, t: u64, j: u64) -> bool {
        j > 0 && self.hash(t, j, salt::LLM) % 1000 < self.llm_per_mille * self.trace_len(t) / (self.trace_len(t) - 1)
    }

    /// The model of an LLM span (an index into [`MODELS`]).
    pub fn model_of(&self, t: u64, j: u64) -> usize {
        self.model_dist.sample(&mut self.rng(t, j, salt::DETAIL ^ 0xFF))
    }

    /// (start, end) of span `j` of trace `t`.
    fn timing(&self, t: u64, j: u64) -> (u64, u64) {
        let start = self.trace_start(t);
        let root = 2_000_000 + self.hash(t, 0, salt::TIMING) % 400_000_000;
        if j == 0 {
            return (start, start + root);
        }
        let mut r = self.rng(t, j, salt::TIMING);
        let offset = r.below(root / 2);
        let duration = if self.is_llm(t, j) {
            200_000_000 + r.below(6_000_000_000)
        } else {
            1_000 + r.below(root / 2)
        };
        (start + offset, start + offset + duration)
    }

    fn words(&self, rng: &mut Rng, n: u64, out: &mut String) {
        words_into(out, &self.vocab_dist, rng, n);
    }

    /// The exception an error span (or its log) carries: (kind, stack).
    fn exception(&self, t: u64, j: u64) -> (&'static ExceptionKind, String) {
        let mut r = self.rng(t, j, salt::DETAIL);
        let service = self.service_of(t, j);
        let frames = 3 + r.below(5) as usize;
        match service % 3 {
            0 => {
                let e = &words::PYTHON_EXCEPTIONS[r.below(3) as usize];
                let mut s = String::from("Traceback (most recent call last):\n");
                for _ in 0..frames {
                    let (file, func, code) = words::PYTHON_FRAMES[r.below(words::PYTHON_FRAMES.len() as u64) as usize];
                    s.push_str(&format!(
                        "  File \"{file}\", line {}, in {func}\n    {code}\n",
                        20 + r.below(900)
                    ));
                }
                s.push_str(&format!("{}: {}", e.ty, e.message));
                (e, s)
            }
            1 => {
                let e = &words::JAVA_EXCEPTIONS[r.below(3) as usize];
                let mut s = format!("{}: {}\n", e.ty, e.message);
                let first = r.below(words::JAVA_FRAMES.len() as u64) as usize;
                for k in 0..frames {
                    s.push_str(&format!(
                        "\tat {}\n",
                        words::JAVA_FRAMES[(first + k) % words::JAVA_FRAMES.len()]
                    ));
                }
                s.push_str(&format!("\t... {} more", 10 + r.below(60)));
                (e, s)
            }
            _ => {
                let e = &words::GO_EXCEPTIONS[r.below(3) as usize];
                let mut s = format!("panic: {}\n\ngoroutine {} [running]:\n", e.message, 1 + r.below(5000));
                for _ in 0..frames {
                    let (func, file) = words::GO_FRAMES[r.below(words::GO_FRAMES.len() as u64) as usize];
                    s.push_str(&format!(
                        "{func}\n\t{file}:{} +0x{:x}\n",
                        30 + r.below(2000),
                        r.below(4096)
                    ));
                }
                s.push_str("exit status 2");
                (e, s)
            }
        }
    }

    fn llm_attributes(&self, t: u64, j: u64, out: &mut Vec<KeyValue>) {
        let mut r = self.rng(t, j, salt::LLM ^ 0xABCD);
        let (model, provider) = MODELS[self.model_of(t, j)];
        let system = &self.system_prompts[r.below(self.system_prompts.len() as u64) as usize];
        let mut user = format!("Ticket {t}-{j} from {}: ", AgentCorpus::user_value(self.user_of(t)));
        let user_words = 15 + r.below(500);
        self.words(&mut r, user_words, &mut user);
        user.push('?');
        let mut answer = String::from("Here is what I found: ");
        let answer_words = 25 + r.below(250);
        self.words(&mut r, answer_words, &mut answer);
        answer.push('.');
        let input = serde_json::json!([
            {"role": "system", "parts": [{"type": "text", "content": system}]},
            {"role": "user", "parts": [{"type": "text", "content": user}]},
        ])
        .to_string();
        let output = serde_json::json!([
            {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"},
        ])
        .to_string();
        out.extend([
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new(MODEL_KEY, model),
            KeyValue::new(SESSION_KEY, AgentCorpus::session_value(self.session_of(t))),
            KeyValue::new("gen_ai.usage.input_tokens", (input.len() / 4) as i64),
            // The shared system prompt, served from the provider's cache.
            KeyValue::new("gen_ai.usage.cache_read.input_tokens", (system.len() / 4) as i64),
            KeyValue::new("gen_ai.usage.output_tokens", (output.len() / 4) as i64),
            KeyValue::new("gen_ai.input.messages", input),
            KeyValue::new("gen_ai.output.messages", output),
        ]);
    }

    /// Span `j` of trace `t`.
    pub fn span(&self, t: u64, j: u64) -> Span {
        let (start, end) = self.timing(t, j);
        let service = self.service_of(t, j);
        let error = self.is_error(t, j);
        let llm = self.is_llm(t, j);
        let mut r = self.rng(t, j, salt::KIND);
        let method = words::METHODS[r.below(4) as usize];
        let route = words::ROUTES[r.below(words::ROUTES.len() as u64) as usize];
        let mut attributes = vec![KeyValue::new(USER_KEY, AgentCorpus::user_value(self.user_of(t)))];
        let (name, kind) = if llm {
            self.llm_attributes(t, j, &mut attributes);
            (format!("chat {}", MODELS[self.model_of(t, j)].0), SpanKind::Client)
        } else {
            attributes.extend([
                KeyValue::new("http.request.method", method),
                KeyValue::new("http.route", route),
                KeyValue::new("http.response.status_code", if error { 500i64 } else { 200 }),
            ]);
            (
                format!("{method} {route}"),
                if j == 0 {
                    SpanKind::Server
                } else {
                    [SpanKind::Client, SpanKind::Internal][r.below(2) as usize]
                },
            )
        };
        let mut events = Vec::new();
        let status = if error {
            let (e, stack) = self.exception(t, j);
            events.push(Event {
                time_unix_nano: end,
                name: "exception".into(),
                attributes: vec![
                    KeyValue::new("exception.type", e.ty),
                    KeyValue::new("exception.message", e.message),
                    KeyValue::new("exception.stacktrace", stack),
                ],
                dropped_attributes_count: 0,
            });
            Status {
                code: StatusCode::Error,
                message: e.message.into(),
            }
        } else {
            Status::default()
        };
        Span {
            trace_id: self.trace_id(t),
            span_id: self.span_id(t, j),
            parent_span_id: (j > 0).then(|| self.span_id(t, (j - 1) / 2)),
            trace_state: String::new(),
            flags: 1,
            name,
            kind,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes,
            dropped_attributes_count: 0,
            events,
            dropped_events_count: 0,
            links: Vec::new(),
            dropped_links_count: 0,
            status,
            resource: self.resources[service].clone(),
            scope: self.scope.clone(),
        }
    }

    /// All spans of one trace, in span order.
    pub fn trace(&self, t: u64) -> Vec<Span> {
        (0..self.trace_len(t)).map(|j| self.span(t, j)).collect()
    }

    /// Spans of traces `range`, in trace order.
    pub fn spans(&self, traces: std::ops::Range<u64>) -> Vec<Span> {
        traces.flat_map(|t| self.trace(t)).collect()
    }

    /// Whether log record `i` carries [`RARE_WORD`].
    pub fn has_rare_word(&self, i: u64) -> bool {
        self.hash(i, 0, salt::RARE).is_multiple_of(RARE_EVERY)
    }

    /// How many of log records `range` carry [`RARE_WORD`].
    pub fn rare_word_count(&self, range: std::ops::Range<u64>) -> u64 {
        range.filter(|&i| self.has_rare_word(i)).count() as u64
    }

    /// The most frequent word of the vocabulary (in about one log record
    /// in three).
    pub fn common_word() -> &'static str {
        VOCABULARY[0]
    }

    /// Log record `i`: record `2t` is on trace `t`'s root span, record
    /// `2t + 1` on its first error span (an ERROR with the stack trace) or
    /// on a span drawn at random.
    pub fn log(&self, i: u64) -> LogRecord {
        let t = i / LOGS_PER_TRACE;
        let len = self.trace_len(t);
        let mut r = self.rng(t, i, salt::LOG);
        let j = if i.is_multiple_of(LOGS_PER_TRACE) {
            0
        } else {
            (0..len).find(|&j| self.is_error(t, j)).unwrap_or_else(|| r.below(len))
        };
        let (start, end) = self.timing(t, j);
        // The two records of a trace never share a time, even on one span.
        let time = start + (end - start) / 2 + i % LOGS_PER_TRACE;
        let service = self.service_of(t, j);
        let user = AgentCorpus::user_value(self.user_of(t));
        let error = self.is_error(t, j);
        let warn = !error && r.below(10) == 0;
        let mut body = String::with_capacity(160);
        if error {
            let (e, stack) = self.exception(t, j);
            body.push_str(&format!("request failed for {user}: {}: {} (", e.ty, e.message));
            self.words(&mut r, 3, &mut body);
            body.push_str(")\n");
            body.push_str(&stack);
        } else {
            let verb = words::LOG_VERBS[r.below(words::LOG_VERBS.len() as u64) as usize];
            let route = words::ROUTES[r.below(words::ROUTES.len() as u64) as usize];
            body.push_str(&format!(
                "{verb} {route} for {user} in {} ms: ",
                (end - start) / 1_000_000
            ));
            let n = 4 + r.below(9);
            self.words(&mut r, n, &mut body);
        }
        if self.has_rare_word(i) {
            body.push(' ');
            body.push_str(RARE_WORD);
        }
        let (severity_number, severity_text) = if error {
            (17, "ERROR")
        } else if warn {
            (13, "WARN")
        } else {
            (9, "INFO")
        };
        LogRecord {
            time_unix_nano: time,
            observed_time_unix_nano: time,
            severity_number,
            severity_text: severity_text.into(),
            body: AnyValue::Str(body),
            attributes: vec![
                KeyValue::new(USER_KEY, user),
                KeyValue::new("code.function.name", ["handle", "dispatch", "run"][j as usize % 3]),
            ],
            trace_id: Some(self.trace_id(t)),
            span_id: Some(self.span_id(t, j)),
            resource: self.resources[service].clone(),
            scope: self.scope.clone(),
            ..Default::default()
        }
    }

    /// Log records `range` (record indices, not traces).
    pub fn logs(&self, range: std::ops::Range<u64>) -> Vec<LogRecord> {
        range.map(|i| self.log(i)).collect()
    }

    /// The log records of trace `t`.
    pub fn trace_logs(&self, t: u64) -> Vec<LogRecord> {
        self.logs(t * LOGS_PER_TRACE..(t + 1) * LOGS_PER_TRACE)
    }
}

fn words_into(out: &mut String, dist: &Zipf, rng: &mut Rng, n: u64) {
    for k in 0..n {
        if k > 0 {
            out.push(' ');
        }
        out.push_str(VOCABULARY[dist.sample(rng)]);
    }
}

/// Whether `word` occurs in `text` as a whole word, ignoring ASCII case: a
/// tokenizer-independent check of a full-text hit (the corpus puts its
/// vocabulary nowhere inside a longer word or identifier).
pub fn contains_word(text: &str, word: &str) -> bool {
    let hay = text.to_ascii_lowercase();
    let word = word.to_ascii_lowercase();
    let bytes = hay.as_bytes();
    let mut from = 0;
    while let Some(pos) = hay[from..].find(&word) {
        let at = from + pos;
        let end = at + word.len();
        let before = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        let after = end == bytes.len() || !bytes[end].is_ascii_alphanumeric();
        if before && after {
            return true;
        }
        from = at + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> AgentCorpus {
        AgentCorpus::new(20_000, 10 * HOUR_NS)
    }

    #[test]
    fn deterministic_and_shaped() {
        let c = corpus();
        assert!(c.span_count() >= 20_000 && c.span_count() < 20_040);
        assert_eq!(c.trace(7), c.trace(7));
        assert_eq!(c.log(9), c.log(9));
        let spans = c.spans(0..c.traces);
        assert_eq!(spans.len() as u64, c.span_count());
        let ids: std::collections::HashSet<_> = spans.iter().map(|s| (s.trace_id, s.span_id)).collect();
        assert_eq!(ids.len(), spans.len(), "ids are unique");
        let lens: Vec<u64> = (0..c.traces).map(|t| c.trace_len(t)).collect();
        assert!(lens.contains(&1) && lens.iter().any(|&l| l >= 30) && lens.iter().all(|&l| l <= 40));
        let llm = spans
            .iter()
            .filter(|s| s.attributes.iter().any(|kv| kv.key == MODEL_KEY))
            .count() as f64;
        let share = llm / spans.len() as f64;
        assert!((0.05..=0.10).contains(&share), "LLM share {share}");
        for s in spans
            .iter()
            .filter(|s| s.attributes.iter().any(|kv| kv.key == MODEL_KEY))
            .take(200)
        {
            let input = s
                .attributes
                .iter()
                .find(|kv| kv.key == "gen_ai.input.messages")
                .unwrap();
            let n = input.value.as_str().unwrap().len();
            assert!((1024..=20 * 1024).contains(&n), "input messages of {n} bytes");
        }
        let errors = spans.iter().filter(|s| s.is_error()).count() as f64 / spans.len() as f64;
        assert!((0.02..0.04).contains(&errors), "error share {errors}");
        // Start times are spread, not in trace order.
        let starts: Vec<u64> = (0..100).map(|t| c.trace_start(t)).collect();
        assert!(starts.windows(2).any(|w| w[0] > w[1]));
        assert!(
            spans
                .iter()
                .all(|s| s.start_time_unix_nano >= c.end_ns - c.window_ns && s.start_time_unix_nano < c.end_ns)
        );
        // Zipf: the first service carries far more than the last.
        let count = |name: &str| spans.iter().filter(|s| s.service_name() == name).count();
        assert!(count(words::SERVICES[0]) > 5 * count(words::SERVICES[19]));
        // Every log's span exists.
        for i in 0..200 {
            let l = c.log(i);
            let t = i / LOGS_PER_TRACE;
            assert!(c.trace(t).iter().any(|s| Some(s.span_id) == l.span_id));
        }
    }

    #[test]
    fn query_words_occur_only_as_whole_words() {
        let c = corpus();
        let mut rare = 0;
        let mut common = 0;
        for i in 0..c.log_count() {
            let l = c.log(i);
            let body = l.body.as_str().unwrap().to_ascii_lowercase();
            for w in [RARE_WORD, AgentCorpus::common_word()] {
                assert_eq!(body.contains(w), contains_word(&body, w), "{w} in {body}");
            }
            rare += contains_word(&body, RARE_WORD) as u64;
            common += contains_word(&body, AgentCorpus::common_word()) as u64;
            assert_eq!(contains_word(&body, RARE_WORD), c.has_rare_word(i));
        }
        assert_eq!(rare, c.rare_word_count(0..c.log_count()));
        assert!(common > c.log_count() / 5, "common word in {common} logs");
        // Nor in the span text the engine indexes.
        for s in c.spans(0..500) {
            let mut text = s.name.clone();
            for e in &s.events {
                for kv in &e.attributes {
                    text.push_str(kv.value.as_str().unwrap_or_default());
                }
            }
            assert!(!text.to_ascii_lowercase().contains(RARE_WORD));
        }
    }

    #[test]
    fn whole_word_check() {
        assert!(contains_word("a Customer, b", "customer"));
        assert!(!contains_word("customers", "customer"));
        assert!(contains_word("x customers customer", "customer"));
        assert!(contains_word("customer", "customer"));
    }
}
