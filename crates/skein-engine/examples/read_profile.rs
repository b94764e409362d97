//! Profiles point reads on one compacted part of the canonical corpus:
//! `cargo run --release --example read_profile [get|cold|search]` (env: N queries,
//! DATA_DIR to keep the data and reuse it, PAGE_CACHE bytes, PAGE_ROWS).

use std::time::Instant;

use skein_engine::part::WriterOptions;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, SpanQuery};
use skein_model::corpus::Corpus;

// The allocator of the `skein` binary, so profiles match the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    skein_engine::allocator::tune_mimalloc();
    let what = std::env::args().nth(1).unwrap_or_else(|| "get".into());
    // DATA_DIR keeps the data for later runs, which then only query it.
    let tmp = tempfile::tempdir().unwrap();
    let path = std::env::var("DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| tmp.path().to_path_buf());
    let fill = !path.join("parts").exists();
    let mut o = EngineOptions::new(&path);
    o.background = false;
    o.durability = skein_engine::Durability::None;
    if let Some(rows) = std::env::var("PAGE_ROWS").ok().and_then(|v| v.parse().ok()) {
        o.writer = WriterOptions {
            page_rows: rows,
            ..WriterOptions::default()
        };
    }
    if let Some(bytes) = std::env::var("PAGE_CACHE").ok().and_then(|v| v.parse().ok()) {
        o.page_cache_bytes = bytes;
    }
    let e = Engine::open(o).unwrap();
    let c = Corpus::new(1_000_000, 1_767_225_600_000_000_000);
    if fill {
        for b in 0..c.traces / 1000 {
            e.ingest_spans(c.spans(b * 1000..(b + 1) * 1000)).unwrap();
            if b % 20 == 19 {
                e.flush().unwrap();
            }
        }
        e.flush().unwrap();
        e.compact().unwrap();
    }
    let st = e.stats();
    println!("parts {}, {:.1} bytes/span", st.parts, st.part_bytes as f64 / 1e6);
    let t = Instant::now();
    let n: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    for i in 0..n {
        if what == "get" || what == "cold" {
            // `cold`: traces 100 apart, so no two lookups share a page.
            let t = if what == "cold" {
                i * 100 % c.traces
            } else {
                i * 7919 % c.traces
            };
            let r = e.get_trace(c.trace_id(t)).unwrap();
            assert_eq!(r.spans.len(), 10);
        } else {
            let q = SpanQuery {
                attributes: vec![AttrFilter::eq(
                    AttrScope::Record,
                    "benchmark.group",
                    format!("group-{}", i % 100),
                )],
                limit: 100,
                ..Default::default()
            };
            assert_eq!(e.search_spans(&q).unwrap().records.len(), 100);
        }
    }
    println!(
        "{what}: {:?} each; page cache {:?}",
        t.elapsed() / n as u32,
        e.stats().page_cache
    );
}
