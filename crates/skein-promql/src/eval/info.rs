//! `info(v [, data-label-selector])`: each series of `v` with the data
//! labels of the info series (`target_info` unless the selector names
//! others) that share its identifying labels, `instance` and `job`, as
//! Prometheus 3 computes it.
//!
//! - The info series are read once per query ([`InfoPlan`]), by the
//!   selector's matchers (`__name__="target_info"` added when it names no
//!   metric), and taken at each step as an instant selector takes series:
//!   the newest sample within the lookback delta.
//! - Two info series of one name and identifying labels at a step: the
//!   newer sample wins; equally new ones are an error.
//! - A data label is added unless the series has it already; with a
//!   selector, only the labels it names are. Two info series giving one
//!   label two values is an error.
//! - A series no info series matches is kept as it is, unless a data
//!   matcher refuses the empty value: then it is dropped.
//! - Series of an info metric itself are kept as they are.

use std::collections::{HashMap, HashSet};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{Call, Expr};

use super::seek::Cursors;
use super::{Evaluator, Sample, selector_matchers};
use crate::{Error, Labels, NAME, Series, is_stale_nan};

/// The labels an info series and the series it describes share.
const IDENTIFYING: [&str; 2] = ["instance", "job"];

/// The info metric a call reads when its selector names none.
const TARGET_INFO: &str = "target_info";

/// What an `info` call reads: the matchers of its info series.
pub(crate) struct InfoPlan {
    /// Every matcher the info series must pass, `__name__` included.
    pub(crate) select: Vec<Matcher>,
    /// The matchers on the metric name.
    names: Vec<Matcher>,
    /// The other matchers: on data labels.
    data: Vec<Matcher>,
}

impl InfoPlan {
    pub(crate) fn of(c: &Call) -> Result<InfoPlan, Error> {
        let mut select = match c.args.args.get(1).map(|a| a.as_ref()) {
            None => Vec::new(),
            Some(Expr::VectorSelector(vs)) => selector_matchers(vs),
            Some(_) => {
                return Err(Error::BadData(
                    "info: the second argument must be a label selector".into(),
                ));
            }
        };
        if !select.iter().any(|m| m.name == NAME) {
            select.insert(0, Matcher::new(MatchOp::Equal, NAME, TARGET_INFO));
        }
        let (names, data) = select.iter().cloned().partition(|m| m.name == NAME);
        Ok(InfoPlan { select, names, data })
    }
}

/// An info series' sample at one step.
struct InfoSample<'a> {
    labels: &'a Labels,
    time: i64,
}

/// The key an info series is found by: its name and identifying labels.
type Signature<'a> = (&'a str, [Option<&'a str>; 2]);

fn signature<'a>(name: &'a str, l: &'a Labels) -> Signature<'a> {
    (name, IDENTIFYING.map(|k| l.get(k)))
}

impl Evaluator<'_> {
    pub(crate) fn info(&mut self, c: &Call, t: i64) -> Result<Vec<Sample>, Error> {
        let arg = c
            .args
            .args
            .first()
            .ok_or_else(|| Error::BadData("function info: missing argument 1".into()))?;
        let base = self.eval_vector(arg, t)?;
        let Some((plan, infos, cursors)) = self.infos.get(&super::call_key(c)) else {
            return Err(Error::Internal("info: its series were not read".into()));
        };
        let is_info = |l: &Labels| {
            let name = l.get(NAME).unwrap_or("");
            plan.names.iter().all(|m| m.is_match(name))
        };
        // The identifying values of the series to describe: an info series
        // whose identifying label has another value (or none, when some
        // series has one) describes none of them.
        let mut wanted: [HashSet<&str>; 2] = Default::default();
        for s in base.iter().filter(|s| !is_info(&s.labels)) {
            for (k, values) in IDENTIFYING.iter().zip(&mut wanted) {
                if let Some(v) = s.labels.get(k) {
                    values.insert(v);
                }
            }
        }
        let mut found: HashMap<Signature<'_>, InfoSample<'_>> = HashMap::new();
        let mut names: Vec<&str> = Vec::new();
        if wanted.iter().any(|w| !w.is_empty()) {
            for (labels, time) in self.info_samples(infos, cursors, t) {
                let relevant = IDENTIFYING
                    .iter()
                    .zip(&wanted)
                    .all(|(k, values)| values.is_empty() || labels.get(k).is_some_and(|v| values.contains(v)));
                if !relevant {
                    continue;
                }
                let name = labels.get(NAME).unwrap_or("");
                if !names.contains(&name) {
                    names.push(name);
                }
                let s = InfoSample { labels, time };
                match found.get(&signature(name, labels)) {
                    Some(e) if e.time > time => {}
                    Some(e) if e.time == time => {
                        return Err(Error::Execution(format!(
                            "found duplicate series for info metric: existing {} @ {}, new {} @ {}",
                            e.labels, e.time, labels, time
                        )));
                    }
                    _ => {
                        found.insert(signature(name, labels), s);
                    }
                }
            }
        }
        let data_names: HashSet<&str> = plan.data.iter().map(|m| m.name.as_str()).collect();
        let mut out = Vec::with_capacity(base.len());
        for s in &base {
            if is_info(&s.labels) {
                out.push(s.clone());
                continue;
            }
            let mut added: Vec<(&str, &str)> = Vec::new();
            let mut matched = false;
            for name in &names {
                let Some(info) = found.get(&signature(name, &s.labels)) else {
                    continue;
                };
                matched = true;
                for (k, v) in info.labels.pairs() {
                    if k == NAME || (!data_names.is_empty() && !data_names.contains(k.as_str())) {
                        continue;
                    }
                    if let Some((_, prev)) = added.iter().find(|(n, _)| n == k) {
                        if prev != v {
                            return Err(Error::Execution(format!("conflicting label: {k}")));
                        }
                        continue;
                    }
                    if s.labels.get(k).is_none() {
                        added.push((k, v));
                    }
                }
            }
            if !matched && plan.data.iter().any(|m| !m.is_match("")) {
                continue;
            }
            let mut labels = s.labels.clone();
            for (k, v) in added {
                labels.set(k, v);
            }
            out.push(Sample::float(labels, s.value));
        }
        Ok(out)
    }

    /// Each info series with a sample at `t`: its labels and the time of
    /// its newest sample within the lookback delta.
    fn info_samples<'s>(&self, series: &'s [Series], cursors: &Cursors, t: i64) -> Vec<(&'s Labels, i64)> {
        let mut out = Vec::new();
        for (n, s) in series.iter().enumerate() {
            let i = cursors.seek(n, &s.samples, |ts| ts <= t);
            let Some(&(ts, v)) = i.checked_sub(1).and_then(|i| s.samples.get(i)) else {
                continue;
            };
            if ts >= t - self.opts.lookback_ms && !is_stale_nan(v) {
                out.push((&s.labels, ts));
            }
        }
        out
    }
}
