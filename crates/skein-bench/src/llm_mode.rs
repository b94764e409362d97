//! `skein-bench llm`: what the typed LLM columns cost at ingest (issue
//! #18: "ingest throughput within 10% of the same corpus without the LLM
//! columns"), in process.
//!
//! Two engines ingest the agent corpus's spans chunk by chunk, in
//! alternating order (drift on a shared machine falls on both): one the
//! spans as generated, one the same spans with every `gen_ai.` key renamed
//! `gen_ax.` — the same bytes, but no span has a GenAI view, so its parts
//! fill no LLM column and have no calls table. Both store every string
//! over 256 bytes as a payload, so both keep the same payloads (GenAI
//! content goes to the store from 256 bytes; once renamed, only that
//! threshold sends it). Timing as in `skein-bench text`: generation is off
//! the clock, each chunk's clock runs until its flushes and merges are
//! done, merges while idle are off.
//!
//! Checked: both engines hold every span; the GenAI one counts exactly the
//! generator's model calls, the renamed one none.

use std::path::{Path, PathBuf};

use serde_json::json;
use skein_engine::{Engine, PayloadPolicy, UsageGroupBy, Window};
use skein_model::Span;
use skein_model::corpus::agent::AgentCorpus;

use crate::e2e::bar;
use crate::inproc::ingest;
use crate::machine::Machine;

#[derive(clap::Args, Debug, Clone)]
pub struct LlmArgs {
    #[command(flatten)]
    pub run: crate::inproc::InProcArgs,
    /// Spans to ingest into each engine, e.g. 1M.
    #[arg(long, default_value = "1M")]
    pub spans: String,
    /// Spans generated (and held) at a time.
    #[arg(long, default_value = "250k")]
    pub chunk: String,
}

/// Payloads from 256 bytes on, GenAI content or not (see the module doc).
const PAYLOAD_BYTES: usize = 256;

fn open(dir: &Path, durability: &str) -> Result<Engine, String> {
    let mut o = crate::inproc::quiet_options(dir, durability)?;
    o.payloads = PayloadPolicy {
        threshold: PAYLOAD_BYTES,
        content_min: PAYLOAD_BYTES,
    };
    Engine::open(o).map_err(|e| e.to_string())
}

/// `span` with its GenAI keys renamed, byte for byte as long.
fn without_genai(mut span: Span) -> Span {
    for kv in &mut span.attributes {
        if let Some(rest) = kv.key.strip_prefix("gen_ai.") {
            kv.key = format!("gen_ax.{rest}");
        }
    }
    span
}

struct Side {
    name: &'static str,
    genai: bool,
    dir: PathBuf,
    engine: Engine,
    seconds: f64,
    cpu_seconds: f64,
}

pub fn run(args: &LlmArgs) -> Result<(), String> {
    let machine = Machine::probe();
    let n = crate::ladder::parse_count(&args.spans)?;
    let chunk = crate::ladder::parse_count(&args.chunk)?.max(args.run.batch);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let corpus = AgentCorpus::new(n, now);
    let n = corpus.span_count();
    let tmp = tempfile::Builder::new()
        .prefix("skein-llm-bench-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let root = args.run.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let mut sides = Vec::new();
    for (name, genai) in [("with", true), ("without", false)] {
        let dir = root.join(format!("llm-columns-{name}"));
        sides.push(Side {
            name,
            genai,
            engine: open(&dir, &args.run.durability)?,
            dir,
            seconds: 0.0,
            cpu_seconds: 0.0,
        });
    }
    let pb = bar(n, "ingesting spans (with and without GenAI keys)");
    let mut llm_spans = 0u64;
    let mut next_trace = 0u64;
    let mut round = 0;
    while next_trace < corpus.traces {
        // Whole traces, about `chunk` spans.
        let first = next_trace;
        let mut spans_in = 0;
        while next_trace < corpus.traces && spans_in < chunk {
            spans_in += corpus.trace_len(next_trace);
            next_trace += 1;
        }
        let spans = corpus.spans(first..next_trace);
        llm_spans += (first..next_trace)
            .map(|t| (0..corpus.trace_len(t)).filter(|&j| corpus.is_llm(t, j)).count() as u64)
            .sum::<u64>();
        let renamed: Vec<Span> = spans.iter().cloned().map(without_genai).collect();
        let last = next_trace == corpus.traces;
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut inputs = [Some(spans), Some(renamed)];
        for &i in &order {
            let these = inputs[i].take().unwrap_or_default();
            let batches: Vec<Vec<Span>> = these.chunks(args.run.batch as usize).map(<[Span]>::to_vec).collect();
            drop(these);
            let side = &mut sides[i];
            let timed = ingest(&side.engine, args.run.writers, batches, last, Engine::ingest_spans)?;
            side.seconds += timed.seconds;
            side.cpu_seconds += timed.cpu_seconds;
        }
        pb.inc(spans_in);
        round += 1;
    }
    pb.finish_and_clear();

    let mut per_side = serde_json::Map::new();
    for side in &sides {
        let st = side.engine.stats();
        if st.spans != n {
            return Err(format!("engine {} holds {} spans, expected {n}", side.name, st.spans));
        }
        let (usage, _) = side
            .engine
            .llm_usage(Window::ALL, UsageGroupBy::Model, false)
            .map_err(|e| e.to_string())?;
        let want = if side.genai { llm_spans } else { 0 };
        if usage.totals.calls != want {
            return Err(format!(
                "engine {} counts {} model calls, expected {want}",
                side.name, usage.totals.calls
            ));
        }
        let span_part_bytes = crate::server::dir_bytes(&side.dir.join("parts").join("spans"));
        eprintln!(
            "LLM columns {}: {:.0} spans/s ({:.2} CPU µs per span)",
            side.name,
            n as f64 / side.seconds,
            side.cpu_seconds * 1e6 / n as f64
        );
        per_side.insert(
            side.name.to_string(),
            json!({
                "genai_keys": side.genai,
                "ingest_seconds": side.seconds,
                "ingest_spans_per_sec": n as f64 / side.seconds,
                "ingest_cpu_us_per_span": side.cpu_seconds * 1e6 / n as f64,
                "model_calls": usage.totals.calls,
                "parts": st.parts,
                "span_part_bytes": span_part_bytes,
                "bytes_on_disk": crate::server::dir_bytes(&side.dir),
                "payloads": st.payloads.payloads,
            }),
        );
    }
    let with = &per_side["with"];
    let without = &per_side["without"];
    let rate = |v: &serde_json::Value| v["ingest_spans_per_sec"].as_f64().unwrap_or(0.0);
    let slowdown = 1.0 - rate(with) / rate(without).max(f64::MIN_POSITIVE);
    let result = json!({
        "machine": machine.finish(),
        "params": {"spans": n, "chunk": chunk, "batch": args.run.batch, "writers": args.run.writers,
                   "durability": args.run.durability, "payload_bytes": PAYLOAD_BYTES},
        "corpus": {"name": "agent", "spans": n, "traces": corpus.traces, "llm_spans": llm_spans},
        "results": {"with": with, "without": without, "ingest_slowdown_with_llm_columns": slowdown},
    });
    crate::report::write(&args.run.out, "llm", result)
}
