//! PromQL functions and aggregation operators, as Prometheus 2.x computes
//! them (the same float operations in the same order where it matters:
//! Kahan-compensated sums over time, the incremental mean of `avg`).

use std::collections::HashMap;
use std::sync::Arc;

use promql_parser::parser::token;
use promql_parser::parser::{Call, Expr, LabelModifier};

use super::{Evaluator, Param, Sample, Value, floats};
use crate::{Error, FloatHistogram, Labels, NAME, SampleValue, Series, format_float};

pub(super) fn unwrap_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unwrap_parens(&p.expr),
        e => e,
    }
}

/// Go's `math.Max`: NaN wins.
pub(crate) fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

/// Go's `math.Min`: NaN wins.
pub(crate) fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// Whether a function of a range vector keeps its series' name: Prometheus
/// drops it for all but `last_over_time` and `first_over_time`.
pub(crate) fn keeps_name(name: &str) -> bool {
    matches!(name, "last_over_time" | "first_over_time")
}

pub(crate) fn call(ev: &mut Evaluator<'_>, c: &Call, t: i64) -> Result<Value, Error> {
    let name = c.func.name;
    let args = &c.args.args;
    let arg = |i: usize| -> Result<&Expr, Error> {
        args.get(i)
            .map(|b| b.as_ref())
            .ok_or_else(|| Error::BadData(format!("function {name}: missing argument {}", i + 1)))
    };
    // Functions of a range vector, one output sample per input series.
    if let Some(f) = over_time(name) {
        if let Some(out) = ev.computed_step(super::call_key(c), t) {
            return Ok(Value::Vector(out));
        }
        let (series, rs, re) = matrix(ev, arg(0)?, t)?;
        let extra = match name {
            "predict_linear" => Some(ev.eval_scalar(arg(1)?, t)?),
            _ => None,
        };
        let mut out = Vec::with_capacity(series.len());
        for s in series {
            let c = Ctx {
                t,
                range_start: rs,
                range_end: re,
                arg: extra,
            };
            let v = if !s.histograms.is_empty()
                && let Some(v) = of_histogram_range(name, &s, c)
            {
                v
            } else if s.samples.is_empty() {
                None
            } else {
                f(&s.samples, c).map(SampleValue::Float)
            };
            let labels = || {
                if keeps_name(name) {
                    s.labels.clone()
                } else {
                    s.labels.without_name()
                }
            };
            match v {
                Some(SampleValue::Float(v)) => out.push(Sample::float(labels(), v)),
                Some(SampleValue::Histogram(h)) => out.push(Sample::histogram(labels(), h)),
                None => {}
            }
        }
        return Ok(Value::Vector(out));
    }
    match name {
        "quantile_over_time" => {
            let q = ev.eval_scalar(arg(0)?, t)?;
            let (series, _, _) = matrix(ev, arg(1)?, t)?;
            Ok(Value::Vector(
                series
                    .into_iter()
                    .filter(|s| !s.samples.is_empty())
                    .map(|s| {
                        let value = quantile(q, s.samples.iter().map(|x| x.1).collect());
                        Sample::float(s.labels.without_name(), value)
                    })
                    .collect(),
            ))
        }
        "double_exponential_smoothing" => {
            let (series, _, _) = matrix(ev, arg(0)?, t)?;
            let sf = ev.eval_scalar(arg(1)?, t)?;
            let tf = ev.eval_scalar(arg(2)?, t)?;
            // As Prometheus checks them (a NaN passes).
            if sf <= 0.0 || sf >= 1.0 {
                return Err(Error::Execution(format!(
                    "invalid smoothing factor. Expected: 0 < sf < 1, got: {sf}"
                )));
            }
            if tf <= 0.0 || tf >= 1.0 {
                return Err(Error::Execution(format!(
                    "invalid trend factor. Expected: 0 < tf < 1, got: {tf}"
                )));
            }
            Ok(Value::Vector(
                series
                    .into_iter()
                    .filter_map(|s| {
                        let value = double_exponential_smoothing(&s.samples, sf, tf)?;
                        Some(Sample::float(s.labels.without_name(), value))
                    })
                    .collect(),
            ))
        }
        "absent_over_time" => {
            let (series, _, _) = matrix(ev, arg(0)?, t)?;
            Ok(Value::Vector(absent(series.is_empty(), arg(0)?)))
        }
        "info" => ev.info(c, t).map(Value::Vector),
        "absent" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            Ok(Value::Vector(absent(v.is_empty(), arg(0)?)))
        }
        "time" => Ok(Value::Scalar(t as f64 / 1000.0)),
        "pi" => Ok(Value::Scalar(std::f64::consts::PI)),
        "scalar" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            Ok(Value::Scalar(if v.len() == 1 && v[0].is_float() {
                v[0].value
            } else {
                f64::NAN
            }))
        }
        "vector" => {
            let v = ev.eval_scalar(arg(0)?, t)?;
            Ok(Value::Vector(vec![Sample::float(Labels::default(), v)]))
        }
        "timestamp" => {
            let a = unwrap_parens(arg(0)?);
            if let Expr::VectorSelector(vs) = a {
                return Ok(Value::Vector(
                    ev.vector_selector(vs, t)
                        .into_iter()
                        .map(|(s, ts)| Sample::float(s.labels.without_name(), ts as f64 / 1000.0))
                        .collect(),
                ));
            }
            let v = ev.eval_vector(a, t)?;
            Ok(Value::Vector(map_drop(v, |_| t as f64 / 1000.0)))
        }
        "sort_by_label" | "sort_by_label_desc" => {
            let mut v = ev.eval_vector(arg(0)?, t)?;
            let mut by = Vec::with_capacity(args.len() - 1);
            for i in 1..args.len() {
                by.push(ev.eval_string(arg(i)?, t)?);
            }
            // By each label in turn (a missing label is ""), numbers
            // within values compared as numbers; ties by the whole label
            // set, so the order is total.
            v.sort_by(|a, b| {
                let o = by
                    .iter()
                    .map(|n| natural_cmp(a.labels.get(n).unwrap_or(""), b.labels.get(n).unwrap_or("")))
                    .find(|o| o.is_ne())
                    .unwrap_or_else(|| a.labels.cmp(&b.labels));
                if name == "sort_by_label" { o } else { o.reverse() }
            });
            Ok(Value::Vector(v))
        }
        "sort" | "sort_desc" => {
            let mut v = ev.eval_vector(arg(0)?, t)?;
            // NaNs last either way, as Prometheus sorts them.
            v.sort_by(|a, b| {
                let o = match (a.value.is_nan(), b.value.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => return std::cmp::Ordering::Greater,
                    (false, true) => return std::cmp::Ordering::Less,
                    _ => a.value.partial_cmp(&b.value).unwrap_or(std::cmp::Ordering::Equal),
                };
                if name == "sort" { o } else { o.reverse() }
            });
            Ok(Value::Vector(v))
        }
        "clamp" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            let lo = ev.eval_scalar(arg(1)?, t)?;
            let hi = ev.eval_scalar(arg(2)?, t)?;
            if hi < lo {
                return Ok(Value::Vector(Vec::new()));
            }
            Ok(Value::Vector(map_drop(v, |x| go_max(lo, go_min(hi, x)))))
        }
        "clamp_min" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            let lo = ev.eval_scalar(arg(1)?, t)?;
            Ok(Value::Vector(map_drop(v, |x| go_max(x, lo))))
        }
        "clamp_max" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            let hi = ev.eval_scalar(arg(1)?, t)?;
            Ok(Value::Vector(map_drop(v, |x| go_min(x, hi))))
        }
        "round" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            let to = if args.len() > 1 {
                ev.eval_scalar(arg(1)?, t)?
            } else {
                1.0
            };
            let inv = 1.0 / to;
            Ok(Value::Vector(map_drop(v, |x| (x * inv + 0.5).floor() / inv)))
        }
        "label_replace" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            let dst = ev.eval_string(arg(1)?, t)?;
            let repl = ev.eval_string(arg(2)?, t)?;
            let src = ev.eval_string(arg(3)?, t)?;
            let re_src = ev.eval_string(arg(4)?, t)?;
            let re = regex::Regex::new(&format!("^(?:{re_src})$"))
                .map_err(|e| Error::BadData(format!("invalid regular expression in label_replace(): {re_src}: {e}")))?;
            if !valid_label_name(&dst) {
                return Err(Error::BadData(format!(
                    "invalid destination label name in label_replace(): {dst}"
                )));
            }
            let mut out = Vec::with_capacity(v.len());
            for mut s in v {
                let val = s.labels.get(&src).unwrap_or("").to_string();
                if let Some(caps) = re.captures(&val) {
                    let mut res = String::new();
                    caps.expand(&repl, &mut res);
                    s.labels.set(&dst, &res);
                }
                out.push(s);
            }
            Ok(Value::Vector(out))
        }
        "label_join" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            let dst = ev.eval_string(arg(1)?, t)?;
            let sep = ev.eval_string(arg(2)?, t)?;
            let mut srcs = Vec::new();
            for i in 3..args.len() {
                srcs.push(ev.eval_string(arg(i)?, t)?);
            }
            if !valid_label_name(&dst) {
                return Err(Error::BadData(format!(
                    "invalid destination label name in label_join(): {dst}"
                )));
            }
            Ok(Value::Vector(
                v.into_iter()
                    .map(|mut s| {
                        let joined = srcs
                            .iter()
                            .map(|n| s.labels.get(n).unwrap_or(""))
                            .collect::<Vec<_>>()
                            .join(&sep);
                        s.labels.set(&dst, &joined);
                        s
                    })
                    .collect(),
            ))
        }
        "histogram_quantile" => {
            let q = ev.eval_scalar(arg(0)?, t)?;
            let v = ev.eval_vector(arg(1)?, t)?;
            Ok(Value::Vector(histogram_quantile(q, v)))
        }
        "histogram_count" | "histogram_sum" | "histogram_avg" | "histogram_stddev" | "histogram_stdvar" => {
            let v = ev.eval_vector(arg(0)?, t)?;
            Ok(Value::Vector(of_histograms(v, |h| match name {
                "histogram_count" => h.count,
                "histogram_sum" => h.sum,
                "histogram_avg" => h.sum / h.count,
                "histogram_stddev" => histogram_variance(h).sqrt(),
                _ => histogram_variance(h),
            })))
        }
        "histogram_fraction" => {
            let lower = ev.eval_scalar(arg(0)?, t)?;
            let upper = ev.eval_scalar(arg(1)?, t)?;
            let v = ev.eval_vector(arg(2)?, t)?;
            Ok(Value::Vector(of_histograms(v, |h| h.fraction(lower, upper))))
        }
        "day_of_month" | "day_of_week" | "day_of_year" | "days_in_month" | "hour" | "minute" | "month" | "year" => {
            let v = if args.is_empty() {
                vec![Sample::float(Labels::default(), t as f64 / 1000.0)]
            } else {
                ev.eval_vector(arg(0)?, t)?
            };
            Ok(Value::Vector(map_drop(v, |x| date_part(name, x))))
        }
        _ => {
            if let Some(f) = math(name) {
                let v = ev.eval_vector(arg(0)?, t)?;
                return Ok(Value::Vector(map_drop(v, f)));
            }
            Err(Error::BadData(format!(
                "function {name:?} is not supported by Skein yet"
            )))
        }
    }
}

