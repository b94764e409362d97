//! `skein-bench e2e`: start `skein serve`, ingest the canonical corpus over
//! OTLP/HTTP protobuf, wait until it is all stored and compaction settles,
//! run the query phase with every answer verified, write the report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::{Value, json};
use skein_model::corpus::agent::{self, AgentCorpus};
use skein_model::corpus::{Corpus, HOUR_NS};
use skein_model::{LogRecord, Span};

use crate::expected::{self, AgentExpected, Expected, SpanKey};
use crate::load::{self, Payload, Protocol, Target};
use crate::machine::Machine;
use crate::server::SkeinProcess;
use crate::stats::Samples;

#[derive(clap::Args, Debug, Clone)]
pub struct E2eArgs {
    /// The skein binary to benchmark.
    #[arg(long, default_value = "target/release/skein")]
    pub skein_bin: PathBuf,
    /// Spans in the corpus (10 per trace in the canonical corpus; whole
    /// traces of 1 to 40 spans in the agent corpus).
    #[arg(long, default_value_t = 1_000_000)]
    pub spans: u64,
    /// Log records: at most this many (default: one per trace in the
    /// canonical corpus, from its root span; two per trace in the agent
    /// corpus).
    #[arg(long)]
    pub logs: Option<u64>,
    /// Which corpus to run: each writes its own report entry.
    #[arg(long, value_enum, default_value_t = CorpusChoice::Both)]
    pub corpus: CorpusChoice,
    /// Concurrent keep-alive clients.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Spans per request.
    #[arg(long, default_value_t = 1000)]
    pub batch: u64,
    /// Durability mode passed to the server.
    #[arg(long, default_value = "fsync")]
    pub durability: String,
    /// Where BENCHMARKS.md and benchmarks.json go.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Benchmark a running OTLP/HTTP endpoint instead (ingest only; no
    /// verification of answers, which needs Skein's API).
    #[arg(long)]
    pub target: Option<String>,
    /// Extra `skein serve` flags, e.g. --server-arg=--hot-max-bytes=32MiB.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Seconds of steady load at half the measured ingest rate, for request
    /// latency below saturation (0 to skip).
    #[arg(long, default_value_t = 10.0)]
    pub paced_seconds: f64,
    /// Also ingest the corpus over OTLP/gRPC into a second, fresh server
    /// (same clients and batches), for the gRPC throughput.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub grpc: bool,
    /// Trace lookups / attribute searches in the query phase.
    #[arg(long, default_value_t = 200)]
    pub trace_queries: usize,
    #[arg(long, default_value_t = 100)]
    pub attr_queries: usize,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorpusChoice {
    Canonical,
    Agent,
    Both,
}

impl CorpusChoice {
    pub fn canonical(self) -> bool {
        self != CorpusChoice::Agent
    }
    pub fn agent(self) -> bool {
        self != CorpusChoice::Canonical
    }
}

/// A corpus with its expected answers.
enum Bench {
    Canonical {
        c: Corpus,
        exp: Expected,
        logs: u64,
    },
    Agent {
        c: AgentCorpus,
        exp: Box<AgentExpected>,
        logs: u64,
    },
}

impl Bench {
    fn traces(&self) -> u64 {
        match self {
            Bench::Canonical { c, .. } => c.traces,
            Bench::Agent { c, .. } => c.traces,
        }
    }
    fn span_count(&self) -> u64 {
        match self {
            Bench::Canonical { c, .. } => c.span_count(),
            Bench::Agent { c, .. } => c.span_count(),
        }
    }
    fn log_count(&self) -> u64 {
        match self {
            Bench::Canonical { logs, .. } | Bench::Agent { logs, .. } => *logs,
        }
    }
    /// Spans of traces `r` (past the corpus's traces too, for fresh load).
    fn spans(&self, r: std::ops::Range<u64>) -> Vec<Span> {
        match self {
            Bench::Canonical { c, .. } => c.spans(r),
            Bench::Agent { c, .. } => c.spans(r),
        }
    }
    fn logs(&self, r: std::ops::Range<u64>) -> Vec<LogRecord> {
        match self {
            Bench::Canonical { c, .. } => expected::logs_of(c, r),
            Bench::Agent { c, .. } => c.logs(r),
        }
    }
    /// Traces per request of about `batch` spans.
    fn batch_traces(&self, batch: u64) -> u64 {
        let mean = self.span_count() as f64 / self.traces().max(1) as f64;
        ((batch as f64 / mean).round() as u64).max(1)
    }
    fn report_mode(&self) -> &'static str {
        match self {
            Bench::Canonical { .. } => "e2e",
            Bench::Agent { .. } => "e2e_agent",
        }
    }
    fn expected_spans(&self) -> u64 {
        match self {
            Bench::Canonical { exp, .. } => exp.spans,
            Bench::Agent { exp, .. } => exp.spans,
        }
    }
    fn expected_logs(&self) -> u64 {
        match self {
            Bench::Canonical { exp, .. } => exp.logs,
            Bench::Agent { exp, .. } => exp.logs,
        }
    }
    fn json(&self) -> Value {
        match self {
            Bench::Canonical { c, logs, .. } => corpus_json(c, *logs),
            Bench::Agent { c, logs, exp } => json!({
                "name": "agent", "spans": c.span_count(), "traces": c.traces,
                "mean_spans_per_trace": c.span_count() as f64 / c.traces.max(1) as f64,
                "max_spans_per_trace": agent::MAX_TRACE_LEN,
                "services": c.services, "service_zipf_s": c.service_zipf_s, "users": c.users,
                "llm_spans": exp.llm_spans, "error_spans": exp.error_spans,
                "llm_per_mille": c.llm_per_mille, "error_per_mille": c.error_per_mille,
                "logs": logs, "rare_word": agent::RARE_WORD, "common_word": AgentCorpus::common_word(),
                "common_word_logs": exp.common_word_logs, "rare_word_logs": exp.rare_word.len(),
                "seed": c.seed,
            }),
        }
    }
}

