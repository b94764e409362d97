//! `skein-bench engine`: the storage engine in process, without the
//! network: ingest throughput through `Engine::ingest_spans` with group
//! commit, bytes per span after compaction, index memory after restart, and
//! query latency on data spread over the hot tier and parts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, SpanQuery, Window};
use skein_model::Span;
use skein_model::corpus::Corpus;
use skein_model::corpus::agent::{self, AgentCorpus};

use crate::e2e::bar;
use crate::machine::Machine;
use crate::stats::Samples;

#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    #[command(flatten)]
    pub run: crate::inproc::InProcArgs,
    #[arg(long, default_value_t = 1_000_000)]
    pub spans: u64,
    /// Skip the memory probe (a child process that ingests and compacts
    /// the corpus on its own, so its peak RSS is the engine's alone).
    #[arg(long)]
    pub no_memory_probe: bool,
    /// Ingest rounds, each into a fresh data directory; ingest figures are
    /// the median round's (this machine is shared: one round alone swings
    /// by ±15%). Queries run on the last round's data.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Which corpus: each writes its own report entry (`engine`,
    /// `engine_agent`).
    #[arg(long, value_enum, default_value_t = crate::e2e::CorpusChoice::Both)]
    pub corpus: crate::e2e::CorpusChoice,
}

/// The corpus an engine run ingests.
pub enum EngineCorpus {
    Canonical(Corpus),
    Agent(AgentCorpus),
}

impl EngineCorpus {
    pub fn new(agent: bool, spans: u64, end_ns: u64) -> EngineCorpus {
        if agent {
            EngineCorpus::Agent(AgentCorpus::new(spans, end_ns))
        } else {
            EngineCorpus::Canonical(Corpus::new(spans, end_ns))
        }
    }
    pub fn traces(&self) -> u64 {
        match self {
            EngineCorpus::Canonical(c) => c.traces,
            EngineCorpus::Agent(c) => c.traces,
        }
    }
    pub fn span_count(&self) -> u64 {
        match self {
            EngineCorpus::Canonical(c) => c.span_count(),
            EngineCorpus::Agent(c) => c.span_count(),
        }
    }
    pub fn spans(&self, r: std::ops::Range<u64>) -> Vec<Span> {
        match self {
            EngineCorpus::Canonical(c) => c.spans(r),
            EngineCorpus::Agent(c) => c.spans(r),
        }
    }
    /// Traces per batch of about `batch` spans.
    pub fn per_batch(&self, batch: u64) -> u64 {
        let mean = self.span_count() as f64 / self.traces().max(1) as f64;
        ((batch as f64 / mean).round() as u64).max(1)
    }
    fn name(&self) -> &'static str {
        match self {
            EngineCorpus::Canonical(_) => "canonical",
            EngineCorpus::Agent(_) => "agent",
        }
    }
}

/// Arguments of the memory probe child (`skein-bench engine-memory`).
#[derive(clap::Args, Debug, Clone)]
pub struct MemoryArgs {
    /// `--dir` is the data directory to fill (or reopen).
    #[command(flatten)]
    pub run: crate::inproc::InProcArgs,
    #[arg(long, default_value_t = 1_000_000)]
    pub spans: u64,
    /// Only reopen `dir` and report resident memory.
    #[arg(long)]
    pub reopen: bool,
    #[arg(long)]
    pub agent: bool,
}

