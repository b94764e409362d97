//! Change detection on one series (an operation's, or a service's sum of
//! them): where, within the look-back, its error rate or latency stepped
//! up, and by how much.
//!
//! Every split point between buckets is tried; "before" is every bucket
//! left of it and "after" every bucket from it on. A split is scored by a
//! one-sided z statistic, and the best-scoring split wins:
//!
//! - errors: the two-proportion z test of the after error rate against the
//!   before one;
//! - latency: the same test on the share of spans above the series' own
//!   p50 (resp. p90), after against before (a median test, and its upper
//!   tail twin). Both sides' sizes enter the variance, so a handful of
//!   spans on one side cannot pass for a change, as they would if one
//!   side's quantile were taken as known. A span in the same sketch bucket
//!   as the threshold counts as below it, on both sides alike.
//!
//! A finding also needs an effect worth a person's time, not only a
//! significant one (see the thresholds below), and enough spans on both
//! sides. The best split of a step change is the step itself: a split
//! left or right of it mixes changed and unchanged buckets into one side
//! and dilutes the difference.

use crate::query::sketch::Sketch;

use super::series::Bucket;

/// Spans needed on each side of a split.
pub const MIN_SPANS: u64 = 10;
/// Buckets with spans needed after a split: one busy minute alone is a
/// blip, not a regression.
pub const MIN_AFTER_BUCKETS: usize = 2;
/// Minimal z score when searching (one-sided; many splits and series are
/// tried, so it is far above the usual 2–3).
pub const MIN_Z: f64 = 5.0;
/// Minimal z score of a fixed split: one test per series (p ≈ 0.001).
pub const MIN_Z_FIXED: f64 = 3.0;
/// Errors: the after rate must exceed the before rate by this much
/// (absolute) and be at least `ERROR_FACTOR` times it.
pub const ERROR_RATE_DELTA: f64 = 0.05;
pub const ERROR_FACTOR: f64 = 2.0;
/// Errors needed after the split.
pub const MIN_ERRORS: u64 = 5;
/// Latency: the after p50 or p95 at least this many times the before one.
pub const LATENCY_FACTOR: f64 = 1.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Errors,
    Latency,
}

/// Counts of one side of a split.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Side {
    pub spans: u64,
    pub errors: u64,
    pub durations: Sketch,
}

impl Side {
    pub fn error_rate(&self) -> f64 {
        if self.spans == 0 {
            0.0
        } else {
            self.errors as f64 / self.spans as f64
        }
    }

    fn add(&mut self, b: &Bucket) {
        self.spans += b.count;
        self.errors += b.errors;
        self.durations.merge(&b.durations);
    }
}

/// A change found in one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kind: Kind,
    /// The first bucket after the change.
    pub at: usize,
    pub z: f64,
    pub before: Side,
    pub after: Side,
}

/// Where the split may go: anywhere (change detection), or at one fixed
/// bucket (the `--last/--baseline` form: the baseline is before, the
/// current window after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Search,
    At(usize),
}

/// What the tests read of one bucket: its spans, errors, and spans above
/// each latency threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub spans: u64,
    pub errors: u64,
    pub above: [u64; 2],
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.spans += o.spans;
        self.errors += o.errors;
        self.above[0] += o.above[0];
        self.above[1] += o.above[1];
    }
}

/// The counts of one series, its latency thresholds the series' own p50
/// and p90 (the same for every split).
pub fn counts(series: &[Bucket]) -> Vec<Counts> {
    let all = Sketch::merged(series.iter().map(|b| &b.durations));
    let thresholds = [all.quantile(0.5), all.quantile(0.9)];
    series
        .iter()
        .map(|b| Counts {
            spans: b.count,
            errors: b.errors,
            above: thresholds.map(|t| b.durations.count_above(t)),
        })
        .collect()
}

/// The error and latency changes of one series (at most one of each).
#[cfg(test)]
pub fn detect(series: &[Bucket], split: Split) -> Vec<Change> {
    detect_counts(&counts(series), split, |k| sides(&[series], k))
}

/// The two sides of a split at bucket `k` of one or more series of the
/// same buckets (a service's operations).
pub fn sides(series: &[&[Bucket]], k: usize) -> (Side, Side) {
    let (mut b, mut a) = (Side::default(), Side::default());
    for s in series {
        s[..k].iter().for_each(|x| b.add(x));
        s[k..].iter().for_each(|x| a.add(x));
    }
    (b, a)
}

