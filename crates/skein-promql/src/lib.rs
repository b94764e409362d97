//! PromQL over Skein's metric points.
//!
//! - [`eval`]: the evaluator, over any [`SeriesSource`] ("the series
//!   matching these matchers, with their samples in `[t0, t1]`"), with
//!   Prometheus 2.x semantics (lookback delta, staleness markers, closed
//!   range windows, extrapolated `rate`/`increase`/`delta`, `@` and
//!   `offset`, subqueries aligned to their step).
//! - [`naming`]: the Prometheus series an OTLP metric point stands for, per
//!   the OpenTelemetry "Prometheus and OpenMetrics compatibility" spec.
//! - [`json`]: results in the Prometheus HTTP API's JSON.
//! - [`params`]: the API's time, duration and step parameters.

pub mod eval;
pub mod histogram;
pub mod json;
pub mod naming;
pub mod params;

pub use histogram::FloatHistogram;
pub use promql_parser::label::{MatchOp, Matcher};
pub use promql_parser::parser::Expr;

use std::sync::{Arc, OnceLock};

/// A series' labels, sorted by name, names unique, no empty values.
///
/// Shared, not copied: a range query hands each series' labels on at every
/// step (selector, function, aggregation), so a clone is a reference count
/// and the set without its metric name is derived once per set
/// ([`Labels::without_name`]), not once per step.
#[derive(Clone, Default)]
pub struct Labels(Arc<LabelSet>);

#[derive(Clone, Default)]
struct LabelSet {
    pairs: Vec<(String, String)>,
    /// [`Labels::without_name`] once asked: `None` when there is no name
    /// to drop (the set itself, not held here: that would be a cycle).
    nameless: OnceLock<Option<Labels>>,
}

impl Labels {
    /// From pairs in any order; a later pair of the same name wins, an
    /// empty value means no label.
    pub fn from_pairs<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Labels {
        let mut v: Vec<(String, String)> = Vec::new();
        for (k, val) in pairs {
            if let Some(e) = v.iter_mut().find(|(n, _)| *n == k) {
                e.1 = val;
            } else {
                v.push((k, val));
            }
        }
        v.retain(|(_, val)| !val.is_empty());
        v.sort();
        Labels::sorted(v)
    }

    /// From pairs already sorted by name, names unique, no empty values.
    fn sorted(pairs: Vec<(String, String)>) -> Labels {
        debug_assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        Labels(Arc::new(LabelSet {
            pairs,
            nameless: OnceLock::new(),
        }))
    }

    /// The pairs `(name, value)`, sorted by name.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0.pairs
    }

    /// The pairs whose name `keep` keeps (an order-preserving subset).
    pub fn filtered(&self, mut keep: impl FnMut(&str) -> bool) -> Labels {
        Labels::sorted(self.pairs().iter().filter(|(k, _)| keep(k)).cloned().collect())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        let pairs = self.pairs();
        pairs
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| pairs[i].1.as_str())
    }

    /// Sets a label (an empty value removes it).
    pub fn set(&mut self, name: &str, value: &str) {
        let at = self.pairs().binary_search_by(|(n, _)| n.as_str().cmp(name));
        if at.is_err() && value.is_empty() {
            return;
        }
        // Copied when shared; the derived set no longer holds.
        let set = Arc::make_mut(&mut self.0);
        set.nameless = OnceLock::new();
        match at {
            Ok(i) if value.is_empty() => {
                set.pairs.remove(i);
            }
            Ok(i) => set.pairs[i].1 = value.to_string(),
            Err(i) => set.pairs.insert(i, (name.to_string(), value.to_string())),
        }
    }

    pub fn remove(&mut self, name: &str) {
        self.set(name, "");
    }

    /// The labels but the metric name.
    pub fn without_name(&self) -> Labels {
        let nameless = self
            .0
            .nameless
            .get_or_init(|| self.get(NAME).map(|_| self.filtered(|k| k != NAME)));
        nameless.as_ref().unwrap_or(self).clone()
    }

    /// Whether every matcher matches (a missing label is the empty value).
    pub fn matches(&self, matchers: &[Matcher]) -> bool {
        matchers.iter().all(|m| m.is_match(self.get(&m.name).unwrap_or("")))
    }
}

impl PartialEq for Labels {
    fn eq(&self, other: &Labels) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.pairs() == other.pairs()
    }
}

impl Eq for Labels {}

impl std::hash::Hash for Labels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.pairs().hash(state)
    }
}

impl PartialOrd for Labels {
    fn partial_cmp(&self, other: &Labels) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Labels {
    fn cmp(&self, other: &Labels) -> std::cmp::Ordering {
        self.pairs().cmp(other.pairs())
    }
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Labels({:?})", self.pairs())
    }
}

impl std::fmt::Display for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{")?;
        for (i, (k, v)) in self.pairs().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{k}={v:?}")?;
        }
        write!(f, "}}")
    }
}

/// The metric name label.
pub const NAME: &str = "__name__";

/// One series: labels, float samples `(milliseconds, value)` and native
/// histogram samples, each ascending by time; one sample of either kind
/// per timestamp.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<(i64, f64)>,
    pub histograms: Vec<(i64, Arc<FloatHistogram>)>,
}

impl Series {
    /// A series of float samples.
    pub fn floats(labels: Labels, samples: Vec<(i64, f64)>) -> Series {
        Series {
            labels,
            samples,
            histograms: Vec::new(),
        }
    }
}

/// A sample's value: a float or a native histogram.
#[derive(Debug, Clone, PartialEq)]
pub enum SampleValue {
    Float(f64),
    Histogram(Arc<FloatHistogram>),
}

/// Where the evaluator reads series from.
pub trait SeriesSource {
    /// Every series matching all `matchers` with its samples in
    /// `[start, end]` (milliseconds, both inclusive), each ascending by
    /// time with one sample per timestamp. A series without samples there
    /// may be left out.
    fn select(&self, matchers: &[Matcher], start: i64, end: i64) -> Result<Vec<Series>, String>;
}

/// A failure, as the Prometheus API reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The request is wrong: a syntax error, an unknown function, a bad
    /// parameter (HTTP 400, `bad_data`).
    BadData(String),
    /// The query could not be evaluated: e.g. many-to-many matching (HTTP
    /// 422, `execution`).
    Execution(String),
    /// Reading the series failed (HTTP 500, `internal`).
    Internal(String),
}

impl Error {
    pub fn message(&self) -> &str {
        match self {
            Error::BadData(m) | Error::Execution(m) | Error::Internal(m) => m,
        }
    }
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::BadData(_) => "bad_data",
            Error::Execution(_) => "execution",
            Error::Internal(_) => "internal",
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

/// The bit pattern Prometheus writes to mark a series stale.
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

pub fn is_stale_nan(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

#[cfg(test)]
mod tests;

/// Formats a float as Go's `strconv.FormatFloat(v, 'f', -1, 64)`, as
/// Prometheus writes values (and `le`, `quantile`, `count_values` labels).
pub fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}
