//! The PromQL evaluator.
//!
//! A query is evaluated step by step: a range query is the instant query
//! at each of its steps, which is what Prometheus computes too (its range
//! evaluation is an optimisation of exactly that). Before the first step,
//! every selector's series are read once from the source, for the whole
//! time span any step can reach (offsets, `@`, ranges, subqueries and the
//! lookback delta included), so a step only searches samples in memory.
//!
//! Semantics follow Prometheus 2.x (the version the conformance test runs
//! against): an instant selector takes the newest sample in
//! `[t - lookback, t]` unless it is a staleness marker; a range selector
//! takes the samples in `[t - range, t]`, markers dropped; subquery steps
//! are aligned to multiples of the step since the epoch.

pub(crate) mod funcs;
mod info;
mod seek;
mod steps;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::token::{self, TokenType};
use promql_parser::parser::value::ValueType;
use promql_parser::parser::{
    AggregateExpr, AtModifier, BinaryExpr, Call, Expr, LabelModifier, Offset, SubqueryExpr, VectorMatchCardinality,
    VectorSelector,
};

use crate::{Error, FloatHistogram, Labels, NAME, Series, SeriesSource, is_stale_nan};
use seek::Cursors;

/// Prometheus's default lookback delta: 5 minutes.
pub const DEFAULT_LOOKBACK_MS: i64 = 5 * 60 * 1000;
/// The step of a subquery without one (Prometheus: the global evaluation
/// interval, 1 minute by default).
pub const DEFAULT_SUBQUERY_STEP_MS: i64 = 60 * 1000;
/// The most points a range query may ask per series (Prometheus's limit).
pub const MAX_POINTS: i64 = 11_000;

/// An instant vector's element: a float, or a native histogram (`value`
/// then 0 and unused).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Labels,
    pub value: f64,
    pub histogram: Option<Arc<FloatHistogram>>,
}

impl Sample {
    pub fn float(labels: Labels, value: f64) -> Sample {
        Sample {
            labels,
            value,
            histogram: None,
        }
    }

    pub fn histogram(labels: Labels, h: Arc<FloatHistogram>) -> Sample {
        Sample {
            labels,
            value: 0.0,
            histogram: Some(h),
        }
    }

    pub fn is_float(&self) -> bool {
        self.histogram.is_none()
    }
}

/// The float samples of a vector: what operations defined on floats only
/// see (Prometheus ignores a native histogram there).
pub(crate) fn floats(v: Vec<Sample>) -> Vec<Sample> {
    let mut v = v;
    v.retain(Sample::is_float);
    v
}

/// A value of a PromQL expression at one evaluation time.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar(f64),
    String(String),
    Vector(Vec<Sample>),
    /// A range vector and the window it was taken over (for the
    /// extrapolation of `rate` and its kin).
    Matrix {
        series: Vec<Series>,
        range_start: i64,
        range_end: i64,
    },
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "scalar",
            Value::String(_) => "string",
            Value::Vector(_) => "instant vector",
            Value::Matrix { .. } => "range vector",
        }
    }
}

/// Evaluation settings.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub lookback_ms: i64,
    pub subquery_step_ms: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lookback_ms: DEFAULT_LOOKBACK_MS,
            subquery_step_ms: DEFAULT_SUBQUERY_STEP_MS,
        }
    }
}

/// Parses a query, its errors as Prometheus reports them (`bad_data`).
pub fn parse(query: &str) -> Result<Expr, Error> {
    promql_parser::parser::parse(query).map_err(|e| Error::BadData(format!("invalid parameter \"query\": {e}")))
}

/// Evaluates `expr` at `t` (milliseconds).
pub fn instant(source: &dyn SeriesSource, expr: &Expr, t: i64, opts: Options) -> Result<Value, Error> {
    let mut ev = Evaluator::new(source, opts, t, t);
    ev.prefetch(expr)?;
    let v = ev.eval(expr, t)?;
    if let Value::Vector(v) = &v {
        check_unique(v)?;
    }
    Ok(v)
}

