//! Prometheus native histograms (`FloatHistogram`): exponential buckets
//! of `schema` (bucket `i` of a positive value is `(b^(i-1), b^i]` with
//! `b = 2^(2^-schema)`; negatives mirror it), a zero bucket
//! `[-zero_threshold, zero_threshold]`, a count and a sum.
//!
//! The arithmetic is Prometheus's: two histograms of different schemas
//! meet at the coarser one, zero buckets at the wider one; counter resets
//! are detected bucket by bucket; a quantile interpolates linearly inside
//! its bucket (Prometheus 2.x).

use skein_model::metric::{ExpBuckets, ExpHistogramValue, MAX_EXP_BUCKET_INDEX};

/// The finest and coarsest schemas Prometheus has.
pub const MAX_SCHEMA: i32 = 8;
pub const MIN_SCHEMA: i32 = -4;
/// The finest scale OTLP has.
const MAX_OTLP_SCALE: i32 = 20;

/// One side's buckets: `counts[k]` is bucket `offset + k`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Buckets {
    pub offset: i32,
    pub counts: Vec<f64>,
}

impl Buckets {
    fn get(&self, i: i32) -> f64 {
        let k = i64::from(i) - i64::from(self.offset);
        if k < 0 {
            return 0.0;
        }
        self.counts.get(k as usize).copied().unwrap_or(0.0)
    }

    fn indexed(&self) -> impl Iterator<Item = (i32, f64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .map(|(k, c)| (self.offset + k as i32, *c))
    }

    /// Adds `c` to bucket `i`, growing the range as needed.
    fn add_at(&mut self, i: i32, c: f64) {
        if self.counts.is_empty() {
            self.offset = i;
        }
        if i < self.offset {
            let grow = (self.offset - i) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0.0, grow));
            self.offset = i;
        }
        let k = (i - self.offset) as usize;
        if k >= self.counts.len() {
            self.counts.resize(k + 1, 0.0);
        }
        self.counts[k] += c;
    }

    /// The buckets at a coarser schema: `delta` schemas down, each new
    /// bucket the sum of the `2^delta` it covers.
    fn coarsened(&self, delta: u32) -> Buckets {
        let mut out = Buckets::default();
        for (i, c) in self.indexed() {
            out.add_at(((i - 1) >> delta) + 1, c);
        }
        out
    }

    /// Drops leading and trailing empty buckets.
    fn trim(&mut self) {
        let Some(last) = self.counts.iter().rposition(|c| *c != 0.0) else {
            *self = Buckets::default();
            return;
        };
        self.counts.truncate(last + 1);
        let first = self.counts.iter().position(|c| *c != 0.0).unwrap_or(0);
        self.counts.drain(..first);
        self.offset += first as i32;
    }
}

/// A native histogram's values as floats (what PromQL computes with).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FloatHistogram {
    pub schema: i32,
    pub zero_threshold: f64,
    pub zero_count: f64,
    pub count: f64,
    pub sum: f64,
    pub positive: Buckets,
    pub negative: Buckets,
}

/// The upper bound of bucket `idx` of `schema` (Prometheus `getBound`):
/// `2^(idx / 2^schema)`, exact at powers of two.
pub fn bucket_bound(idx: i32, schema: i32) -> f64 {
    if schema < 0 {
        let exp = i64::from(idx) << -schema;
        if exp >= 1024 {
            return f64::MAX;
        }
        return 2f64.powi(exp as i32);
    }
    let per = 1i32 << schema;
    let frac_idx = idx & (per - 1);
    let frac = 2f64.powf(f64::from(frac_idx) / f64::from(per)) / 2.0;
    let exp = (idx >> schema) + 1;
    if frac_idx == 0 && exp == 1025 {
        return f64::MAX;
    }
    frac * 2f64.powi(exp)
}

/// A bucket as a quantile and the API see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub lower: f64,
    pub upper: f64,
    pub lower_inclusive: bool,
    pub upper_inclusive: bool,
    pub count: f64,
}

impl Bucket {
    /// The API's boundary rule: 0 `(l, u]`, 1 `[l, u)`, 2 `(l, u)`, 3
    /// `[l, u]`.
    pub fn boundary_rule(&self) -> u8 {
        match (self.lower_inclusive, self.upper_inclusive) {
            (false, true) => 0,
            (true, false) => 1,
            (false, false) => 2,
            (true, true) => 3,
        }
    }
}

