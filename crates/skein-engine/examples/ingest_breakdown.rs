//! Times each stage a span goes through on its way to a part, in µs per
//! span over 100k canonical spans (batches of 1,000): WAL encoding, hot-tier
//! insert, ordering and index renumbering, to_batch, the whole part write.
//! `cargo run --release --example ingest_breakdown [rounds]`; compare
//! builds by interleaving runs and reading the minimum of each stage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use skein_engine::codec;
use skein_engine::hot::MemTable;
use skein_engine::part::{Columnar, PartMeta, PartWriter, WriterOptions};
use skein_engine::storage::{LocalStore, PartStore};
use skein_model::Span;
use skein_model::corpus::Corpus;

// The server's allocator and tuning: with the system allocator, the stages
// spend their time differently than they do in `skein serve`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STAGES: [&str; 5] = ["encode", "insert", "order+index", "to_batch", "part write"];

fn main() {
    skein_engine::allocator::tune_mimalloc();
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let c = Corpus::new(100_000, 1_767_225_600_000_000_000);
    let batches: Vec<Vec<Span>> = (0..100).map(|b| c.spans(b * 100..(b + 1) * 100)).collect();
    let n = 100_000f64;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
    let defaults = WriterOptions::default();
    let opts = WriterOptions {
        zstd_level: defaults.flush_zstd_level,
        ..defaults
    };
    let us = |d: Duration| d.as_secs_f64() * 1e6 / n;
    let mut best = [f64::MAX; STAGES.len()];
    for round in 0..rounds as u64 {
        let t = Instant::now();
        for b in &batches {
            codec::with_encoded_batch(b, |bytes| Ok(bytes.len())).unwrap();
        }
        let encode = t.elapsed();

        let copies = batches.clone();
        let mut table = MemTable::<Span>::default();
        let t = Instant::now();
        for (i, b) in copies.into_iter().enumerate() {
            table.insert(b, 1 + i as u64 * 1000);
        }
        let insert = t.elapsed();

        let t = Instant::now();
        let (rows, index) = table.sorted_live_keyed();
        let order = t.elapsed();

        let t = Instant::now();
        let refs: Vec<&Span> = rows.iter().map(|(s, _)| &**s).collect();
        let to_batch_out: Vec<_> = refs.chunks(8192).map(|ch| Span::to_batch(ch).unwrap()).collect();
        let to_batch = t.elapsed();
        drop(to_batch_out);

        let t = Instant::now();
        let meta = PartMeta::new(skein_engine::Signal::Spans, round + 1);
        let mut w = PartWriter::<Span>::new(store.clone(), meta, &opts)
            .unwrap()
            .with_index(index);
        for (r, key) in rows {
            w.push_keyed(r, key).unwrap();
        }
        let part = w.finish().unwrap();
        let write = t.elapsed();

        let stage = [encode, insert, order, to_batch, write].map(us);
        for (b, s) in best.iter_mut().zip(stage) {
            *b = b.min(s);
        }
        let shown: Vec<String> = STAGES.iter().zip(stage).map(|(n, s)| format!("{n} {s:.2}")).collect();
        println!(
            "round {round}: {} µs/span; {} bytes",
            shown.join(", "),
            part.file_bytes()
        );
    }
    let shown: Vec<String> = STAGES.iter().zip(best).map(|(n, s)| format!("{n} {s:.2}")).collect();
    println!("best: {} µs/span", shown.join(", "));
}
