//! A mergeable latency histogram with bounded relative error: log-linear
//! buckets (as in HdrHistogram), 128 per power of two, so any quantile it
//! reports is within 0.4% of a value in the data, and values below 128 ns
//! are exact. Finding a bucket is a handful of integer operations — it sits
//! on the flush and aggregation paths. Parts keep one per (service,
//! operation); merging is adding counts.

use serde::{Deserialize, Serialize};

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

/// Sparse buckets, sorted by index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sketch {
    buckets: Vec<(i32, u64)>,
    count: u64,
    sum: f64,
    max: u64,
}

fn bucket_of(v: u64) -> i32 {
    if v < SUB {
        return v as i32;
    }
    let exp = 63 - v.leading_zeros();
    let shift = exp - SUB_BITS;
    let mantissa = ((v >> shift) & (SUB - 1)) as i32;
    (((shift + 1) << SUB_BITS) as i32) + mantissa
}

/// The middle of a bucket's range.
fn value_of(b: i32) -> f64 {
    if (b as u64) < SUB {
        return b as f64;
    }
    let shift = (b >> SUB_BITS) as u32 - 1;
    let mantissa = (b as u64) & (SUB - 1);
    let low = (SUB + mantissa) << shift;
    low as f64 + ((1u64 << shift) as f64 - 1.0) / 2.0
}

/// `v` kept to its 4 most significant bits, rounded to the middle of the
/// step they leave (values below 16 exact): at most 8 values per power of
/// two, within 6.25% of `v`. Per-minute sketches hold coarse values, so a
/// minute of an operation costs a few dozen buckets however many spans it
/// saw.
pub fn coarse(v: u64) -> u64 {
    if v < 16 {
        return v;
    }
    let shift = 63 - v.leading_zeros() - 3;
    ((v >> shift) << shift) | ((1u64 << shift) >> 1)
}

impl Sketch {
    pub fn new() -> Self {
        Sketch::default()
    }

    /// How many values fall in buckets above the one `v` falls in: none of
    /// them is ≤ `v`, so under "nothing changed" this share is at most the
    /// share of values above `v`.
    pub fn count_above(&self, v: u64) -> u64 {
        let b = bucket_of(v);
        let from = self.buckets.partition_point(|(i, _)| *i <= b);
        self.buckets[from..].iter().map(|(_, n)| n).sum()
    }

    /// Buckets held (a measure of its memory).
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    pub fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    fn add_n(&mut self, v: u64, n: u64) {
        self.count_bucket(bucket_of(v), n);
        self.count += n;
        self.sum += v as f64 * n as f64;
        self.max = self.max.max(v);
    }

    /// Adds `n` to bucket `b`'s count alone (not to count, sum or max).
    fn count_bucket(&mut self, b: i32, n: u64) {
        match self.buckets.binary_search_by_key(&b, |(i, _)| *i) {
            Ok(pos) => self.buckets[pos].1 += n,
            Err(pos) => self.buckets.insert(pos, (b, n)),
        }
    }

