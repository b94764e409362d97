//! Where a part's full-text index build goes, on synthetic log records:
//! reading their text, tokenizing, the part index (tantivy) and the hot
//! index. Timings belong here, not in tests.
//!
//! ```sh
//! cargo run --release -p skein-engine --example text_parts -- 200000
//! ```
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use skein_engine::text::TextRecord;
use std::time::Instant;
fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let logs = skein_engine::testdata::logs(n);
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
    println!("text_doc {:?}", t.elapsed());
    let t = Instant::now();
    let mut nt = 0;
    for d in &docs {
        for (_, s) in d {
            for tok in skein_text::tokenize(s) {
                nt += tok.terms().count();
            }
        }
    }
    println!("tokenize {:?} terms {nt}", t.elapsed());
    let t = Instant::now();
    let mut b = skein_text::PartTextIndexBuilder::new().unwrap();
    for (i, d) in docs.iter().enumerate() {
        let bd: Vec<_> = d.iter().map(|(f, s)| (*f, s.as_str())).collect();
        b.add(i as u32, &bd).unwrap();
    }
    println!("tantivy add {:?}", t.elapsed());
    let t = Instant::now();
    let bytes = b.finish().unwrap();
    println!("tantivy finish {:?} bytes {}", t.elapsed(), bytes.len());
    let t = Instant::now();
    let mut m = skein_text::MemTextIndex::new();
    for (i, d) in docs.iter().enumerate() {
        let bd: Vec<_> = d.iter().map(|(f, s)| (*f, s.as_str())).collect();
        m.add(i as u32, &bd);
    }
    println!("mem add {:?} mem {}", t.elapsed(), m.memory_bytes());
}