/// [`detect`] with the counts given, and the sides of a split (with their
/// sketches) built by `sides` only for the few splits that score high
/// enough. A service's counts are the sum of its operations', each
/// operation's spans counted above its own thresholds, so traffic moving
/// from a fast operation to a slow one does not pass for a slowdown.
///
/// Every test of a split is O(1) from prefix sums of the counts, so a
/// series costs O(buckets) plus sketch work for the few splits that score
/// high enough: hundreds of operations an hour stay a few milliseconds.
pub fn detect_counts(counts: &[Counts], split: Split, sides: impl Fn(usize) -> (Side, Side)) -> Vec<Change> {
    let n = counts.len();
    let total: u64 = counts.iter().map(|c| c.spans).sum();
    if n < 2 || total < 2 * MIN_SPANS {
        return Vec::new();
    }
    let prefix = |f: &dyn Fn(&Counts) -> u64| -> Vec<u64> {
        let mut v = Vec::with_capacity(n + 1);
        v.push(0);
        for c in counts {
            v.push(v[v.len() - 1] + f(c));
        }
        v
    };
    let spans = prefix(&|c| c.spans);
    let errors = prefix(&|c| c.errors);
    let busy = prefix(&|c| (c.spans > 0) as u64);
    let above: Vec<Vec<u64>> = (0..2).map(|i| prefix(&|c| c.above[i])).collect();
    let splits: Vec<usize> = match split {
        Split::Search => (1..n).collect(),
        Split::At(k) if k >= 1 && k < n => vec![k],
        Split::At(_) => Vec::new(),
    };
    let min_z = if split == Split::Search { MIN_Z } else { MIN_Z_FIXED };
    let mut error_best: Option<(f64, usize)> = None;
    let mut latency: Vec<(f64, usize)> = Vec::new();
    for k in splits {
        let (nb, na) = (spans[k], spans[n] - spans[k]);
        if nb < MIN_SPANS || na < MIN_SPANS {
            continue;
        }
        if split == Split::Search && ((busy[n] - busy[k]) as usize) < MIN_AFTER_BUCKETS {
            continue;
        }
        let (xb, xa) = (errors[k], errors[n] - errors[k]);
        if let Some(z) = error_z(xa, na, xb, nb)
            && z >= min_z
            && error_best.is_none_or(|(best, _)| z > best)
        {
            error_best = Some((z, k));
        }
        let z = above
            .iter()
            .map(|p| two_proportion_z(p[n] - p[k], na, p[k], nb))
            .fold(0.0, f64::max);
        if z >= min_z {
            latency.push((z, k));
        }
    }
    let mut out = Vec::new();
    if let Some((z, at)) = error_best {
        let (before, after) = sides(at);
        out.push(Change {
            kind: Kind::Errors,
            at,
            z,
            before,
            after,
        });
    }
    // The strongest latency split whose effect is big enough too (a few
    // are tried: the effect check needs the sides' sketches).
    latency.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    for &(z, at) in latency.iter().take(LATENCY_CANDIDATES) {
        let (before, after) = sides(at);
        if latency_grew(&before, &after) {
            out.push(Change {
                kind: Kind::Latency,
                at,
                z,
                before,
                after,
            });
            break;
        }
    }
    out
}

/// Latency splits checked for their effect, best z first.
const LATENCY_CANDIDATES: usize = 8;

/// One-sided z score of `xa` of `na` against `xb` of `nb` (is the first
/// share higher?), from the likelihood-ratio test of two binomials: the
/// signed square root of G = 2·(log-likelihood with a share per side −
/// with one pooled share). Unlike the two-proportion z test it stays
/// honest in the tails with few events (a handful of spans after a split,
/// a rare error), where the normal approximation calls a chance cluster
/// significant and would also pull the best split toward larger samples.
fn two_proportion_z(xa: u64, na: u64, xb: u64, nb: u64) -> f64 {
    let (pa, pb) = (xa as f64 / na as f64, xb as f64 / nb as f64);
    if pa <= pb {
        return 0.0;
    }
    let g = 2.0 * (log_likelihood(xa, na) + log_likelihood(xb, nb) - log_likelihood(xa + xb, na + nb));
    g.max(0.0).sqrt()
}

/// The log-likelihood of `x` events in `n` at the share `x / n`.
fn log_likelihood(x: u64, n: u64) -> f64 {
    let xlnp = |k: u64| {
        if k == 0 {
            0.0
        } else {
            k as f64 * (k as f64 / n as f64).ln()
        }
    };
    xlnp(x) + xlnp(n - x)
}

/// The z score of an error-rate rise from `xb` of `nb` to `xa` of `na`,
/// if the rise is big enough to matter.
fn error_z(xa: u64, na: u64, xb: u64, nb: u64) -> Option<f64> {
    let (pb, pa) = (xb as f64 / nb as f64, xa as f64 / na as f64);
    if xa < MIN_ERRORS || pa < pb + ERROR_RATE_DELTA || pa < ERROR_FACTOR * pb {
        return None;
    }
    Some(two_proportion_z(xa, na, xb, nb))
}