impl FloatHistogram {
    /// The native histogram of an OTLP exponential histogram point (OTel
    /// "Prometheus and OpenMetrics compatibility": the scale is the
    /// schema, a finer scale than 8 is coarsened to 8, a coarser one than
    /// -4 has no Prometheus form; Prometheus's bucket `i` is OTLP's
    /// `i - 1`). `None` too for a bucket beyond any float's.
    pub fn from_otlp(h: &ExpHistogramValue) -> Option<FloatHistogram> {
        // OTLP's scales are -10 to 20.
        if h.scale < MIN_SCHEMA || h.scale > MAX_OTLP_SCALE {
            return None;
        }
        // Buckets no float falls in (at the schema they are read at):
        // refused rather than letting a sum with another histogram span
        // the gap between them.
        let shift = (h.scale - MAX_SCHEMA).max(0);
        let in_range = |b: &Option<ExpBuckets>| {
            b.as_ref().is_none_or(|b| {
                let first = i64::from(b.offset) >> shift;
                let last = (i64::from(b.offset) + b.bucket_counts.len() as i64) >> shift;
                first.abs().max(last.abs()) <= MAX_EXP_BUCKET_INDEX
            })
        };
        if !in_range(&h.positive) || !in_range(&h.negative) {
            return None;
        }
        let side = |b: &Option<ExpBuckets>| {
            let mut out = Buckets::default();
            if let Some(b) = b {
                out.offset = b.offset.saturating_add(1);
                out.counts = b.bucket_counts.iter().map(|c| *c as f64).collect();
            }
            out
        };
        let mut out = FloatHistogram {
            schema: h.scale,
            zero_threshold: h.zero_threshold,
            zero_count: h.zero_count as f64,
            count: h.count as f64,
            sum: h.sum.unwrap_or(0.0),
            positive: side(&h.positive),
            negative: side(&h.negative),
        };
        if out.schema > MAX_SCHEMA {
            out = out.to_schema(MAX_SCHEMA);
        }
        Some(out)
    }

    /// This histogram at `schema`, no finer than its own.
    pub fn to_schema(&self, schema: i32) -> FloatHistogram {
        if schema >= self.schema {
            return self.clone();
        }
        let delta = (self.schema - schema) as u32;
        FloatHistogram {
            schema,
            positive: self.positive.coarsened(delta),
            negative: self.negative.coarsened(delta),
            ..self.clone()
        }
    }

    /// Moves every bucket that starts within `[-t, t]` into the zero
    /// bucket, and widens the zero bucket to cover a populated bucket it
    /// cuts through; an empty one leaves the threshold at `t`
    /// (Prometheus `widenZeroBucket`).
    fn widen_zero_bucket(&mut self, t: f64) {
        if t <= self.zero_threshold {
            return;
        }
        let mut t = t;
        loop {
            let before = t;
            for side in [&mut self.positive, &mut self.negative] {
                for k in 0..side.counts.len() {
                    let i = side.offset + k as i32;
                    let lower = bucket_bound(i - 1, self.schema);
                    if lower >= t {
                        break;
                    }
                    let c = std::mem::take(&mut side.counts[k]);
                    self.zero_count += c;
                    let upper = bucket_bound(i, self.schema);
                    if upper > t && c != 0.0 {
                        t = upper;
                    }
                }
            }
            // A bucket cut through widened it: the other side again.
            if t == before {
                break;
            }
        }
        self.zero_threshold = t;
        self.positive.trim();
        self.negative.trim();
    }

    /// `self` and `other` at a common schema and zero bucket.
    fn reconciled(&self, other: &FloatHistogram) -> (FloatHistogram, FloatHistogram) {
        let schema = self.schema.min(other.schema);
        let mut a = self.to_schema(schema);
        let mut b = other.to_schema(schema);
        let t = a.zero_threshold.max(b.zero_threshold);
        a.widen_zero_bucket(t);
        b.widen_zero_bucket(t);
        // Widening may have gone further on one side.
        let t = a.zero_threshold.max(b.zero_threshold);
        a.widen_zero_bucket(t);
        b.widen_zero_bucket(t);
        (a, b)
    }

