//! Prometheus remote write bodies: snappy (block format), then the
//! protobuf `WriteRequest`, then samples and native histograms to metric
//! points, and each stored histogram read back as PromQL reads it. Byte 0
//! picks the layout: even, the rest is the body as sent; odd, the rest is
//! the protobuf, which the target compresses, so mutations reach prost and
//! the histogram decoding rather than dying in snappy.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_model::PointValue;
use skein_model::metric::MAX_EXP_BUCKET_INDEX;
use skein_server::prometheus::remote_write::decode;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&layout, rest)) = data.split_first() else {
        return;
    };
    let (body, raw_len) = if layout % 2 == 0 {
        (rest.to_vec(), snap::raw::decompress_len(rest).unwrap_or(0))
    } else {
        (
            snap::raw::Encoder::new().compress_vec(rest).expect("snappy compresses"),
            rest.len(),
        )
    };
    let Ok(d) = decode(&body, LIMIT) else { return };
    // A sparse histogram of a few bytes must not have grown past the
    // request's room: about a bucket per byte.
    let mut dense = 0;
    for p in &d.records {
        assert!(!p.metric.name.is_empty(), "a stored point has a name");
        let PointValue::ExponentialHistogram(e) = &p.value else {
            continue;
        };
        for b in [&e.positive, &e.negative].into_iter().flatten() {
            dense += b.bucket_counts.len();
            let first = i64::from(b.offset);
            let last = first + b.bucket_counts.len() as i64;
            assert!(first.abs().max(last.abs()) <= MAX_EXP_BUCKET_INDEX + 1, "{b:?}");
        }
        let (labels, h) = skein_promql::naming::native_histogram(p).expect("a stored histogram reads back");
        assert!(labels.get("__name__").is_some_and(|n| !n.is_empty()));
        if let Some(h) = h {
            // What queries do with it.
            let _ = (h.buckets(), h.quantile(0.99), h.fraction(-1.0, 1.0));
            let mut sum = h.add(&h);
            sum.compact();
            assert!(!h.detect_reset(&h), "a histogram is no reset of itself");
        }
    }
    assert!(
        dense <= raw_len + (1 << 16),
        "{dense} dense buckets from {raw_len} bytes"
    );
});