fn open(dir: &std::path::Path, durability: &str) -> Result<Engine, String> {
    let mut o = EngineOptions::new(dir);
    o.durability = durability.parse()?;
    Engine::open(o).map_err(|e| e.to_string())
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Ingests batches `0..count` from `writers` threads sharing group commit;
/// each thread takes the next batch number and asks `batch` for its spans.
fn ingest_concurrently(
    engine: &Engine,
    writers: usize,
    count: u64,
    batch: &(dyn Fn(u64) -> Result<Vec<Span>, String> + Sync),
    pb: &indicatif::ProgressBar,
) -> Result<(), String> {
    let next = AtomicU64::new(0);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..writers)
            .map(|_| {
                s.spawn(|| -> Result<(), String> {
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        if b >= count {
                            return Ok(());
                        }
                        let spans = batch(b)?;
                        let n = spans.len() as u64;
                        let r = engine.ingest_spans(spans).map_err(|e| e.to_string())?;
                        if r.rejected > 0 {
                            return Err(format!("rejected: {:?}", r.errors));
                        }
                        pb.inc(n);
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|t| t.join().map_err(|_| "writer panicked".to_string())?)
    })
}

pub fn run(args: &EngineArgs) -> Result<(), String> {
    if args.corpus.canonical() {
        run_corpus(args, false)?;
    }
    if args.corpus.agent() {
        run_corpus(args, true)?;
    }
    Ok(())
}

fn run_corpus(args: &EngineArgs, agent_corpus: bool) -> Result<(), String> {
    let machine = Machine::probe();
    let tmp = tempfile::Builder::new()
        .prefix("skein-engine-bench-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let dir = args.run.dir.clone().unwrap_or_else(|| tmp.path().join("data"));
    // First, in a child process of its own, the engine's peak memory: the
    // throughput run below holds the whole corpus in memory, which would
    // swamp the engine's own footprint.
    let memory = if args.no_memory_probe {
        serde_json::Value::Null
    } else {
        memory_probe(args, agent_corpus)?
    };
    let corpus = EngineCorpus::new(agent_corpus, args.spans, now_ns());
    let rounds = args.rounds.max(1);
    let mut measured = Vec::with_capacity(rounds);
    let mut last = None;
    for round in 0..rounds {
        // Earlier rounds go to scratch directories, removed with the temp
        // dir at the end: deleting a round's files frees their blocks in
        // the background, and the next round's fsyncs would wait behind it.
        let round_dir = if round + 1 == rounds {
            dir.clone()
        } else {
            tmp.path().join(format!("round-{round}"))
        };
        // Start each round with nothing left for the disk to write back.
        sync_filesystems();
        let (engine, m) = ingest_round(args, &corpus, &round_dir)?;
        eprintln!(
            "ingest round {}/{rounds}: {:.0} spans/s, {:.2} CPU µs/span, {} page faults",
            round + 1,
            m.spans_per_sec,
            m.cpu_us_per_span,
            m.page_faults,
        );
        measured.push(m);
        if round + 1 == rounds {
            last = Some(engine);
        } else {
            engine.close().map_err(|e| e.to_string())?;
            drop(engine);
        }
    }
    let engine = last.ok_or("no ingest round ran")?;
    let all_rates: Vec<f64> = measured.iter().map(|m| m.spans_per_sec).collect();
    measured.sort_by(|a, b| a.spans_per_sec.total_cmp(&b.spans_per_sec));
    let median = measured.swap_remove(measured.len() / 2);

    // Queries with data spread over the hot tier and parts.
    let queries = measure_queries(&engine, &corpus)?;

    // Compact fully, then measure disk, then restart and measure memory.
    engine.flush().map_err(|e| e.to_string())?;
    engine.compact().map_err(|e| e.to_string())?;
    let queries_compacted = measure_queries(&engine, &corpus)?;
    let part_bytes = crate::server::dir_bytes(&dir.join("parts").join("spans"));
    engine.close().map_err(|e| e.to_string())?;
    drop(engine);
    let t = Instant::now();
    let reopened = open(&dir, &args.run.durability)?;
    let restart_ms = t.elapsed().as_secs_f64() * 1000.0;
    let st = reopened.stats();
    let rss = crate::server::proc_status_kib(std::process::id(), "VmRSS:") * 1024;
    drop(reopened);

    let result = json!({
        "machine": machine.finish(),
        "params": {"spans": corpus.span_count(), "traces": corpus.traces(), "corpus": corpus.name(), "batch": args.run.batch, "writers": args.run.writers, "durability": args.run.durability, "rounds": rounds},
        "results": {
            "ingest_spans_per_sec": median.spans_per_sec,
            "ingest_rounds_spans_per_sec": all_rates,
            "ingest_seconds": median.seconds,
            "ingest_cpu_us_per_span": median.cpu_us_per_span,
            "ingest_page_faults": median.page_faults,
            "wal_fsyncs": median.fsyncs,
            "bytes_per_span": part_bytes as f64 / corpus.span_count() as f64,
            "span_part_bytes": part_bytes,
            "peak_rss_mib": memory["peak_rss_mib"],
            "memory_probe": memory,
            "bench_process_peak_rss_mib": crate::server::proc_status_kib(std::process::id(), "VmHWM:") as f64 / 1024.0,
            "restart_rss_mib": rss as f64 / 1048576.0,
            "index_memory_bytes": st.index_memory_bytes,
            "index_mib_per_million": st.index_memory_bytes as f64 / 1048576.0 / (corpus.span_count() as f64 / 1e6),
            "restart_ms": restart_ms,
            "parts_after_compaction": st.parts,
            "queries": queries,
            "queries_compacted": queries_compacted,
        },
    });
    let mode = if agent_corpus { "engine_agent" } else { "engine" };
    crate::report::write(&args.run.out, mode, result)
}

/// Writes back every dirty page of every filesystem (`sync`), so a round
/// does not pay for the last one's writes.
fn sync_filesystems() {
    match std::process::Command::new("sync").status() {
        Ok(s) if s.success() => {}
        other => eprintln!("sync before an ingest round failed: {other:?}"),
    }
}

/// One ingest round's figures.
struct Round {
    spans_per_sec: f64,
    seconds: f64,
    /// CPU per span, background flushes included: steadier than throughput
    /// on a shared machine, where stolen time slows the wall clock.
    cpu_us_per_span: f64,
    page_faults: i64,
    fsyncs: u64,
}

/// Ingests the whole corpus into a new engine on `dir`, timing only the
/// ingest (batches are generated before, and held in memory).
fn ingest_round(args: &EngineArgs, corpus: &EngineCorpus, dir: &std::path::Path) -> Result<(Engine, Round), String> {
    let per = corpus.per_batch(args.run.batch);
    let traces = corpus.traces();
    let pb = bar(corpus.span_count(), "generating batches");
    let batches: Vec<Mutex<Option<Vec<Span>>>> = (0..traces.div_ceil(per))
        .map(|b| {
            let spans = corpus.spans(b * per..((b + 1) * per).min(traces));
            pb.inc(spans.len() as u64);
            Mutex::new(Some(spans))
        })
        .collect();
    pb.finish_and_clear();

    let engine = open(dir, &args.run.durability)?;
    let pb = bar(corpus.span_count(), "ingesting");
    let started = Instant::now();
    let cpu_started = crate::server::process_cpu_seconds();
    let faults_started = crate::server::minor_faults();
    let take = |b: u64| -> Result<Vec<Span>, String> {
        let slot = batches[b as usize].lock().map_err(|e| e.to_string())?.take();
        Ok(slot.unwrap_or_default())
    };
    ingest_concurrently(&engine, args.run.writers, batches.len() as u64, &take, &pb)?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_us_per_span = (crate::server::process_cpu_seconds() - cpu_started) * 1e6 / corpus.span_count() as f64;
    pb.finish_and_clear();
    let round = Round {
        spans_per_sec: corpus.span_count() as f64 / seconds,
        seconds,
        cpu_us_per_span,
        page_faults: crate::server::minor_faults() - faults_started,
        fsyncs: engine.stats().wal_fsyncs,
    };
    Ok((engine, round))
}

/// Runs the memory probe: `skein-bench engine-memory` twice, on one temp
/// data dir — ingest + compaction, then a fresh process that only reopens
/// it — and returns both reports.
fn memory_probe(args: &EngineArgs, agent_corpus: bool) -> Result<serde_json::Value, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let tmp = tempfile::Builder::new()
        .prefix("skein-engine-memory-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let dir = tmp.path().join("data");
    let run = |reopen: bool| -> Result<serde_json::Value, String> {
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("engine-memory")
            .arg("--dir")
            .arg(&dir)
            .args(["--spans", &args.spans.to_string()])
            .args(["--batch", &args.run.batch.to_string()])
            .args(["--writers", &args.run.writers.to_string()])
            .args(["--durability", &args.run.durability])
            .stderr(std::process::Stdio::inherit());
        if reopen {
            cmd.arg("--reopen");
        }
        if agent_corpus {
            cmd.arg("--agent");
        }
        let out = cmd.output().map_err(|e| format!("memory probe: {e}"))?;
        if !out.status.success() {
            return Err(format!("memory probe failed: {}", out.status));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("memory probe output: {e}"))
    };
    eprintln!(
        "memory probe: ingest + compaction of {} spans in a child process",
        args.spans
    );
    let mut v = run(false)?;
    let reopened = run(true)?;
    v["restart_rss_mib"] = reopened["rss_mib"].clone();
    v["restart_index_memory_bytes"] = reopened["index_memory_bytes"].clone();
    v["restart_ms"] = reopened["open_ms"].clone();
    Ok(v)
}

/// The memory probe itself. Without `--reopen`: a fresh engine ingests the
/// corpus, each writer generating its batches as it goes (so at most
/// `writers` batches exist outside the engine), then flushes and compacts
/// to one part, and prints the process's peak RSS (VmHWM). With
/// `--reopen`: opens the data dir and prints the resident memory then.
pub fn memory(args: &MemoryArgs) -> Result<(), String> {
    let dir = args.run.dir.as_deref().ok_or("engine-memory needs --dir")?;
    let self_kib = |key| crate::server::proc_status_kib(std::process::id(), key);
    let baseline_kib = self_kib("VmRSS:");
    if args.reopen {
        let t = Instant::now();
        let engine = open(dir, &args.run.durability)?;
        let open_ms = t.elapsed().as_secs_f64() * 1000.0;
        let st = engine.stats();
        println!(
            "{}",
            json!({
                "baseline_rss_mib": baseline_kib as f64 / 1024.0,
                "rss_mib": self_kib("VmRSS:") as f64 / 1024.0,
                "index_memory_bytes": st.index_memory_bytes,
                "spans": st.spans,
                "open_ms": open_ms,
            })
        );
        return Ok(());
    }
    let corpus = EngineCorpus::new(args.agent, args.spans, now_ns());
    let per = corpus.per_batch(args.run.batch);
    let traces = corpus.traces();
    let engine = open(dir, &args.run.durability)?;
    let generate = |b: u64| Ok(corpus.spans(b * per..((b + 1) * per).min(traces)));
    ingest_concurrently(
        &engine,
        args.run.writers,
        traces.div_ceil(per),
        &generate,
        &indicatif::ProgressBar::hidden(),
    )?;
    let after_ingest_kib = self_kib("VmHWM:");
    engine.flush().map_err(|e| e.to_string())?;
    engine.compact().map_err(|e| e.to_string())?;
    let st = engine.stats();
    engine.close().map_err(|e| e.to_string())?;
    let v = json!({
        "spans": corpus.span_count(),
        "baseline_rss_mib": baseline_kib as f64 / 1024.0,
        "peak_rss_ingest_mib": after_ingest_kib as f64 / 1024.0,
        "peak_rss_mib": self_kib("VmHWM:") as f64 / 1024.0,
        "parts_after_compaction": st.parts,
    });
    println!("{v}");
    Ok(())
}

fn measure_queries(engine: &Engine, c: &EngineCorpus) -> Result<serde_json::Value, String> {
    match c {
        EngineCorpus::Canonical(c) => measure_canonical_queries(engine, c),
        EngineCorpus::Agent(c) => measure_agent_queries(engine, c),
    }
}

/// The agent corpus's queries, each answer checked against the generator.
fn measure_agent_queries(engine: &Engine, c: &AgentCorpus) -> Result<serde_json::Value, String> {
    let attr_of = |s: &Span, key: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_str().map(str::to_string))
    };
    let mut get = Samples::default();
    for i in 0..200u64 {
        let t = i * c.traces / 200;
        let s = Instant::now();
        let r = engine.get_trace(c.trace_id(t)).map_err(|e| e.to_string())?;
        get.push(s.elapsed());
        if r.spans.len() as u64 != c.trace_len(t) {
            return Err(format!(
                "trace {t}: {} spans, expected {}",
                r.spans.len(),
                c.trace_len(t)
            ));
        }
    }
    let mut users = Samples::default();
    for i in 0..100u64 {
        let t = i * c.traces / 100;
        let user = AgentCorpus::user_value(c.user_of(t));
        let q = SpanQuery {
            attributes: vec![AttrFilter::eq(AttrScope::Record, agent::USER_KEY, user.clone())],
            limit: 100,
            ..Default::default()
        };
        let s = Instant::now();
        let r = engine.search_spans(&q).map_err(|e| e.to_string())?;
        users.push(s.elapsed());
        let n = r.records.len() as u64;
        let all_match = r
            .records
            .iter()
            .all(|s| attr_of(s, agent::USER_KEY).as_deref() == Some(user.as_str()));
        let has_trace = r.records.iter().filter(|s| s.trace_id == c.trace_id(t)).count() as u64;
        if !all_match || (n < 100 && has_trace != c.trace_len(t)) {
            return Err(format!(
                "user {user}: {n} spans, {has_trace} of trace {t} ({} spans)",
                c.trace_len(t)
            ));
        }
    }
    let mut models = Samples::default();
    for i in 0..50usize {
        let model = agent::MODELS[i % agent::MODELS.len()].0;
        let q = SpanQuery {
            attributes: vec![AttrFilter::eq(AttrScope::Record, agent::MODEL_KEY, model)],
            limit: 100,
            ..Default::default()
        };
        let s = Instant::now();
        let r = engine.search_spans(&q).map_err(|e| e.to_string())?;
        models.push(s.elapsed());
        let ok = r
            .records
            .iter()
            .all(|s| attr_of(s, agent::MODEL_KEY).as_deref() == Some(model));
        if !ok || (c.span_count() > 100_000 && r.records.len() != 100) {
            return Err(format!("model {model}: {} spans", r.records.len()));
        }
    }
    let services = services_queries(engine, c.span_count())?;
    Ok(
        json!({"get_trace": get.summary(), "attribute_search": users.summary(), "attribute_search_model": models.summary(), "services": services.summary()}),
    )
}