/// Evaluates `expr` at every step from `start` to `end` (inclusive,
/// milliseconds): a matrix, series sorted by labels, each with at least one
/// point.
pub fn range(
    source: &dyn SeriesSource,
    expr: &Expr,
    start: i64,
    end: i64,
    step: i64,
    opts: Options,
) -> Result<Vec<Series>, Error> {
    match expr.value_type() {
        ValueType::Vector | ValueType::Scalar => {}
        other => {
            return Err(Error::BadData(format!(
                "invalid expression type \"{}\" for range query, must be Scalar or instant Vector",
                match other {
                    ValueType::Matrix => "range vector",
                    _ => "string",
                }
            )));
        }
    }
    if step <= 0 {
        return Err(Error::BadData(
            "zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
        ));
    }
    if end < start {
        return Err(Error::BadData("end timestamp must not be before start time".into()));
    }
    if (end - start) / step > MAX_POINTS {
        return Err(Error::BadData(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"
                .into(),
        ));
    }
    let mut ev = Evaluator::new(source, opts, start, end);
    ev.prefetch(expr)?;
    ev.compute_steps(expr, start, end, step);
    let mut out: HashMap<Labels, Series> = HashMap::new();
    let mut t = start;
    while t <= end {
        match ev.eval(expr, t)? {
            Value::Scalar(v) => out.entry(Labels::default()).or_default().samples.push((t, v)),
            Value::Vector(v) => {
                check_unique(&v)?;
                for s in v {
                    let e = out
                        .entry(s.labels.clone())
                        .or_insert_with(|| Series::floats(s.labels.clone(), Vec::new()));
                    push_sample(e, t, s);
                }
            }
            other => {
                return Err(Error::Execution(format!(
                    "unexpected {} in a range query",
                    other.type_name()
                )));
            }
        }
        t += step;
    }
    let mut series: Vec<Series> = out.into_values().collect();
    series.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(series)
}

/// Appends an instant vector's sample at `t` to its series.
fn push_sample(series: &mut Series, t: i64, s: Sample) {
    match s.histogram {
        Some(h) => series.histograms.push((t, h)),
        None => series.samples.push((t, s.value)),
    }
}

fn check_unique(v: &[Sample]) -> Result<(), Error> {
    if v.len() < 2 {
        return Ok(());
    }
    let mut seen = std::collections::HashSet::with_capacity(v.len());
    for s in v {
        if !seen.insert(&s.labels) {
            return Err(Error::Execution(
                "vector cannot contain metrics with the same labelset".into(),
            ));
        }
    }
    Ok(())
}

pub(crate) fn ms(d: &Duration) -> i64 {
    d.as_millis() as i64
}

fn offset_ms(o: &Option<Offset>) -> i64 {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => ms(d),
        Some(Offset::Neg(d)) => -ms(d),
    }
}