    fn combine(&self, other: &FloatHistogram, sign: f64) -> FloatHistogram {
        let (mut a, b) = self.reconciled(other);
        a.zero_count += sign * b.zero_count;
        a.count += sign * b.count;
        a.sum += sign * b.sum;
        for (i, c) in b.positive.indexed() {
            a.positive.add_at(i, sign * c);
        }
        for (i, c) in b.negative.indexed() {
            a.negative.add_at(i, sign * c);
        }
        a
    }

    /// `self + other`.
    pub fn add(&self, other: &FloatHistogram) -> FloatHistogram {
        self.combine(other, 1.0)
    }

    /// `self - other`.
    pub fn sub(&self, other: &FloatHistogram) -> FloatHistogram {
        self.combine(other, -1.0)
    }

    /// Every count and the sum times `f`.
    pub fn scale(&mut self, f: f64) {
        self.zero_count *= f;
        self.count *= f;
        self.sum *= f;
        for c in self.positive.counts.iter_mut().chain(self.negative.counts.iter_mut()) {
            *c *= f;
        }
    }

    /// Drops empty buckets at either end of each side.
    pub fn compact(&mut self) {
        self.positive.trim();
        self.negative.trim();
    }

    /// Whether `self`, the next sample of a counter after `prev`, shows a
    /// reset: a count or bucket went down, or the buckets cannot be
    /// compared (a finer schema, a narrower zero bucket).
    pub fn detect_reset(&self, prev: &FloatHistogram) -> bool {
        if self.count < prev.count || self.schema > prev.schema || self.zero_threshold < prev.zero_threshold {
            return true;
        }
        let mut prev = prev.to_schema(self.schema);
        prev.widen_zero_bucket(self.zero_threshold);
        if self.zero_threshold != prev.zero_threshold || self.zero_count < prev.zero_count {
            return true;
        }
        let side_down = |now: &Buckets, before: &Buckets| before.indexed().any(|(i, c)| now.get(i) < c);
        side_down(&self.positive, &prev.positive) || side_down(&self.negative, &prev.negative)
    }

    /// Every bucket, lowest first: the negative ones, the zero bucket (when
    /// it counts anything), the positive ones; bounds clipped at the zero
    /// bucket (Prometheus `AllBucketIterator`).
    pub fn buckets(&self) -> Vec<Bucket> {
        let mut out = Vec::with_capacity(self.negative.counts.len() + self.positive.counts.len() + 1);
        for (i, c) in self.negative.indexed().collect::<Vec<_>>().into_iter().rev() {
            out.push(Bucket {
                lower: -bucket_bound(i, self.schema),
                upper: (-bucket_bound(i - 1, self.schema)).min(-self.zero_threshold),
                lower_inclusive: true,
                upper_inclusive: false,
                count: c,
            });
        }
        if self.zero_count > 0.0 {
            out.push(Bucket {
                lower: -self.zero_threshold,
                upper: self.zero_threshold,
                lower_inclusive: true,
                upper_inclusive: true,
                count: self.zero_count,
            });
        }
        for (i, c) in self.positive.indexed() {
            out.push(Bucket {
                lower: bucket_bound(i - 1, self.schema).max(self.zero_threshold),
                upper: bucket_bound(i, self.schema),
                lower_inclusive: false,
                upper_inclusive: true,
                count: c,
            });
        }
        out
    }

    /// The zero bucket's bounds as a quantile reads them: from 0 when
    /// there are only positive buckets, to 0 when only negative ones.
    fn clip_zero_bucket(&self, b: &mut Bucket) {
        if b.lower < 0.0 && b.upper > 0.0 {
            let has_negative = !self.negative.counts.is_empty();
            let has_positive = !self.positive.counts.is_empty();
            if !has_negative && has_positive {
                b.lower = 0.0;
            } else if !has_positive && has_negative {
                b.upper = 0.0;
            }
        }
    }