pub fn bar(len: u64, what: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(len);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg:<28} [{bar:40}] {human_pos}/{human_len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn span_key(v: &Value) -> Result<SpanKey, String> {
    let t = v["start_time_unix_nano"].as_u64().ok_or("span without start time")?;
    let tid = u128::from_str_radix(v["trace_id"].as_str().ok_or("no trace_id")?, 16).map_err(|e| e.to_string())?;
    let sid = u64::from_str_radix(v["span_id"].as_str().ok_or("no span_id")?, 16).map_err(|e| e.to_string())?;
    Ok((t, tid, sid))
}

fn log_key(v: &Value) -> Result<SpanKey, String> {
    let t = v["time_unix_nano"].as_u64().ok_or("log without time")?;
    let tid = u128::from_str_radix(v["trace_id"].as_str().unwrap_or("0"), 16).unwrap_or(0);
    let sid = u64::from_str_radix(v["span_id"].as_str().unwrap_or("0"), 16).unwrap_or(0);
    Ok((t, tid, sid))
}

struct Timed {
    http: crate::http1::Connection,
}

impl Timed {
    /// GETs `path`, timing request to last byte of the answer.
    fn get_raw(&mut self, path: &str, samples: &mut Samples) -> Result<Vec<u8>, String> {
        let t = Instant::now();
        let a = self.http.get(path)?;
        samples.push(t.elapsed());
        if !(200..300).contains(&a.status) {
            return Err(format!("GET {path}: {} {}", a.status, String::from_utf8_lossy(&a.body)));
        }
        Ok(a.body)
    }

    fn get(&mut self, path: &str, samples: &mut Samples) -> Result<Value, String> {
        let body = self.get_raw(path, samples)?;
        serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))
    }
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("wrong answer: {}", what()))
    }
}

fn encode_all(c: &Bench, protocol: Protocol, batch_traces: u64, pb: &indicatif::ProgressBar) -> Vec<Payload> {
    let traces = c.traces();
    let mut out = Vec::with_capacity((traces / batch_traces.max(1)) as usize + 1);
    let mut t = 0;
    while t < traces {
        let end = (t + batch_traces).min(traces);
        let p = load::encode(protocol, &c.spans(t..end));
        pb.inc(p.records);
        out.push(p);
        t = end;
    }
    out
}

pub fn run(args: &E2eArgs) -> Result<(), String> {
    if args.corpus.canonical() {
        run_corpus(args, false)?;
    }
    if args.corpus.agent() {
        run_corpus(args, true)?;
    }
    Ok(())
}

