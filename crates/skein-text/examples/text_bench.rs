//! Measures the text indexes on synthetic log lines: build rate, bundle bytes
//! per record, resident memory, and query latency for a rare and a common
//! word. Timings belong here, not in tests.
//!
//! ```sh
//! cargo run --release -p skein-text --example text_bench -- 1000000
//! ```
//! (A dev build runs too, just slower: it proves the harness works.)

use std::time::{Duration, Instant};

use skein_text::{Field, MemTextIndex, PartTextIndex, PartTextIndexBuilder, Query, RowMap};

/// xorshift64*: deterministic lines without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const SERVICES: &[&str] = &[
    "checkout",
    "cart",
    "payments",
    "inventory",
    "auth",
    "search",
    "shipping",
    "email",
];
const WORDS: &[&str] = &[
    "request",
    "served",
    "upstream",
    "connect",
    "error",
    "timeout",
    "retry",
    "scheduled",
    "cache",
    "miss",
    "hit",
    "user",
    "session",
    "expired",
    "token",
    "refreshed",
    "order",
    "placed",
    "payment",
    "declined",
    "queue",
    "full",
];
/// The rare word: once in every 10,000 lines.
const RARE: &str = "xyzzyplugh";
const RARE_EVERY: usize = 10_000;

fn line(rng: &mut Rng, i: usize) -> String {
    let service = rng.pick(SERVICES);
    let trace = format!("{:016x}{:016x}", rng.next(), rng.next());
    let rare = if i % RARE_EVERY == RARE_EVERY / 2 { RARE } else { "" };
    match rng.below(4) {
        0 => format!(
            "GET /api/v1/{service}/{} 200 {}ms user_id={} trace_id={trace} {rare}",
            rng.below(100_000),
            rng.below(900),
            rng.below(50_000)
        ),
        1 => format!(
            "PoolTimeout: connection pool exhausted after {}s in {service}.db.query ({} waiting) {rare}",
            rng.below(30),
            rng.below(64)
        ),
        2 => format!(
            "{}: retry {} of 5 for {service}Client.sendRequest, {} {} {rare}",
            rng.pick(&["ERROR", "WARN", "INFO"]),
            rng.below(5),
            rng.pick(WORDS),
            rng.pick(WORDS)
        ),
        _ => {
            let mut s = String::new();
            for _ in 0..(8 + rng.below(16)) {
                s.push_str(rng.pick(WORDS));
                s.push(' ');
            }
            s.push_str(rare);
            s
        }
    }
}

/// Resident set size of this process, from /proc (Linux); 0 elsewhere.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// The benchmark's queries on `part`, whose row `r` is `lines[r]`.
fn searches(name: &str, part: &PartTextIndex, lines: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let queries = [
        ("rare word", RARE),
        ("common word", "timeout"),
        ("identifier", "PoolTimeout"),
        ("phrase", "\"connection pool exhausted\""),
    ];
    for (what, text) in queries {
        let q = Query::parse(text)?;
        let mut search = Vec::new();
        let mut candidates = 0;
        for _ in 0..21 {
            let t = Instant::now();
            let rows = part.search(&q)?;
            search.push(t.elapsed());
            candidates = rows.len();
        }
        // Re-check the first 100 candidates, as a search with limit 100 does.
        let t = Instant::now();
        let rows = part.search(&q)?;
        let hits = rows
            .iter()
            .take(100)
            .filter(|&r| q.matches(&[(Field::Body, lines[r as usize].as_str())]))
            .count();
        let limited = t.elapsed();
        println!(
            "{name} {what:<12} {text:<28} candidates {candidates:>8}  search p50 {:>10.2?}  +re-check of 100 {:>10.2?} ({hits} hits)",
            p50(search),
            limited
        );
    }
    Ok(())
}