    /// The share of observations in `[lower, upper]`, interpolated linearly
    /// inside the buckets the bounds cut (Prometheus 2.x
    /// `histogramFraction`).
    pub fn fraction(&self, lower: f64, upper: f64) -> f64 {
        if self.count == 0.0 || lower.is_nan() || upper.is_nan() {
            return f64::NAN;
        }
        if lower >= upper {
            return 0.0;
        }
        let (mut rank, mut lower_rank, mut upper_rank) = (0.0, None, None);
        for mut b in self.buckets() {
            self.clip_zero_bucket(&mut b);
            if lower_rank.is_none() && b.lower >= lower {
                lower_rank = Some(rank);
            }
            if upper_rank.is_none() && b.lower >= upper {
                upper_rank = Some(rank);
            }
            if lower_rank.is_some() && upper_rank.is_some() {
                break;
            }
            let within = |x: f64| rank + b.count * (x - b.lower) / (b.upper - b.lower);
            if lower_rank.is_none() && b.lower < lower && b.upper > lower {
                lower_rank = Some(within(lower));
            }
            if upper_rank.is_none() && b.lower < upper && b.upper > upper {
                upper_rank = Some(within(upper));
            }
            if lower_rank.is_some() && upper_rank.is_some() {
                break;
            }
            rank += b.count;
        }
        let at_most_count = |r: Option<f64>| r.map_or(self.count, |r| r.min(self.count));
        (at_most_count(upper_rank) - at_most_count(lower_rank)) / self.count
    }