    /// One sketch of many: their buckets gathered, sorted once and summed
    /// (rather than a merge, and an allocation, per sketch).
    pub fn merged<'a>(sketches: impl IntoIterator<Item = &'a Sketch>) -> Sketch {
        let mut out = Sketch::default();
        let mut all: Vec<(i32, u64)> = Vec::new();
        for s in sketches {
            all.extend_from_slice(&s.buckets);
            out.count += s.count;
            out.sum += s.sum;
            out.max = out.max.max(s.max);
        }
        all.sort_unstable_by_key(|(b, _)| *b);
        for (b, n) in all {
            match out.buckets.last_mut() {
                Some((last, m)) if *last == b => *m += n,
                _ => out.buckets.push((b, n)),
            }
        }
        out
    }

    pub fn merge(&mut self, other: &Sketch) {
        if other.count == 0 && other.buckets.is_empty() {
            return;
        }
        if self.buckets.is_empty() {
            self.buckets.extend_from_slice(&other.buckets);
            self.count += other.count;
            self.sum += other.sum;
            self.max = self.max.max(other.max);
            return;
        }
        let mut merged = Vec::with_capacity(self.buckets.len() + other.buckets.len());
        let (a, b) = (&self.buckets, &other.buckets);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Equal => {
                    merged.push((a[i].0, a[i].1 + b[j].1));
                    i += 1;
                    j += 1;
                }
                std::cmp::Ordering::Less => {
                    merged.push(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    merged.push(b[j]);
                    j += 1;
                }
            }
        }
        merged.extend_from_slice(&a[i..]);
        merged.extend_from_slice(&b[j..]);
        self.buckets = merged;
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Adds many values at once (reordering them): their buckets sorted
    /// and merged in one pass, where adding one at a time is a search and
    /// an insert into the sorted list each.
    pub fn add_all(&mut self, values: &mut [u64]) {
        if values.is_empty() {
            return;
        }
        values.sort_unstable();
        let mut run = Sketch::default();
        for &v in values.iter() {
            let b = bucket_of(v);
            match run.buckets.last_mut() {
                Some((last, n)) if *last == b => *n += 1,
                _ => run.buckets.push((b, 1)),
            }
            run.count += 1;
            run.sum += v as f64;
        }
        run.max = values[values.len() - 1];
        self.merge(&run);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Sets the maximum to `max`: the exact one, kept beside a sketch of
    /// rounded values (per-minute statistics), whose own is rounded too.
    pub fn set_max(&mut self, max: u64) {
        self.max = max;
    }

    /// The nearest-rank `q` quantile (0 < q ≤ 1), within 0.4% relative error;
    /// never above the exact maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return (value_of(*i).round() as u64).min(self.max);
            }
        }
        self.max
    }
}

/// A sparse sketch whose values are added [`FOLD_AT`] at a time
/// ([`Sketch::add_all`]): small while few values came (aggregations keep
/// one per group, and groups can be many), cheap per value when many do.
#[derive(Debug, Clone, Default)]
pub struct BatchedSketch {
    sketch: Sketch,
    pending: Vec<u64>,
}

impl BatchedSketch {
    pub fn add(&mut self, v: u64) {
        self.pending.push(v);
        if self.pending.len() >= FOLD_AT {
            self.sketch.add_all(&mut self.pending);
            self.pending.clear();
        }
    }

    pub fn finish(mut self) -> Sketch {
        self.sketch.add_all(&mut self.pending);
        self.sketch
    }
}

/// A sketch being built one value at a time. Its buckets are a dense
/// window, so adding a value is an index rather than a search and an
/// insert into a sorted list; [`SketchBuilder::sketch`] gives exactly the
/// [`Sketch`] the same adds would. A window spans at most the ~7,400
/// buckets of the whole u64 range (58 KB), and in practice the few
/// thousand between an operation's fastest and slowest span.
///
/// Values wait in a short list and are counted [`FOLD_AT`] at a time: the
/// hot tier keeps a builder per operation, hundreds of windows together too
/// big for the CPU caches, and counting one value at a time as spans
/// arrive cost a cache miss per span.
#[derive(Debug, Clone, Default)]
pub struct SketchBuilder {
    first: i32,
    counts: Vec<u64>,
    pending: Vec<u64>,
    count: u64,
    sum: f64,
    max: u64,
}

const FOLD_AT: usize = 256;

impl SketchBuilder {
    pub fn add(&mut self, v: u64) {
        self.pending.push(v);
        self.count += 1;
        self.sum += v as f64;
        self.max = self.max.max(v);
        if self.pending.len() >= FOLD_AT {
            self.fold();
        }
    }

    /// Counts the pending values into the window, grown once to fit them.
    fn fold(&mut self) {
        // Buckets ascend with values: the extremes bound the window.
        let (Some(&min), Some(&max)) = (self.pending.iter().min(), self.pending.iter().max()) else {
            return;
        };
        self.cover(bucket_of(min), bucket_of(max));
        for v in self.pending.drain(..) {
            self.counts[(bucket_of(v) - self.first) as usize] += 1;
        }
    }