fn valid_label_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch == '_' || ch.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

fn map_drop(v: Vec<Sample>, f: impl Fn(f64) -> f64) -> Vec<Sample> {
    floats(v)
        .into_iter()
        .map(|s| Sample::float(s.labels.without_name(), f(s.value)))
        .collect()
}

fn matrix(ev: &mut Evaluator<'_>, e: &Expr, t: i64) -> Result<(Vec<Series>, i64, i64), Error> {
    match ev.eval(e, t)? {
        Value::Matrix {
            series,
            range_start,
            range_end,
        } => Ok((series, range_start, range_end)),
        _ => Err(Error::BadData("expected a range vector".into())),
    }
}

/// `absent()`'s answer: when its argument is empty, one sample whose
/// labels are the selector's equality matchers (a name matched twice
/// dropped).
fn absent(empty: bool, arg: &Expr) -> Vec<Sample> {
    if !empty {
        return Vec::new();
    }
    let vs = match unwrap_parens(arg) {
        Expr::VectorSelector(vs) => Some(vs),
        Expr::MatrixSelector(m) => Some(&m.vs),
        _ => None,
    };
    let mut labels = Labels::default();
    if let Some(vs) = vs {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for m in &vs.matchers.matchers {
            *seen.entry(m.name.as_str()).or_default() += 1;
        }
        for m in &vs.matchers.matchers {
            if m.name != NAME && matches!(m.op, promql_parser::label::MatchOp::Equal) && seen[m.name.as_str()] == 1 {
                labels.set(&m.name, &m.value);
            }
        }
    }
    vec![Sample::float(labels, 1.0)]
}