    /// The `q` quantile of the observations, interpolated linearly inside
    /// its bucket (Prometheus 2.x `histogramQuantile` of a native
    /// histogram).
    pub fn quantile(&self, q: f64) -> f64 {
        if q < 0.0 {
            return f64::NEG_INFINITY;
        }
        if q > 1.0 {
            return f64::INFINITY;
        }
        if self.count == 0.0 || q.is_nan() {
            return f64::NAN;
        }
        let rank = q * self.count;
        let mut count = 0.0;
        let mut found = None;
        for b in self.buckets() {
            count += b.count;
            found = Some(b);
            if count >= rank {
                break;
            }
        }
        let Some(mut b) = found else {
            return f64::NAN;
        };
        self.clip_zero_bucket(&mut b);
        let count = count.min(self.count);
        if count < rank {
            return b.upper;
        }
        let rank = rank - (count - b.count);
        b.lower + (b.upper - b.lower) * (rank / b.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn otlp(scale: i32, offset: i32, counts: &[u64]) -> ExpHistogramValue {
        ExpHistogramValue {
            count: counts.iter().sum(),
            sum: Some(10.0),
            scale,
            positive: Some(ExpBuckets {
                offset,
                bucket_counts: counts.to_vec(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn bounds_are_powers_of_the_schemas_base() {
        assert_eq!(bucket_bound(0, 0), 1.0);
        assert_eq!(bucket_bound(1, 0), 2.0);
        assert_eq!(bucket_bound(-1, 0), 0.5);
        assert_eq!(bucket_bound(1, -1), 4.0);
        assert!((bucket_bound(1, 1) - 2f64.sqrt()).abs() < 1e-15);
        assert_eq!(bucket_bound(2, 1), 2.0);
        assert!((bucket_bound(3, 3) - 2f64.powf(3.0 / 8.0)).abs() < 1e-15);
        assert_eq!(bucket_bound(-8, 3), 0.5);
    }

    #[test]
    fn otlp_buckets_shift_by_one_and_fine_scales_coarsen_to_eight() {
        // OTLP bucket 0 of scale 0 is (1, 2]: Prometheus bucket 1.
        let h = FloatHistogram::from_otlp(&otlp(0, 0, &[3])).unwrap();
        assert_eq!(
            h.positive,
            Buckets {
                offset: 1,
                counts: vec![3.0]
            }
        );
        assert_eq!(h.buckets()[0].lower, 1.0);
        assert_eq!(h.buckets()[0].upper, 2.0);
        // Scale 10, OTLP buckets 0..4 ((1, 2^(4/1024)]) all fall in
        // Prometheus bucket 1 of schema 8.
        let h = FloatHistogram::from_otlp(&otlp(10, 0, &[1, 1, 1, 1])).unwrap();
        assert_eq!(h.schema, 8);
        assert_eq!(
            h.positive,
            Buckets {
                offset: 1,
                counts: vec![4.0]
            }
        );
        assert!(FloatHistogram::from_otlp(&otlp(-5, 0, &[1])).is_none());
        assert!(FloatHistogram::from_otlp(&otlp(21, 0, &[1])).is_none());
        // A bucket beyond any float's: none, at schema 8 and (coarsened to
        // 8) at scale 20.
        assert!(FloatHistogram::from_otlp(&otlp(8, i32::MIN, &[1])).is_none());
        assert!(FloatHistogram::from_otlp(&otlp(0, 1 << 20, &[1])).is_none());
        assert!(FloatHistogram::from_otlp(&otlp(20, 1000 << 20, &[1])).is_some());
        assert!(FloatHistogram::from_otlp(&otlp(20, 1200 << 20, &[1])).is_none());
    }

    #[test]
    fn histograms_of_different_schemas_add_at_the_coarser() {
        let a = FloatHistogram::from_otlp(&otlp(1, 0, &[1, 2, 3, 4])).unwrap(); // idx 1..4 at schema 1
        let b = FloatHistogram::from_otlp(&otlp(0, 0, &[10])).unwrap(); // idx 1 at schema 0
        let s = a.add(&b);
        assert_eq!(s.schema, 0);
        // Schema 1 buckets 1, 2 → schema 0 bucket 1; 3, 4 → 2.
        assert_eq!(
            s.positive,
            Buckets {
                offset: 1,
                counts: vec![13.0, 7.0]
            }
        );
        assert_eq!(s.count, 20.0);
        assert_eq!(
            s.sub(&b).positive,
            Buckets {
                offset: 1,
                counts: vec![3.0, 7.0]
            }
        );
    }

    #[test]
    fn a_lower_bucket_is_a_counter_reset() {
        let a = FloatHistogram::from_otlp(&otlp(0, 0, &[5, 5])).unwrap();
        let mut b = FloatHistogram::from_otlp(&otlp(0, 0, &[6, 4])).unwrap();
        assert!(b.detect_reset(&a), "bucket 2 went down");
        b.positive.counts[1] = 5.0;
        b.count = 11.0;
        assert!(!b.detect_reset(&a));
        assert!(a.detect_reset(&b));
    }

    #[test]
    fn a_quantile_interpolates_in_its_bucket() {
        // 4 observations in (1, 2], 4 in (2, 4].
        let h = FloatHistogram::from_otlp(&otlp(0, 0, &[4, 4])).unwrap();
        assert_eq!(h.quantile(0.5), 2.0);
        assert_eq!(h.quantile(0.25), 1.5);
        assert_eq!(h.quantile(0.75), 3.0);
        assert_eq!(h.quantile(1.0), 4.0);
        assert_eq!(h.quantile(2.0), f64::INFINITY);
        assert!(FloatHistogram::default().quantile(0.5).is_nan());
    }

    #[test]
    fn a_fraction_interpolates_where_its_bounds_cut() {
        let h = FloatHistogram::from_otlp(&otlp(0, 0, &[4, 4])).unwrap(); // (1, 2], (2, 4]
        assert_eq!(h.fraction(0.0, 2.0), 0.5);
        assert_eq!(h.fraction(1.5, 3.0), 0.5);
        assert_eq!(h.fraction(0.0, 100.0), 1.0);
        assert_eq!(h.fraction(3.0, 1.0), 0.0);
    }

    #[test]
    fn a_wider_zero_bucket_swallows_the_buckets_within_it() {
        let mut a = FloatHistogram::from_otlp(&otlp(0, -3, &[1, 2, 3])).unwrap(); // (1/8, 1/4], (1/4, 1/2], (1/2, 1]
        a.widen_zero_bucket(0.3);
        // (1/8, 1/4] lies within; (1/4, 1/2] is cut, so the zero bucket
        // grows to 1/2.
        assert_eq!(a.zero_threshold, 0.5);
        assert_eq!(a.zero_count, 3.0);
        assert_eq!(
            a.positive,
            Buckets {
                offset: 0,
                counts: vec![3.0]
            }
        );
        // An empty bucket cut through leaves the threshold where asked.
        let mut b = FloatHistogram::from_otlp(&otlp(0, -3, &[1, 0, 3])).unwrap();
        b.widen_zero_bucket(0.3);
        assert_eq!((b.zero_threshold, b.zero_count), (0.3, 1.0));
        assert_eq!(b.positive.offset, 0);
        assert_eq!(b.positive.counts, vec![3.0]);
    }
}