fn run_corpus(args: &E2eArgs, agent_corpus: bool) -> Result<(), String> {
    let machine = Machine::probe();
    let end_ns = now_ns();
    // Expected answers and request bodies, all before any clock starts.
    let corpus = if agent_corpus {
        let c = AgentCorpus::new(args.spans, end_ns);
        let logs = args.logs.unwrap_or(c.log_count()).min(c.log_count());
        let pb = bar(c.span_count(), "agent corpus: expected answers");
        let users = expected::agent_query_users(&c, args.attr_queries);
        let exp = Box::new(expected::compute_agent(&c, &users, logs, &pb));
        pb.finish_and_clear();
        Bench::Agent { c, exp, logs }
    } else {
        let c = Corpus::new(args.spans, end_ns);
        let logs = args.logs.unwrap_or(c.traces).min(c.traces);
        let pb = bar(c.span_count(), "computing expected answers");
        let exp = expected::compute(&c, logs, &pb);
        pb.finish_and_clear();
        Bench::Canonical { c, exp, logs }
    };
    let logs_n = corpus.log_count();
    let batch_traces = corpus.batch_traces(args.batch);
    let pb = bar(corpus.span_count(), "encoding requests");
    let payloads = Arc::new(encode_all(&corpus, Protocol::OtlpHttpProtobuf, batch_traces, &pb));
    pb.finish_and_clear();
    let log_payloads: Arc<Vec<Payload>> = Arc::new(
        (0..logs_n)
            .step_by(1000)
            .map(|t| {
                let logs = corpus.logs(t..(t + 1000).min(logs_n));
                Payload {
                    records: logs.len() as u64,
                    body: skein_model::otlp::logs_to_otlp(&logs).encode_to_vec().into(),
                }
            })
            .collect(),
    );

    // Before any load: what an fsync costs the disk of the server this run
    // starts (a target's disk is elsewhere).
    let fsync = match &args.target {
        None => Some(crate::machine::fdatasync_latency(&std::env::temp_dir(), 300)?.summary()),
        Some(_) => None,
    };
    let server = match &args.target {
        Some(_) => None,
        None => Some(start_server(args)?),
    };
    let target = match (&server, &args.target) {
        (Some(s), _) => s.target(),
        (None, Some(t)) => Target {
            otlp_http: t.trim_end_matches('/').to_string(),
            grpc: String::new(),
            api: String::new(),
        },
        (None, None) => unreachable!(),
    };

    let cpu_before = server.as_ref().map(crate::server::SkeinProcess::cpu_seconds);
    let ingest = send_all(
        &target,
        Protocol::OtlpHttpProtobuf,
        "/v1/traces",
        payloads,
        args.clients,
        "spans",
    )?;
    // Work the flushes still owe after the last ack is not on it.
    let span_ingest_cpu = server
        .as_ref()
        .zip(cpu_before)
        .map(|(s, before)| s.cpu_seconds() - before);
    let log_ingest = send_all(
        &target,
        Protocol::OtlpHttpProtobuf,
        "/v1/logs",
        log_payloads,
        args.clients,
        "logs",
    )?;
    let acked = Instant::now();
    eprintln!(
        "ingested {} spans in {:.1} s ({:.0} spans/s), {} logs ({:.0}/s)",
        ingest.records,
        ingest.elapsed.as_secs_f64(),
        ingest.records_per_sec(),
        log_ingest.records,
        log_ingest.records_per_sec()
    );
    let Some(server) = server else {
        let result = json!({
            "machine": machine.finish(),
            "params": {"clients": args.clients, "batch": args.batch, "durability": "target's", "target": args.target},
            "corpus": corpus.json(),
            "results": {"ingest": ingest_json(&ingest), "log_ingest": ingest_json(&log_ingest)},
        });
        let mode = if agent_corpus { "e2e_target_agent" } else { "e2e_target" };
        return crate::report::write(&args.out, mode, result);
    };

    // Everything acknowledged must be queryable; then let compaction settle.
    let stats = wait_stored(&server, corpus.expected_spans(), corpus.expected_logs())?;
    let parts_after_ingest = stats["parts"].as_u64().unwrap_or(0);
    let peak_ingest = server.peak_rss_bytes();
    // Parts are flushed without their full-text index, which is built once
    // flushing has caught up: how long after the last acknowledgement every
    // part had one, and what the whole of ingest and indexing cost.
    let text_indexed = wait_text_indexed(&server)?.duration_since(acked);
    let indexed_cpu = cpu_before.map(|before| server.cpu_seconds() - before);
    let records = (ingest.records + log_ingest.records).max(1) as f64;
    let stats = server.wait_settled()?;
    let parts_after_compaction = stats["parts"].as_u64().unwrap_or(0);

    let queries = match &corpus {
        Bench::Canonical { c, exp, .. } => query_phase(&server.api, c, exp, end_ns, args)?,
        Bench::Agent { c, exp, .. } => agent_query_phase(&server.api, server.pid(), c, exp, end_ns, args)?,
    };
    let stats = server.stats()?;
    let mut disk = server_disk(&server, &stats, corpus.expected_spans(), corpus.expected_logs());
    let request_bytes = ingest.bytes + log_ingest.bytes;
    disk["request_bytes"] = json!(request_bytes);
    disk["disk_over_request_bytes"] =
        json!(disk["bytes_on_disk"].as_u64().unwrap_or(0) as f64 / request_bytes.max(1) as f64);
    for k in ["payloads", "payload_bytes", "payload_logical_bytes"] {
        disk[k] = stats[k].clone();
    }
    let peak = server.peak_rss_bytes();
    let rss = server.rss_bytes();
    // Latency under a steady half of the measured rate, on fresh traces
    // (after the verified queries, so their counts are unaffected).
    let half_rate = ingest.records_per_sec() / 2.0;
    let paced = if args.paced_seconds > 0.0 {
        let n_req = ((half_rate * args.paced_seconds) / args.batch as f64).ceil() as u64 + 4;
        let pb = bar(n_req * args.batch, "encoding paced load");
        let mut paced_payloads = Vec::new();
        for r in 0..n_req {
            let t0 = corpus.traces() + r * batch_traces;
            paced_payloads.push(load::encode(
                Protocol::OtlpHttpProtobuf,
                &corpus.spans(t0..t0 + batch_traces),
            ));
            pb.inc(args.batch);
        }
        pb.finish_and_clear();
        // Request batches of the agent corpus vary in size: pace by the
        // mean request.
        let per_request = paced_payloads.iter().map(|p| p.records).sum::<u64>() as f64 / n_req.max(1) as f64;
        let r = load::run_paced(
            &target,
            Arc::new(paced_payloads),
            args.clients,
            half_rate / per_request.max(1.0),
            Duration::from_secs_f64(args.paced_seconds),
        )?;
        json!({"target_spans_per_sec": half_rate, "spans_per_sec": r.records_per_sec(), "latency": r.latencies.summary(), "errors": r.errors})
    } else {
        Value::Null
    };
    server.stop()?;
    let grpc = if args.grpc {
        Some(grpc_ingest(&corpus, batch_traces, args)?)
    } else {
        None
    };

    let result = json!({
        "machine": machine.finish(),
        "params": {"clients": args.clients, "batch": args.batch, "durability": args.durability, "skein_bin": args.skein_bin, "server_args": args.server_args},
        "corpus": corpus.json(),
        "results": {
            "ingest": ingest_json(&ingest),
            "log_ingest": ingest_json(&log_ingest),
            "disk": disk,
            "server": {
                "peak_rss_mib": peak as f64 / 1048576.0,
                "peak_rss_ingest_mib": peak_ingest as f64 / 1048576.0,
                "span_ingest_cpu_us_per_span": span_ingest_cpu.map(|s| s * 1e6 / ingest.records.max(1) as f64),
                "text_indexed_seconds_after_ack": text_indexed.as_secs_f64(),
                "cpu_us_per_record_until_indexed": indexed_cpu.map(|s| s * 1e6 / records),
                "rss_mib": rss as f64 / 1048576.0,
                "wal_fsyncs": stats["wal_fsyncs"],
                "wal_appends": stats["wal_appends"],
                "compactions": stats["compactions"],
                "flushes": stats["flushes"],
            },
            "parts": {"after_ingest": parts_after_ingest, "after_compaction": parts_after_compaction},
            "queries": queries,
            "paced_half_rate": paced,
            "grpc_ingest": grpc,
            "disk_fdatasync": fsync,
        },
    });
    crate::report::write(&args.out, corpus.report_mode(), result)?;
    eprintln!("wrote {}", args.out.join(crate::report::MD_FILE).display());
    Ok(())
}