/// Holt's linear smoothing of a series (Prometheus's
/// `double_exponential_smoothing`, `holt_winters` before 3.0), step for step
/// as Prometheus computes it: the smoothed value after the last sample, or
/// `None` with fewer than two samples.
fn double_exponential_smoothing(samples: &[(i64, f64)], sf: f64, tf: f64) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let (mut s0, mut s1) = (0.0, samples[0].1);
    let mut b = samples[1].1 - samples[0].1;
    for (i, &(_, v)) in samples.iter().enumerate().skip(1) {
        let x = sf * v;
        // The trend: the first difference at first, then smoothed.
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        (s0, s1) = (s1, x + y);
    }
    Some(s1)
}

#[derive(Clone, Copy)]
pub(super) struct Ctx {
    pub(super) t: i64,
    pub(super) range_start: i64,
    pub(super) range_end: i64,
    pub(super) arg: Option<f64>,
}

pub(super) type OverTime = fn(&[(i64, f64)], Ctx) -> Option<f64>;

pub(super) fn over_time(name: &str) -> Option<OverTime> {
    Some(match name {
        "rate" => |s, c| extrapolated(s, c, true, true),
        "increase" => |s, c| extrapolated(s, c, true, false),
        "delta" => |s, c| extrapolated(s, c, false, false),
        "irate" => |s, _| instant_value(s, true),
        "idelta" => |s, _| instant_value(s, false),
        "deriv" => |s, _| (s.len() >= 2).then(|| linear_regression(s, s[0].0).0),
        "predict_linear" => |s, c| {
            (s.len() >= 2).then(|| {
                let (slope, intercept) = linear_regression(s, c.t);
                slope * c.arg.unwrap_or(0.0) + intercept
            })
        },
        "avg_over_time" => |s, _| {
            let (mut mean, mut count, mut c) = (0.0f64, 0.0f64, 0.0f64);
            for &(_, v) in s {
                count += 1.0;
                if mean.is_infinite() {
                    if v.is_infinite() && (mean > 0.0) == (v > 0.0) {
                        continue;
                    }
                    if !v.is_infinite() && !v.is_nan() {
                        continue;
                    }
                }
                (mean, c) = kahan_inc(v / count - mean / count, mean, c);
            }
            Some(if mean.is_infinite() { mean } else { mean + c })
        },
        "sum_over_time" => |s, _| {
            let (mut sum, mut c) = (0.0f64, 0.0f64);
            for &(_, v) in s {
                (sum, c) = kahan_inc(v, sum, c);
            }
            Some(if sum.is_infinite() { sum } else { sum + c })
        },
        "count_over_time" => |s, _| Some(s.len() as f64),
        "min_over_time" => |s, _| {
            let mut m = s[0].1;
            for &(_, v) in s {
                if v < m || m.is_nan() {
                    m = v;
                }
            }
            Some(m)
        },
        "max_over_time" => |s, _| {
            let mut m = s[0].1;
            for &(_, v) in s {
                if v > m || m.is_nan() {
                    m = v;
                }
            }
            Some(m)
        },
        "last_over_time" => |s, _| s.last().map(|x| x.1),
        "first_over_time" => |s, _| s.first().map(|x| x.1),
        // Timestamps in seconds; of the newest sample among equals.
        "ts_of_first_over_time" => |s, _| s.first().map(|x| seconds(x.0)),
        "ts_of_last_over_time" => |s, _| s.last().map(|x| seconds(x.0)),
        "ts_of_max_over_time" => |s, _| Some(seconds(ts_of_extreme(s, |v, m| v >= m || m.is_nan()))),
        "ts_of_min_over_time" => |s, _| Some(seconds(ts_of_extreme(s, |v, m| v <= m || m.is_nan()))),
        "mad_over_time" => |s, _| {
            // A NaN makes the median, and so the deviation, undefined.
            if s.iter().any(|x| x.1.is_nan()) {
                return Some(f64::NAN);
            }
            let median = quantile(0.5, s.iter().map(|x| x.1).collect());
            Some(quantile(0.5, s.iter().map(|x| (x.1 - median).abs()).collect()))
        },
        "present_over_time" => |_, _| Some(1.0),
        "stddev_over_time" => |s, _| Some(stdvar_over_time(s).sqrt()),
        "stdvar_over_time" => |s, _| Some(stdvar_over_time(s)),
        "changes" => |s, _| {
            let mut n = 0.0;
            for w in s.windows(2) {
                let (p, c) = (w[0].1, w[1].1);
                if c != p && !(c.is_nan() && p.is_nan()) {
                    n += 1.0;
                }
            }
            Some(n)
        },
        "resets" => |s, _| Some(s.windows(2).filter(|w| w[1].1 < w[0].1).count() as f64),
        _ => return None,
    })
}

