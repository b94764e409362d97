//! How payload frames compress on the agent corpus, by frame size and zstd
//! level: the figures behind `payload::FRAME_RAW_BYTES` and the arrival
//! level. `cargo run --release -p skein-engine --example codec_levels`.

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
}
