//! A range function of a range selector (`rate(x[5m])`), computed for a
//! range query series by series over all its steps before the first step,
//! instead of step by step over all series.
//!
//! Step by step, each step visits every series' samples at a new place and
//! copies its window out; a day at a 60 s step over 1k series is 1.4M
//! windows, and finding and copying them was most of such a query. Series
//! by series, two indexes walk each series' samples forward once, and a
//! window is a slice of them. The values are the function's own on the
//! same window ([`funcs::over_time`]), so the answers are the same; a step
//! then only gathers its values.
//!
//! Only where that is plainly the same: a function of one range selector
//! argument without `@` (not `predict_linear`, whose second argument may
//! change by step), evaluated at the query's own steps (not inside a
//! subquery), over series without native histograms, and not over more
//! than [`MAX_VALUES`] series × steps (the values are held until the query
//! ends).
//!
//! An aggregation without a parameter (`sum by (job) (rate(x[5m]))`) of
//! such values is computed ahead too ([`Evaluator::aggregate_steps`]):
//! each series' group is found once, not at every step, and every step is
//! folded in the order and through the same code as step by step.

use std::collections::HashMap;

use promql_parser::parser::token;
use promql_parser::parser::{AggregateExpr, Call, Expr};

use super::funcs::{Ctx, Group, group_labels, keeps_name, over_time, unwrap_parens};
use super::{Evaluator, Param, Sample, aggregate_key, call_key, ms, offset_ms};
use crate::{Labels, is_stale_nan};

/// The key of the values computed ahead for `e`, a call or an aggregation.
fn computed_key(e: &Expr) -> Option<usize> {
    match unwrap_parens(e) {
        Expr::Call(c) => Some(call_key(c)),
        Expr::Aggregate(a) => Some(aggregate_key(a)),
        _ => None,
    }
}

/// Series × steps a query computes ahead at most (16 bytes each).
const MAX_VALUES: usize = 1 << 24;

/// A call's values at each step of a range query: per step, the index of
/// each series that has one (ascending) and its value.
pub(crate) struct StepValues {
    start: i64,
    step: i64,
    /// The labels of each series of the values, made once rather than per
    /// step: a call's are its selector's (without the name unless the
    /// function keeps it), an aggregation's are its groups'.
    labels: Vec<Labels>,
    values: Vec<Vec<(u32, f64)>>,
}

impl StepValues {
    /// The values at `t`, if `t` is one of the query's steps.
    pub(crate) fn at(&self, t: i64) -> Option<&[(u32, f64)]> {
        let d = t.checked_sub(self.start)?;
        if d < 0 || d % self.step != 0 {
            return None;
        }
        self.values.get(usize::try_from(d / self.step).ok()?).map(Vec::as_slice)
    }
}