/// Whether the after p50 or p95 grew by [`LATENCY_FACTOR`].
fn latency_grew(b: &Side, a: &Side) -> bool {
    let grew = |q: f64| a.durations.quantile(q) as f64 >= LATENCY_FACTOR * b.durations.quantile(q).max(1) as f64;
    grew(0.5) || grew(0.95)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::sketch::coarse;

    /// A series of `n` buckets of `per` spans each, the bucket at `i`
    /// given durations and errors by `f(i, j)`.
    fn series(n: usize, per: u64, f: impl Fn(usize, u64) -> (u64, bool)) -> Vec<Bucket> {
        (0..n)
            .map(|i| {
                let mut b = Bucket::default();
                for j in 0..per {
                    let (d, e) = f(i, j);
                    b.count += 1;
                    b.errors += e as u64;
                    b.durations.add(coarse(d));
                }
                b
            })
            .collect()
    }

    /// A deterministic spread of durations around `base` (±40%).
    fn jitter(base: u64, j: u64) -> u64 {
        let x = (j.wrapping_mul(2654435761) % 1000) as f64 / 1000.0;
        (base as f64 * (0.6 + 0.8 * x)) as u64
    }

    #[test]
    fn small_counts_are_not_taken_for_a_change() {
        // 5 errors in 32 spans at a 1.7% base rate: the exact binomial tail
        // is 1.95e-4 (z ≈ 3.5); the normal approximation said 5.6.
        let z = two_proportion_z(5, 32, 25, 1468);
        assert!((3.2..4.0).contains(&z), "{z}");
        // Many events: clear.
        assert!(two_proportion_z(300, 1000, 100, 1000) > 10.0);
        assert_eq!(two_proportion_z(1, 100, 5, 100), 0.0);
        assert!(two_proportion_z(10, 10, 0, 10).is_finite());
    }

    #[test]
    fn a_latency_step_is_found_where_it_happened() {
        let s = series(60, 30, |i, j| {
            (jitter(if i >= 37 { 8_000_000 } else { 1_000_000 }, j), false)
        });
        let c = detect(&s, Split::Search);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].kind, c[0].at), (Kind::Latency, 37));
        assert!(c[0].after.durations.quantile(0.5) > 6 * c[0].before.durations.quantile(0.5));
    }

    #[test]
    fn an_error_step_is_found_where_it_happened() {
        // 1% errors, then 30% from bucket 12.
        let s = series(60, 40, |i, j| {
            let rate = if i >= 12 { 30 } else { 1 };
            (jitter(1_000_000, j), (j * 7 + i as u64) % 100 < rate)
        });
        let c = detect(&s, Split::Search);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].kind, Kind::Errors);
        assert!((11..=13).contains(&c[0].at), "{}", c[0].at);
    }

    #[test]
    fn a_quiet_series_has_no_change() {
        let s = series(60, 30, |i, j| {
            (jitter(2_000_000, j + i as u64 * 31), (j + i as u64).is_multiple_of(97))
        });
        assert!(detect(&s, Split::Search).is_empty());
    }

    #[test]
    fn a_one_minute_blip_mid_hour_is_not_a_regression() {
        let s = series(60, 30, |i, j| {
            (jitter(if i == 30 { 9_000_000 } else { 1_000_000 }, j), false)
        });
        assert!(detect(&s, Split::Search).is_empty(), "{:?}", detect(&s, Split::Search));
    }

    #[test]
    fn a_fixed_split_judges_that_split_alone() {
        // The last minute slowed down: the search puts the change in the
        // last two minutes (its minimum), the fixed split exactly at it.
        let s = series(60, 30, |i, j| {
            (jitter(if i == 59 { 9_000_000 } else { 1_000_000 }, j), false)
        });
        let c = detect(&s, Split::At(59));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].at, 59);
        assert_eq!(detect(&s, Split::Search)[0].at, 58);
        assert!(detect(&s, Split::At(20)).is_empty());
    }

    #[test]
    fn too_few_spans_judge_nothing() {
        // 8 spans before the step: short of MIN_SPANS; 10 would do.
        let s = series(20, 2, |i, j| {
            (jitter(if i >= 4 { 9_000_000 } else { 1_000_000 }, j), i >= 4)
        });
        assert!(detect(&s, Split::At(4)).is_empty());
        assert!(detect(&s, Split::At(5)).iter().any(|c| c.kind == Kind::Errors));
    }
}