/// The span ingest again, over OTLP/gRPC into a fresh server: the same
/// corpus, clients and batch size as the OTLP/HTTP run.
fn grpc_ingest(corpus: &Bench, batch_traces: u64, args: &E2eArgs) -> Result<Value, String> {
    let pb = bar(corpus.span_count(), "encoding gRPC requests");
    let payloads = Arc::new(encode_all(corpus, Protocol::Grpc, batch_traces, &pb));
    pb.finish_and_clear();
    let server = start_server(args)?;
    let r = send_all(
        &server.target(),
        Protocol::Grpc,
        "",
        payloads,
        args.clients,
        "spans over gRPC",
    )?;
    // Every acknowledged span must be there.
    wait_stored(&server, corpus.span_count(), 0)?;
    server.stop()?;
    eprintln!(
        "ingested {} spans over gRPC in {:.1} s ({:.0} spans/s)",
        r.records,
        r.elapsed.as_secs_f64(),
        r.records_per_sec()
    );
    Ok(ingest_json(&r))
}

fn corpus_json(c: &Corpus, logs: u64) -> Value {
    json!({"name": "canonical", "spans": c.span_count(), "traces": c.traces, "spans_per_trace": c.spans_per_trace,
           "services": c.services, "groups": c.groups, "logs": logs, "seed": c.seed})
}

pub fn ingest_json(r: &load::LoadResult) -> Value {
    json!({
        "records": r.records,
        "requests": r.requests,
        "seconds": r.elapsed.as_secs_f64(),
        "spans_per_sec": r.records_per_sec(),
        "records_per_sec": r.records_per_sec(),
        "mb_per_sec": r.mb_per_sec(),
        "bytes": r.bytes,
        "latency": r.latencies.summary(),
        "errors": r.errors,
    })
}

/// A `skein serve` with the run's durability and extra flags.
fn start_server(args: &E2eArgs) -> Result<SkeinProcess, String> {
    let mut flags = vec!["--durability".to_string(), args.durability.clone()];
    flags.extend(args.server_args.iter().cloned());
    SkeinProcess::start(&args.skein_bin, &flags)
}

/// Sends every payload from `clients` keep-alive clients, with a progress
/// bar; any failed request fails the run.
fn send_all(
    target: &Target,
    protocol: Protocol,
    path: &'static str,
    payloads: Arc<Vec<Payload>>,
    clients: usize,
    what: &str,
) -> Result<load::LoadResult, String> {
    let pb = bar(payloads.iter().map(|p| p.records).sum(), &format!("ingesting {what}"));
    let r = load::run(target, protocol, path, payloads, clients, None, Some(pb.clone()))?;
    pb.finish_and_clear();
    if r.errors > 0 {
        return Err(format!(
            "{} {what} ingest requests failed: {:?}",
            r.errors, r.first_error
        ));
    }
    Ok(r)
}