    /// Grows the window to hold buckets `lo..=hi`.
    fn cover(&mut self, lo: i32, hi: i32) {
        if self.counts.is_empty() {
            self.first = lo;
        } else if lo < self.first {
            let grow = (self.first - lo) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = lo;
        }
        let len = (hi - self.first) as usize + 1;
        if len > self.counts.len() {
            self.counts.resize(len, 0);
        }
    }

    /// Adds `other`'s values: an index per bucket of `other`, where merging
    /// two sorted bucket lists walks (and copies) both.
    pub fn merge(&mut self, other: &Sketch) {
        let (Some(&(lo, _)), Some(&(hi, _))) = (other.buckets.first(), other.buckets.last()) else {
            self.count += other.count;
            self.sum += other.sum;
            self.max = self.max.max(other.max);
            return;
        };
        self.cover(lo, hi);
        for &(b, n) in &other.buckets {
            self.counts[(b - self.first) as usize] += n;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub fn sketch(&self) -> Sketch {
        let mut s = Sketch {
            buckets: (self.first..)
                .zip(&self.counts)
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| (b, *n))
                .collect(),
            count: self.count,
            sum: self.sum,
            max: self.max,
        };
        for v in &self.pending {
            s.count_bucket(bucket_of(*v), 1);
        }
        s
    }
}

/// A sum of sketches, as an aggregation keeps per group. Sparse while it
/// holds few buckets, so that many small groups stay small; a dense
/// [`SketchBuilder`] window from [`DENSE_AT`] buckets on, so that summing
/// the sketches of hundreds of parts costs an index per bucket of each
/// rather than a walk of the whole sum per part (two thirds of a services
/// query over 41 parts, before).
#[derive(Debug, Clone)]
pub enum SketchSum {
    Sparse(Sketch),
    Dense(SketchBuilder),
}

/// Buckets from which a [`SketchSum`] is dense. Its window is at most
/// ~7,400 buckets of 8 bytes, against at least this many of 16 sparse.
const DENSE_AT: usize = 256;

impl Default for SketchSum {
    fn default() -> Self {
        SketchSum::Sparse(Sketch::default())
    }
}

impl SketchSum {
    pub fn add(&mut self, v: u64) {
        match self {
            SketchSum::Sparse(s) => {
                s.add(v);
                self.densify_if_big();
            }
            SketchSum::Dense(d) => d.add(v),
        }
    }

    pub fn merge(&mut self, other: &Sketch) {
        match self {
            SketchSum::Sparse(s) => {
                s.merge(other);
                self.densify_if_big();
            }
            SketchSum::Dense(d) => d.merge(other),
        }
    }

    pub fn merge_sum(&mut self, other: &SketchSum) {
        match other {
            SketchSum::Sparse(o) => self.merge(o),
            SketchSum::Dense(o) => self.merge(&o.sketch()),
        }
    }

    fn densify_if_big(&mut self) {
        if let SketchSum::Sparse(s) = self
            && s.buckets.len() >= DENSE_AT
        {
            let mut d = SketchBuilder::default();
            d.merge(s);
            *self = SketchSum::Dense(d);
        }
    }

