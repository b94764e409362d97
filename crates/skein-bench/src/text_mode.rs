//! `skein-bench text`: full-text search over log records of the agent
//! corpus, in process. Two engines, one with `full_text` on and one with it
//! off, ingest the same records chunk by chunk (in alternating order, so
//! drift on a shared machine falls on both); then a rare word and a common
//! word are searched in each, every answer checked against the generator.
//!
//! Timing: a chunk's records are generated before the clock starts; the
//! clock stops once the engine has flushed them and no merge is running
//! and every part has its full-text index (so flush, index building, done
//! after the flush, and the merges ingest triggers are on it),
//! and the last chunk's clock includes the final `flush`. Merges while
//! idle are switched off (`compaction.idle_after` = 1 day) so one engine
//! does not merge while the other is timed; a full `compact` is timed on
//! its own.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skein_engine::{Engine, LogQuery, TextQuery};
use skein_model::LogRecord;
use skein_model::corpus::agent::{self, AgentCorpus};

use crate::e2e::bar;
use crate::expected::{SpanKey, TopN, log_key};
use crate::machine::Machine;
use crate::stats::Samples;

#[derive(clap::Args, Debug, Clone)]
pub struct TextArgs {
    #[command(flatten)]
    pub run: crate::inproc::InProcArgs,
    /// Log records to ingest, e.g. 1M, 10M.
    #[arg(long, default_value = "1M")]
    pub logs: String,
    /// Records generated (and held) at a time.
    #[arg(long, default_value = "1M")]
    pub chunk: String,
    /// Samples of each query with the index on; with it off (a scan).
    #[arg(long, default_value_t = 20)]
    pub queries: usize,
    #[arg(long, default_value_t = 3)]
    pub queries_off: usize,
    /// Stop sampling a query after this long (at least one sample each): a
    /// scan of 10M records takes a minute.
    #[arg(long, default_value_t = 30.0)]
    pub query_seconds: f64,
}

const RARE_LIMIT: usize = 1000;
const COMMON_LIMIT: usize = 100;

fn open(dir: &Path, durability: &str, full_text: bool) -> Result<Engine, String> {
    let mut o = crate::inproc::quiet_options(dir, durability)?;
    o.full_text = full_text;
    Engine::open(o).map_err(|e| e.to_string())
}

/// One engine under test and what its ingest cost.
struct Side {
    name: &'static str,
    full_text: bool,
    dir: PathBuf,
    engine: Option<Engine>,
    ingest: crate::inproc::Timed,
}

impl Side {
    fn engine(&self) -> Result<&Engine, String> {
        self.engine
            .as_ref()
            .ok_or_else(|| format!("engine {} is closed", self.name))
    }
}

/// Bytes of files under `dir` (recursively) whose name ends with `suffix`.
fn bytes_ending(dir: &Path, suffix: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            match e.metadata() {
                Ok(m) if m.is_dir() => bytes_ending(&p, suffix),
                Ok(m) if p.to_string_lossy().ends_with(suffix) => m.len(),
                _ => 0,
            }
        })
        .sum()
}

/// What the generator says the queries must answer.
struct Want {
    common: Vec<SpanKey>,
    common_logs: u64,
    rare: Vec<SpanKey>,
    body_bytes: u64,
}

fn text_query(engine: &Engine, word: &str, limit: usize) -> Result<(Duration, Vec<std::sync::Arc<LogRecord>>), String> {
    let q = LogQuery {
        text: Some(TextQuery::parse(word).map_err(|e| e.to_string())?),
        limit,
        ..Default::default()
    };
    let s = Instant::now();
    let r = engine.search_logs(&q).map_err(|e| e.to_string())?;
    Ok((s.elapsed(), r.records))
}