fn wait_stored(server: &SkeinProcess, spans: u64, logs: u64) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let s = server.stats()?;
        if s["spans"].as_u64() == Some(spans) && s["logs"].as_u64() == Some(logs) {
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "server reports {} spans / {} logs, expected {spans} / {logs}",
                s["spans"], s["logs"]
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// When every part has its full-text index and nothing waits for flush.
fn wait_text_indexed(server: &SkeinProcess) -> Result<Instant, String> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let s = server.stats()?;
        // (A server from before indexes were built after the flush has no
        // backlog: it indexes as it flushes.)
        let backlog = s["text_index_backlog_parts"].as_u64().unwrap_or(0);
        if backlog == 0 && s["frozen_tiers"].as_u64() == Some(0) {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            return Err(format!("parts still without a text index after 600 s: {s}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn server_disk(server: &SkeinProcess, stats: &Value, spans: u64, logs: u64) -> Value {
    let span_parts = crate::server::dir_bytes(&server.data_dir.join("parts").join("spans"));
    let total = crate::server::dir_bytes(&server.data_dir);
    json!({
        "bytes_on_disk": total,
        "span_part_bytes": span_parts,
        "span_bytes_per_span": span_parts as f64 / spans.max(1) as f64,
        "bytes_per_record": total as f64 / (spans + logs).max(1) as f64,
        "wal_bytes": stats["wal_bytes"],
        "hot_records": stats["hot_records"],
    })
}

fn query_phase(api: &str, c: &Corpus, exp: &Expected, end_ns: u64, args: &E2eArgs) -> Result<Value, String> {
    let mut q = Timed {
        http: crate::http1::Connection::new(api)?,
    };
    let total = args.trace_queries + args.attr_queries + 20 * 8 + 10 + 200;
    let pb = bar(total as u64, "queries");
    let floor = round_trip_floor(&mut q, &pb)?;
    let mut traces = Samples::default();
    for i in 0..args.trace_queries {
        let t = (i as u64 * c.traces / args.trace_queries as u64).min(c.traces - 1);
        let id = c.trace_id(t).to_hex();
        let want = c.trace(t).iter().map(|s| s.span_id.to_hex()).collect();
        trace_query(&mut q, &id, want, &mut traces)?;
        pb.inc(1);
    }
    let mut attrs = Samples::default();
    for i in 0..args.attr_queries {
        let g = i as u64 % c.groups;
        let v = q.get(
            &format!("/api/v1/spans?attr.benchmark.group=group-{g}&limit=100"),
            &mut attrs,
        )?;
        let got: Vec<SpanKey> = v["spans"]
            .as_array()
            .ok_or("no spans")?
            .iter()
            .map(span_key)
            .collect::<Result<_, _>>()?;
        let want = &exp.by_group[g as usize];
        check(&got == want, || {
            format!(
                "group-{g}: {} spans, first {:?}, expected {} first {:?}",
                got.len(),
                got.first(),
                want.len(),
                want.first()
            )
        })?;
        pb.inc(1);
    }
    let mut services = Samples::default();
    for _ in 0..20 {
        let v = q.get("/api/v1/services", &mut services)?;
        let list = v["services"].as_array().ok_or("no services")?;
        check(list.len() == exp.by_service.len(), || {
            format!("{} services, expected {}", list.len(), exp.by_service.len())
        })?;
        for s in list {
            let name = s["service"].as_str().unwrap_or_default();
            let want = exp.by_service.get(name).copied().unwrap_or(0);
            check(s["spans"].as_u64() == Some(want), || {
                format!("service {name}: {} spans, expected {want}", s["spans"])
            })?;
        }
        pb.inc(1);
    }
    let mut summarize = Samples::default();
    for _ in 0..20 {
        let since = end_ns - HOUR_NS;
        let v = q.get(&format!("/api/v1/summary?since={since}&until={end_ns}"), &mut summarize)?;
        check(v["spans"].as_u64() == Some(exp.spans), || {
            format!("summary spans {} expected {}", v["spans"], exp.spans)
        })?;
        check(v["error_spans"].as_u64() == Some(exp.error_spans), || {
            format!("summary error_spans {} expected {}", v["error_spans"], exp.error_spans)
        })?;
        check(v["logs"].as_u64() == Some(exp.logs), || {
            format!("summary logs {} expected {}", v["logs"], exp.logs)
        })?;
        pb.inc(1);
    }
    let (anomalies, findings) = anomalies_queries(&mut q, end_ns, &pb)?;
    let mut duration = Samples::default();
    for _ in 0..20 {
        let v = q.get(
            &format!("/api/v1/spans?min_duration={}&limit=100", expected::MIN_DURATION_NS),
            &mut duration,
        )?;
        let got: Vec<SpanKey> = v["spans"]
            .as_array()
            .ok_or("no spans")?
            .iter()
            .map(span_key)
            .collect::<Result<_, _>>()?;
        check(got == exp.slow, || {
            format!(
                "duration filter: {} spans, first {:?} expected {:?}",
                got.len(),
                got.first(),
                exp.slow.first()
            )
        })?;
        pb.inc(1);
    }
    let mut sev = Samples::default();
    let mut body = Samples::default();
    let mut text = Samples::default();
    if exp.logs > 0 {
        for _ in 0..20 {
            severity_query(&mut q, &exp.error_logs, &mut sev)?;
            pb.inc(1);
        }
        let needle = expected::BODY_NEEDLE.replace(' ', "%20").replace(':', "%3A");
        for _ in 0..20 {
            let got = logs_of(&q.get(&format!("/api/v1/logs?body_contains={needle}&limit=100"), &mut body)?)?;
            check(got == exp.body_matches, || {
                format!("body search: {} logs, expected {}", got.len(), exp.body_matches.len())
            })?;
            pb.inc(1);
        }
        for _ in 0..20 {
            text_query(&mut q, expected::TEXT_WORD, 100, &exp.text_matches, &mut text)?;
            pb.inc(1);
        }
    }
    // The CLI end to end: process start, request, JSON out.
    let mut cli = Samples::default();
    let skein_bin = std::fs::canonicalize(&args.skein_bin).unwrap_or_else(|_| args.skein_bin.clone());
    for i in 0..10u64 {
        let t = (i * c.traces / 10).min(c.traces - 1);
        let started = Instant::now();
        let out = std::process::Command::new(&skein_bin)
            .args(["get", "trace", &c.trace_id(t).to_hex(), "--format", "json"])
            .env("SKEIN_SERVER", api)
            .output()
            .map_err(|e| format!("run skein get trace: {e}"))?;
        cli.push(started.elapsed());
        if !out.status.success() {
            // The CLI may not exist in older binaries: record nothing then.
            cli = Samples::default();
            break;
        }
        let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("skein get trace output: {e}"))?;
        check(v["span_count"].as_u64() == Some(c.spans_per_trace), || {
            format!("CLI trace: {}", v["span_count"])
        })?;
        pb.inc(1);
    }
    // Last: it adds spans, which would change the answers above.
    let planted = planted_regression_queries(&mut q, end_ns, &pb)?;
    pb.finish_and_clear();
    let summary = |s: &Samples| {
        if s.is_empty() {
            Value::Null
        } else {
            serde_json::to_value(s.summary()).unwrap_or(Value::Null)
        }
    };
    Ok(json!({
        "http_floor": summary(&floor),
        "trace_by_id": summary(&traces),
        "attribute_filter": summary(&attrs),
        "services": summary(&services),
        "summarize": summary(&summarize),
        "anomalies": summary(&anomalies),
        "anomalies_findings": findings,
        "duration_filter": summary(&duration),
        "logs_severity": summary(&sev),
        "logs_body": summary(&body),
        "logs_text": summary(&text),
        "logs_text_word": expected::TEXT_WORD,
        "cli_get_trace": summary(&cli),
        "anomalies_planted": summary(&planted),
    }))
}

/// Diagnosis over the corpus hour, 20 times: its latency, and how many
/// findings it made (the corpus has no planted change; each finding is
/// analysed in depth, so the figure holds that cost too).
fn anomalies_queries(q: &mut Timed, end_ns: u64, pb: &indicatif::ProgressBar) -> Result<(Samples, u64), String> {
    let mut samples = Samples::default();
    let mut findings = 0;
    for _ in 0..20 {
        let v = q.get(&format!("/api/v1/anomalies?lookback=1h&until={end_ns}"), &mut samples)?;
        let list = v["findings"].as_array().ok_or("anomalies: no findings list")?;
        check(v["operations_examined"].as_u64().is_some_and(|n| n > 0), || {
            format!("anomalies examined no operations: {}", v["operations_examined"])
        })?;
        findings = list.len() as u64;
        pb.inc(1);
    }
    Ok((samples, findings))
}

/// Planted beside the corpus: `planted-api GET /pay` calling
/// `planted-db SELECT`, 20 traces a minute over the corpus hour, the query
/// 8× slower for its last 20 minutes. Diagnosis over the hour, 20 times,
/// must name the query the cause and its caller affected: the figure holds
/// the whole analysis (samples, traces, evidence), with the corpus around.
fn planted_regression_queries(q: &mut Timed, end_ns: u64, pb: &indicatif::ProgressBar) -> Result<Samples, String> {
    const MIN: u64 = 60_000_000_000;
    const MS: u64 = 1_000_000;
    let start = end_ns - HOUR_NS;
    let mut spans = Vec::new();
    for m in 0..60u64 {
        for j in 0..20u64 {
            let t = start + m * MIN + j * 3_000_000_000;
            let trace = format!("{:016x}{:016x}", 0x5eed_0000 + m, j + 1);
            let (api, db) = (
                format!("{:016x}", m * 100 + 2 * j + 1),
                format!("{:016x}", m * 100 + 2 * j + 2),
            );
            let query = if m >= 40 { 32 * MS } else { 4 * MS } + (m * 7 + j * 13) % 10 * MS / 10;
            spans.push(
                json!({"trace_id": trace, "span_id": api, "service": "planted-api", "name": "GET /pay",
                              "kind": "server", "start_time_unix_nano": t, "duration_ns": query + 2 * MS}),
            );
            spans.push(json!({"trace_id": trace, "span_id": db, "parent_span_id": api, "service": "planted-db",
                              "name": "SELECT", "kind": "client", "start_time_unix_nano": t + MS, "duration_ns": query}));
        }
    }
    let body = serde_json::to_vec(&spans).map_err(|e| e.to_string())?;
    let a = q
        .http
        .post("/api/v1/spans", &[("content-type", "application/json")], &body)?;
    check(a.status == 200, || {
        format!("planted spans: {} {}", a.status, String::from_utf8_lossy(&a.body))
    })?;
    let mut samples = Samples::default();
    for _ in 0..20 {
        let v = q.get(&format!("/api/v1/anomalies?lookback=1h&until={end_ns}"), &mut samples)?;
        let f = v["findings"].as_array().ok_or("anomalies: no findings list")?;
        let find = |service: &str| f.iter().find(|x| x["service"] == service);
        check(
            find("planted-db").is_some_and(|x| x["role"] == "cause" && x["kind"] == "latency"),
            || format!("the planted slow query is not a cause: {v}"),
        )?;
        check(find("planted-api").is_some_and(|x| x["role"] == "affected"), || {
            format!("the planted caller is not affected: {v}")
        })?;
        pb.inc(1);
    }
    Ok(samples)
}

fn summary(s: &Samples) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        serde_json::to_value(s.summary()).unwrap_or(Value::Null)
    }
}

