//! Prometheus remote write 1.0 messages: a protobuf `WriteRequest`,
//! compressed with snappy's block format. The server decodes them
//! (`skein_server::prometheus::remote_write`); the tests and the
//! benchmark send them.

use prost::Message;

use crate::metric::{ExpBuckets, ExpHistogramValue, MAX_EXP_BUCKET_INDEX};

#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// Native histogram samples (tag 3, exemplars, is not read).
    #[prost(message, repeated, tag = "4")]
    pub histograms: Vec<Histogram>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// A native histogram sample. Buckets come as spans (the first span's
/// offset is the index of its first bucket, a later one's the gap after
/// the span before) and, for an integer histogram, count deltas (each
/// bucket's count less the one before it, across spans), or for a float
/// histogram absolute counts.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    #[prost(oneof = "histogram::Count", tags = "1, 2")]
    pub count: Option<histogram::Count>,
    #[prost(double, tag = "3")]
    pub sum: f64,
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    #[prost(double, tag = "5")]
    pub zero_threshold: f64,
    #[prost(oneof = "histogram::ZeroCount", tags = "6, 7")]
    pub zero_count: Option<histogram::ZeroCount>,
    #[prost(message, repeated, tag = "8")]
    pub negative_spans: Vec<BucketSpan>,
    #[prost(sint64, repeated, tag = "9")]
    pub negative_deltas: Vec<i64>,
    #[prost(double, repeated, tag = "10")]
    pub negative_counts: Vec<f64>,
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    #[prost(sint64, repeated, tag = "12")]
    pub positive_deltas: Vec<i64>,
    #[prost(double, repeated, tag = "13")]
    pub positive_counts: Vec<f64>,
    /// 0 unknown, 1 a counter reset, 2 no reset, 3 a gauge histogram.
    #[prost(int32, tag = "14")]
    pub reset_hint: i32,
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
}

pub mod histogram {
    /// The observation count: an integer histogram's, or a float
    /// histogram's.
    #[derive(Clone, Copy, PartialEq, prost::Oneof)]
    pub enum Count {
        #[prost(uint64, tag = "1")]
        Int(u64),
        #[prost(double, tag = "2")]
        Float(f64),
    }

