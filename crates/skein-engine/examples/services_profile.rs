//! Profiles the services aggregate on the canonical corpus with data spread
//! over the hot tier and parts: `cargo run --release --example services_profile`.

use std::time::Instant;

use skein_engine::{Engine, EngineOptions, Window};
use skein_model::corpus::Corpus;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(EngineOptions::new(dir.path())).unwrap();
    let c = Corpus::new(1_000_000, 1_767_225_600_000_000_000);
    for b in 0..c.traces / 100 {
        e.ingest_spans(c.spans(b * 100..(b + 1) * 100)).unwrap();
    }
    let st = e.stats();
    println!("hot {} records, {} parts", st.hot_records, st.parts);
    let t = Instant::now();
    for _ in 0..100 {
        e.services(Window::ALL).unwrap();
    }
    println!("services: {:?} each", t.elapsed() / 100);
}