fn system_ms(t: &SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// The matchers of a selector, its metric name as a `__name__` matcher.
pub fn selector_matchers(vs: &VectorSelector) -> Vec<Matcher> {
    let mut m = vs.matchers.matchers.clone();
    if let Some(n) = &vs.name {
        m.push(Matcher::new(MatchOp::Equal, NAME, n));
    }
    m
}

fn key(vs: &VectorSelector) -> usize {
    vs as *const VectorSelector as usize
}

fn call_key(c: &Call) -> usize {
    c as *const Call as usize
}

fn aggregate_key(a: &AggregateExpr) -> usize {
    a as *const AggregateExpr as usize
}

/// What a query reads before its first step.
enum Read<'e> {
    /// A selector's series over `[lo, hi]`.
    Selector(&'e VectorSelector, i64, i64),
    /// The info series of an `info` call over `[lo, hi]`.
    Info(&'e Call, i64, i64),
}

pub(crate) struct Evaluator<'a> {
    source: &'a dyn SeriesSource,
    pub(crate) opts: Options,
    /// The query's first and last evaluation times (`@ start()`, `@ end()`).
    start: i64,
    end: i64,
    /// Series of each selector (by the address of its AST node), with a
    /// cursor per series.
    data: HashMap<usize, (Vec<Series>, Cursors)>,
    /// Each `info` call's plan and info series (by the address of its
    /// node).
    infos: HashMap<usize, (info::InfoPlan, Vec<Series>, Cursors)>,
    /// The values of calls a range query computed ahead, at each of its
    /// steps (by the address of the call's node; see [`steps`]).
    steps: HashMap<usize, steps::StepValues>,
}

impl<'a> Evaluator<'a> {
    fn new(source: &'a dyn SeriesSource, opts: Options, start: i64, end: i64) -> Self {
        Evaluator {
            source,
            opts,
            start,
            end,
            data: HashMap::new(),
            infos: HashMap::new(),
            steps: HashMap::new(),
        }
    }

    fn at_ms(&self, at: &Option<AtModifier>) -> Option<i64> {
        match at {
            None => None,
            Some(AtModifier::Start) => Some(self.start),
            Some(AtModifier::End) => Some(self.end),
            Some(AtModifier::At(t)) => Some(system_ms(t)),
        }
    }

    /// Reads every selector's series for the times it can be evaluated at.
    fn prefetch(&mut self, expr: &Expr) -> Result<(), Error> {
        let mut reads = Vec::new();
        self.plan(expr, self.start, self.end, &mut reads);
        for read in reads {
            match read {
                Read::Selector(vs, lo, hi) => {
                    let selected = self.select(&selector_matchers(vs), lo, hi)?;
                    self.data.insert(key(vs), selected);
                }
                Read::Info(c, lo, hi) => {
                    let plan = info::InfoPlan::of(c)?;
                    let (series, cursors) = self.select(&plan.select, lo, hi)?;
                    self.infos.insert(call_key(c), (plan, series, cursors));
                }
            }
        }
        Ok(())
    }

    /// The series `matchers` select over `[lo, hi]`, each with a cursor.
    fn select(&self, matchers: &[Matcher], lo: i64, hi: i64) -> Result<(Vec<Series>, Cursors), Error> {
        let mut series = self.source.select(matchers, lo, hi).map_err(Error::Internal)?;
        // In label order, as Prometheus's storage hands series over: what
        // `limitk` keeps is the first k of its input. (Unstable: a source
        // answers a label set once.)
        series.sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
        let cursors = Cursors::new(series.len());
        Ok((series, cursors))
    }

    /// The sample windows each selector (and `info` call) under `expr`
    /// needs when `expr` is evaluated at times in `[lo, hi]`.
    fn plan<'e>(&self, expr: &'e Expr, lo: i64, hi: i64, out: &mut Vec<Read<'e>>) {
        let refs = |at: &Option<AtModifier>, off: &Option<Offset>| {
            let o = offset_ms(off);
            match self.at_ms(at) {
                Some(a) => (a - o, a - o),
                None => (lo - o, hi - o),
            }
        };
        match expr {
            Expr::VectorSelector(vs) => {
                let (a, b) = refs(&vs.at, &vs.offset);
                out.push(Read::Selector(vs, a - self.opts.lookback_ms, b));
            }
            Expr::MatrixSelector(m) => {
                let (a, b) = refs(&m.vs.at, &m.vs.offset);
                out.push(Read::Selector(&m.vs, a - ms(&m.range), b));
            }
            Expr::Subquery(sq) => {
                let (a, b) = refs(&sq.at, &sq.offset);
                self.plan(&sq.expr, a - ms(&sq.range), b, out);
            }
            Expr::Aggregate(a) => {
                self.plan(&a.expr, lo, hi, out);
                if let Some(p) = &a.param {
                    self.plan(p, lo, hi, out);
                }
            }
            Expr::Unary(u) => self.plan(&u.expr, lo, hi, out),
            Expr::Binary(b) => {
                self.plan(&b.lhs, lo, hi, out);
                self.plan(&b.rhs, lo, hi, out);
            }
            Expr::Paren(p) => self.plan(&p.expr, lo, hi, out),
            // The second argument of `info` selects info series, read at
            // each step as an instant selector reads.
            Expr::Call(c) if c.func.name == "info" => {
                if let Some(a) = c.args.args.first() {
                    self.plan(a, lo, hi, out);
                }
                out.push(Read::Info(c, lo - self.opts.lookback_ms, hi));
            }
            Expr::Call(c) => {
                for a in &c.args.args {
                    self.plan(a, lo, hi, out);
                }
            }
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
        }
    }

    /// A selector's series and their cursors (none before `prefetch`).
    fn series(&self, vs: &VectorSelector) -> Option<&(Vec<Series>, Cursors)> {
        self.data.get(&key(vs))
    }

    /// The instant vector of a selector at `t`; with `times`, the sample
    /// times too (for `timestamp()`).
    pub(crate) fn vector_selector(&self, vs: &VectorSelector, t: i64) -> Vec<(Sample, i64)> {
        let r = self.at_ms(&vs.at).unwrap_or(t) - offset_ms(&vs.offset);
        let mut out = Vec::new();
        let Some((series, cursors)) = self.series(vs) else {
            return out;
        };
        for (n, s) in series.iter().enumerate() {
            let i = cursors.seek(n, &s.samples, |ts| ts <= r);
            let float = i.checked_sub(1).map(|i| s.samples[i]);
            // The newest histogram at or before `r`, if newer than the
            // newest float.
            let h = s.histograms.partition_point(|x| x.0 <= r);
            let histogram = h
                .checked_sub(1)
                .map(|h| &s.histograms[h])
                .filter(|(ht, _)| float.is_none_or(|(ft, _)| *ht > ft));
            let (sample, ts) = match (histogram, float) {
                (Some((ht, h)), _) => (Sample::histogram(s.labels.clone(), h.clone()), *ht),
                (None, Some((ts, v))) if !is_stale_nan(v) => (Sample::float(s.labels.clone(), v), ts),
                _ => continue,
            };
            if ts < r - self.opts.lookback_ms {
                continue;
            }
            out.push((sample, ts));
        }
        out
    }

    fn matrix_selector(&self, vs: &VectorSelector, range: i64, t: i64) -> Value {
        let end = self.at_ms(&vs.at).unwrap_or(t) - offset_ms(&vs.offset);
        let start = end - range;
        let mut series = Vec::new();
        if let Some((selected, cursors)) = self.series(vs) {
            for (n, s) in selected.iter().enumerate() {
                let lo = cursors.seek(n, &s.samples, |ts| ts < start);
                let hi = lo + seek::seek(&s.samples[lo..], 0, |ts| ts <= end);
                let samples: Vec<(i64, f64)> = s.samples[lo..hi]
                    .iter()
                    .copied()
                    .filter(|(_, v)| !is_stale_nan(*v))
                    .collect();
                let histograms = if s.histograms.is_empty() {
                    Vec::new()
                } else {
                    let lo = s.histograms.partition_point(|x| x.0 < start);
                    let hi = s.histograms.partition_point(|x| x.0 <= end);
                    s.histograms[lo..hi].to_vec()
                };
                if !samples.is_empty() || !histograms.is_empty() {
                    series.push(Series {
                        labels: s.labels.clone(),
                        samples,
                        histograms,
                    });
                }
            }
        }
        Value::Matrix {
            series,
            range_start: start,
            range_end: end,
        }
    }

    fn subquery(&mut self, sq: &SubqueryExpr, t: i64) -> Result<Value, Error> {
        let end = self.at_ms(&sq.at).unwrap_or(t) - offset_ms(&sq.offset);
        let start = end - ms(&sq.range);
        let step = sq
            .step
            .as_ref()
            .map(ms)
            .filter(|s| *s > 0)
            .unwrap_or(self.opts.subquery_step_ms);
        let mut first = step * (start / step);
        if first < start {
            first += step;
        }
        let mut by: HashMap<Labels, Series> = HashMap::new();
        let mut order: Vec<Labels> = Vec::new();
        let mut it = first;
        while it <= end {
            let v = match self.eval(&sq.expr, it)? {
                Value::Scalar(v) => vec![Sample::float(Labels::default(), v)],
                Value::Vector(v) => v,
                other => return Err(Error::Execution(format!("subquery of a {}", other.type_name()))),
            };
            for s in v {
                let e = by.entry(s.labels.clone()).or_insert_with(|| {
                    order.push(s.labels.clone());
                    Series::floats(s.labels.clone(), Vec::new())
                });
                push_sample(e, it, s);
            }
            it += step;
        }
        let series = order.into_iter().filter_map(|l| by.remove(&l)).collect();
        Ok(Value::Matrix {
            series,
            range_start: start,
            range_end: end,
        })
    }

    pub(crate) fn eval(&mut self, e: &Expr, t: i64) -> Result<Value, Error> {
        match e {
            Expr::NumberLiteral(n) => Ok(Value::Scalar(n.val)),
            Expr::StringLiteral(s) => Ok(Value::String(s.val.clone())),
            Expr::Paren(p) => self.eval(&p.expr, t),
            Expr::VectorSelector(vs) => Ok(Value::Vector(
                self.vector_selector(vs, t).into_iter().map(|(s, _)| s).collect(),
            )),
            Expr::MatrixSelector(m) => Ok(self.matrix_selector(&m.vs, ms(&m.range), t)),
            Expr::Subquery(sq) => self.subquery(sq, t),
            Expr::Unary(u) => match self.eval(&u.expr, t)? {
                Value::Scalar(v) => Ok(Value::Scalar(-v)),
                Value::Vector(v) => Ok(Value::Vector(
                    floats(v)
                        .into_iter()
                        .map(|s| Sample::float(s.labels.without_name(), -s.value))
                        .collect(),
                )),
                other => Err(Error::Execution(format!("unary minus of a {}", other.type_name()))),
            },
            Expr::Binary(b) => self.binary(b, t),
            Expr::Aggregate(a) => self.aggregate(a, t),
            Expr::Call(c) => funcs::call(self, c, t),
            Expr::Extension(_) => Err(Error::BadData("unsupported expression".into())),
        }
    }

    pub(crate) fn eval_vector(&mut self, e: &Expr, t: i64) -> Result<Vec<Sample>, Error> {
        match self.eval(e, t)? {
            Value::Vector(v) => Ok(v),
            other => Err(Error::Execution(format!(
                "expected an instant vector, got a {}",
                other.type_name()
            ))),
        }
    }

    pub(crate) fn eval_scalar(&mut self, e: &Expr, t: i64) -> Result<f64, Error> {
        match self.eval(e, t)? {
            Value::Scalar(v) => Ok(v),
            other => Err(Error::Execution(format!(
                "expected a scalar, got a {}",
                other.type_name()
            ))),
        }
    }

    pub(crate) fn eval_string(&mut self, e: &Expr, t: i64) -> Result<String, Error> {
        match self.eval(e, t)? {
            Value::String(v) => Ok(v),
            other => Err(Error::Execution(format!(
                "expected a string, got a {}",
                other.type_name()
            ))),
        }
    }

    fn binary(&mut self, b: &BinaryExpr, t: i64) -> Result<Value, Error> {
        let op = b.op;
        let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
        let lhs = self.eval(&b.lhs, t)?;
        let rhs = self.eval(&b.rhs, t)?;
        match (lhs, rhs) {
            (Value::Scalar(l), Value::Scalar(r)) => {
                let (v, keep) = scalar_op(op, l, r)?;
                if is_comparison(op) {
                    if return_bool {
                        return Ok(Value::Scalar(if keep { 1.0 } else { 0.0 }));
                    }
                    return Err(Error::BadData(
                        "comparisons between scalars must use BOOL modifier".into(),
                    ));
                }
                Ok(Value::Scalar(v))
            }
            (Value::Vector(v), Value::Scalar(s)) => vector_scalar(op, v, s, false, return_bool).map(Value::Vector),
            (Value::Scalar(s), Value::Vector(v)) => vector_scalar(op, v, s, true, return_bool).map(Value::Vector),
            (Value::Vector(l), Value::Vector(r)) => {
                let on = b.modifier.as_ref().and_then(|m| m.matching.as_ref());
                let card = b
                    .modifier
                    .as_ref()
                    .map(|m| m.card.clone())
                    .unwrap_or(VectorMatchCardinality::OneToOne);
                let id = op.id();
                if id == token::T_LAND || id == token::T_LOR || id == token::T_LUNLESS {
                    return Ok(Value::Vector(set_op(id, l, r, on)));
                }
                vector_vector(op, l, r, on, &card, return_bool).map(Value::Vector)
            }
            (l, r) => Err(Error::Execution(format!(
                "binary operator between a {} and a {}",
                l.type_name(),
                r.type_name()
            ))),
        }
    }

    fn aggregate(&mut self, a: &AggregateExpr, t: i64) -> Result<Value, Error> {
        if let Some(out) = self.computed_step(aggregate_key(a), t) {
            return Ok(Value::Vector(out));
        }
        let id = a.op.id();
        let param = match &a.param {
            Some(p) if id == token::T_COUNT_VALUES => Param::Str(self.eval_string(p, t)?),
            Some(p) => Param::Num(self.eval_scalar(p, t)?),
            None => Param::None,
        };
        let v = self.eval_vector(&a.expr, t)?;
        funcs::aggregate(id, v, a.modifier.as_ref(), param).map(Value::Vector)
    }
}