/// `GET /api/v1/logs?text=WORD&limit=N`, checked: every hit's body holds
/// the word as a whole word, and the hits are exactly `want` (newest first).
fn text_query(q: &mut Timed, word: &str, limit: usize, want: &[SpanKey], samples: &mut Samples) -> Result<(), String> {
    let v = q.get(&format!("/api/v1/logs?text={word}&limit={limit}"), samples)?;
    let logs = v["logs"].as_array().ok_or("no logs")?;
    for l in logs {
        let body = l["body"].as_str().unwrap_or_default();
        check(agent::contains_word(body, word), || {
            format!("text={word}: a hit without it: {body:?}")
        })?;
    }
    let got = logs_of(&v)?;
    check(got == want, || {
        format!(
            "text={word}: {} logs, first {:?}, expected {} first {:?}",
            got.len(),
            got.first(),
            want.len(),
            want.first()
        )
    })
}

/// The log keys of an answer, newest first.
fn logs_of(v: &Value) -> Result<Vec<SpanKey>, String> {
    let mut got: Vec<SpanKey> = v["logs"]
        .as_array()
        .ok_or("no logs")?
        .iter()
        .map(log_key)
        .collect::<Result<_, _>>()?;
    got.sort_unstable_by(|a, b| b.cmp(a));
    Ok(got)
}