/// Milliseconds to Prometheus's float seconds.
fn seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

/// The time of the sample `replaces` keeps: walking the samples, a sample
/// whose value `replaces(value, kept)` takes the place of the kept one.
fn ts_of_extreme(s: &[(i64, f64)], replaces: fn(f64, f64) -> bool) -> i64 {
    let (mut kept, mut at) = (s[0].1, s[0].0);
    for &(t, v) in s {
        if replaces(v, kept) {
            (kept, at) = (v, t);
        }
    }
    at
}

fn stdvar_over_time(s: &[(i64, f64)]) -> f64 {
    let (mut count, mut mean, mut cmean, mut aux, mut caux) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for &(_, v) in s {
        count += 1.0;
        let delta = v - (mean + cmean);
        (mean, cmean) = kahan_inc(delta / count, mean, cmean);
        (aux, caux) = kahan_inc(delta * (v - (mean + cmean)), aux, caux);
    }
    (aux + caux) / count
}

/// `rate`, `increase` and `delta`: the change over the samples, corrected
/// for counter resets, extrapolated towards the window's edges (at most
/// half an average interval past the outer samples, and for counters not
/// below zero).
fn extrapolated(s: &[(i64, f64)], c: Ctx, is_counter: bool, is_rate: bool) -> Option<f64> {
    if s.len() < 2 {
        return None;
    }
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut result = last.1 - first.1;
    if is_counter {
        let mut prev = 0.0;
        for &(_, v) in s {
            if v < prev {
                result += prev;
            }
            prev = v;
        }
    }
    let sampled = (last.0 - first.0) as f64 / 1000.0;
    // Counters do not go below zero: not extrapolated past where this
    // one would have been 0.
    let to_zero = (is_counter && result > 0.0 && first.1 >= 0.0).then(|| sampled * (first.1 / result));
    Some(result * extrapolation(first.0, last.0, s.len(), c, to_zero, is_rate))
}

/// What a change over samples from `first` to `last` (ms, `n` samples) is
/// multiplied by to stand for the whole window `c` (at most half an
/// average interval past the outer samples; not past `to_zero` seconds
/// before the first), per second of the window for a rate.
fn extrapolation(first: i64, last: i64, n: usize, c: Ctx, to_zero: Option<f64>, is_rate: bool) -> f64 {
    let mut to_start = (first - c.range_start) as f64 / 1000.0;
    let to_end = (c.range_end - last) as f64 / 1000.0;
    let sampled = (last - first) as f64 / 1000.0;
    let avg = sampled / (n - 1) as f64;
    if let Some(z) = to_zero
        && z < to_start
    {
        to_start = z;
    }
    let threshold = avg * 1.1;
    let mut interval = sampled;
    interval += if to_start < threshold { to_start } else { avg / 2.0 };
    interval += if to_end < threshold { to_end } else { avg / 2.0 };
    let mut factor = interval / sampled;
    if is_rate {
        factor /= (c.range_end - c.range_start) as f64 / 1000.0;
    }
    factor
}