pub(crate) enum Param {
    None,
    Num(f64),
    Str(String),
}

pub(crate) fn is_comparison(op: TokenType) -> bool {
    op.is_comparison_operator()
}

/// `l op r`, and for comparisons whether it holds (the value is then `l`).
fn scalar_op(op: TokenType, l: f64, r: f64) -> Result<(f64, bool), Error> {
    Ok(match op.id() {
        token::T_ADD => (l + r, true),
        token::T_SUB => (l - r, true),
        token::T_MUL => (l * r, true),
        token::T_DIV => (l / r, true),
        token::T_MOD => (l % r, true),
        token::T_POW => (l.powf(r), true),
        token::T_EQLC => (l, l == r),
        token::T_NEQ => (l, l != r),
        token::T_GTR => (l, l > r),
        token::T_LSS => (l, l < r),
        token::T_GTE => (l, l >= r),
        token::T_LTE => (l, l <= r),
        token::T_ATAN2 => (l.atan2(r), true),
        _ => return Err(Error::BadData(format!("operator {op} is not supported here"))),
    })
}

/// Arithmetic drops the metric name; comparisons and set operators keep it.
fn drops_name(op: TokenType) -> bool {
    matches!(
        op.id(),
        token::T_ADD | token::T_SUB | token::T_MUL | token::T_DIV | token::T_MOD | token::T_POW | token::T_ATAN2
    )
}