/// Times `samples` runs of each query on `engine`, checking every answer.
fn measure(engine: &Engine, want: &Want, samples: usize, budget: f64) -> Result<Value, String> {
    let check = |word: &str, got: &[std::sync::Arc<LogRecord>], want: &[SpanKey]| -> Result<(), String> {
        for l in got {
            let body = l.body.as_str().unwrap_or_default();
            if !agent::contains_word(body, word) {
                return Err(format!("text={word}: a hit without it: {body:?}"));
            }
        }
        let mut keys: Vec<SpanKey> = got.iter().map(|l| log_key(l)).collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        if keys != want {
            return Err(format!(
                "text={word}: {} hits, first {:?}; expected {}, first {:?}",
                keys.len(),
                keys.first(),
                want.len(),
                want.first()
            ));
        }
        Ok(())
    };
    let mut rare = Samples::default();
    let mut common = Samples::default();
    let started = Instant::now();
    for _ in 0..samples.max(1) {
        let (d, got) = text_query(engine, agent::RARE_WORD, RARE_LIMIT)?;
        rare.push(d);
        check(agent::RARE_WORD, &got, &want.rare)?;
        if started.elapsed().as_secs_f64() > budget {
            break;
        }
    }
    let started = Instant::now();
    for _ in 0..samples.max(1) {
        let (d, got) = text_query(engine, AgentCorpus::common_word(), COMMON_LIMIT)?;
        common.push(d);
        check(AgentCorpus::common_word(), &got, &want.common)?;
        if started.elapsed().as_secs_f64() > budget {
            break;
        }
    }
    // The first sample of each reads pages no earlier query left in the
    // page cache (after ingest, or after a compaction wrote new parts):
    // what a new question costs, where the percentiles are of repeats.
    Ok(json!({"rare": rare.summary(), "common": common.summary(),
              "rare_first_ms": rare.first_ms(), "common_first_ms": common.first_ms()}))
}