/// `GET /api/v1/logs?severity=error&limit=100`, checked against `want`.
fn severity_query(q: &mut Timed, want: &[SpanKey], samples: &mut Samples) -> Result<(), String> {
    let got = logs_of(&q.get("/api/v1/logs?severity=error&limit=100", samples)?)?;
    check(got == want, || {
        format!("severity filter: {} logs, expected {}", got.len(), want.len())
    })
}

/// The floor under every query figure: round trips to the server's
/// cheapest endpoint on the same connection.
fn round_trip_floor(q: &mut Timed, pb: &indicatif::ProgressBar) -> Result<Samples, String> {
    let mut floor = Samples::default();
    for _ in 0..200 {
        q.get_raw("/healthz", &mut floor)?;
        pb.inc(1);
    }
    Ok(floor)
}

/// `GET /api/v1/traces/{id}`, checked: exactly the span ids `want`.
fn trace_query(q: &mut Timed, id: &str, mut want: Vec<String>, samples: &mut Samples) -> Result<(), String> {
    let v = q.get(&format!("/api/v1/traces/{id}"), samples)?;
    let mut got: Vec<String> = v["spans"]
        .as_array()
        .ok_or("no spans")?
        .iter()
        .filter_map(|s| s["span_id"].as_str().map(str::to_string))
        .collect();
    got.sort();
    want.sort();
    check(got == want, || {
        format!("trace {id}: {} spans, expected {}", got.len(), want.len())
    })
}

fn spans_of(v: &Value) -> Result<Vec<SpanKey>, String> {
    v["spans"].as_array().ok_or("no spans")?.iter().map(span_key).collect()
}

fn check_services(v: &Value, by_service: &std::collections::HashMap<String, u64>) -> Result<(), String> {
    let list = v["services"].as_array().ok_or("no services")?;
    check(list.len() == by_service.len(), || {
        format!("{} services, expected {}", list.len(), by_service.len())
    })?;
    for s in list {
        let name = s["service"].as_str().unwrap_or_default();
        let want = by_service.get(name).copied().unwrap_or(0);
        check(s["spans"].as_u64() == Some(want), || {
            format!("service {name}: {} spans, expected {want}", s["spans"])
        })?;
    }
    Ok(())
}

/// Usage by model, the session list, one session, and an export of 100k
/// spans (its rate, and the server's RSS growth while it streams), each
/// answer checked against the corpus.
fn llm_queries(
    q: &mut Timed,
    server_pid: u32,
    exp: &AgentExpected,
    pb: &indicatif::ProgressBar,
) -> Result<Value, String> {
    let mut usage = Samples::default();
    for _ in 0..20 {
        let v = q.get("/api/v1/llm/usage?group_by=model", &mut usage)?;
        for (i, (model, _)) in agent::MODELS.iter().enumerate() {
            let g = v["groups"]
                .as_array()
                .and_then(|gs| gs.iter().find(|g| g["key"] == *model))
                .ok_or_else(|| format!("usage: no group for {model}"))?;
            let (calls, input) = exp.usage_by_model[i];
            check(
                g["calls"].as_u64() == Some(calls) && g["input_tokens"].as_i64() == Some(input),
                || format!("usage of {model}: {g}, expected {calls} calls and {input} input tokens"),
            )?;
        }
        pb.inc(1);
    }
    let mut list = Samples::default();
    for _ in 0..20 {
        let v = q.get("/api/v1/sessions?limit=50", &mut list)?;
        let sessions = v["sessions"].as_array().cloned().unwrap_or_default();
        check(sessions.len() == 50.min(exp.session_calls.len()), || {
            format!("session list: {} sessions", sessions.len())
        })?;
        for s in &sessions {
            let id = s["session_id"].as_str().unwrap_or_default();
            check(s["llm_calls"].as_u64() == exp.session_calls.get(id).copied(), || {
                format!("session {id}: {s}, expected {:?} LLM calls", exp.session_calls.get(id))
            })?;
        }
        pb.inc(1);
    }
    let mut ids: Vec<(&String, &u64)> = exp.session_calls.iter().collect();
    ids.sort();
    let mut one = Samples::default();
    for i in 0..20.min(ids.len()) {
        let (id, calls) = ids[i * ids.len() / 20];
        let v = q.get(&format!("/api/v1/sessions/{id}"), &mut one)?;
        let llm_turns = v["turns"]
            .as_array()
            .map_or(0, |t| t.iter().filter(|t| t["kind"] == "llm").count() as u64);
        check(v["llm_calls"].as_u64() == Some(*calls) && llm_turns == *calls, || {
            format!(
                "session {id}: {} calls, {llm_turns} turns, expected {calls}",
                v["llm_calls"]
            )
        })?;
        pb.inc(1);
    }
    let exported = exp.spans.min(100_000);
    let mut export = Samples::default();
    let mut rates = Vec::new();
    let mut growth = Vec::new();
    for _ in 0..3 {
        let before = crate::server::proc_status_kib(server_pid, "VmRSS:");
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut peak = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    peak = peak.max(crate::server::proc_status_kib(server_pid, "VmRSS:"));
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                peak
            })
        };
        let started = std::time::Instant::now();
        let body = q.get_raw(&format!("/api/v1/export?signal=spans&limit={exported}"), &mut export);
        let secs = started.elapsed().as_secs_f64();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let peak = sampler.join().unwrap_or(0);
        let body = body?;
        let text = std::str::from_utf8(&body).map_err(|e| e.to_string())?;
        let lines = text.lines().count() as u64;
        let last: Value = text
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        check(
            lines == exported + 1 && last["export_complete"] == true && last["count"] == exported,
            || format!("export: {lines} lines, last {last}"),
        )?;
        rates.push(exported as f64 / secs);
        growth.push(peak.saturating_sub(before) as f64 / 1024.0);
        pb.inc(1);
    }
    rates.sort_by(f64::total_cmp);
    growth.sort_by(f64::total_cmp);
    Ok(json!({
        "usage_by_model": summary(&usage),
        "sessions_list": summary(&list),
        "session": summary(&one),
        "sessions": exp.session_calls.len(),
        "export_spans": exported,
        "export": summary(&export),
        "export_spans_per_sec_median": rates[rates.len() / 2],
        "export_rss_growth_mib_median": growth[growth.len() / 2],
    }))
}