    /// The zero bucket's count, as [`Count`].
    #[derive(Clone, Copy, PartialEq, prost::Oneof)]
    pub enum ZeroCount {
        #[prost(uint64, tag = "6")]
        Int(u64),
        #[prost(double, tag = "7")]
        Float(f64),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BucketSpan {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// How a float count reads as an exact integer count.
fn exact_count(what: &str, x: f64) -> Result<u64, String> {
    if x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(53) {
        Ok(x as u64)
    } else {
        Err(format!(
            "{what} {x} is not a whole number of observations (float histograms with fractional counts are not stored)"
        ))
    }
}

impl Histogram {
    /// Whether this is a staleness marker (Prometheus marks a histogram
    /// series stale with the stale NaN as its sum).
    pub fn is_stale(&self) -> bool {
        self.sum.to_bits() == 0x7ff0_0000_0000_0002
    }

    fn float(&self) -> bool {
        matches!(self.count, Some(histogram::Count::Float(_)))
            || !self.positive_counts.is_empty()
            || !self.negative_counts.is_empty()
    }

    /// This histogram as an OTLP exponential histogram point value: the
    /// schema is the scale, Prometheus's bucket `i` is OTLP's `i - 1`,
    /// buckets are dense from the first to the last. Refuses a schema
    /// outside -4..=8 (custom buckets included), spans that do not cover
    /// the counts, a negative bucket count, a fractional count, and more
    /// than `max_buckets` dense buckets in all: a sparse histogram of a
    /// few bytes can span any range, so the caller bounds what its bytes
    /// may grow to.
    pub fn to_exponential(&self, max_buckets: usize) -> Result<ExpHistogramValue, String> {
        if !(-4..=8).contains(&self.schema) {
            return Err(format!(
                "schema {} (only the exponential schemas -4 to 8 are stored)",
                self.schema
            ));
        }
        let float = self.float();
        let mut room = max_buckets;
        let mut side = |name: &str, spans: &[BucketSpan], deltas: &[i64], counts: &[f64]| {
            let mut indexed: Vec<(i64, u64)> = Vec::new();
            let mut idx = 0i64;
            let mut k = 0usize;
            let mut count = 0i64;
            for (n, span) in spans.iter().enumerate() {
                // Buckets ascend: only the first span may start anywhere
                // (as Prometheus validates them).
                if n > 0 && span.offset < 0 {
                    return Err(format!(
                        "the {name} span number {} has a negative offset ({})",
                        n + 1,
                        span.offset
                    ));
                }
                idx += i64::from(span.offset);
                for _ in 0..span.length {
                    let given = if float { counts.len() } else { deltas.len() };
                    if k >= given {
                        return Err(format!("the {name} spans cover more buckets than its {given} counts"));
                    }
                    let c = if float {
                        exact_count(&format!("a {name} bucket count"), counts[k])?
                    } else {
                        count = count.saturating_add(deltas[k]);
                        u64::try_from(count).map_err(|_| format!("a {name} bucket count is negative ({count})"))?
                    };
                    indexed.push((idx, c));
                    idx += 1;
                    k += 1;
                }
            }
            let given = if float { counts.len() } else { deltas.len() };
            if k != given {
                return Err(format!("the {name} spans cover {k} buckets, but it has {given} counts"));
            }
            let (Some(first), Some(last)) = (indexed.first(), indexed.last()) else {
                return Ok(None);
            };
            let (first, last) = (first.0, last.0);
            if first.abs().max(last.abs()) > MAX_EXP_BUCKET_INDEX {
                return Err(format!(
                    "a {name} bucket index of {} (no float falls beyond ±{MAX_EXP_BUCKET_INDEX})",
                    if first.abs() > last.abs() { first } else { last }
                ));
            }
            let span = (last - first + 1) as u64;
            if span > room as u64 {
                return Err(format!(
                    "{name} buckets spanning {span} indexes, more than the {room} its request has room for"
                ));
            }
            room -= span as usize;
            let mut dense = vec![0u64; (last - first + 1) as usize];
            for (i, c) in indexed {
                dense[(i - first) as usize] += c;
            }
            let offset = i32::try_from(first - 1).map_err(|_| format!("a {name} bucket index out of range"))?;
            Ok(Some(ExpBuckets {
                offset,
                bucket_counts: dense,
            }))
        };
        let count = match self.count {
            Some(histogram::Count::Int(c)) => c,
            Some(histogram::Count::Float(x)) => exact_count("the count", x)?,
            None => 0,
        };
        let zero_count = match self.zero_count {
            Some(histogram::ZeroCount::Int(c)) => c,
            Some(histogram::ZeroCount::Float(x)) => exact_count("the zero bucket's count", x)?,
            None => 0,
        };
        if self.zero_threshold.is_nan() || self.zero_threshold < 0.0 {
            return Err(format!("a zero threshold of {}", self.zero_threshold));
        }
        Ok(ExpHistogramValue {
            count,
            sum: Some(self.sum),
            scale: self.schema,
            zero_count,
            positive: side(
                "positive",
                &self.positive_spans,
                &self.positive_deltas,
                &self.positive_counts,
            )?,
            negative: side(
                "negative",
                &self.negative_spans,
                &self.negative_deltas,
                &self.negative_counts,
            )?,
            min: None,
            max: None,
            zero_threshold: self.zero_threshold,
        })
    }

    /// An integer histogram of `schema` from `(bucket index, count)`
    /// pairs in ascending index order, each side as Prometheus encodes it
    /// (a new span after a gap). For tests and the benchmark.
    pub fn from_buckets(
        timestamp: i64,
        schema: i32,
        zero: (f64, u64),
        positive: &[(i32, u64)],
        negative: &[(i32, u64)],
        sum: f64,
    ) -> Histogram {
        fn encode(b: &[(i32, u64)]) -> (Vec<BucketSpan>, Vec<i64>) {
            let mut spans: Vec<BucketSpan> = Vec::new();
            let mut deltas = Vec::new();
            let mut next = 0i32;
            let mut prev = 0i64;
            for &(i, c) in b {
                match spans.last_mut() {
                    Some(s) if i == next => s.length += 1,
                    last => {
                        let offset = if last.is_none() { i } else { i - next };
                        spans.push(BucketSpan { offset, length: 1 });
                    }
                }
                next = i + 1;
                deltas.push(c as i64 - prev);
                prev = c as i64;
            }
            (spans, deltas)
        }
        let (positive_spans, positive_deltas) = encode(positive);
        let (negative_spans, negative_deltas) = encode(negative);
        let count = zero.1 + positive.iter().chain(negative).map(|b| b.1).sum::<u64>();
        Histogram {
            count: Some(histogram::Count::Int(count)),
            sum,
            schema,
            zero_threshold: zero.0,
            zero_count: Some(histogram::ZeroCount::Int(zero.1)),
            negative_spans,
            negative_deltas,
            positive_spans,
            positive_deltas,
            timestamp,
            ..Default::default()
        }
    }
}

/// Encodes a request as Prometheus sends it (for tests and the CLI).
pub fn encode(req: &WriteRequest) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(&req.encode_to_vec())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_deltas_expand_to_dense_otlp_buckets() {
        // Buckets 1, 2 and (after a gap of two) 5; -1 on the negative side.
        let h = Histogram::from_buckets(7, 1, (0.001, 2), &[(1, 3), (2, 1), (5, 4)], &[(-1, 6)], 9.5);
        assert_eq!(
            h.positive_spans,
            vec![BucketSpan { offset: 1, length: 2 }, BucketSpan { offset: 2, length: 1 }]
        );
        assert_eq!(h.positive_deltas, vec![3, -2, 3]);
        let back = Histogram::decode(h.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back, h);
        let e = h.to_exponential(1 << 20).unwrap();
        assert_eq!((e.count, e.zero_count, e.scale, e.sum), (16, 2, 1, Some(9.5)));
        assert_eq!(
            e.positive,
            Some(ExpBuckets {
                offset: 0,
                bucket_counts: vec![3, 1, 0, 0, 4]
            })
        );
        assert_eq!(
            e.negative,
            Some(ExpBuckets {
                offset: -2,
                bucket_counts: vec![6]
            })
        );
    }

    #[test]
    fn a_float_histogram_with_whole_counts_is_stored_and_others_refused() {
        let mut h = Histogram {
            count: Some(histogram::Count::Float(3.0)),
            positive_spans: vec![BucketSpan { offset: 0, length: 2 }],
            positive_counts: vec![1.0, 2.0],
            ..Default::default()
        };
        let e = h.to_exponential(1 << 20).unwrap();
        assert_eq!(
            e.positive,
            Some(ExpBuckets {
                offset: -1,
                bucket_counts: vec![1, 2]
            })
        );
        h.positive_counts[1] = 1.5;
        assert!(h.to_exponential(1 << 20).unwrap_err().contains("not a whole number"));
    }

    #[test]
    fn bad_histograms_are_refused_with_the_reason() {
        let mut h = Histogram::from_buckets(0, 0, (0.0, 0), &[(1, 3), (2, 1)], &[], 1.0);
        h.positive_deltas.push(1);
        assert!(
            h.to_exponential(1 << 20)
                .unwrap_err()
                .contains("cover 2 buckets, but it has 3")
        );
        let mut h = Histogram::from_buckets(0, 0, (0.0, 0), &[(1, 3), (2, 1)], &[], 1.0);
        h.positive_deltas[1] = -5;
        assert!(h.to_exponential(1 << 20).unwrap_err().contains("negative"));
        // A later span going back (found by the fuzzer: the buckets were
        // taken to ascend, and one landed before the first).
        let mut h = Histogram::from_buckets(0, 0, (0.0, 0), &[(1, 3), (4, 1)], &[], 1.0);
        h.positive_spans[1].offset = -5;
        let e = h.to_exponential(1 << 20).unwrap_err();
        assert!(
            e.contains("the positive span number 2 has a negative offset (-5)"),
            "{e}"
        );
        let h = Histogram::from_buckets(0, -53, (0.0, 0), &[(1, 3)], &[], 1.0);
        assert!(h.to_exponential(1 << 20).unwrap_err().contains("schema -53"));
        // Two buckets far apart: a few bytes spanning 200 thousand indexes.
        let h = Histogram::from_buckets(0, 0, (0.0, 0), &[(1, 3), (200_000, 1)], &[], 1.0);
        let e = h.to_exponential(1 << 16).unwrap_err();
        assert!(e.contains("spanning 200000 indexes, more than the 65536"), "{e}");
        let h = Histogram::from_buckets(0, 0, (0.0, 0), &[], &[(-300_000, 1)], 1.0);
        let e = h.to_exponential(1 << 16).unwrap_err();
        assert!(e.contains("a negative bucket index of -300000"), "{e}");
        // The room is for both sides.
        let h = Histogram::from_buckets(0, 0, (0.0, 0), &[(1, 3), (4, 1)], &[(1, 1), (2, 1)], 1.0);
        assert!(h.to_exponential(6).is_ok());
        assert!(h.to_exponential(5).unwrap_err().contains("negative buckets spanning 2"));
    }
}