pub fn run(args: &TextArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let n = crate::ladder::parse_count(&args.logs)?;
    let chunk = crate::ladder::parse_count(&args.chunk)?.max(args.run.batch);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let corpus = AgentCorpus::with_traces(n.div_ceil(agent::LOGS_PER_TRACE), now);
    let tmp = tempfile::Builder::new()
        .prefix("skein-text-bench-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let root = args.run.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let mut sides = Vec::new();
    for (name, full_text) in [("on", true), ("off", false)] {
        let dir = root.join(format!("full-text-{name}"));
        sides.push(Side {
            name,
            full_text,
            engine: Some(open(&dir, &args.run.durability, full_text)?),
            dir,
            ingest: Default::default(),
        });
    }
    let mut common = TopN::new(COMMON_LIMIT);
    let mut want = Want {
        common: Vec::new(),
        common_logs: 0,
        rare: Vec::new(),
        body_bytes: 0,
    };
    let pb = bar(n, "ingesting logs (on and off)");
    let mut from = 0;
    let mut round = 0;
    while from < n {
        let to = (from + chunk).min(n);
        // Generate (two threads), off the clock.
        let half = from + (to - from) / 2;
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| corpus.logs(from..half));
            let b = corpus.logs(half..to);
            (a.join().unwrap_or_default(), b)
        });
        let logs: Vec<LogRecord> = a.into_iter().chain(b).collect();
        if logs.len() as u64 != to - from {
            return Err("log generation failed".into());
        }
        for l in &logs {
            let body = l.body.as_str().unwrap_or_default();
            want.body_bytes += body.len() as u64;
            if agent::contains_word(body, AgentCorpus::common_word()) {
                want.common_logs += 1;
                common.push(log_key(l));
            }
            if agent::contains_word(body, agent::RARE_WORD) {
                want.rare.push(log_key(l));
            }
        }
        let batches: Vec<Vec<LogRecord>> = logs
            .chunks(args.run.batch as usize)
            .map(<[LogRecord]>::to_vec)
            .collect();
        drop(logs);
        let last = to == n;
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut batches = Some(batches);
        for (k, &i) in order.iter().enumerate() {
            let these = if k == 0 {
                batches.clone().unwrap_or_default()
            } else {
                batches.take().unwrap_or_default()
            };
            let side = &mut sides[i];
            side.ingest += crate::inproc::ingest(side.engine()?, args.run.writers, these, last, Engine::ingest_logs)?;
        }
        pb.inc(to - from);
        from = to;
        round += 1;
    }
    pb.finish_and_clear();
    want.rare.sort_unstable_by(|a, b| b.cmp(a));
    want.common = common.sorted();
    let planted = corpus.rare_word_count(0..n);
    if planted != want.rare.len() as u64 {
        return Err(format!(
            "the generator planted {planted} rare words, the bodies hold {}",
            want.rare.len()
        ));
    }
    for s in &sides {
        eprintln!(
            "full text {}: {:.0} logs/s ({:.2} CPU µs per record; {:.1} s of {:.1} after the last acks)",
            s.name,
            n as f64 / s.ingest.seconds,
            s.ingest.cpu_seconds * 1e6 / n as f64,
            s.ingest.after_ack_seconds,
            s.ingest.seconds,
        );
    }

    let mut per_side = serde_json::Map::new();
    for side in &mut sides {
        let samples = if side.full_text { args.queries } else { args.queries_off };
        let engine = side.engine()?;
        let st = engine.stats();
        // Without the index only the compacted figures (scans are slow).
        let queries = if side.full_text {
            measure(engine, &want, samples, args.query_seconds)?
        } else {
            Value::Null
        };
        let t = Instant::now();
        engine.compact().map_err(|e| e.to_string())?;
        let compact_seconds = t.elapsed().as_secs_f64();
        let compacted = measure(engine, &want, samples, args.query_seconds)?;
        let st_compacted = engine.stats();
        let parts = side.dir.join("parts");
        let log_part_bytes = crate::server::dir_bytes(&parts.join("logs"));
        let text_bytes = bytes_ending(&parts, ".txt");
        let total = crate::server::dir_bytes(&side.dir);
        let engine = side.engine.take().ok_or("engine closed")?;
        engine.close().map_err(|e| e.to_string())?;
        drop(engine);
        // Reopened alone: what its indexes hold resident.
        let rss_before = crate::server::proc_status_kib(std::process::id(), "VmRSS:");
        let reopened = open(&side.dir, &args.run.durability, side.full_text)?;
        let rss_after = crate::server::proc_status_kib(std::process::id(), "VmRSS:");
        let st_reopened = reopened.stats();
        if st_reopened.logs != n {
            return Err(format!("reopened engine holds {} logs, expected {n}", st_reopened.logs));
        }
        drop(reopened);
        let per_m = n as f64 / 1e6;
        per_side.insert(
            side.name.to_string(),
            json!({
                "full_text": side.full_text,
                "ingest_seconds": side.ingest.seconds,
                "ingest_after_ack_seconds": side.ingest.after_ack_seconds,
                "ingest_logs_per_sec": n as f64 / side.ingest.seconds,
                "ingest_cpu_us_per_log": side.ingest.cpu_seconds * 1e6 / n as f64,
                "parts_after_ingest": st.parts,
                "parts_after_compaction": st_compacted.parts,
                "compact_seconds": compact_seconds,
                "queries": queries,
                "queries_compacted": compacted,
                "log_part_bytes": log_part_bytes,
                "text_index_bytes": text_bytes,
                "text_index_bytes_per_million": text_bytes as f64 / per_m,
                "bytes_on_disk": total,
                "bytes_on_disk_per_million": total as f64 / per_m,
                "index_memory_bytes": st_reopened.index_memory_bytes,
                "index_memory_mib_per_million": st_reopened.index_memory_bytes as f64 / 1048576.0 / per_m,
                "reopen_rss_growth_mib": (rss_after as f64 - rss_before as f64) / 1024.0,
            }),
        );
    }
    let on = &per_side["on"];
    let off = &per_side["off"];
    let slowdown =
        1.0 - on["ingest_logs_per_sec"].as_f64().unwrap_or(0.0) / off["ingest_logs_per_sec"].as_f64().unwrap_or(1.0);
    let result = json!({
        "machine": machine.finish(),
        "params": {"logs": n, "chunk": chunk, "batch": args.run.batch, "writers": args.run.writers, "durability": args.run.durability,
                   "queries": args.queries, "queries_off": args.queries_off, "rare_limit": RARE_LIMIT, "common_limit": COMMON_LIMIT,
                   "page_cache_mib": skein_engine::EngineOptions::new("").page_cache_bytes / (1 << 20)},
        "corpus": {"name": "agent", "logs": n, "traces": corpus.traces, "body_bytes": want.body_bytes,
                   "rare_word": agent::RARE_WORD, "rare_word_logs": want.rare.len(), "rare_every": agent::RARE_EVERY,
                   "common_word": AgentCorpus::common_word(), "common_word_logs": want.common_logs},
        "results": {"on": on, "off": off, "ingest_slowdown_with_index": slowdown},
    });
    crate::report::write(&args.run.out, "text", result)
}