/// `l op r` where a side is a native histogram (Prometheus 3): the sum or
/// difference of two histograms, a histogram times a float (either way
/// round) or divided by one. `None` for any other operation on a
/// histogram, comparisons included.
fn histogram_op(op: TokenType, l: &Sample, r: &Sample) -> Option<FloatHistogram> {
    let mut h = match (op.id(), l.histogram.as_deref(), r.histogram.as_deref()) {
        (token::T_ADD, Some(a), Some(b)) => a.add(b),
        (token::T_SUB, Some(a), Some(b)) => a.sub(b),
        (token::T_MUL, Some(a), None) => scaled(a, r.value),
        (token::T_MUL, None, Some(b)) => scaled(b, l.value),
        (token::T_DIV, Some(a), None) => scaled(a, 1.0 / r.value),
        _ => return None,
    };
    h.compact();
    Some(h)
}

fn scaled(h: &FloatHistogram, f: f64) -> FloatHistogram {
    let mut h = h.clone();
    h.scale(f);
    h
}

fn vector_scalar(op: TokenType, v: Vec<Sample>, s: f64, swap: bool, return_bool: bool) -> Result<Vec<Sample>, Error> {
    let mut out = Vec::with_capacity(v.len());
    for mut x in v {
        if x.histogram.is_some() {
            let scalar = Sample::float(Labels::default(), s);
            let (l, r) = if swap { (&scalar, &x) } else { (&x, &scalar) };
            if let Some(h) = histogram_op(op, l, r).filter(|_| !return_bool) {
                out.push(Sample::histogram(x.labels.without_name(), Arc::new(h)));
            }
            continue;
        }
        let (l, r) = if swap { (s, x.value) } else { (x.value, s) };
        let (mut value, keep) = scalar_op(op, l, r)?;
        // A comparison keeps the vector's value, on whichever side it is.
        if is_comparison(op) && swap {
            value = r;
        }
        if return_bool {
            value = if keep { 1.0 } else { 0.0 };
        } else if !keep {
            continue;
        }
        if drops_name(op) || return_bool {
            x.labels.remove(NAME);
        }
        x.value = value;
        out.push(x);
    }
    Ok(out)
}