/// A range function over a series holding native histograms, as
/// Prometheus 3 defines it: `rate`, `increase`, `delta`, `irate` and
/// `idelta` of its histograms (none when floats are mixed in); the
/// newest or oldest sample and the count and presence of samples of
/// either kind; the changes and counter resets along both kinds (a
/// change of kind is a change, and a reset). `Some(None)`: no result;
/// `None` for the other functions, which see only floats.
fn of_histogram_range(name: &str, s: &Series, c: Ctx) -> Option<Option<SampleValue>> {
    let hs = &s.histograms;
    let only = s.samples.is_empty();
    let hist = |h: FloatHistogram| SampleValue::Histogram(Arc::new(h));
    // Both kinds in time order: a float, or a histogram.
    let merged = || {
        let mut all: Vec<(i64, Result<f64, &FloatHistogram>)> = s
            .samples
            .iter()
            .map(|&(t, v)| (t, Ok(v)))
            .chain(hs.iter().map(|(t, h)| (*t, Err(h.as_ref()))))
            .collect();
        all.sort_by_key(|x| x.0);
        all
    };
    let count = |pred: fn(&Result<f64, &FloatHistogram>, &Result<f64, &FloatHistogram>) -> bool| {
        let all = merged();
        let n = all.windows(2).filter(|w| pred(&w[0].1, &w[1].1)).count();
        Some(Some(SampleValue::Float(n as f64)))
    };
    match name {
        "rate" | "increase" | "delta" if only => {
            let is_counter = name != "delta";
            Some(histogram_extrapolated(hs, c, is_counter, name == "rate").map(hist))
        }
        "irate" | "idelta" if only && hs.len() >= 2 => {
            let ((t0, prev), (t1, last)) = (&hs[hs.len() - 2], &hs[hs.len() - 1]);
            if t1 == t0 {
                return Some(None);
            }
            let mut h = if name == "irate" && last.detect_reset(prev) {
                last.as_ref().clone()
            } else {
                last.sub(prev)
            };
            h.compact();
            if name == "irate" {
                h.scale(1000.0 / (t1 - t0) as f64);
            }
            Some(Some(hist(h)))
        }
        "rate" | "increase" | "delta" | "irate" | "idelta" => Some(None),
        "count_over_time" => Some(Some(SampleValue::Float((s.samples.len() + hs.len()) as f64))),
        "present_over_time" => Some(Some(SampleValue::Float(1.0))),
        "last_over_time" | "first_over_time" => {
            let all = merged();
            let x = if name == "last_over_time" {
                all.last()
            } else {
                all.first()
            };
            Some(x.map(|x| match x.1 {
                Ok(v) => SampleValue::Float(v),
                Err(h) => hist(h.clone()),
            }))
        }
        "changes" => count(|a, b| match (a, b) {
            (Ok(a), Ok(b)) => a != b && !(a.is_nan() && b.is_nan()),
            (Err(a), Err(b)) => a != b,
            _ => true,
        }),
        "resets" => count(|a, b| match (a, b) {
            (Ok(a), Ok(b)) => b < a,
            (Err(a), Err(b)) => b.detect_reset(a),
            _ => true,
        }),
        _ => None,
    }
}

/// `rate`, `increase` and `delta` of native histograms: the last minus
/// the first at the coarsest schema among them, for counters plus each
/// histogram before a reset, extrapolated as floats are (Prometheus 2.x:
/// with no clamp at zero). `None` for fewer than two.
fn histogram_extrapolated(
    s: &[(i64, Arc<FloatHistogram>)],
    c: Ctx,
    is_counter: bool,
    is_rate: bool,
) -> Option<FloatHistogram> {
    if s.len() < 2 {
        return None;
    }
    let (first, last) = (&s[0], &s[s.len() - 1]);
    let schema = s.iter().map(|(_, h)| h.schema).min().unwrap_or(last.1.schema);
    let mut h = last.1.to_schema(schema).sub(&first.1);
    if is_counter {
        for w in s.windows(2) {
            if w[1].1.detect_reset(&w[0].1) {
                h = h.add(&w[0].1);
            }
        }
    }
    h.compact();
    h.scale(extrapolation(first.0, last.0, s.len(), c, None, is_rate));
    Some(h)
}

fn instant_value(s: &[(i64, f64)], is_rate: bool) -> Option<f64> {
    if s.len() < 2 {
        return None;
    }
    let (prev, last) = (s[s.len() - 2], s[s.len() - 1]);
    let mut v = if is_rate && last.1 < prev.1 {
        last.1
    } else {
        last.1 - prev.1
    };
    let interval = last.0 - prev.0;
    if interval == 0 {
        return None;
    }
    if is_rate {
        v /= interval as f64 / 1000.0;
    }
    Some(v)
}

fn linear_regression(s: &[(i64, f64)], intercept_time: i64) -> (f64, f64) {
    let (mut n, mut sx, mut cx, mut sy, mut cy, mut sxy, mut cxy, mut sx2, mut cx2) =
        (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let init = s[0].1;
    let mut const_y = true;
    for (i, &(ts, v)) in s.iter().enumerate() {
        if const_y && i > 0 && v != init {
            const_y = false;
        }
        n += 1.0;
        let x = (ts - intercept_time) as f64 / 1e3;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(v, sy, cy);
        (sxy, cxy) = kahan_inc(x * v, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    if const_y {
        if init.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init);
    }
    let (sx, sy, sxy, sx2) = (sx + cx, sy + cy, sxy + cxy, sx2 + cx2);
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    (slope, sy / n - slope * sx / n)
}

fn math(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "sqrt" => f64::sqrt,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "deg" => |x| x * 180.0 / std::f64::consts::PI,
        "rad" => |x| x * std::f64::consts::PI / 180.0,
        "sgn" => |x| {
            if x < 0.0 {
                -1.0
            } else if x > 0.0 {
                1.0
            } else {
                x
            }
        },
        _ => return None,
    })
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H.
/// Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn date_part(name: &str, secs: f64) -> f64 {
    if secs.is_nan() || secs.is_infinite() {
        return f64::NAN;
    }
    let s = secs as i64;
    let days = s.div_euclid(86_400);
    let sod = s.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let month_days = [
        31,
        if is_leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    (match name {
        "day_of_month" => d as i64,
        "day_of_week" => (days + 4).rem_euclid(7),
        "day_of_year" => month_days[..(m as usize - 1)].iter().sum::<i64>() + d as i64,
        "days_in_month" => month_days[m as usize - 1],
        "hour" => sod / 3600,
        "minute" => sod % 3600 / 60,
        "month" => m as i64,
        _ => y,
    }) as f64
}

/// Prometheus's `quantile`: linear interpolation between the closest
/// ranks, `q` outside [0, 1] giving ±Inf.
pub(crate) fn quantile(q: f64, mut values: Vec<f64>) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}

