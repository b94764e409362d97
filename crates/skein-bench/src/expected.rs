//! Expected answers computed from the corpus itself, so every query the
//! benchmark times is also checked.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use skein_model::corpus::Corpus;
use skein_model::corpus::agent::{self, AgentCorpus, MODELS};
use skein_model::{AnyValue, LogRecord, Span};

/// A span's position in newest-first order.
pub type SpanKey = (u64, u128, u64);

/// Keeps the `n` largest keys.
pub struct TopN {
    n: usize,
    heap: BinaryHeap<Reverse<SpanKey>>,
}

impl TopN {
    pub fn new(n: usize) -> Self {
        TopN {
            n,
            heap: BinaryHeap::new(),
        }
    }
    pub fn push(&mut self, k: SpanKey) {
        if self.heap.len() < self.n {
            self.heap.push(Reverse(k));
        } else if self.heap.peek().is_some_and(|Reverse(min)| k > *min) {
            self.heap.pop();
            self.heap.push(Reverse(k));
        }
    }
    /// Newest first.
    pub fn sorted(&self) -> Vec<SpanKey> {
        let mut v: Vec<SpanKey> = self.heap.iter().map(|Reverse(k)| *k).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }
}

pub const MIN_DURATION_NS: u64 = 150_000_000;
pub const BODY_NEEDLE: &str = "users failed: upstream";
/// The canonical corpus's full-text word: in the body of every error log.
pub const TEXT_WORD: &str = "timeout";

pub struct Expected {
    pub spans: u64,
    pub error_spans: u64,
    pub by_service: HashMap<String, u64>,
    /// Newest 100 spans of each `benchmark.group` value.
    pub by_group: Vec<Vec<SpanKey>>,
    /// Newest 100 spans lasting at least MIN_DURATION_NS.
    pub slow: Vec<SpanKey>,
    pub logs: u64,
    /// Newest 100 error logs and body matches: (time, trace, span) of each.
    pub error_logs: Vec<SpanKey>,
    pub body_matches: Vec<SpanKey>,
    /// Newest 100 logs whose body holds TEXT_WORD as a whole word.
    pub text_matches: Vec<SpanKey>,
}

pub fn log_key(l: &LogRecord) -> SpanKey {
    (
        l.effective_time(),
        l.trace_id.map(|t| t.as_u128()).unwrap_or(0),
        l.span_id.map(|s| s.as_u64()).unwrap_or(0),
    )
}

/// The logs of the corpus: the root span's log line of each of the first
/// `traces_with_logs` traces.
pub fn logs_of(c: &Corpus, traces: std::ops::Range<u64>) -> Vec<LogRecord> {
    traces.map(|t| c.trace_logs(t).swap_remove(0)).collect()
}

pub fn compute(c: &Corpus, traces_with_logs: u64, progress: &indicatif::ProgressBar) -> Expected {
    let mut e = Expected {
        spans: 0,
        error_spans: 0,
        by_service: HashMap::new(),
        by_group: Vec::new(),
        slow: Vec::new(),
        logs: 0,
        error_logs: Vec::new(),
        body_matches: Vec::new(),
        text_matches: Vec::new(),
    };
    let mut groups: Vec<TopN> = (0..c.groups).map(|_| TopN::new(100)).collect();
    let mut slow = TopN::new(100);
    for t in 0..c.traces {
        for s in c.trace(t) {
            e.spans += 1;
            if s.is_error() {
                e.error_spans += 1;
            }
            *e.by_service.entry(s.service_name().to_string()).or_default() += 1;
            let key = (s.start_time_unix_nano, s.trace_id.as_u128(), s.span_id.as_u64());
            if let Some(AnyValue::Str(g)) = s.attributes.first().map(|kv| &kv.value) {
                let idx: usize = g.trim_start_matches("group-").parse().unwrap_or(0);
                groups[idx].push(key);
            }
            if s.duration_ns() >= MIN_DURATION_NS {
                slow.push(key);
            }
        }
        progress.inc(c.spans_per_trace);
    }
    e.by_group = groups.iter().map(TopN::sorted).collect();
    e.slow = slow.sorted();
    let mut errs = TopN::new(100);
    let mut bodies = TopN::new(100);
    let mut text = TopN::new(100);
    for l in logs_of(c, 0..traces_with_logs) {
        if l.body.as_str().is_some_and(|b| agent::contains_word(b, TEXT_WORD)) {
            text.push(log_key(&l));
        }
        e.logs += 1;
        if l.severity_number >= 17 {
            errs.push(log_key(&l));
        }
        if l.body
            .as_str()
            .is_some_and(|b| b.to_lowercase().contains(&BODY_NEEDLE.to_lowercase()))
        {
            bodies.push(log_key(&l));
        }
    }
    e.error_logs = errs.sorted();
    e.body_matches = bodies.sorted();
    e.text_matches = text.sorted();
    e
}

