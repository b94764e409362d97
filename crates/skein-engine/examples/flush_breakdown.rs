//! Times the stages of a flush (ordering and index renumbering, to_batch,
//! the whole part write) on 100k canonical spans in a hot tier:
//! `cargo run --release --example flush_breakdown`.

use std::sync::Arc;
use std::time::Instant;

use skein_engine::hot::MemTable;
use skein_engine::part::{Columnar, PartMeta, PartWriter, WriterOptions};
use skein_engine::storage::{LocalStore, PartStore};
use skein_model::Span;
use skein_model::corpus::Corpus;

fn main() {
    let c = Corpus::new(100_000, 1_767_225_600_000_000_000);
    let mut table = MemTable::<Span>::default();
    table.insert(c.spans(0..10_000), 1);
    let n = table.live_rows() as f64;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
    let defaults = WriterOptions::default();
    let opts = WriterOptions {
        zstd_level: defaults.flush_zstd_level,
        ..defaults
    };
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6 / n;
    for round in 0..5u64 {
        let t = Instant::now();
        let (rows, index) = table.sorted_live_indexed();
        let order = t.elapsed();
        let t = Instant::now();
        let refs: Vec<&Span> = rows.iter().map(|s| &**s).collect();
        let batches: Vec<_> = refs.chunks(8192).map(|ch| Span::to_batch(ch).unwrap()).collect();
        let to_batch = t.elapsed();
        drop(batches);
        let t = Instant::now();
        let meta = PartMeta::new(skein_engine::Signal::Spans, round + 1);
        let mut w = PartWriter::<Span>::new(store.clone(), meta, &opts)
            .unwrap()
            .with_index(index);
        for r in rows {
            w.push(r).unwrap();
        }
        let part = w.finish().unwrap();
        let write = t.elapsed();
        println!(
            "round {round}: order+index {:.2} us/span, to_batch {:.2}, part write (incl. to_batch) {:.2}, total {:.2}; {} bytes",
            us(order),
            us(to_batch),
            us(write),
            us(order + write),
            part.file_bytes()
        );
    }
}
