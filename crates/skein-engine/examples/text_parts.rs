//! Where a part's full-text index build goes, on the agent corpus's log
//! records: reading their text, tokenizing, the part index (tantivy), an
//! engine's backlog (parts read back and indexed, as after a flush), the
//! merge of four parts' indexes (compaction), and the hot index. Timings
//! belong here, not in tests.
//!
//! ```sh
//! cargo run --release -p skein-engine --example text_parts -- 250000
//! ```
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use skein_engine::text::TextRecord;
use skein_model::corpus::agent::AgentCorpus;
use std::time::Instant;

const PARTS: usize = 4;

/// CPU seconds of the whole process (every thread: tantivy indexes on its
/// own), from /proc/self/stat.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<f64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name.
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(250_000);
    let corpus = AgentCorpus::with_traces(n.div_ceil(2), 1_800_000_000_000_000_000);
    let logs = corpus.logs(0..n);
    let t = Instant::now();
    let docs: Vec<_> = logs
        .iter()
        .map(|l| {
            l.text_doc(None)
                .into_iter()
                .map(|(f, s)| (f, s.into_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!("text_doc      {:7.3} µs/record", per(t.elapsed()));
    let t = Instant::now();
    let mut nt = 0;
    for d in &docs {
        for (_, s) in d {
            for tok in skein_text::tokenize(s) {
                nt += tok.terms().count();
            }
        }
    }
    println!(
        "tokenize      {:7.3} µs/record ({:.1} terms/record, no memo)",
        per(t.elapsed()),
        nt as f64 / n as f64
    );
    let mut distinct = 0;
    for block in docs.chunks(skein_text::BLOCK_ROWS as usize) {
        let mut seen = std::collections::HashSet::new();
        for d in block {
            for (_, s) in d {
                for tok in skein_text::tokenize(s) {
                    for t in tok.terms() {
                        seen.insert(t.to_owned());
                    }
                }
            }
        }
        distinct += seen.len();
    }
    println!(
        "distinct terms per block, per record: {:.1}",
        distinct as f64 / n as f64
    );
    let (mut add, mut finish) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    let build_cpu = cpu();
    let mut bundles = Vec::new();
    let part_rows = docs.len().div_ceil(PARTS);
    for chunk in docs.chunks(part_rows) {
        let t = Instant::now();
        let mut b = skein_text::PartTextIndexBuilder::new().unwrap();
        for (i, d) in chunk.iter().enumerate() {
            let bd: Vec<_> = d.iter().map(|(f, s)| (*f, s.as_str())).collect();
            b.add(i as u32, &bd).unwrap();
        }
        add += t.elapsed();
        let t = Instant::now();
        bundles.push(b.finish().unwrap());
        finish += t.elapsed();
    }
    println!("builder add   {:7.3} µs/record", per(add));
    println!("builder finish{:7.3} µs/record", per(finish));
    println!("builder CPU   {:7.3} µs/record", (cpu() - build_cpu) * 1e6 / n as f64);
    backlog(&logs);
    if std::env::var_os("BUILD_ONLY").is_some() {
        return;
    }
    let parts: Vec<_> = bundles
        .into_iter()
        .map(|b| skein_text::PartTextIndex::open(b).unwrap())
        .collect();
    let mut maps = Vec::new();
    let mut out = 0u32;
    for chunk in docs.chunks(part_rows) {
        let mut m = skein_text::RowMap::new();
        for row in 0..chunk.len() as u32 {
            m.keep(row, out).unwrap();
            out += 1;
        }
        maps.push(m);
    }
    let t = Instant::now();
    let pairs: Vec<_> = parts.iter().zip(&maps).collect();
    let merged = skein_text::PartTextIndex::merge(&pairs).unwrap();
    println!(
        "merge {PARTS}       {:7.3} µs/record ({} bytes)",
        per(t.elapsed()),
        merged.len()
    );
    let t = Instant::now();
    let mut m = skein_text::MemTextIndex::new();
    for (i, d) in docs.iter().enumerate() {
        let bd: Vec<_> = d.iter().map(|(f, s)| (*f, s.as_str())).collect();
        m.add(i as u32, &bd);
    }
    println!(
        "mem add       {:7.3} µs/record (memory {})",
        per(t.elapsed()),
        m.memory_bytes()
    );
}

/// An engine's text backlog: the logs flushed as parts without an index,
/// then every part indexed at once (read back, tokenized, stored).
fn backlog(logs: &[skein_model::LogRecord]) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = skein_engine::EngineOptions::new(dir.path());
    o.background = false;
    o.full_text = true;
    let e = skein_engine::Engine::open(o).unwrap();
    for batch in logs.chunks(1000) {
        e.ingest_logs(batch.to_vec()).unwrap();
    }
    e.flush().unwrap();
    let n = logs.len() as f64;
    let (t, c) = (Instant::now(), cpu());
    let parts = e.index_text().unwrap();
    println!(
        "backlog       {:7.3} µs/record, CPU {:.3} µs/record ({parts} parts)",
        t.elapsed().as_secs_f64() * 1e6 / n,
        (cpu() - c) * 1e6 / n
    );
}