pub fn span_key(s: &Span) -> SpanKey {
    (s.start_time_unix_nano, s.trace_id.as_u128(), s.span_id.as_u64())
}

/// Expected answers on the agent corpus.
pub struct AgentExpected {
    pub spans: u64,
    pub error_spans: u64,
    pub llm_spans: u64,
    pub by_service: HashMap<String, u64>,
    /// The users the attribute queries ask for, each with its newest 100
    /// spans (a user has a trace or a few: usually all of them).
    pub users: Vec<(String, Vec<SpanKey>)>,
    /// Newest 100 spans of each model (`gen_ai.request.model`).
    pub by_model: Vec<Vec<SpanKey>>,
    /// Per model: LLM calls and input tokens (what usage by model answers).
    pub usage_by_model: Vec<(u64, i64)>,
    /// LLM calls per session.
    pub session_calls: HashMap<String, u64>,
    pub logs: u64,
    pub error_logs: Vec<SpanKey>,
    /// Newest 100 logs holding the common word; how many hold it.
    pub common_word: Vec<SpanKey>,
    pub common_word_logs: u64,
    /// Every log holding the rare word, newest first.
    pub rare_word: Vec<SpanKey>,
}

/// Users of `queries` traces spread over the corpus.
pub fn agent_query_users(c: &AgentCorpus, queries: usize) -> Vec<String> {
    let mut users: Vec<String> = (0..queries as u64)
        .map(|i| AgentCorpus::user_value(c.user_of(i * c.traces / queries.max(1) as u64)))
        .collect();
    users.dedup();
    users
}

pub fn compute_agent(c: &AgentCorpus, users: &[String], logs: u64, progress: &indicatif::ProgressBar) -> AgentExpected {
    let mut e = AgentExpected {
        spans: 0,
        error_spans: 0,
        llm_spans: 0,
        by_service: HashMap::new(),
        users: Vec::new(),
        by_model: Vec::new(),
        usage_by_model: MODELS.iter().map(|_| (0, 0)).collect(),
        session_calls: HashMap::new(),
        logs: 0,
        error_logs: Vec::new(),
        common_word: Vec::new(),
        common_word_logs: 0,
        rare_word: Vec::new(),
    };
    let wanted: HashMap<&str, usize> = users.iter().enumerate().map(|(i, u)| (u.as_str(), i)).collect();
    let mut by_user: Vec<TopN> = users.iter().map(|_| TopN::new(100)).collect();
    let mut by_model: Vec<TopN> = MODELS.iter().map(|_| TopN::new(100)).collect();
    for t in 0..c.traces {
        let user = AgentCorpus::user_value(c.user_of(t));
        let slot = wanted.get(user.as_str()).copied();
        for s in c.trace(t) {
            e.spans += 1;
            e.error_spans += s.is_error() as u64;
            *e.by_service.entry(s.service_name().to_string()).or_default() += 1;
            let key = span_key(&s);
            if let Some(i) = slot {
                by_user[i].push(key);
            }
            if let Some(m) = s.attributes.iter().find(|kv| kv.key == agent::MODEL_KEY)
                && let Some(i) = MODELS.iter().position(|(name, _)| m.value.as_str() == Some(*name))
            {
                e.llm_spans += 1;
                by_model[i].push(key);
                let attr = |k: &str| s.attributes.iter().find(|kv| kv.key == k).map(|kv| &kv.value);
                let u = &mut e.usage_by_model[i];
                u.0 += 1;
                u.1 += attr("gen_ai.usage.input_tokens").and_then(|v| v.as_i64()).unwrap_or(0);
                if let Some(session) = attr(agent::SESSION_KEY).and_then(|v| v.as_str()) {
                    *e.session_calls.entry(session.to_string()).or_default() += 1;
                }
            }
        }
        progress.inc(c.trace_len(t));
    }
    e.users = users.iter().cloned().zip(by_user.iter().map(TopN::sorted)).collect();
    e.by_model = by_model.iter().map(TopN::sorted).collect();
    let mut errs = TopN::new(100);
    let mut common = TopN::new(100);
    let mut rare = Vec::new();
    for i in 0..logs {
        let l = c.log(i);
        e.logs += 1;
        let key = log_key(&l);
        if l.severity_number >= 17 {
            errs.push(key);
        }
        let body = l.body.as_str().unwrap_or_default();
        if agent::contains_word(body, AgentCorpus::common_word()) {
            e.common_word_logs += 1;
            common.push(key);
        }
        if agent::contains_word(body, agent::RARE_WORD) {
            rare.push(key);
        }
    }
    rare.sort_unstable_by(|a, b| b.cmp(a));
    e.error_logs = errs.sorted();
    e.common_word = common.sorted();
    e.rare_word = rare;
    e
}