fn agent_query_phase(
    api: &str,
    server_pid: u32,
    c: &AgentCorpus,
    exp: &AgentExpected,
    end_ns: u64,
    args: &E2eArgs,
) -> Result<Value, String> {
    let mut q = Timed {
        http: crate::http1::Connection::new(api)?,
    };
    let model_queries = 4 * exp.by_model.len();
    let total = args.trace_queries + exp.users.len() + model_queries + 20 * 10 + 3 + 200;
    let pb = bar(total as u64, "queries (agent corpus)");
    let floor = round_trip_floor(&mut q, &pb)?;
    let mut traces = Samples::default();
    for i in 0..args.trace_queries {
        let t = (i as u64 * c.traces / args.trace_queries as u64).min(c.traces - 1);
        let id = c.trace_id(t).to_hex();
        let want = c.trace(t).iter().map(|s| s.span_id.to_hex()).collect();
        trace_query(&mut q, &id, want, &mut traces)?;
        pb.inc(1);
    }
    // High cardinality: one user's spans (a trace or a few).
    let mut users = Samples::default();
    for (user, want) in &exp.users {
        let v = q.get(
            &format!("/api/v1/spans?attr.{}={user}&limit=100", agent::USER_KEY),
            &mut users,
        )?;
        let got = spans_of(&v)?;
        check(&got == want, || {
            format!("user.id={user}: {} spans, expected {}", got.len(), want.len())
        })?;
        pb.inc(1);
    }
    // Low cardinality, limit binding: LLM spans of one model.
    let mut models = Samples::default();
    for i in 0..model_queries {
        let m = i % exp.by_model.len();
        let name = agent::MODELS[m].0;
        let v = q.get(
            &format!("/api/v1/spans?attr.{}={name}&limit=100", agent::MODEL_KEY),
            &mut models,
        )?;
        let got = spans_of(&v)?;
        let want = &exp.by_model[m];
        check(&got == want, || {
            format!(
                "model {name}: {} spans, first {:?}, expected {} first {:?}",
                got.len(),
                got.first(),
                want.len(),
                want.first()
            )
        })?;
        pb.inc(1);
    }
    let mut services = Samples::default();
    for _ in 0..20 {
        let v = q.get("/api/v1/services", &mut services)?;
        check_services(&v, &exp.by_service)?;
        pb.inc(1);
    }
    let mut summarize = Samples::default();
    for _ in 0..20 {
        let since = end_ns - HOUR_NS;
        let v = q.get(&format!("/api/v1/summary?since={since}&until={end_ns}"), &mut summarize)?;
        for (k, want) in [
            ("spans", exp.spans),
            ("error_spans", exp.error_spans),
            ("logs", exp.logs),
        ] {
            check(v[k].as_u64() == Some(want), || {
                format!("summary {k} {} expected {want}", v[k])
            })?;
        }
        pb.inc(1);
    }
    let (anomalies, findings) = anomalies_queries(&mut q, end_ns, &pb)?;
    let mut sev = Samples::default();
    let mut common = Samples::default();
    let mut rare = Samples::default();
    if exp.logs > 0 {
        for _ in 0..20 {
            severity_query(&mut q, &exp.error_logs, &mut sev)?;
            pb.inc(1);
        }
        let planted = c.rare_word_count(0..exp.logs);
        check(planted == exp.rare_word.len() as u64, || {
            format!(
                "the generator planted {planted} rare words, the bodies hold {}",
                exp.rare_word.len()
            )
        })?;
        for _ in 0..20 {
            text_query(&mut q, AgentCorpus::common_word(), 100, &exp.common_word, &mut common)?;
            pb.inc(1);
        }
        for _ in 0..20 {
            text_query(&mut q, agent::RARE_WORD, 1000, &exp.rare_word, &mut rare)?;
            pb.inc(1);
        }
    }
    let llm = llm_queries(&mut q, server_pid, exp, &pb)?;
    // Last: it adds spans, which would change the answers above.
    let planted = planted_regression_queries(&mut q, end_ns, &pb)?;
    pb.finish_and_clear();
    Ok(json!({
        "llm": llm,
        "http_floor": summary(&floor),
        "trace_by_id": summary(&traces),
        "attribute_filter": summary(&users),
        "attribute_filter_model": summary(&models),
        "services": summary(&services),
        "summarize": summary(&summarize),
        "anomalies": summary(&anomalies),
        "anomalies_findings": findings,
        "anomalies_planted": summary(&planted),
        "logs_severity": summary(&sev),
        "logs_text": summary(&common),
        "logs_text_word": AgentCorpus::common_word(),
        "logs_text_rare": summary(&rare),
        "logs_text_rare_word": agent::RARE_WORD,
        "logs_text_rare_hits": exp.rare_word.len(),
    }))
}