/// 20 runs of the services aggregate, each checked to count every span.
fn services_queries(engine: &Engine, spans: u64) -> Result<Samples, String> {
    let mut services = Samples::default();
    for _ in 0..20 {
        let s = Instant::now();
        let (r, _) = engine.services(Window::ALL).map_err(|e| e.to_string())?;
        services.push(s.elapsed());
        let total: u64 = r.iter().map(|s| s.spans).sum();
        if total != spans {
            return Err(format!("services count {total} spans, expected {spans}"));
        }
    }
    Ok(services)
}

fn measure_canonical_queries(engine: &Engine, c: &Corpus) -> Result<serde_json::Value, String> {
    let mut get = Samples::default();
    for i in 0..200u64 {
        let t = i * c.traces / 200;
        let s = Instant::now();
        let r = engine.get_trace(c.trace_id(t)).map_err(|e| e.to_string())?;
        get.push(s.elapsed());
        if r.spans.len() as u64 != c.spans_per_trace {
            return Err(format!("trace {t}: {} spans", r.spans.len()));
        }
    }
    let mut attr = Samples::default();
    for g in 0..100u64 {
        let q = SpanQuery {
            attributes: vec![AttrFilter::eq(
                AttrScope::Record,
                "benchmark.group",
                format!("group-{}", g % c.groups),
            )],
            limit: 100,
            ..Default::default()
        };
        let s = Instant::now();
        let r = engine.search_spans(&q).map_err(|e| e.to_string())?;
        attr.push(s.elapsed());
        if r.records.len() != 100 {
            return Err(format!("group {g}: {} spans", r.records.len()));
        }
    }
    let services = services_queries(engine, c.span_count())?;
    std::thread::sleep(Duration::from_millis(1));
    Ok(json!({"get_trace": get.summary(), "attribute_search": attr.summary(), "services": services.summary()}))
}