    /// The sum as one sketch.
    pub fn sketch(&self) -> std::borrow::Cow<'_, Sketch> {
        match self {
            SketchSum::Sparse(s) => std::borrow::Cow::Borrowed(s),
            SketchSum::Dense(d) => std::borrow::Cow::Owned(d.sketch()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exact(values: &mut [u64], q: f64) -> u64 {
        values.sort_unstable();
        let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
        values[rank - 1]
    }

    proptest! {
        #[test]
        fn quantiles_are_within_one_percent(
            values in prop::collection::vec(0u64..10_000_000_000, 1..500),
            q in 0.01f64..1.0,
        ) {
            let mut s = Sketch::new();
            for v in &values { s.add(*v); }
            let mut sorted = values.clone();
            let want = exact(&mut sorted, q) as f64;
            let got = s.quantile(q) as f64;
            prop_assert!((got - want).abs() <= want * 0.004 + 1.0, "q={q} want {want} got {got}");
        }

        #[test]
        fn builder_equals_adding_to_a_sketch(
            values in prop::collection::vec(
                prop_oneof![0u64..200, 0u64..10_000_000_000, any::<u64>()],
                0..1000,
            ),
        ) {
            let (mut b, mut s) = (SketchBuilder::default(), Sketch::new());
            for v in &values {
                b.add(*v);
                s.add(*v);
            }
            prop_assert_eq!(b.sketch(), s);
        }

        #[test]
        fn coarse_values_are_close_and_few(v in any::<u64>()) {
            let c = coarse(v);
            prop_assert!((c as f64 - v as f64).abs() <= v as f64 * 0.0625, "{v} -> {c}");
            prop_assert_eq!(coarse(c), c);
        }

        #[test]
        fn adding_all_at_once_is_adding_one_by_one(
            first in prop::collection::vec(0u64..10_000_000, 0..50),
            values in prop::collection::vec(prop_oneof![0u64..200, 0u64..u64::MAX], 0..300),
        ) {
            let (mut one, mut all) = (Sketch::new(), Sketch::new());
            for v in &first {
                one.add(*v);
                all.add(*v);
            }
            for v in &values {
                one.add(*v);
            }
            all.add_all(&mut values.clone());
            prop_assert_eq!(one.buckets, all.buckets);
            prop_assert_eq!((one.count, one.max), (all.count, all.max));
            prop_assert!((one.sum - all.sum).abs() <= one.sum * 1e-9);
        }

        #[test]
        fn count_above_counts_values_in_higher_buckets(
            values in prop::collection::vec(0u64..1_000_000, 0..200),
            v in 0u64..1_000_000,
        ) {
            let mut s = Sketch::new();
            for x in &values { s.add(*x); }
            let want = values.iter().filter(|x| bucket_of(**x) > bucket_of(v)).count() as u64;
            prop_assert_eq!(s.count_above(v), want);
            prop_assert!(s.count_above(v) <= values.iter().filter(|x| **x > v).count() as u64);
        }

        #[test]
        fn merge_equals_adding_everything(
            a in prop::collection::vec(0u64..1_000_000, 0..100),
            b in prop::collection::vec(0u64..1_000_000, 0..100),
        ) {
            let (mut sa, mut sb, mut all) = (Sketch::new(), Sketch::new(), Sketch::new());
            for v in &a { sa.add(*v); all.add(*v); }
            for v in &b { sb.add(*v); all.add(*v); }
            prop_assert_eq!(&Sketch::merged([&sa, &sb]), &all);
            sa.merge(&sb);
            prop_assert_eq!(&sa.buckets, &all.buckets);
            prop_assert_eq!(sa.count, all.count);
        }

        /// Summing sketches, values and other sums, sparse or dense, gives
        /// the sketch of every value added to one.
        #[test]
        fn a_sum_equals_adding_everything(
            parts in prop::collection::vec(
                prop::collection::vec(prop_oneof![0u64..200, 0u64..10_000_000_000, any::<u64>()], 0..300),
                0..12,
            ),
        ) {
            let (mut sum, mut all) = (SketchSum::default(), Sketch::new());
            for (i, values) in parts.iter().enumerate() {
                let mut s = Sketch::new();
                for v in values {
                    s.add(*v);
                    all.add(*v);
                }
                match i % 3 {
                    0 => sum.merge(&s),
                    1 => values.iter().for_each(|v| sum.add(*v)),
                    _ => {
                        let mut other = SketchSum::default();
                        other.merge(&s);
                        sum.merge_sum(&other);
                    }
                }
            }
            let got = sum.sketch().into_owned();
            prop_assert_eq!(&got.buckets, &all.buckets);
            prop_assert_eq!((got.count, got.max), (all.count, all.max));
            // Sums of floats differ with their order only in rounding.
            prop_assert!((got.sum - all.sum).abs() <= all.sum.abs() * 1e-9);
        }
    }
}