/// Ten parts of a tenth of the lines each, merged as compaction merges
/// them when their times interleave row by row (the worst case for the
/// row maps), then the same searches.
fn merged(lines: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    const PARTS: usize = 10;
    let mut parts = Vec::new();
    let mut maps = vec![RowMap::new(); PARTS];
    let mut merged_lines = Vec::new();
    let built = Instant::now();
    for p in 0..PARTS {
        let mut b = PartTextIndexBuilder::new()?;
        for (row, l) in lines.iter().skip(p).step_by(PARTS).enumerate() {
            b.add(row as u32, &[(Field::Body, l.as_str())])?;
        }
        parts.push(PartTextIndex::open(b.finish()?)?);
    }
    let built = built.elapsed();
    let chunk = lines.len().div_ceil(PARTS);
    for row in 0..chunk {
        for (p, map) in maps.iter_mut().enumerate() {
            if let Some(l) = lines.get(row * PARTS + p) {
                map.keep(row as u32, merged_lines.len() as u32)?;
                merged_lines.push(l.clone());
            }
        }
    }
    let t = Instant::now();
    let pairs: Vec<(&PartTextIndex, &RowMap)> = parts.iter().zip(&maps).collect();
    let bundle = PartTextIndex::merge(&pairs)?;
    println!(
        "merged: {PARTS} parts built in {built:.2?}, their indexes merged in {:.2?} ({} bytes)",
        t.elapsed(),
        bundle.len()
    );
    searches("merged", &PartTextIndex::open(bundle)?, &merged_lines)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let lines: Vec<String> = (0..n).map(|i| line(&mut rng, i)).collect();
    let text_bytes: usize = lines.iter().map(String::len).sum();
    println!("{n} log lines, {:.1} MiB of text", text_bytes as f64 / (1 << 20) as f64);

    let started = Instant::now();
    let mut builder = PartTextIndexBuilder::new()?;
    for (row, l) in lines.iter().enumerate() {
        builder.add(row as u32, &[(Field::Body, l.as_str())])?;
    }
    let bundle = builder.finish()?;
    let build = started.elapsed();
    println!(
        "part index: built in {:.2?} ({:.0} records/s, {:.1} MiB/s of text); {} bytes = {:.1} bytes/record ({:.0}% of the text)",
        build,
        n as f64 / build.as_secs_f64(),
        text_bytes as f64 / (1 << 20) as f64 / build.as_secs_f64(),
        bundle.len(),
        bundle.len() as f64 / n as f64,
        100.0 * bundle.len() as f64 / text_bytes as f64
    );

    let rss_before = rss_bytes();
    let part = PartTextIndex::open(bundle)?;
    searches("part", &part, &lines)?;
    // The bundle is held in memory here; from a mapped file only the pages
    // read are resident.
    println!(
        "part resident: bundle {:.1} MiB in memory + {:.1} MiB grown while opening and searching ({:.1} bytes/record)",
        part.size_bytes() as f64 / (1 << 20) as f64,
        rss_bytes().saturating_sub(rss_before) as f64 / (1 << 20) as f64,
        (part.size_bytes() as u64 + rss_bytes().saturating_sub(rss_before)) as f64 / n as f64
    );

    let started = Instant::now();
    let mut mem = MemTextIndex::new();
    for (row, l) in lines.iter().enumerate() {
        mem.add(row as u32, &[(Field::Body, l.as_str())]);
    }
    let build = started.elapsed();
    println!(
        "hot index: built in {:.2?} ({:.0} records/s); {} terms, memory_bytes {:.1} MiB = {:.1} bytes/record",
        build,
        n as f64 / build.as_secs_f64(),
        mem.num_terms(),
        mem.memory_bytes() as f64 / (1 << 20) as f64,
        mem.memory_bytes() as f64 / n as f64
    );
    for (what, text) in [("rare word", RARE), ("common word", "timeout")] {
        let q = Query::parse(text)?;
        let samples: Vec<Duration> = (0..21)
            .map(|_| {
                let t = Instant::now();
                let _ = mem.search(&q);
                t.elapsed()
            })
            .collect();
        println!("hot  {what:<12} {text:<28} search p50 {:>10.2?}", p50(samples));
    }
    merged(&lines)
}