/// The labels two sides are matched on.
fn signature(l: &Labels, on: Option<&LabelModifier>) -> String {
    let mut s = String::new();
    let mut push = |k: &str, v: &str| {
        s.push_str(k);
        s.push('\u{1}');
        s.push_str(v);
        s.push('\u{2}');
    };
    match on {
        Some(LabelModifier::Include(names)) => {
            let mut names: Vec<&String> = names.labels.iter().collect();
            names.sort();
            names.dedup();
            for n in names {
                if let Some(v) = l.get(n) {
                    push(n, v);
                }
            }
        }
        Some(LabelModifier::Exclude(names)) => {
            for (k, v) in l.pairs() {
                if k != NAME && !names.labels.contains(k) {
                    push(k, v);
                }
            }
        }
        None => {
            for (k, v) in l.pairs() {
                if k != NAME {
                    push(k, v);
                }
            }
        }
    }
    s
}

fn set_op(id: u16, l: Vec<Sample>, r: Vec<Sample>, on: Option<&LabelModifier>) -> Vec<Sample> {
    let rsigs: std::collections::HashSet<String> = r.iter().map(|s| signature(&s.labels, on)).collect();
    match id {
        token::T_LAND => l
            .into_iter()
            .filter(|s| rsigs.contains(&signature(&s.labels, on)))
            .collect(),
        token::T_LUNLESS => l
            .into_iter()
            .filter(|s| !rsigs.contains(&signature(&s.labels, on)))
            .collect(),
        _ => {
            let lsigs: std::collections::HashSet<String> = l.iter().map(|s| signature(&s.labels, on)).collect();
            let mut out = l;
            out.extend(r.into_iter().filter(|s| !lsigs.contains(&signature(&s.labels, on))));
            out
        }
    }
}

