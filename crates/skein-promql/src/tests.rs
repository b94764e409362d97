//! The evaluator over an in-memory source: semantics spot-checked against
//! values worked out by hand from Prometheus's rules, and properties
//! against naive models.

use proptest::prelude::*;

use crate::eval::{self, Options, Value};
use crate::{Labels, Matcher, Series, SeriesSource};

struct Mem(Vec<Series>);

impl SeriesSource for Mem {
    fn select(&self, matchers: &[Matcher], start: i64, end: i64) -> Result<Vec<Series>, String> {
        Ok(self
            .0
            .iter()
            .filter(|s| s.labels.matches(matchers))
            .map(|s| Series {
                labels: s.labels.clone(),
                samples: s
                    .samples
                    .iter()
                    .copied()
                    .filter(|(t, _)| *t >= start && *t <= end)
                    .collect(),
                histograms: s
                    .histograms
                    .iter()
                    .filter(|(t, _)| *t >= start && *t <= end)
                    .cloned()
                    .collect(),
            })
            .collect())
    }
}

fn l(pairs: &[(&str, &str)]) -> Labels {
    Labels::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn series(pairs: &[(&str, &str)], samples: &[(i64, f64)]) -> Series {
    Series::floats(l(pairs), samples.to_vec())
}

fn instant(src: &Mem, q: &str, t: i64) -> Result<Value, crate::Error> {
    eval::instant(src, &eval::parse(q)?, t, Options::default())
}

fn vector(src: &Mem, q: &str, t: i64) -> Vec<(Labels, f64)> {
    match instant(src, q, t).unwrap() {
        Value::Vector(v) => {
            let mut v: Vec<(Labels, f64)> = v.into_iter().map(|s| (s.labels, s.value)).collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        }
        other => panic!("{q}: not a vector: {other:?}"),
    }
}

/// A counter sampled every 10 s from 0: 0, 10, 20, … (1/s).
fn counter() -> Mem {
    let samples: Vec<(i64, f64)> = (0..=60).map(|i| (i * 10_000, i as f64 * 10.0)).collect();
    Mem(vec![
        series(&[("__name__", "c_total"), ("job", "a")], &samples),
        series(
            &[("__name__", "c_total"), ("job", "b")],
            &samples.iter().map(|&(t, v)| (t, v * 2.0)).collect::<Vec<_>>(),
        ),
    ])
}

#[test]
fn rate_extrapolates_to_the_window_as_prometheus_does() {
    let src = counter();
    // Samples at 240..=300 s cover the closed window [240, 300] exactly.
    let v = vector(&src, "rate(c_total[1m])", 300_000);
    assert_eq!(v[0].0, l(&[("job", "a")]));
    assert!((v[0].1 - 1.0).abs() < 1e-12, "{v:?}");
    let v = vector(&src, "increase(c_total{job=\"b\"}[1m])", 300_000);
    assert!((v[0].1 - 120.0).abs() < 1e-9, "{v:?}");
    // Fewer than two samples: no result.
    assert!(vector(&src, "rate(c_total[5s])", 300_000).is_empty());
}

#[test]
fn a_counter_reset_counts_the_value_before_it() {
    let src = Mem(vec![series(
        &[("__name__", "r_total")],
        &[(0, 5.0), (10_000, 8.0), (20_000, 2.0), (30_000, 4.0)],
    )]);
    // 8 - 5 + 2 + 2 = 7 over 30 s, window [0, 30 s] exactly covered.
    let v = vector(&src, "increase(r_total[30s])", 30_000);
    assert!((v[0].1 - 7.0).abs() < 1e-12, "{v:?}");
    assert_eq!(vector(&src, "resets(r_total[1m])", 30_000)[0].1, 1.0);
    assert_eq!(vector(&src, "irate(r_total[1m])", 30_000)[0].1, 0.2);
}

#[test]
fn double_exponential_smoothing_follows_holts_steps() {
    let src = Mem(vec![series(
        &[("__name__", "g"), ("job", "a")],
        &[(0, 1.0), (10_000, 3.0), (20_000, 4.0)],
    )]);
    // s=1, b=2; then s = 0.5*3 + 0.5*(1+2) = 3; then b = 0.5*(3-1) + 0.5*2
    // = 2 and s = 0.5*4 + 0.5*(3+2) = 4.5.
    let v = vector(&src, "double_exponential_smoothing(g[1m], 0.5, 0.5)", 20_000);
    assert_eq!(v, vec![(l(&[("job", "a")]), 4.5)]);
    // One sample: nothing to smooth.
    assert!(vector(&src, "double_exponential_smoothing(g[5s], 0.5, 0.5)", 20_000).is_empty());
    for q in [
        "double_exponential_smoothing(g[1m], 1, 0.5)",
        "double_exponential_smoothing(g[1m], 0.5, 0)",
    ] {
        assert!(
            matches!(instant(&src, q, 20_000), Err(crate::Error::Execution(_))),
            "{q}"
        );
    }
}

#[test]
fn first_timestamps_and_median_absolute_deviation_over_time() {
    let src = Mem(vec![series(
        &[("__name__", "g"), ("job", "a")],
        &[
            (0, 4.0),
            (10_000, 1.0),
            (20_000, 9.0),
            (30_000, 1.0),
            (40_000, 9.0),
            (50_000, 6.0),
        ],
    )]);
    let at = 50_000;
    let one = |q: &str| {
        let v = vector(&src, q, at);
        assert_eq!(v.len(), 1, "{q}: {v:?}");
        v[0].clone()
    };
    // first_over_time keeps the name, as last_over_time does.
    assert_eq!(
        one("first_over_time(g[1m])"),
        (l(&[("__name__", "g"), ("job", "a")]), 4.0)
    );
    assert_eq!(one("first_over_time(g[25s])").1, 1.0);
    assert_eq!(one("ts_of_first_over_time(g[1m])"), (l(&[("job", "a")]), 0.0));
    assert_eq!(one("ts_of_last_over_time(g[1m])").1, 50.0);
    // Of equal extremes, the newest.
    assert_eq!(one("ts_of_max_over_time(g[1m])").1, 40.0);
    assert_eq!(one("ts_of_min_over_time(g[1m])").1, 30.0);
    // Values 1 1 4 6 9 9: median 5; deviations 4 4 1 1 4 4: median 4.
    assert_eq!(one("mad_over_time(g[1m])"), (l(&[("job", "a")]), 4.0));
    // 1 9 6 (the last 25 s): median 6; deviations 5 3 0: median 3.
    assert_eq!(one("mad_over_time(g[25s])").1, 3.0);
    let nan = Mem(vec![series(&[("__name__", "n")], &[(0, 1.0), (10_000, f64::NAN)])]);
    assert!(vector(&nan, "mad_over_time(n[1m])", 10_000)[0].1.is_nan());
}

#[test]
fn lookback_staleness_offset_and_at() {
    let stale = f64::from_bits(crate::STALE_NAN_BITS);
    let src = Mem(vec![
        series(&[("__name__", "g")], &[(0, 1.0), (60_000, 2.0)]),
        series(&[("__name__", "s")], &[(0, 1.0), (60_000, stale)]),
    ]);
    assert_eq!(vector(&src, "g", 60_000 + 299_000)[0].1, 2.0);
    assert_eq!(
        vector(&src, "g", 60_000 + 300_000)[0].1,
        2.0,
        "the lookback window is closed"
    );
    assert!(vector(&src, "g", 60_000 + 300_001).is_empty());
    assert_eq!(vector(&src, "s", 59_000)[0].1, 1.0);
    assert!(
        vector(&src, "s", 61_000).is_empty(),
        "a staleness marker ends the series at once"
    );
    assert_eq!(vector(&src, "g offset 1m", 60_000)[0].1, 1.0);
    assert_eq!(vector(&src, "g @ 30", 100_000)[0].1, 1.0);
    assert_eq!(vector(&src, "g @ 30 offset -30s", 100_000)[0].1, 2.0);
}

#[test]
fn binary_matching_keeps_the_right_labels() {
    let src = Mem(vec![
        series(&[("__name__", "req"), ("job", "a"), ("code", "200")], &[(0, 6.0)]),
        series(&[("__name__", "req"), ("job", "a"), ("code", "500")], &[(0, 2.0)]),
        series(&[("__name__", "tot"), ("job", "a")], &[(0, 8.0)]),
    ]);
    let v = vector(&src, "req / on(job) group_left tot", 0);
    assert_eq!(
        v,
        [
            (l(&[("code", "200"), ("job", "a")]), 0.75),
            (l(&[("code", "500"), ("job", "a")]), 0.25)
        ]
    );
    let v = vector(&src, "req > bool 3", 0);
    assert_eq!(v[0], (l(&[("code", "200"), ("job", "a")]), 1.0));
    let v = vector(&src, "req > 3", 0);
    assert_eq!(v, [(l(&[("__name__", "req"), ("code", "200"), ("job", "a")]), 6.0)]);
    let e = instant(&src, "req / on(job) tot", 0).unwrap_err();
    assert!(e.message().contains("many-to-one matching must be explicit"), "{e}");
    let e = instant(&src, "tot / on(job) req", 0).unwrap_err();
    assert!(e.message().contains("many-to-many"), "{e}");
}

#[test]
fn histogram_quantile_interpolates_within_the_bucket() {
    let b = |le: &str, v: f64| series(&[("__name__", "h_bucket"), ("le", le)], &[(0, v)]);
    let src = Mem(vec![b("1", 10.0), b("2", 30.0), b("+Inf", 40.0)]);
    // rank 20 falls in (1, 2] holding 20: halfway.
    assert_eq!(vector(&src, "histogram_quantile(0.5, h_bucket)", 0)[0].1, 1.5);
    // Past the last finite bound: that bound.
    assert_eq!(vector(&src, "histogram_quantile(0.99, h_bucket)", 0)[0].1, 2.0);
}

#[test]
fn subquery_steps_are_aligned_to_the_epoch() {
    let src = counter();
    // Steps of 20 s in [105, 165]: 120, 140, 160.
    match instant(&src, "c_total{job=\"a\"}[1m:20s]", 165_000).unwrap() {
        Value::Matrix { series, .. } => {
            let t: Vec<i64> = series[0].samples.iter().map(|s| s.0).collect();
            assert_eq!(t, [120_000, 140_000, 160_000]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_queries_are_bad_data() {
    let src = counter();
    for q in ["sum(", "nope(c_total)", "rate(c_total)"] {
        assert!(matches!(instant(&src, q, 0), Err(crate::Error::BadData(_))), "{q}");
    }
    let e = eval::range(
        &src,
        &eval::parse("c_total").unwrap(),
        0,
        86_400_000,
        1000,
        Options::default(),
    )
    .unwrap_err();
    assert!(e.message().contains("11,000 points"), "{e}");
}

#[test]
fn label_replace_and_join() {
    let src = Mem(vec![series(
        &[("__name__", "up"), ("instance", "h1:9100"), ("job", "n")],
        &[(0, 1.0)],
    )]);
    let v = vector(
        &src,
        "label_replace(up, \"host\", \"$1\", \"instance\", \"(.*):.*\")",
        0,
    );
    assert_eq!(v[0].0.get("host"), Some("h1"));
    assert_eq!(v[0].0.get("__name__"), Some("up"));
    let v = vector(&src, "label_join(up, \"id\", \"/\", \"job\", \"instance\")", 0);
    assert_eq!(v[0].0.get("id"), Some("n/h1:9100"));
}

type Pred = Box<dyn Fn(Option<&str>) -> bool>;

proptest! {
    /// `sum by (g)`, `count by (g)`, `max by (g)` agree with a naive
    /// grouping of the same samples.
    #[test]
    fn aggregations_match_a_naive_grouping(values in prop::collection::vec((0u8..4, -1000i32..1000), 1..40)) {
        let src = Mem(values.iter().enumerate().map(|(i, (g, v))| {
            series(&[("__name__", "m"), ("g", &g.to_string()), ("i", &i.to_string())], &[(0, *v as f64)])
        }).collect());
        for (op, f) in [("sum", 0usize), ("count", 1), ("max", 2)] {
            let got = vector(&src, &format!("{op} by (g) (m)"), 0);
            let mut want: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
            for (g, v) in &values {
                want.entry(g.to_string()).or_default().push(*v as f64);
            }
            let want: Vec<(Labels, f64)> = want.into_iter().map(|(g, vs)| {
                let x = match f {
                    0 => vs.iter().sum(),
                    1 => vs.len() as f64,
                    _ => vs.iter().cloned().fold(f64::MIN, f64::max),
                };
                (l(&[("g", &g)]), x)
            }).collect();
            prop_assert_eq!(got, want);
        }
    }

    /// A selector returns exactly the series whose labels satisfy every
    /// matcher (a missing label matching as the empty string).
    #[test]
    fn selectors_match_as_the_naive_predicate(
        rows in prop::collection::vec((prop::option::of(0u8..3), prop::option::of(0u8..3)), 1..30),
        op in 0usize..4, val in 0u8..3,
    ) {
        let src = Mem(rows.iter().enumerate().map(|(i, (a, b))| {
            let mut p = vec![("__name__".to_string(), "m".to_string()), ("i".to_string(), i.to_string())];
            if let Some(a) = a { p.push(("a".into(), format!("v{a}"))); }
            if let Some(b) = b { p.push(("b".into(), format!("v{b}"))); }
            Series::floats(Labels::from_pairs(p), vec![(0, i as f64)])
        }).collect());
        let (sym, pred): (&str, Pred) = match op {
            0 => ("=", Box::new(move |v: Option<&str>| v.unwrap_or("") == format!("v{val}"))),
            1 => ("!=", Box::new(move |v: Option<&str>| v.unwrap_or("") != format!("v{val}"))),
            2 => ("=~", Box::new(move |v: Option<&str>| v.unwrap_or("").starts_with(&format!("v{val}")))),
            _ => ("!~", Box::new(move |v: Option<&str>| !v.unwrap_or("").starts_with(&format!("v{val}")))),
        };
        let rhs = if op >= 2 { format!("v{val}.*") } else { format!("v{val}") };
        let got: Vec<f64> = {
            let mut v: Vec<f64> = vector(&src, &format!("m{{a{sym}\"{rhs}\"}}"), 0).into_iter().map(|x| x.1).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v
        };
        let want: Vec<f64> = rows.iter().enumerate()
            .filter(|(_, (a, _))| pred(a.map(|a| format!("v{a}")).as_deref()))
            .map(|(i, _)| i as f64).collect();
        prop_assert_eq!(got, want);
    }
}

/// Gauges `g{job, instance}` of value 1 at time 0, from `(job, instance)`.
fn gauges(pairs: &[(&str, &str)]) -> Mem {
    Mem(pairs
        .iter()
        .map(|(job, instance)| series(&[("__name__", "g"), ("job", job), ("instance", instance)], &[(0, 1.0)]))
        .collect())
}

/// An instant vector's labels, in the order of the answer.
fn ordered(src: &Mem, q: &str) -> Vec<Labels> {
    match instant(src, q, 0).unwrap() {
        Value::Vector(v) => v.into_iter().map(|s| s.labels).collect(),
        other => panic!("{q}: not a vector: {other:?}"),
    }
}

#[test]
fn limitk_keeps_the_first_k_series_of_each_group_in_label_order() {
    let src = gauges(&[("a", "h3"), ("a", "h1"), ("b", "h9"), ("a", "h2")]);
    let g = |job: &str, instance: &str| l(&[("__name__", "g"), ("instance", instance), ("job", job)]);
    let got = vector(&src, "limitk by (job) (2, g)", 0);
    let want = vec![g("a", "h1"), g("a", "h2"), g("b", "h9")];
    assert_eq!(got.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(), want);
    assert!(got.iter().all(|(_, v)| *v == 1.0));
    assert_eq!(vector(&src, "limitk(1, g)", 0).len(), 1);
    assert_eq!(vector(&src, "limitk(1, g)", 0)[0].0, g("a", "h1"));
    assert_eq!(vector(&src, "limitk(10, g)", 0).len(), 4);
    assert!(vector(&src, "limitk(0, g)", 0).is_empty());
}

#[test]
fn limit_ratio_splits_series_in_two_by_their_labels() {
    let pairs: Vec<(String, String)> = (0..400).map(|i| (format!("j{}", i % 7), format!("h{i}"))).collect();
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let src = gauges(&refs);
    let set = |q: &str| -> std::collections::BTreeSet<Labels> { ordered(&src, q).into_iter().collect() };
    let (kept, rest) = (set("limit_ratio(0.3, g)"), set("limit_ratio(-0.7, g)"));
    assert!(kept.is_disjoint(&rest));
    assert_eq!(kept.len() + rest.len(), 400);
    assert!((80..160).contains(&kept.len()), "{} of 400 kept at 0.3", kept.len());
    // The same series whatever the grouping, and a larger ratio keeps more.
    assert_eq!(set("limit_ratio by (job) (0.3, g)"), kept);
    assert!(kept.is_subset(&set("limit_ratio(0.6, g)")));
    assert_eq!(set("limit_ratio(1, g)").len(), 400);
    assert_eq!(set("limit_ratio(5, g)").len(), 400);
    assert!(set("limit_ratio(0, g)").is_empty());
    assert!(set("limit_ratio(-1, g)").len() == 400);
    let err = instant(&src, "limit_ratio(NaN, g)", 0).unwrap_err();
    assert!(err.to_string().contains("NaN"), "{err}");
}

#[test]
fn sort_by_label_orders_numbers_within_values_as_numbers() {
    let src = gauges(&[("b", "h10"), ("a", "h9"), ("b", "h1"), ("a", "h10"), ("c", "")]);
    let instances = |q: &str| -> Vec<(String, String)> {
        ordered(&src, q)
            .into_iter()
            .map(|l| {
                (
                    l.get("job").unwrap_or("").to_string(),
                    l.get("instance").unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    // Ties on the instance fall back to the whole label set; a missing
    // label sorts as the empty value, first.
    assert_eq!(
        instances("sort_by_label(g, \"instance\")"),
        pairs(&[("c", ""), ("b", "h1"), ("a", "h9"), ("a", "h10"), ("b", "h10")])
    );
    assert_eq!(
        instances("sort_by_label(g, \"job\", \"instance\")"),
        pairs(&[("a", "h9"), ("a", "h10"), ("b", "h1"), ("b", "h10"), ("c", "")])
    );
    assert_eq!(
        instances("sort_by_label_desc(g, \"job\", \"instance\")"),
        pairs(&[("c", ""), ("b", "h10"), ("b", "h1"), ("a", "h10"), ("a", "h9")])
    );
}

#[test]
fn natural_order_is_total_and_reads_numbers_as_numbers() {
    use crate::eval::funcs::natural_cmp;
    use std::cmp::Ordering::*;
    assert_eq!(natural_cmp("h9", "h10"), Less);
    assert_eq!(natural_cmp("a", "a1"), Less);
    assert_eq!(natural_cmp("1a", "a1"), Less);
    assert_eq!(natural_cmp("v1.10.0", "v1.9.3"), Greater);
    assert_eq!(natural_cmp("99999999999999999999999", "100000000000000000000000"), Less);
    // What natsort cannot tell apart, the string order decides.
    assert_eq!(natural_cmp("01", "1"), Less);
    assert_eq!(natural_cmp("", "x"), Less);
    assert_eq!(natural_cmp("x", "x"), Equal);
}

proptest! {
    /// A total order: antisymmetric and transitive on any strings (a sort
    /// with a comparator that is not may panic).
    #[test]
    fn natural_order_is_a_total_order(mut v in prop::collection::vec("[a-c0-2]{0,5}", 0..40)) {
        use crate::eval::funcs::natural_cmp;
        for a in &v {
            for b in &v {
                prop_assert_eq!(natural_cmp(a, b), natural_cmp(b, a).reverse());
                prop_assert_eq!(natural_cmp(a, b).is_eq(), a == b);
            }
        }
        v.sort_by(|a, b| natural_cmp(a, b));
        for w in v.windows(2) {
            prop_assert!(natural_cmp(&w[0], &w[1]).is_le());
        }
        for a in &v {
            for b in &v {
                for c in &v {
                    if natural_cmp(a, b).is_le() && natural_cmp(b, c).is_le() {
                        prop_assert!(natural_cmp(a, c).is_le(), "{a:?} {b:?} {c:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_changed_label_set_drops_the_nameless_set_it_derived() {
    let a = l(&[("__name__", "x"), ("job", "a")]);
    assert_eq!(a.without_name(), l(&[("job", "a")]));
    // A clone shares the derived set; changing it must not.
    let mut b = a.clone();
    b.set("job", "b");
    assert_eq!(b.without_name(), l(&[("job", "b")]));
    assert_eq!(a.without_name(), l(&[("job", "a")]), "the original is untouched");
    b.remove("__name__");
    assert_eq!(b.without_name(), b);
    let c = l(&[("job", "c")]);
    assert_eq!(c.without_name(), c);
    // Hash and order are the pairs'.
    let set: std::collections::HashSet<Labels> = [a.clone(), a.without_name(), l(&[("job", "a")])].into();
    assert_eq!(set.len(), 2);
    assert!(l(&[("a", "1")]) < l(&[("b", "1")]));
}

/// A range query evaluates each step as the instant query at that time,
/// whatever the cursors the steps leave behind (steps ascend; a subquery
/// goes back in time within each).
#[test]
fn a_range_query_is_its_instant_queries() {
    let mut all = Vec::new();
    for i in 0..6 {
        let samples: Vec<(i64, f64)> = (0..200)
            .filter(|t| (t + i) % 7 != 0)
            .map(|t| (t * 15_000, (t * (i + 1)) as f64))
            .collect();
        all.push(series(
            &[
                ("__name__", "c"),
                ("job", &format!("j{}", i % 2)),
                ("i", &i.to_string()),
            ],
            &samples,
        ));
    }
    // A series with staleness markers, which range functions skip.
    let stale = f64::from_bits(crate::STALE_NAN_BITS);
    let marked: Vec<(i64, f64)> = (0..200)
        .map(|t| (t * 15_000, if t % 9 == 4 { stale } else { (t * 3) as f64 }))
        .collect();
    all.push(series(&[("__name__", "c"), ("job", "j2"), ("i", "6")], &marked));
    let src = Mem(all);
    for q in [
        "sum by (job) (rate(c[1m]))",
        "c",
        "max_over_time(rate(c[1m])[5m:30s])",
        "count without (i) (c offset 2m)",
        // Computed ahead, series by series (eval/steps.rs).
        "increase(c[2m] offset 1m)",
        "last_over_time((c[1m]))",
        "resets(c[3m]) + idelta(c[1m])",
        "deriv(c[5m])",
        "avg_over_time(c[40s]) * 2",
        "irate(c[1m])",
        // Aggregations of those, computed ahead too.
        "avg by (job) (rate(c[1m]))",
        "min without (i) (irate(c[1m])) - max(delta(c[2m]))",
        "count by (job) (resets(c[3m])) + group(deriv(c[5m]))",
        "stddev(rate(c[1m])) + stdvar by (job) (increase(c[2m]))",
        "max by (job) (sum by (job, i) (rate(c[1m])))",
        "sum(last_over_time(c[1m]))",
        // Not: these take a parameter.
        "topk(2, rate(c[1m]))",
        "quantile by (job) (0.5, rate(c[1m]))",
    ] {
        let e = eval::parse(q).unwrap();
        let (start, end, step) = (60_000, 2_900_000, 45_000);
        let range = eval::range(&src, &e, start, end, step, Options::default()).unwrap();
        let mut t = start;
        while t <= end {
            let want = match eval::instant(&src, &e, t, Options::default()).unwrap() {
                Value::Vector(v) => v,
                other => panic!("{other:?}"),
            };
            for s in &want {
                let got = range
                    .iter()
                    .find(|r| r.labels == s.labels)
                    .and_then(|r| r.samples.iter().find(|p| p.0 == t));
                assert_eq!(got.map(|p| p.1), Some(s.value), "{q} at {t}: {}", s.labels);
            }
            let points = range.iter().filter(|r| r.samples.iter().any(|p| p.0 == t)).count();
            assert_eq!(points, want.len(), "{q} at {t}");
            t += step;
        }
    }
}

/// Series for `info`: two services' request counters, their `target_info`
/// (one service's stopped reporting after 60 s), and a `build_info`.
fn with_info() -> Mem {
    let every = |v: f64| -> Vec<(i64, f64)> { (0..=60).map(|i| (i * 10_000, v)).collect() };
    let until = |end: i64| -> Vec<(i64, f64)> { (0..=end / 10_000).map(|i| (i * 10_000, 1.0)).collect() };
    Mem(vec![
        series(
            &[
                ("__name__", "req_total"),
                ("job", "api"),
                ("instance", "a"),
                ("path", "/x"),
            ],
            &every(5.0),
        ),
        series(
            &[("__name__", "req_total"), ("job", "web"), ("instance", "b")],
            &every(7.0),
        ),
        series(&[("__name__", "req_total"), ("job", "batch")], &every(9.0)),
        series(
            &[
                ("__name__", "target_info"),
                ("job", "api"),
                ("instance", "a"),
                ("k8s_cluster", "c1"),
                ("region", "eu"),
                ("path", "/info"),
            ],
            &every(1.0),
        ),
        series(
            &[
                ("__name__", "target_info"),
                ("job", "web"),
                ("instance", "b"),
                ("k8s_cluster", "c2"),
            ],
            &until(60_000),
        ),
        series(
            &[
                ("__name__", "build_info"),
                ("job", "api"),
                ("instance", "a"),
                ("version", "1.2"),
            ],
            &every(1.0),
        ),
    ])
}

#[test]
fn info_adds_the_data_labels_of_the_matching_target_info() {
    let src = with_info();
    let v = vector(&src, "info(req_total)", 30_000);
    assert_eq!(
        v,
        vec![
            (
                l(&[
                    ("__name__", "req_total"),
                    ("instance", "a"),
                    ("job", "api"),
                    ("k8s_cluster", "c1"),
                    ("path", "/x"),
                    ("region", "eu")
                ]),
                5.0
            ),
            (
                l(&[
                    ("__name__", "req_total"),
                    ("instance", "b"),
                    ("job", "web"),
                    ("k8s_cluster", "c2")
                ]),
                7.0
            ),
            // No info series: kept as it is.
            (l(&[("__name__", "req_total"), ("job", "batch")]), 9.0),
        ],
        "the series' own `path` wins; the name stays"
    );
    // web's target_info last reported at 60 s: gone once past the lookback.
    let v = vector(&src, "info(req_total)", 600_000);
    assert_eq!(
        v[1].0,
        l(&[("__name__", "req_total"), ("instance", "b"), ("job", "web")])
    );
    // The info series themselves are not described.
    let v = vector(&src, "info(target_info)", 30_000);
    assert_eq!(v.len(), 2);
    assert!(
        v.iter()
            .all(|(l, _)| l.get("k8s_cluster").is_some() && l.get("version").is_none())
    );
}

#[test]
fn an_info_selector_picks_the_labels_the_metric_and_drops_series_without_a_match() {
    let src = with_info();
    // Only the labels named; a series whose info has none is dropped, as the
    // matcher refuses the empty value.
    let v = vector(&src, r#"info(req_total, {region=~".+"})"#, 30_000);
    assert_eq!(
        v,
        vec![(
            l(&[
                ("__name__", "req_total"),
                ("instance", "a"),
                ("job", "api"),
                ("path", "/x"),
                ("region", "eu")
            ]),
            5.0
        )]
    );
    // Another info metric, by name.
    let v = vector(&src, r#"info(req_total, {__name__="build_info"})"#, 30_000);
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].0.get("version"), Some("1.2"));
    assert_eq!(v[0].0.get("k8s_cluster"), None);
    // Both: labels of each, when they do not disagree.
    let v = vector(
        &src,
        r#"info(req_total{job="api"}, {__name__=~"build_info|target_info"})"#,
        30_000,
    );
    assert_eq!(v[0].0.get("version"), Some("1.2"));
    assert_eq!(v[0].0.get("region"), Some("eu"));
    // A range query reads the info series for every step.
    let e = eval::parse("info(req_total)").unwrap();
    let r = eval::range(&src, &e, 0, 600_000, 60_000, Options::default()).unwrap();
    let web: Vec<&Series> = r.iter().filter(|s| s.labels.get("job") == Some("web")).collect();
    assert_eq!(
        web.len(),
        2,
        "with k8s_cluster while target_info lasts, without after: {r:?}"
    );
}

#[test]
fn info_series_that_disagree_are_errors() {
    let mut src = with_info();
    // Two target_info series for one target at one time.
    src.0.push(series(
        &[
            ("__name__", "target_info"),
            ("job", "api"),
            ("instance", "a"),
            ("k8s_cluster", "c9"),
        ],
        &[(30_000, 1.0)],
    ));
    let e = instant(&src, "info(req_total)", 30_000).unwrap_err();
    assert!(e.message().contains("duplicate series for info metric"), "{e:?}");
    // The newer one wins: at 45 s, c1's sample of 40 s over c9's of 30 s.
    let got = vector(&src, r#"info(req_total{job="api"})"#, 45_000);
    assert_eq!(got[0].0.get("k8s_cluster"), Some("c1"), "{got:?}");
    // Two info metrics giving one label two values.
    let mut src = with_info();
    src.0.push(series(
        &[
            ("__name__", "build_info"),
            ("job", "web"),
            ("instance", "b"),
            ("k8s_cluster", "other"),
        ],
        &[(30_000, 1.0)],
    ));
    let e = instant(&src, r#"info(req_total, {__name__=~".+_info"})"#, 30_000).unwrap_err();
    assert!(e.message().contains("conflicting label: k8s_cluster"), "{e:?}");
}

// ---- native histograms ----

use crate::FloatHistogram;
use crate::histogram::Buckets;
use std::sync::Arc;

/// Schema 0 with `n` observations in (1, 2] and `n` in (2, 4]: count
/// 2n, sum 5n.
fn two_bucket(n: f64) -> FloatHistogram {
    FloatHistogram {
        schema: 0,
        count: 2.0 * n,
        sum: 5.0 * n,
        positive: Buckets {
            offset: 1,
            counts: vec![n, n],
        },
        ..FloatHistogram::default()
    }
}

fn hseries(pairs: &[(&str, &str)], points: &[(i64, FloatHistogram)]) -> Series {
    Series {
        labels: l(pairs),
        samples: Vec::new(),
        histograms: points.iter().map(|(t, h)| (*t, Arc::new(h.clone()))).collect(),
    }
}

/// A histogram counter (every bucket +1 each 10 s, reset to 1 at 40 s)
/// and a float counter holding its count, so a function of one can be
/// checked against the same function of the other.
fn histogram_counter() -> Mem {
    let ns = [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0];
    let t = |i: usize| i as i64 * 10_000;
    let hs: Vec<(i64, FloatHistogram)> = ns.iter().enumerate().map(|(i, n)| (t(i), two_bucket(*n))).collect();
    let cs: Vec<(i64, f64)> = ns.iter().enumerate().map(|(i, n)| (t(i), 2.0 * n)).collect();
    Mem(vec![
        hseries(&[("__name__", "h"), ("job", "a")], &hs),
        hseries(&[("__name__", "h"), ("job", "b")], &hs),
        series(&[("__name__", "c"), ("job", "a")], &cs),
    ])
}

fn one(src: &Mem, q: &str, t: i64) -> f64 {
    let v = vector(src, q, t);
    assert_eq!(v.len(), 1, "{q}: {v:?}");
    v[0].1
}

#[test]
fn a_histogram_selector_answers_its_newest_histogram() {
    let src = histogram_counter();
    match instant(&src, "h{job=\"a\"}", 25_000).unwrap() {
        Value::Vector(v) => {
            assert_eq!(v.len(), 1);
            assert_eq!(v[0].histogram.as_deref(), Some(&two_bucket(3.0)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(one(&src, "histogram_count(h{job=\"a\"})", 25_000), 6.0);
    assert_eq!(one(&src, "histogram_sum(h{job=\"a\"})", 25_000), 15.0);
    // Operations defined on floats only ignore histograms.
    assert!(vector(&src, "h + 1", 25_000).is_empty());
    assert!(vector(&src, "max(h)", 25_000).is_empty());
    assert_eq!(one(&src, "count(h)", 25_000), 2.0);
}

#[test]
fn histogram_rate_matches_the_rate_of_its_count_across_a_reset() {
    let src = histogram_counter();
    for (w, at) in [("30s", 30_000), ("1m", 60_000), ("25s", 60_000)] {
        let h = one(&src, &format!("histogram_count(rate(h{{job=\"a\"}}[{w}]))"), at);
        let c = one(&src, &format!("rate(c[{w}])"), at);
        assert!((h - c).abs() < 1e-12, "{w} at {at}: {h} vs {c}");
        let h = one(&src, &format!("histogram_sum(increase(h{{job=\"a\"}}[{w}]))"), at);
        let c = one(&src, &format!("increase(c[{w}])"), at);
        assert!((h - 2.5 * c).abs() < 1e-9, "{w} at {at}: {h} vs {c}");
    }
}

#[test]
fn histogram_quantile_and_fraction_interpolate_inside_a_bucket() {
    let src = histogram_counter();
    let at = 30_000; // n = 4: 4 in (1, 2], 4 in (2, 4]
    let q = |x: &str| one(&src, &format!("histogram_quantile({x}, h{{job=\"a\"}})"), at);
    assert_eq!(q("0.5"), 2.0);
    assert_eq!(q("0.75"), 3.0);
    assert_eq!(q("0.25"), 1.5);
    assert_eq!(q("1"), 4.0);
    assert_eq!(q("2"), f64::INFINITY);
    assert!(q("-1") == f64::NEG_INFINITY);
    let f = |a: &str, b: &str| one(&src, &format!("histogram_fraction({a}, {b}, h{{job=\"a\"}})"), at);
    assert_eq!(f("0", "2"), 0.5);
    assert_eq!(f("0", "3"), 0.75);
    assert_eq!(f("-Inf", "+Inf"), 1.0);
    // Mean 20/8 = 2.5; four at √2 (the geometric middle of (1, 2]) and
    // four at √8 (of (2, 4]).
    assert_eq!(one(&src, "histogram_avg(h{job=\"a\"})", at), 2.5);
    let var = (4.0 * (2f64.sqrt() - 2.5).powi(2) + 4.0 * (8f64.sqrt() - 2.5).powi(2)) / 8.0;
    let got = one(&src, "histogram_stdvar(h{job=\"a\"})", at);
    assert!((got - var).abs() < 1e-12, "{got} vs {var}");
    let got = one(&src, "histogram_stddev(h{job=\"a\"})", at);
    assert!((got - var.sqrt()).abs() < 1e-12, "{got}");
}

#[test]
fn summing_histograms_adds_them_bucket_by_bucket() {
    let src = histogram_counter();
    let at = 30_000;
    match instant(&src, "sum(h)", at).unwrap() {
        Value::Vector(v) => {
            assert_eq!(v.len(), 1);
            assert_eq!(v[0].histogram.as_deref(), Some(&two_bucket(8.0)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(one(&src, "histogram_count(avg(h))", at), 8.0);
    // A group mixing floats and histograms has no sum.
    assert!(vector(&src, "sum({job=\"a\"})", at).is_empty());
}

#[test]
fn a_finer_schema_meets_a_coarser_one_at_the_coarser() {
    // Schema 1: buckets (√2, 2] and (2, 2√2] of schema 1 fold into (1, 2]
    // and (2, 4] of schema 0.
    let fine = FloatHistogram {
        schema: 1,
        count: 3.0,
        sum: 6.0,
        positive: Buckets {
            offset: 2,
            counts: vec![1.0, 2.0],
        },
        ..FloatHistogram::default()
    };
    let src = Mem(vec![
        hseries(&[("__name__", "h"), ("i", "1")], &[(0, fine)]),
        hseries(&[("__name__", "h"), ("i", "2")], &[(0, two_bucket(1.0))]),
    ]);
    match instant(&src, "sum(h)", 0).unwrap() {
        Value::Vector(v) => {
            let h = v[0].histogram.as_deref().unwrap();
            assert_eq!(h.schema, 0);
            assert_eq!(h.count, 5.0);
            assert_eq!(h.positive.offset, 1);
            assert_eq!(h.positive.counts, vec![2.0, 3.0]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn histograms_answer_as_the_prometheus_api_does() {
    let src = histogram_counter();
    let v = instant(&src, "h{job=\"a\"}", 0).unwrap();
    let j = crate::json::instant_data(&v, 0);
    assert_eq!(
        j["result"][0]["histogram"],
        serde_json::json!([0.0, {"count": "2", "sum": "5", "buckets": [[0, "1", "2", "1"], [0, "2", "4", "1"]]}])
    );
    let v = instant(&src, "h{job=\"a\"}[15s]", 10_000).unwrap();
    let j = crate::json::instant_data(&v, 10_000);
    let s = &j["result"][0];
    assert!(s.get("values").is_none(), "{s}");
    assert_eq!(s["histograms"].as_array().map(Vec::len), Some(2), "{s}");
}

fn histogram_at(src: &Mem, q: &str, t: i64) -> Vec<(Labels, FloatHistogram)> {
    match instant(src, q, t).unwrap() {
        Value::Vector(v) => v
            .into_iter()
            .map(|s| {
                let h = s.histogram.unwrap_or_else(|| panic!("{q}: a float {}", s.value));
                (s.labels, h.as_ref().clone())
            })
            .collect(),
        other => panic!("{q}: not a vector: {other:?}"),
    }
}

#[test]
fn range_functions_of_histograms_follow_prometheus_3() {
    // job a: n = 1, 2, 3, 4, then a reset to 1, 2, 3 (every 10 s).
    let src = histogram_counter();
    let a = "h{job=\"a\"}";
    // The newest histogram, its name kept.
    let v = histogram_at(&src, &format!("last_over_time({a}[1m])"), 25_000);
    assert_eq!(v[0].0.get("__name__"), Some("h"));
    assert_eq!(v[0].1, two_bucket(3.0));
    assert_eq!(
        histogram_at(&src, &format!("first_over_time({a}[25s])"), 25_000)[0].1,
        two_bucket(1.0)
    );
    assert_eq!(one(&src, &format!("count_over_time({a}[1m])"), 60_000), 7.0);
    assert_eq!(one(&src, &format!("present_over_time({a}[1m])"), 60_000), 1.0);
    // Every step changes it; one is a reset.
    assert_eq!(one(&src, &format!("changes({a}[1m])"), 60_000), 6.0);
    assert_eq!(one(&src, &format!("resets({a}[1m])"), 60_000), 1.0);
    assert_eq!(one(&src, &format!("resets({a}[30s])"), 30_000), 0.0);
    // irate: the last two, per second; across the reset, the last itself.
    let mut per_s = two_bucket(1.0);
    per_s.scale(0.1);
    assert_eq!(histogram_at(&src, &format!("irate({a}[1m])"), 30_000)[0].1, per_s);
    let mut after_reset = two_bucket(1.0);
    after_reset.scale(0.1);
    assert_eq!(histogram_at(&src, &format!("irate({a}[1m])"), 40_000)[0].1, after_reset);
    assert_eq!(
        histogram_at(&src, &format!("idelta({a}[1m])"), 30_000)[0].1,
        two_bucket(1.0)
    );
    // Functions of floats only have no result for a histogram series.
    assert!(vector(&src, &format!("max_over_time({a}[1m])"), 60_000).is_empty());
    assert!(vector(&src, &format!("avg_over_time({a}[1m])"), 60_000).is_empty());
}

#[test]
fn histograms_scale_add_and_subtract_but_do_not_compare() {
    let src = histogram_counter();
    let a = "h{job=\"a\"}";
    let at = 20_000; // n = 3
    let v = histogram_at(&src, &format!("{a} * 2"), at);
    assert_eq!(v[0].0.get("__name__"), None, "arithmetic drops the name");
    assert_eq!(v[0].1, two_bucket(6.0));
    assert_eq!(histogram_at(&src, &format!("2 * {a}"), at)[0].1, two_bucket(6.0));
    assert_eq!(histogram_at(&src, &format!("{a} / 3"), at)[0].1, two_bucket(1.0));
    assert_eq!(
        histogram_at(&src, "h{job=\"a\"} + on () h{job=\"b\"}", at)[0].1,
        two_bucket(6.0)
    );
    assert_eq!(
        histogram_at(&src, &format!("{a} - {a} offset 10s"), at)[0].1,
        two_bucket(1.0)
    );
    // A histogram times a float vector, matched on its labels.
    assert_eq!(histogram_at(&src, &format!("{a} * on () c"), at)[0].1, two_bucket(18.0));
    for q in [
        format!("{a} + 1"),
        format!("1 / {a}"),
        format!("{a} * {a}"),
        format!("{a} > 0"),
        format!("{a} == bool {a}"),
        format!("{a} + on () c"),
    ] {
        assert!(vector(&src, &q, at).is_empty(), "{q}");
    }
    // Set operators pass histograms through.
    assert_eq!(histogram_at(&src, "h and on (job) c", at).len(), 1);
}