impl Evaluator<'_> {
    /// Computes ahead the calls under `expr` that a range query from
    /// `start` to `end` at `step` evaluates at its steps.
    pub(crate) fn compute_steps(&mut self, expr: &Expr, start: i64, end: i64, step: i64) {
        match expr {
            Expr::Aggregate(a) => {
                self.compute_steps(&a.expr, start, end, step);
                if let Some(p) = &a.param {
                    self.compute_steps(p, start, end, step);
                }
                if let Some(values) = self.aggregate_steps(a) {
                    self.steps.insert(aggregate_key(a), values);
                }
            }
            Expr::Unary(u) => self.compute_steps(&u.expr, start, end, step),
            Expr::Binary(b) => {
                self.compute_steps(&b.lhs, start, end, step);
                self.compute_steps(&b.rhs, start, end, step);
            }
            Expr::Paren(p) => self.compute_steps(&p.expr, start, end, step),
            Expr::Call(c) => {
                if let Some(values) = self.call_steps(c, start, end, step) {
                    self.steps.insert(call_key(c), values);
                    return;
                }
                for a in &c.args.args {
                    self.compute_steps(a, start, end, step);
                }
            }
            // A subquery evaluates at its own times.
            Expr::Subquery(_)
            | Expr::VectorSelector(_)
            | Expr::MatrixSelector(_)
            | Expr::NumberLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::Extension(_) => {}
        }
    }

    /// The vector at `t` of the call or aggregation whose key is `key`,
    /// if it was computed ahead for this step: a call's value for each
    /// series of its range selector that has one, in the selector's order;
    /// an aggregation's groups in the order the step meets them.
    pub(crate) fn computed_step(&self, key: usize, t: i64) -> Option<Vec<Sample>> {
        let computed = self.steps.get(&key)?;
        let values = computed.at(t)?;
        Some(
            values
                .iter()
                .map(|&(n, v)| Sample::float(computed.labels[n as usize].clone(), v))
                .collect(),
        )
    }

    /// Aggregation `a`'s values at every step, when its argument's were
    /// computed ahead and it folds floats alone (no parameter, so no
    /// `topk`, `quantile` or `count_values`): each series' group is found
    /// once rather than at every step, and each step folds its values in
    /// the order [`funcs::aggregate`] does, through the same
    /// [`Group`], so the answers are the same. The argument's values are
    /// then no longer needed.
    fn aggregate_steps(&mut self, a: &AggregateExpr) -> Option<StepValues> {
        let id = a.op.id();
        let folds = matches!(
            id,
            token::T_SUM
                | token::T_AVG
                | token::T_MIN
                | token::T_MAX
                | token::T_COUNT
                | token::T_GROUP
                | token::T_STDDEV
                | token::T_STDVAR
        );
        if !folds || a.param.is_some() {
            return None;
        }
        let input = self.steps.remove(&computed_key(&a.expr)?)?;
        let mut groups: Vec<Labels> = Vec::new();
        let mut numbers: HashMap<Labels, u32> = HashMap::new();
        let group_of: Vec<u32> = input
            .labels
            .iter()
            .map(|l| {
                let g = group_labels(l, a.modifier.as_ref());
                *numbers.entry(g.clone()).or_insert_with(|| {
                    groups.push(g);
                    (groups.len() - 1) as u32
                })
            })
            .collect();
        let mut open: Vec<Option<Group>> = (0..groups.len()).map(|_| None).collect();
        let (mut met, mut done) = (Vec::new(), Vec::new());
        let mut values = Vec::with_capacity(input.values.len());
        for at in &input.values {
            for &(n, v) in at {
                let g = group_of[n as usize];
                match &mut open[g as usize] {
                    Some(group) => group.add_float(id, v),
                    slot => {
                        *slot = Some(Group::of_float(id, groups[g as usize].clone(), v));
                        met.push(g);
                    }
                }
            }
            let mut out = Vec::with_capacity(met.len());
            for g in met.drain(..) {
                let group = open[g as usize].take()?;
                done.clear();
                group.finish(id, 0, &Param::None, &mut done).ok()?;
                out.extend(done.iter().map(|s| (g, s.value)));
            }
            values.push(out);
        }
        Some(StepValues {
            start: input.start,
            step: input.step,
            labels: groups,
            values,
        })
    }

    /// `c`'s values at every step, when it can be computed ahead.
    fn call_steps(&self, c: &Call, start: i64, end: i64, step: i64) -> Option<StepValues> {
        let name = c.func.name;
        let f = over_time(name).filter(|_| name != "predict_linear" && c.args.args.len() == 1)?;
        let Expr::MatrixSelector(m) = unwrap_parens(c.args.args.first()?) else {
            return None;
        };
        if m.vs.at.is_some() || step <= 0 || end < start {
            return None;
        }
        let (series, _) = self.series(&m.vs)?;
        let steps = usize::try_from((end - start) / step).ok()?.checked_add(1)?;
        if series.iter().any(|s| !s.histograms.is_empty()) || series.len().saturating_mul(steps) > MAX_VALUES {
            return None;
        }
        let (offset, range) = (offset_ms(&m.vs.offset), ms(&m.range));
        let mut values = vec![Vec::new(); steps];
        let mut fresh = Vec::new();
        for (n, s) in series.iter().enumerate() {
            let samples = &s.samples;
            let (mut lo, mut hi) = (0, 0);
            for (k, at) in values.iter_mut().enumerate() {
                let t = start + k as i64 * step;
                let range_end = t - offset;
                let range_start = range_end - range;
                // The window the matrix selector takes: range_start ≤ ts ≤ range_end.
                while lo < samples.len() && samples[lo].0 < range_start {
                    lo += 1;
                }
                hi = hi.max(lo);
                while hi < samples.len() && samples[hi].0 <= range_end {
                    hi += 1;
                }
                let mut window = &samples[lo..hi];
                if window.iter().any(|x| is_stale_nan(x.1)) {
                    fresh.clear();
                    fresh.extend(window.iter().copied().filter(|x| !is_stale_nan(x.1)));
                    window = &fresh;
                }
                if window.is_empty() {
                    continue;
                }
                let ctx = Ctx {
                    t,
                    range_start,
                    range_end,
                    arg: None,
                };
                if let Some(v) = f(window, ctx) {
                    at.push((n as u32, v));
                }
            }
        }
        let keeps = keeps_name(name);
        let labels = series
            .iter()
            .map(|s| {
                if keeps {
                    s.labels.clone()
                } else {
                    s.labels.without_name()
                }
            })
            .collect();
        Some(StepValues {
            start,
            step,
            labels,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use promql_parser::label::Matcher;

    use super::*;
    use crate::eval::{Options, parse};
    use crate::{Labels, Series, SeriesSource};

    /// One counter series, whatever is asked.
    struct One;

    impl SeriesSource for One {
        fn select(&self, _: &[Matcher], _: i64, _: i64) -> Result<Vec<Series>, String> {
            let labels = Labels::from_pairs([("__name__".to_string(), "c".to_string())]);
            Ok(vec![Series::floats(
                labels,
                (0..100).map(|i| (i * 15_000, i as f64)).collect(),
            )])
        }
    }

    /// How many calls of `q` a range query computes ahead.
    fn computed(q: &str) -> usize {
        let e = parse(q).unwrap();
        let mut ev = Evaluator::new(&One, Options::default(), 300_000, 900_000);
        ev.prefetch(&e).unwrap();
        ev.compute_steps(&e, 300_000, 900_000, 60_000);
        ev.steps.len()
    }

    #[test]
    fn range_functions_of_a_selector_at_the_steps_are_computed_ahead() {
        assert_eq!(computed("sum by (job) (rate(c[1m]))"), 1);
        assert_eq!(computed("rate(c[1m] offset 1m) / on() group_left irate((c[2m]))"), 2);
        assert_eq!(computed("-last_over_time(c[5m]) + count_over_time(c[1m])"), 2);
        // Not where another time or argument comes in.
        assert_eq!(computed("max_over_time(rate(c[1m])[5m:30s])"), 0);
        assert_eq!(computed("predict_linear(c[5m], 60)"), 0);
        assert_eq!(computed("rate(c[1m] @ 100)"), 0);
        assert_eq!(computed("quantile_over_time(0.5, c[1m])"), 0);
        assert_eq!(computed("rate(c[1m:15s])"), 0);
    }

    #[test]
    fn aggregations_that_fold_floats_of_computed_values_are_computed_ahead() {
        // The aggregation's values take the place of its argument's.
        assert_eq!(computed("sum by (job) (rate(c[1m]))"), 1);
        assert_eq!(computed("max(avg without (job) ((rate(c[1m]))))"), 1);
        assert_eq!(computed("stddev(rate(c[1m])) + count(irate(c[1m]))"), 2);
        // Not with a parameter, nor over values not computed ahead.
        assert_eq!(computed("topk(2, rate(c[1m]))"), 1);
        assert_eq!(computed("sum(c)"), 0);
        assert_eq!(computed("sum(rate(c[1m]) * 2)"), 1);
    }

    #[test]
    fn a_step_off_the_grid_has_no_computed_values() {
        let v = StepValues {
            start: 100,
            step: 10,
            labels: Vec::new(),
            values: vec![vec![(0, 1.0)], vec![], vec![(3, 2.0)]],
        };
        assert_eq!(v.at(100), Some(&[(0, 1.0)][..]));
        assert_eq!(v.at(120), Some(&[(3, 2.0)][..]));
        for t in [90, 105, 130, i64::MIN] {
            assert_eq!(v.at(t), None, "{t}");
        }
    }
}