fn vector_vector(
    op: TokenType,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
    on: Option<&LabelModifier>,
    card: &VectorMatchCardinality,
    return_bool: bool,
) -> Result<Vec<Sample>, Error> {
    let one_to_many = matches!(card, VectorMatchCardinality::OneToMany(_));
    // Many-to-one is the general case: for one-to-many the sides swap.
    let (many, one) = if one_to_many { (rhs, lhs) } else { (lhs, rhs) };
    let mut one_by: HashMap<String, Sample> = HashMap::with_capacity(one.len());
    for s in one {
        let sig = signature(&s.labels, on);
        if let Some(d) = one_by.get(&sig) {
            let side = if one_to_many { "left" } else { "right" };
            return Err(Error::Execution(format!(
                "found duplicate series for the match group on the {side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                s.labels, d.labels
            )));
        }
        one_by.insert(sig, s);
    }
    let include = card.labels().map(|l| l.labels.clone());
    let mut matched: HashMap<String, std::collections::HashSet<Labels>> = HashMap::new();
    let mut out = Vec::new();
    for ls in many {
        let sig = signature(&ls.labels, on);
        let Some(rs) = one_by.get(&sig) else { continue };
        let (l, r) = if one_to_many { (rs, &ls) } else { (&ls, rs) };
        let (value, histogram) = if l.is_float() && r.is_float() {
            let (mut value, keep) = scalar_op(op, l.value, r.value)?;
            if return_bool {
                value = if keep { 1.0 } else { 0.0 };
            } else if !keep {
                continue;
            }
            (value, None)
        } else {
            match histogram_op(op, l, r).filter(|_| !return_bool) {
                Some(h) => (0.0, Some(Arc::new(h))),
                None => continue,
            }
        };
        // The result's labels: the "many" side's, narrowed for one-to-one
        // matching to what was matched on, plus any group_x labels from the
        // "one" side.
        let mut m = ls.labels.clone();
        if drops_name(op) || return_bool {
            m.remove(NAME);
        }
        if matches!(card, VectorMatchCardinality::OneToOne) {
            match on {
                Some(LabelModifier::Include(names)) => {
                    m = m.filtered(|k| names.labels.iter().any(|n| n == k));
                }
                Some(LabelModifier::Exclude(names)) => {
                    m = m.filtered(|k| !names.labels.iter().any(|n| n == k));
                }
                None => {}
            }
        }
        if let Some(inc) = &include {
            for n in inc {
                match rs.labels.get(n) {
                    Some(v) => {
                        let v = v.to_string();
                        m.set(n, &v)
                    }
                    None => m.remove(n),
                }
            }
        }
        let seen = matched.entry(sig).or_default();
        if matches!(card, VectorMatchCardinality::OneToOne) {
            if !seen.is_empty() {
                return Err(Error::Execution(
                    "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"
                        .into(),
                ));
            }
            seen.insert(Labels::default());
        } else if !seen.insert(m.clone()) {
            return Err(Error::Execution(
                "multiple matches for labels: grouping labels must ensure unique matches".into(),
            ));
        }
        out.push(match histogram {
            Some(h) => Sample::histogram(m, h),
            None => Sample::float(m, value),
        });
    }
    Ok(out)
}
