//! How payload frames compress on the agent corpus, by frame size and zstd
//! level: the figures behind `payload::FRAME_RAW_BYTES` and the arrival
//! level; and how WAL batches do, by level: the figures behind
//! `codec::WAL_ZSTD_LEVEL`.
//! `cargo run --release -p skein-engine --example codec_levels`.

use std::time::Instant;

use skein_model::AnyValue;
use skein_model::corpus::agent::AgentCorpus;

fn main() {
    let corpus = AgentCorpus::new(200_000, 1_800_000_000_000_000_000);
    // The string values a payload policy would take out, one after another
    // as a batch's new payloads are.
    let mut payloads: Vec<u8> = Vec::new();
    for span in corpus.spans(0..27_000) {
        for kv in &span.attributes {
            if let AnyValue::Str(v) = &kv.value
                && v.len() > 256
            {
                payloads.extend_from_slice(v.as_bytes());
            }
        }
    }
    println!("{} MB of payloads", payloads.len() >> 20);
    for size in [128usize << 10, 256 << 10, 512 << 10, 1 << 20] {
        let frames: Vec<&[u8]> = payloads.chunks(size).collect();
        for level in [1, 3] {
            let mut c = zstd::bulk::Compressor::new(level).expect("a zstd context");
            let t = Instant::now();
            let zstd: Vec<Vec<u8>> = frames.iter().map(|f| c.compress(f).expect("compress")).collect();
            let compress = t.elapsed().as_secs_f64();
            let mut d = zstd::bulk::Decompressor::new().expect("a zstd context");
            let t = Instant::now();
            for (z, f) in zstd.iter().zip(&frames) {
                d.decompress(z, f.len()).expect("decompress");
            }
            let decompress = t.elapsed().as_secs_f64();
            let bytes = payloads.len() as f64;
            println!(
                "frames of {:>4} KiB, level {level}: 1/{:.2} of the bytes, compress {:.0} MB/s, decompress {:.0} MB/s ({:.0} µs a frame)",
                size >> 10,
                bytes / zstd.iter().map(Vec::len).sum::<usize>() as f64,
                bytes / compress / 1e6,
                bytes / decompress / 1e6,
                decompress / frames.len() as f64 * 1e6
            );
        }
    }
    wal_levels(&corpus);
}

/// WAL batches of 1,000 spans as ingest encodes them (payloads already
/// out, a reference in their place), compressed at each level.
fn wal_levels(corpus: &AgentCorpus) {
    use skein_engine::payload::{PayloadRef, ref_value};
    let mut spans = corpus.spans(0..4_000);
    for s in &mut spans {
        for kv in &mut s.attributes {
            if let AnyValue::Str(v) = &kv.value
                && v.len() > 256
            {
                kv.value = ref_value(PayloadRef::of(v.as_bytes()), v);
            }
        }
    }
    let mut raw_batches = Vec::new();
    for batch in spans.chunks(1_000) {
        let encoded = skein_engine::codec::encode_batch(batch).expect("encode");
        raw_batches.push(skein_engine::envelope::zstd_decompress(&encoded, 1 << 30).expect("decompress"));
    }
    let bytes = raw_batches.iter().map(Vec::len).sum::<usize>() as f64;
    let n = spans.len() as f64;
    println!("WAL: {} batches, {:.0} bytes a span raw", raw_batches.len(), bytes / n);
    for level in [1, -1, -3, -5] {
        let mut c = zstd::bulk::Compressor::new(level).expect("a zstd context");
        let t = Instant::now();
        let mut out = 0;
        for _ in 0..5 {
            out = raw_batches
                .iter()
                .map(|b| c.compress(b).expect("compress").len())
                .sum::<usize>();
        }
        let compress = t.elapsed().as_secs_f64() / 5.0;
        println!(
            "WAL level {level:>2}: 1/{:.2} of the bytes, compress {:.0} MB/s ({:.2} µs a span)",
            bytes / out as f64,
            bytes / compress / 1e6,
            compress / n * 1e6
        );
    }
}