/// A float of each native histogram of `v`, the name dropped (floats are
/// left out).
fn of_histograms(v: Vec<Sample>, f: impl Fn(&FloatHistogram) -> f64) -> Vec<Sample> {
    v.into_iter()
        .filter_map(|s| Some(Sample::float(s.labels.without_name(), f(s.histogram.as_deref()?))))
        .collect()
}

/// The estimated variance of a native histogram's observations (Prometheus
/// 3 `histogram_stdvar`): each bucket's observations taken at its
/// geometric mean (0 for the zero bucket), against the mean `sum / count`.
fn histogram_variance(h: &FloatHistogram) -> f64 {
    let mean = h.sum / h.count;
    let (mut variance, mut c) = (0.0f64, 0.0f64);
    for b in h.buckets() {
        if b.count == 0.0 {
            continue;
        }
        let val = if b.lower <= 0.0 && b.upper >= 0.0 {
            0.0
        } else {
            let g = (b.upper * b.lower).sqrt();
            if b.upper < 0.0 { -g } else { g }
        };
        let delta = val - mean;
        (variance, c) = kahan_inc(b.count * delta * delta, variance, c);
    }
    (variance + c) / h.count
}

fn histogram_quantile(q: f64, v: Vec<Sample>) -> Vec<Sample> {
    // Buckets by series without `le` (the name included, as Prometheus
    // groups them), in first-seen order; a native histogram on its own.
    let mut groups: Vec<(Labels, Vec<(f64, f64)>)> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::new();
    let mut native = Vec::new();
    for s in v {
        if let Some(h) = &s.histogram {
            native.push(Sample::float(s.labels.without_name(), h.quantile(q)));
            continue;
        }
        let Some(le) = s.labels.get("le").and_then(parse_float) else {
            continue;
        };
        let mut key = s.labels.clone();
        key.remove("le");
        let i = *index.entry(key.clone()).or_insert_with(|| {
            let mut out = key.clone();
            out.remove(NAME);
            groups.push((out, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push((le, s.value));
    }
    groups
        .into_iter()
        .filter(|(_, b)| !b.is_empty())
        .map(|(labels, b)| Sample::float(labels, bucket_quantile(q, b)))
        .chain(native)
        .collect()
}

/// A float as Go's `strconv.ParseFloat` reads a label value.
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "+inf" | "inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

fn bucket_quantile(q: f64, mut b: Vec<(f64, f64)>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    b.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal));
    if b.last().is_none_or(|l| l.0 != f64::INFINITY) {
        return f64::NAN;
    }
    // Coalesce equal bounds, then force the counts monotonic.
    let mut c: Vec<(f64, f64)> = Vec::with_capacity(b.len());
    for x in b {
        match c.last_mut() {
            Some(l) if l.0 == x.0 => l.1 += x.1,
            _ => c.push(x),
        }
    }
    let mut max = f64::NEG_INFINITY;
    for x in c.iter_mut() {
        if x.1 > max {
            max = x.1;
        } else if x.1 < max {
            x.1 = max;
        }
    }
    if c.len() < 2 {
        return f64::NAN;
    }
    let observations = c[c.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let n = c.len() - 1;
    let i = c[..n].partition_point(|x| x.1 < rank);
    if i == n {
        return c[n - 1].0;
    }
    if i == 0 && c[0].0 <= 0.0 {
        return c[0].0;
    }
    let (mut start, end, mut count) = (0.0, c[i].0, c[i].1);
    if i > 0 {
        start = c[i - 1].0;
        count -= c[i - 1].1;
        rank -= c[i - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// Whether label `k` of a sample is one of its group's under `m`.
fn in_group(k: &str, m: Option<&LabelModifier>) -> bool {
    match m {
        None => false,
        Some(LabelModifier::Include(names)) => names.labels.iter().any(|n| n == k),
        Some(LabelModifier::Exclude(names)) => k != NAME && !names.labels.iter().any(|n| n == k),
    }
}

/// The group's labels of a sample under `by`/`without`.
pub(crate) fn group_labels(l: &Labels, m: Option<&LabelModifier>) -> Labels {
    l.filtered(|k| in_group(k, m))
}

/// The groups of an aggregation, found by a hash of each sample's group
/// labels: a sample's group is looked up without building its labels,
/// which are built once per group.
#[derive(Default)]
struct GroupIndex {
    /// Group numbers by the hash of their labels; a clash keeps both.
    by_hash: HashMap<u64, Vec<usize>>,
}

impl GroupIndex {
    fn hash(l: &Labels, m: Option<&LabelModifier>) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        for pair in l.pairs().iter().filter(|(k, _)| in_group(k, m)) {
            pair.hash(&mut h);
        }
        h.finish()
    }

    /// The number of `l`'s group among `groups` (their labels), if met.
    fn find(&self, h: u64, l: &Labels, m: Option<&LabelModifier>, groups: &[Group]) -> Option<usize> {
        let same = |g: &Labels| l.pairs().iter().filter(|(k, _)| in_group(k, m)).eq(g.pairs().iter());
        self.by_hash.get(&h)?.iter().copied().find(|&i| same(&groups[i].labels))
    }
}

/// Whether `limit_ratio(ratio, …)` keeps the series `labels`, as
/// Prometheus decides it: the series' place in [0, 1), the XXH64 of its
/// labels (`Labels.Hash`: each name and value followed by a 0xff byte)
/// over 2⁶⁴, is below `ratio`, or for a negative ratio at least `1 +
/// ratio`. So `limit_ratio(r, v)` and `limit_ratio(-(1 - r), v)` split
/// `v` in two, and a series is kept or not at every step alike.
pub(crate) fn keeps_in_ratio(ratio: f64, labels: &Labels) -> bool {
    let mut bytes = Vec::new();
    for (name, value) in labels.pairs() {
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0xff);
        bytes.extend_from_slice(value.as_bytes());
        bytes.push(0xff);
    }
    let offset = xxhash_rust::xxh64::xxh64(&bytes, 0) as f64 / u64::MAX as f64;
    (ratio >= 0.0 && offset < ratio) || (ratio < 0.0 && offset >= 1.0 + ratio)
}

/// One group of an aggregation, as its samples are added.
pub(crate) struct Group {
    labels: Labels,
    /// The sum of the group's native histograms (`sum`, `avg`).
    histogram: Option<FloatHistogram>,
    /// Whether the group has a float too: then a sum of histograms has no
    /// value.
    has_float: bool,
    value: f64,
    mean: f64,
    count: f64,
    values: Vec<f64>,
    samples: Vec<Sample>,
}

impl Group {
    /// The group labelled `labels` of aggregation `id`, of its first
    /// sample `s`.
    pub(crate) fn new(id: u16, labels: Labels, s: Sample) -> Group {
        let mut g = Group::first(id, labels, s.value, s.is_float());
        g.histogram = s.histogram.as_deref().cloned();
        g.samples.push(s);
        g
    }

    /// [`Group::new`] of a float `x`, for an aggregation that keeps no
    /// samples (not `topk`, `bottomk` or `limitk`).
    pub(crate) fn of_float(id: u16, labels: Labels, x: f64) -> Group {
        Group::first(id, labels, x, true)
    }

    fn first(id: u16, labels: Labels, x: f64, has_float: bool) -> Group {
        let stdvar = id == token::T_STDDEV || id == token::T_STDVAR;
        Group {
            labels,
            histogram: None,
            has_float,
            value: if stdvar { 0.0 } else { x },
            mean: x,
            count: 1.0,
            values: vec![x],
            samples: Vec::new(),
        }
    }

    /// Adds a later sample of the group (`k`: the `k` of `topk`,
    /// `bottomk` and `limitk`).
    pub(crate) fn add(&mut self, id: u16, k: usize, s: Sample) {
        if let (Some(h), token::T_SUM | token::T_AVG) = (&s.histogram, id) {
            self.histogram = Some(match &self.histogram {
                Some(sum) => sum.add(h),
                None => (**h).clone(),
            });
            self.count += 1.0;
            return;
        }
        self.has_float |= s.is_float();
        match id {
            token::T_TOPK | token::T_BOTTOMK => self.samples.push(s),
            // The first k of the input, in its order.
            token::T_LIMITK if self.samples.len() < k => self.samples.push(s),
            token::T_LIMITK => {}
            _ => self.add_value(id, s.value),
        }
    }

    /// [`Group::add`] of a float `x`, for an aggregation that keeps no
    /// samples.
    pub(crate) fn add_float(&mut self, id: u16, x: f64) {
        self.has_float = true;
        self.add_value(id, x);
    }

    fn add_value(&mut self, id: u16, x: f64) {
        match id {
            token::T_SUM => self.value += x,
            token::T_AVG => {
                self.count += 1.0;
                if self.mean.is_infinite() {
                    if x.is_infinite() && (self.mean > 0.0) == (x > 0.0) {
                        return;
                    }
                    if !x.is_infinite() && !x.is_nan() {
                        return;
                    }
                }
                self.mean += x / self.count - self.mean / self.count;
            }
            token::T_MAX if self.value < x || self.value.is_nan() => self.value = x,
            token::T_MIN if self.value > x || self.value.is_nan() => self.value = x,
            token::T_COUNT | token::T_GROUP => self.count += 1.0,
            token::T_STDDEV | token::T_STDVAR => {
                self.count += 1.0;
                let delta = x - self.mean;
                self.mean += delta / self.count;
                self.value += delta * (x - self.mean);
            }
            token::T_QUANTILE => self.values.push(x),
            _ => {}
        }
    }

    /// Appends the group's result to `out`.
    pub(crate) fn finish(mut self, id: u16, k: usize, param: &Param, out: &mut Vec<Sample>) -> Result<(), Error> {
        if let (Some(mut h), token::T_SUM | token::T_AVG) = (self.histogram.take(), id) {
            // A mix of floats and histograms sums to nothing.
            if !self.has_float {
                if id == token::T_AVG {
                    h.scale(1.0 / self.count);
                }
                h.compact();
                out.push(Sample::histogram(self.labels, Arc::new(h)));
            }
            return Ok(());
        }
        let value = match id {
            token::T_SUM | token::T_MAX | token::T_MIN => self.value,
            token::T_AVG => self.mean,
            token::T_COUNT => self.count,
            token::T_GROUP => 1.0,
            token::T_STDVAR => self.value / self.count,
            token::T_STDDEV => (self.value / self.count).sqrt(),
            token::T_QUANTILE => {
                let Param::Num(q) = param else {
                    return Err(Error::BadData("quantile needs a number".into()));
                };
                quantile(*q, std::mem::take(&mut self.values))
            }
            token::T_TOPK | token::T_BOTTOMK => {
                let top = id == token::T_TOPK;
                // NaN sorts as the least for topk and the greatest for bottomk.
                self.samples.sort_by(|a, b| {
                    let (x, y) = (a.value, b.value);
                    match (x.is_nan(), y.is_nan()) {
                        (true, true) => std::cmp::Ordering::Equal,
                        (true, false) => std::cmp::Ordering::Greater,
                        (false, true) => std::cmp::Ordering::Less,
                        _ => {
                            let o = x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
                            if top { o.reverse() } else { o }
                        }
                    }
                });
                out.extend(self.samples.into_iter().take(k));
                return Ok(());
            }
            token::T_LIMITK => {
                out.extend(self.samples);
                return Ok(());
            }
            _ => f64::NAN,
        };
        out.push(Sample::float(self.labels, value));
        Ok(())
    }
}

pub(crate) fn aggregate(
    id: u16,
    v: Vec<Sample>,
    m: Option<&LabelModifier>,
    param: Param,
) -> Result<Vec<Sample>, Error> {
    if id == token::T_COUNT_VALUES {
        let Param::Str(label) = &param else {
            return Err(Error::BadData("count_values needs a label name".into()));
        };
        if !valid_label_name(label) {
            return Err(Error::BadData(format!("invalid label name {label:?}")));
        }
        let mut order: Vec<Labels> = Vec::new();
        let mut counts: HashMap<Labels, f64> = HashMap::new();
        for s in &floats(v) {
            let mut g = group_labels(&s.labels, m);
            g.set(label, &format_float(s.value));
            let e = counts.entry(g.clone()).or_insert_with(|| {
                order.push(g);
                0.0
            });
            *e += 1.0;
        }
        return Ok(order
            .into_iter()
            .map(|l| {
                let value = counts[&l];
                Sample::float(l, value)
            })
            .collect());
    }
    if !matches!(
        id,
        token::T_SUM
            | token::T_AVG
            | token::T_MAX
            | token::T_MIN
            | token::T_COUNT
            | token::T_GROUP
            | token::T_STDDEV
            | token::T_STDVAR
            | token::T_QUANTILE
            | token::T_TOPK
            | token::T_BOTTOMK
            | token::T_LIMITK
            | token::T_LIMIT_RATIO
    ) {
        return Err(Error::BadData("this aggregation is not supported by Skein yet".into()));
    }
    let k = match (&param, id) {
        (Param::Num(k), token::T_TOPK | token::T_BOTTOMK | token::T_LIMITK) => {
            if k.is_nan() || *k < 1.0 {
                return Ok(Vec::new());
            }
            k.min(i64::MAX as f64) as usize
        }
        _ => 0,
    };
    if id == token::T_LIMIT_RATIO {
        let Param::Num(ratio) = param else {
            return Err(Error::BadData("limit_ratio needs a number".into()));
        };
        if ratio.is_nan() {
            return Err(Error::BadData("Ratio value is NaN".into()));
        }
        // Grouping cannot change which series a ratio keeps: each is kept
        // or not by its own labels.
        let ratio = ratio.clamp(-1.0, 1.0);
        return Ok(v.into_iter().filter(|s| keeps_in_ratio(ratio, &s.labels)).collect());
    }
    // Only these see native histograms: the others are of floats.
    let v = if matches!(
        id,
        token::T_SUM | token::T_AVG | token::T_COUNT | token::T_GROUP | token::T_LIMITK
    ) {
        v
    } else {
        floats(v)
    };
    let mut groups: Vec<Group> = Vec::new();
    let mut index = GroupIndex::default();
    for s in v {
        let h = GroupIndex::hash(&s.labels, m);
        match index.find(h, &s.labels, m, &groups) {
            Some(i) => groups[i].add(id, k, s),
            None => {
                index.by_hash.entry(h).or_default().push(groups.len());
                groups.push(Group::new(id, group_labels(&s.labels, m), s));
            }
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        g.finish(id, k, &param, &mut out)?;
    }
    Ok(out)
}

/// Natural order of label values, as Prometheus's `sort_by_label` uses it
/// (facette/natsort): the values cut into runs of digits and of other
/// characters, compared run by run, two runs of digits as numbers, others
/// as strings; a value whose runs all match the start of the other's is
/// the lesser. Where natsort cannot tell two values apart (`1` and `01`,
/// or an empty value, which it puts after everything and before it too),
/// the plain string order decides, so the order is total.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (ra, rb) = (runs(a), runs(b));
    for (x, y) in ra.iter().zip(&rb) {
        let digits = |r: &str| r.bytes().all(|c| c.is_ascii_digit());
        let o = if digits(x) && digits(y) {
            // As numbers, of any length: fewer significant digits is less.
            let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
            x.len().cmp(&y.len()).then_with(|| x.cmp(y))
        } else {
            x.cmp(y)
        };
        if o.is_ne() {
            return o;
        }
    }
    ra.len().cmp(&rb.len()).then_with(|| a.cmp(b))
}

/// The runs of digits and of other characters of `s` (regexp
/// `(\d+|\D+)`, ASCII digits).
fn runs(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let mut start = 0;
    for i in 1..=bytes.len() {
        if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
            out.push(&s[start..i]);
            start = i;
        }
    }
    out
}
