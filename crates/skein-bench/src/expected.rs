//! Expected answers computed from the corpus itself, so every query the
//! benchmark times is also checked.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use skein_model::corpus::Corpus;
use skein_model::{AnyValue, LogRecord};

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
    for l in logs_of(c, 0..traces_with_logs) {
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
    e
}
