//! The benchmark record: `benchmarks.json` keeps every number of every mode
//! (each run replaces its own mode's entry), and BENCHMARKS.md is rendered
//! from it — never edited by hand.

use std::path::Path;

use serde_json::{Map, Value};

pub const JSON_FILE: &str = "benchmarks.json";
pub const MD_FILE: &str = "BENCHMARKS.md";

/// Stores `result` as the entry `mode` and re-renders BENCHMARKS.md.
pub fn write(out: &Path, mode: &str, result: Value) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let path = out.join(JSON_FILE);
    let mut all: Map<String, Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.insert(mode.to_string(), result);
    let json = serde_json::to_string_pretty(&Value::Object(all.clone())).map_err(|e| e.to_string())?;
    std::fs::write(&path, json + "\n").map_err(|e| format!("write {}: {e}", path.display()))?;
    let md = render(&all);
    std::fs::write(out.join(MD_FILE), md).map_err(|e| format!("write {MD_FILE}: {e}"))?;
    Ok(())
}

/// Writes `out`'s BENCHMARKS.md anew from its benchmarks.json: after
/// entries of runs made apart (each into its own directory) are merged
/// into one file, the page, its side-by-side summary included, is the
/// figures of those runs and nothing else.
pub fn rewrite(out: &Path) -> Result<(), String> {
    let path = out.join(JSON_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let all: Map<String, Value> =
        serde_json::from_str(&text).map_err(|e| format!("{} is not a JSON object: {e}", path.display()))?;
    std::fs::write(out.join(MD_FILE), render(&all)).map_err(|e| format!("write {MD_FILE}: {e}"))
}

fn f(v: &Value, digits: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.digits$}"),
        // A figure an older run did not record.
        None if v.is_null() => "not measured".to_string(),
        None => v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()),
    }
}

fn thousands(v: &Value) -> String {
    let n = v.as_f64().unwrap_or(0.0).round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

fn machine(m: &Value) -> String {
    format!(
        "- Machine: {} ({} cores, {} GiB), {}\n- Load average before / after: {} / {}\n- Commit: `{}`, {}\n- Command: `{}`\n",
        f(&m["cpu"], 0),
        m["cores"],
        m["memory_gib"],
        f(&m["kernel"], 0),
        f(&m["load_before"], 0),
        f(&m["load_after"], 0),
        f(&m["git_commit"], 0),
        f(&m["date_utc"], 0),
        f(&m["command"], 0)
    )
}

fn latency_table(rows: &[(&str, &Value)]) -> String {
    let mut s =
        String::from("| query | samples | p50 ms | p95 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|---:|\n");
    for (name, v) in rows {
        if v.is_null() {
            continue;
        }
        s.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} |\n",
            v["samples"],
            f(&v["p50_ms"], 3),
            f(&v["p95_ms"], 3),
            f(&v["p99_ms"], 3),
            f(&v["max_ms"], 3)
        ));
    }
    s
}

/// The agent corpus, described from its report entry.
fn agent_corpus_line(c: &Value) -> String {
    format!(
        "- Corpus: the **agent corpus**, {} spans ({} traces of 1 to {} spans, heavy-tailed, mean {}; {} services drawn Zipf-wise, s = {}; start times at random over the last hour; `user.id` over {} users), {} LLM spans (GenAI semconv: chat, provider, model, token usage, `gen_ai.input.messages` of 1–20 KiB from 4 shared system prompts plus a unique user turn, a shorter `gen_ai.output.messages`), {} error spans with Python/Java/Go stack traces in `exception` events; {} log records (2 per trace; error logs carry the stack trace; bodies draw words Zipf-wise from a vocabulary, `{}` in {} of them, the planted rare word `{}` in {})\n",
        thousands(&c["spans"]),
        thousands(&c["traces"]),
        c["max_spans_per_trace"],
        f(&c["mean_spans_per_trace"], 2),
        c["services"],
        c["service_zipf_s"],
        thousands(&c["users"]),
        thousands(&c["llm_spans"]),
        thousands(&c["error_spans"]),
        thousands(&c["logs"]),
        f(&c["common_word"], 0),
        thousands(&c["common_word_logs"]),
        f(&c["rare_word"], 0),
        thousands(&c["rare_word_logs"]),
    )
}

/// The headline figures of both corpora side by side.
fn render_comparison(canonical: Option<&Value>, agent: Option<&Value>) -> String {
    let mut s = String::from(
        "### Canonical and agent corpora side by side (`skein-bench e2e`)\n\n| metric | canonical | agent |\n|---|---:|---:|\n",
    );
    let spans = |v: Option<&Value>| {
        v.map(|v| thousands(&v["corpus"]["spans"]))
            .unwrap_or_else(|| "—".into())
    };
    s.push_str(&format!(
        "| spans in the corpus | {} | {} |\n",
        spans(canonical),
        spans(agent)
    ));
    let get = |v: Option<&Value>, path: &[&str], digits: Option<usize>| -> String {
        let Some(mut x) = v.map(|v| &v["results"]) else {
            return "—".into();
        };
        for p in path {
            x = &x[*p];
        }
        if x.is_null() {
            return "—".into();
        }
        match digits {
            Some(d) => f(x, d),
            None => thousands(x),
        }
    };
    let rows: &[(&str, &[&str], Option<usize>)] = &[
        (
            "span ingest over OTLP/HTTP (spans/s)",
            &["ingest", "spans_per_sec"],
            None,
        ),
        (
            "span ingest (MB/s of request bodies)",
            &["ingest", "mb_per_sec"],
            Some(1),
        ),
        ("log ingest (records/s)", &["log_ingest", "records_per_sec"], None),
        ("request bytes (spans + logs)", &["disk", "request_bytes"], None),
        ("bytes on disk after compaction", &["disk", "bytes_on_disk"], None),
        (
            "bytes on disk / request bytes",
            &["disk", "disk_over_request_bytes"],
            Some(3),
        ),
        ("trace by id p50 (ms)", &["queries", "trace_by_id", "p50_ms"], Some(3)),
        ("trace by id p99 (ms)", &["queries", "trace_by_id", "p99_ms"], Some(3)),
        (
            "attribute filter, limit 100, p50 (ms)",
            &["queries", "attribute_filter", "p50_ms"],
            Some(3),
        ),
        (
            "full-text log query, limit 100, p50 (ms)",
            &["queries", "logs_text", "p50_ms"],
            Some(3),
        ),
        ("server peak RSS (MiB)", &["server", "peak_rss_mib"], Some(1)),
    ];
    for (name, path, digits) in rows {
        s.push_str(&format!(
            "| {name} | {} | {} |\n",
            get(canonical, path, *digits),
            get(agent, path, *digits)
        ));
    }
    let word = |v: Option<&Value>| {
        v.map(|v| f(&v["results"]["queries"]["logs_text_word"], 0))
            .unwrap_or_default()
    };
    s.push_str(&format!(
        "\nAttribute filter: `benchmark.group` (100 values) on the canonical corpus; `user.id` (high cardinality: one user's spans) on the agent corpus. Full-text word: `{}` (canonical), `{}` (agent).\n\n",
        word(canonical),
        word(agent)
    ));
    s
}

fn render_e2e(v: &Value) -> String {
    let r = &v["results"];
    let agent = v["corpus"]["name"].as_str() == Some("agent");
    let mut s = String::from(if agent {
        "## End to end, agent corpus (`skein-bench e2e --corpus agent`)\n\n"
    } else {
        "## End to end (`skein-bench e2e`)\n\n"
    });
    s.push_str(&machine(&v["machine"]));
    if agent {
        s.push_str(&agent_corpus_line(&v["corpus"]));
    } else {
        s.push_str(&format!(
            "- Corpus: {} spans ({} traces × {} spans, {} services, {} `benchmark.group` values, 3 attributes, an event every 50th span, start times over the last hour), {} log records\n",
            thousands(&v["corpus"]["spans"]),
            thousands(&v["corpus"]["traces"]),
            v["corpus"]["spans_per_trace"],
            v["corpus"]["services"],
            v["corpus"]["groups"],
            thousands(&v["corpus"]["logs"]),
        ));
    }
    s.push_str(&format!(
        "- Ingest: OTLP/HTTP protobuf, {} keep-alive clients, {} spans per request, bodies encoded before timing, durability `{}`; then the same over OTLP/gRPC into a fresh server\n\n",
        v["params"]["clients"],
        v["params"]["batch"],
        f(&v["params"]["durability"], 0),
    ));
    s.push_str("| metric | value |\n|---|---:|\n");
    let rows: &[(&str, String)] = &[
        ("span ingest (spans/s)", thousands(&r["ingest"]["spans_per_sec"])),
        ("span ingest (MB/s of request bodies)", f(&r["ingest"]["mb_per_sec"], 1)),
        (
            "span ingest request p50 / p99 (ms)",
            format!(
                "{} / {}",
                f(&r["ingest"]["latency"]["p50_ms"], 2),
                f(&r["ingest"]["latency"]["p99_ms"], 2)
            ),
        ),
        (
            "span ingest over OTLP/gRPC, fresh server (spans/s)",
            thousands(&r["grpc_ingest"]["spans_per_sec"]),
        ),
        (
            "span ingest over OTLP/gRPC, request p50 / p99 (ms)",
            format!(
                "{} / {}",
                f(&r["grpc_ingest"]["latency"]["p50_ms"], 2),
                f(&r["grpc_ingest"]["latency"]["p99_ms"], 2)
            ),
        ),
        ("log ingest (records/s)", thousands(&r["log_ingest"]["records_per_sec"])),
        (
            "disk: fdatasync after a 64 KiB write, p50 / p99 / max (ms), before the run",
            format!(
                "{} / {} / {}",
                f(&r["disk_fdatasync"]["p50_ms"], 2),
                f(&r["disk_fdatasync"]["p99_ms"], 2),
                f(&r["disk_fdatasync"]["max_ms"], 2)
            ),
        ),
        (
            "request p50 / p99 at half that rate (ms)",
            format!(
                "{} / {}",
                f(&r["paced_half_rate"]["latency"]["p50_ms"], 2),
                f(&r["paced_half_rate"]["latency"]["p99_ms"], 2)
            ),
        ),
        (
            "bytes on disk (after compaction)",
            thousands(&r["disk"]["bytes_on_disk"]),
        ),
        (
            "request bytes (span and log bodies)",
            thousands(&r["disk"]["request_bytes"]),
        ),
        (
            "bytes on disk / request bytes",
            f(&r["disk"]["disk_over_request_bytes"], 3),
        ),
        (
            "payloads stored; compressed / logical bytes",
            format!(
                "{}; {} / {}",
                thousands(&r["disk"]["payloads"]),
                thousands(&r["disk"]["payload_bytes"]),
                thousands(&r["disk"]["payload_logical_bytes"])
            ),
        ),
        (
            "bytes per span (spans' parts only)",
            f(&r["disk"]["span_bytes_per_span"], 1),
        ),
        (
            "bytes per record (everything on disk)",
            f(&r["disk"]["bytes_per_record"], 1),
        ),
        ("server peak RSS, whole run (MiB)", f(&r["server"]["peak_rss_mib"], 1)),
        (
            "server peak RSS during ingest (MiB)",
            f(&r["server"]["peak_rss_ingest_mib"], 1),
        ),
        ("server RSS after queries (MiB)", f(&r["server"]["rss_mib"], 1)),
        (
            "server CPU per span during span ingest (µs, all threads)",
            f(&r["server"]["span_ingest_cpu_us_per_span"], 2),
        ),
        (
            "every part text-indexed, seconds after the last ack",
            f(&r["server"]["text_indexed_seconds_after_ack"], 2),
        ),
        (
            "server CPU per record, ingest until text-indexed (µs, all threads)",
            f(&r["server"]["cpu_us_per_record_until_indexed"], 2),
        ),
        ("WAL fsyncs (group commits)", thousands(&r["server"]["wal_fsyncs"])),
        ("WAL appends", thousands(&r["server"]["wal_appends"])),
        (
            "parts after ingest → after compaction",
            format!("{} → {}", r["parts"]["after_ingest"], r["parts"]["after_compaction"]),
        ),
        ("compactions", thousands(&r["server"]["compactions"])),
    ];
    for (k, val) in rows {
        s.push_str(&format!("| {k} | {val} |\n"));
    }
    s.push_str(
        "\nQuery phase over HTTP (every answer verified against the corpus; one keep-alive \
         connection, timed from request to the answer's last byte):\n\n",
    );
    let q = &r["queries"];
    let text_label = format!("logs full text `{}`, limit 100", f(&q["logs_text_word"], 0));
    let anomalies_label = format!(
        "anomalies: change detection over the hour ({} findings)",
        f(&q["anomalies_findings"], 0)
    );
    let rare_label = format!(
        "logs full text, rare word `{}` ({} hits), limit 1000",
        f(&q["logs_text_rare_word"], 0),
        q["logs_text_rare_hits"]
    );
    s.push_str(&latency_table(&[
        ("round trip floor: `GET /healthz`", &q["http_floor"]),
        ("trace by id", &q["trace_by_id"]),
        (
            if agent {
                "attribute filter `user.id` (one user), limit 100"
            } else {
                "attribute filter, limit 100"
            },
            &q["attribute_filter"],
        ),
        (
            "attribute filter `gen_ai.request.model`, limit 100",
            &q["attribute_filter_model"],
        ),
        ("services", &q["services"]),
        ("summarize 1h", &q["summarize"]),
        (&anomalies_label, &q["anomalies"]),
        (
            "anomalies with a planted slow dependency (cause and caller found, with evidence)",
            &q["anomalies_planted"],
        ),
        ("duration filter (≥150 ms), limit 100", &q["duration_filter"]),
        ("logs severity ≥ error, limit 100", &q["logs_severity"]),
        ("logs body substring, limit 100", &q["logs_body"]),
        (&text_label, &q["logs_text"]),
        (&rare_label, &q["logs_text_rare"]),
        ("CLI `skein get trace` end to end", &q["cli_get_trace"]),
    ]));
    s.push('\n');
    let llm = &q["llm"];
    if !llm.is_null() {
        s.push_str(&format!(
            "LLM queries (answers checked against the corpus: calls and input tokens per model, each listed \
             session's LLM calls, every exported line; {} sessions):\n\n",
            thousands(&llm["sessions"])
        ));
        let export_label = format!("export of {} spans (NDJSON)", thousands(&llm["export_spans"]));
        s.push_str(&latency_table(&[
            ("LLM usage by model, all data", &llm["usage_by_model"]),
            ("session list, limit 50", &llm["sessions_list"]),
            ("one session (summary, traces, turns)", &llm["session"]),
            (&export_label, &llm["export"]),
        ]));
        s.push_str(&format!(
            "\nExport: {} spans/s, server RSS growth while streaming {} MiB (medians of 3).\n\n",
            thousands(&Value::from(
                llm["export_spans_per_sec_median"].as_f64().unwrap_or(0.0).round() as u64
            )),
            f(&llm["export_rss_growth_mib_median"], 1)
        ));
    }
    s
}

fn render_matrix(v: &Value) -> String {
    let mut s = String::from("## Ingest matrix (`skein-bench ingest-matrix`)\n\n");
    s.push_str(&machine(&v["machine"]));
    s.push_str(&format!(
        "- Each cell: {} s of load, median of {} rounds; spans/s and request latency (median round).\n\n",
        v["params"]["seconds"], v["params"]["rounds"]
    ));
    s.push_str(
        "| protocol | clients | batch | spans/s | p50 ms | p99 ms | errors |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in v["cells"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            f(&c["protocol"], 0),
            c["clients"],
            c["batch"],
            thousands(&c["spans_per_sec"]),
            f(&c["p50_ms"], 2),
            f(&c["p99_ms"], 2),
            c["errors"]
        ));
    }
    s.push('\n');
    s
}

fn render_ladder(v: &Value) -> String {
    let mut s = String::from("## Read-cliff ladder (`skein-bench ladder`)\n\n");
    s.push_str(&machine(&v["machine"]));
    s.push_str("- Each level fills every signal to the row count (generated, encoded and sent a million rows at a time), then runs each dashboard query 3 times, checking every answer against what was generated; a level passes when every median is ≤ 5 s.\n\n");
    s.push_str("| level (rows per signal) | query | median ms | pass |\n|---:|---|---:|---|\n");
    for lvl in v["levels"].as_array().into_iter().flatten() {
        for q in lvl["queries"].as_array().into_iter().flatten() {
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                thousands(&lvl["rows"]),
                f(&q["name"], 0),
                f(&q["median_ms"], 1),
                if q["pass"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "**no**"
                }
            ));
        }
    }
    s.push_str(&format!("\nCliff: {}\n\n", f(&v["cliff"], 0)));
    let levels: Vec<&Value> = v["levels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["storage"].is_object())
        .collect();
    if !levels.is_empty() {
        s.push_str("Server state once each level's rows were in (before its queries), from `/api/v1/stats`:\n\n");
        s.push_str("| level (rows per signal) | parts | bytes on disk | index memory | server RSS | compacting |\n|---:|---:|---:|---:|---:|---|\n");
        let gb = |b: &Value| b.as_f64().map_or("n/a".to_string(), |b| format!("{:.2} GB", b / 1e9));
        for l in levels {
            let st = &l["storage"];
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                thousands(&l["rows"]),
                thousands(&st["parts"]),
                gb(&st["bytes_on_disk"]),
                gb(&st["index_memory_bytes"]),
                gb(&st["resident_memory_bytes"]),
                if st["compacting"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "no"
                },
            ));
        }
        s.push('\n');
    }
    s
}

fn render_engine(v: &Value) -> String {
    let r = &v["results"];
    let agent = v["params"]["corpus"].as_str() == Some("agent");
    let mut s = String::from(if agent {
        "## Engine, in process, agent corpus (`skein-bench engine --corpus agent`)\n\n"
    } else {
        "## Engine, in process (`skein-bench engine`)\n\n"
    });
    s.push_str(&machine(&v["machine"]));
    s.push_str(&format!(
        "- {} spans of the {} corpus through `Engine::ingest_spans` in batches of {}, {} writer threads, durability `{}`; queries on data spread over the hot tier and parts.\n\n",
        thousands(&v["params"]["spans"]),
        if agent { "agent" } else { "canonical" },
        v["params"]["batch"],
        v["params"]["writers"],
        f(&v["params"]["durability"], 0)
    ));
    s.push_str("| metric | value |\n|---|---:|\n");
    // Older reports had one round: no list.
    let rounds: Vec<String> = r["ingest_rounds_spans_per_sec"]
        .as_array()
        .map(|a| a.iter().map(thousands).collect())
        .unwrap_or_default();
    let ingest_label = if rounds.len() > 1 {
        format!("ingest (spans/s; median round of {})", rounds.len())
    } else {
        "ingest (spans/s)".to_string()
    };
    let mut rows: Vec<(&str, String)> = vec![(&ingest_label, thousands(&r["ingest_spans_per_sec"]))];
    if rounds.len() > 1 {
        rows.push(("ingest rounds (spans/s, in run order)", rounds.join(" / ")));
    }
    rows.extend([
        (
            "ingest CPU per span, all threads (µs; median round)",
            f(&r["ingest_cpu_us_per_span"], 2),
        ),
        (
            "page faults during ingest (median round)",
            thousands(&r["ingest_page_faults"]),
        ),
        ("WAL fsyncs during ingest (median round)", thousands(&r["wal_fsyncs"])),
        ("on-disk bytes per span after compaction", f(&r["bytes_per_span"], 1)),
        (
            "peak RSS, ingest + compaction (MiB; probe process)",
            f(&r["memory_probe"]["peak_rss_mib"], 1),
        ),
        (
            "peak RSS during ingest only (MiB; probe process)",
            f(&r["memory_probe"]["peak_rss_ingest_mib"], 1),
        ),
        (
            "RSS after restart (MiB; probe process)",
            f(&r["memory_probe"]["restart_rss_mib"], 1),
        ),
        (
            "index memory after restart (MiB per million spans)",
            f(&r["index_mib_per_million"], 1),
        ),
        ("restart (recovery) time (ms)", f(&r["restart_ms"], 1)),
    ]);
    for (k, val) in rows {
        s.push_str(&format!("| {k} | {val} |\n"));
    }
    s.push('\n');
    s.push_str(&latency_table(&[
        ("get_trace (hot tier + parts)", &r["queries"]["get_trace"]),
        (
            if agent {
                "attribute search `user.id`, limit 100 (hot tier + parts)"
            } else {
                "attribute search, limit 100 (hot tier + parts)"
            },
            &r["queries"]["attribute_search"],
        ),
        (
            "attribute search `gen_ai.request.model`, limit 100 (hot tier + parts)",
            &r["queries"]["attribute_search_model"],
        ),
        ("services aggregate (hot tier + parts)", &r["queries"]["services"]),
        ("get_trace (compacted)", &r["queries_compacted"]["get_trace"]),
        (
            if agent {
                "attribute search `user.id`, limit 100 (compacted)"
            } else {
                "attribute search, limit 100 (compacted)"
            },
            &r["queries_compacted"]["attribute_search"],
        ),
        (
            "attribute search `gen_ai.request.model`, limit 100 (compacted)",
            &r["queries_compacted"]["attribute_search_model"],
        ),
        ("services aggregate (compacted)", &r["queries_compacted"]["services"]),
    ]));
    s.push('\n');
    s
}

fn render_text(v: &Value) -> String {
    let r = &v["results"];
    let c = &v["corpus"];
    let mut s = String::from("## Full-text search over logs, in process (`skein-bench text`)\n\n");
    s.push_str(&machine(&v["machine"]));
    s.push_str(&format!(
        "- {} log records of the agent corpus ({} body bytes; `{}` in {} of them, the rare word `{}` planted in {}, one in {}), in batches of {} from {} writer threads, durability `{}`, into two engines at once: `full_text` on and off, a chunk of {} records at a time in alternating order. Generation is off the clock; each chunk's clock runs until its flushes, merges and text indexes are done (merges while idle off, so the other engine stays quiet). Every hit is checked: its body holds the word as a whole word, and the hits are exactly the generator's (the rare word's count is the generator's).\n\n",
        thousands(&c["logs"]),
        thousands(&c["body_bytes"]),
        f(&c["common_word"], 0),
        thousands(&c["common_word_logs"]),
        f(&c["rare_word"], 0),
        thousands(&c["rare_word_logs"]),
        thousands(&c["rare_every"]),
        v["params"]["batch"],
        v["params"]["writers"],
        f(&v["params"]["durability"], 0),
        thousands(&v["params"]["chunk"]),
    ));
    s.push_str("| metric | index on | index off |\n|---|---:|---:|\n");
    let (on, off) = (&r["on"], &r["off"]);
    let rows: Vec<(&str, String, String)> = vec![
        (
            "log ingest (records/s)",
            thousands(&on["ingest_logs_per_sec"]),
            thousands(&off["ingest_logs_per_sec"]),
        ),
        (
            "ingest CPU per record (µs)",
            f(&on["ingest_cpu_us_per_log"], 2),
            f(&off["ingest_cpu_us_per_log"], 2),
        ),
        (
            "seconds on the clock",
            f(&on["ingest_seconds"], 1),
            f(&off["ingest_seconds"], 1),
        ),
        (
            "of which after each chunk's last ack (flush, merges, text indexes catching up)",
            f(&on["ingest_after_ack_seconds"], 1),
            f(&off["ingest_after_ack_seconds"], 1),
        ),
        (
            "full compaction (s)",
            f(&on["compact_seconds"], 1),
            f(&off["compact_seconds"], 1),
        ),
        (
            "parts after ingest → after compaction",
            format!("{} → {}", on["parts_after_ingest"], on["parts_after_compaction"]),
            format!("{} → {}", off["parts_after_ingest"], off["parts_after_compaction"]),
        ),
        (
            "log part bytes on disk",
            thousands(&on["log_part_bytes"]),
            thousands(&off["log_part_bytes"]),
        ),
        (
            "text index bytes on disk (`.txt` files), per million records",
            thousands(&on["text_index_bytes_per_million"]),
            thousands(&off["text_index_bytes_per_million"]),
        ),
        (
            "bytes on disk, per million records",
            thousands(&on["bytes_on_disk_per_million"]),
            thousands(&off["bytes_on_disk_per_million"]),
        ),
        (
            "index memory after reopen (MiB per million records; `index_memory_bytes`)",
            f(&on["index_memory_mib_per_million"], 2),
            f(&off["index_memory_mib_per_million"], 2),
        ),
        (
            "RSS growth on reopen (MiB)",
            f(&on["reopen_rss_growth_mib"], 1),
            f(&off["reopen_rss_growth_mib"], 1),
        ),
    ];
    for (k, a, b) in rows {
        s.push_str(&format!("| {k} | {a} | {b} |\n"));
    }
    s.push_str(&format!(
        "\nIngest with the index on is {:.1}% slower than with it off (negative: faster; within this machine's noise).\n\n",
        r["ingest_slowdown_with_index"].as_f64().unwrap_or(0.0) * 100.0
    ));
    let rare = format!(
        "rare word `{}`, limit {}",
        f(&c["rare_word"], 0),
        v["params"]["rare_limit"]
    );
    let common = format!(
        "common word `{}`, limit {}",
        f(&c["common_word"], 0),
        v["params"]["common_limit"]
    );
    let rows = [
        (format!("index on, after ingest: {rare}"), &on["queries"]["rare"]),
        (format!("index on, after ingest: {common}"), &on["queries"]["common"]),
        (format!("index on, compacted: {rare}"), &on["queries_compacted"]["rare"]),
        (
            format!("index on, compacted: {common}"),
            &on["queries_compacted"]["common"],
        ),
        (
            format!("index off, compacted: {rare}"),
            &off["queries_compacted"]["rare"],
        ),
        (
            format!("index off, compacted: {common}"),
            &off["queries_compacted"]["common"],
        ),
    ];
    let rows: Vec<(&str, &Value)> = rows.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    s.push_str(&latency_table(&rows));
    s.push_str(&format!(
        "\nPercentiles are of repeated queries, whose pages the page cache (`page_cache_bytes`, {} MiB) keeps from their second read. The first query of each, on pages nothing read before (new parts), took: after ingest, rare {} ms and common {} ms; compacted, rare {} ms and common {} ms.\n",
        f(&v["params"]["page_cache_mib"], 0),
        f(&on["queries"]["rare_first_ms"], 1),
        f(&on["queries"]["common_first_ms"], 1),
        f(&on["queries_compacted"]["rare_first_ms"], 1),
        f(&on["queries_compacted"]["common_first_ms"], 1),
    ));
    s.push('\n');
    s
}

fn render_mcp(v: &Value) -> String {
    let r = &v["results"];
    let mut s = String::from("## MCP tool call overhead (`skein-bench mcp`)\n\n");
    s.push_str(&machine(&v["machine"]));
    s.push_str(&format!(
        "- One trace of {} spans; {} calls of each, taken in turn after {} warm-up calls: `GET /api/v1/traces/{{id}}` and `tools/call get_trace` over {}. Every answer is checked (all spans, no error).\n- Overhead (MCP − REST): p50 **{} ms**, p95 {} ms; target p50 of the MCP call ≤ {} ms: {}.\n\n",
        v["params"]["spans"],
        v["params"]["calls"],
        v["params"]["warmup"],
        f(&v["params"]["transport"], 0),
        f(&r["overhead_p50_ms"], 3),
        f(&r["overhead_p95_ms"], 3),
        f(&r["target_p50_ms"], 0),
        if r["meets_target"] == true { "met" } else { "**missed**" },
    ));
    s.push_str(&latency_table(&[
        ("REST `GET /api/v1/traces/{id}`", &r["rest_get_trace"]),
        ("MCP `get_trace` (compact tree)", &r["mcp_get_trace"]),
    ]));
    s.push('\n');
    s
}

/// The BENCHMARKS.md section of a `storage` run.
fn render_storage(v: &Value) -> String {
    let p = &v["params"];
    let r = &v["results"];
    let sides = [&r["local"], &r["s3"], &r["s3_uncached"]];
    let mut s = format!(
        "## Local disk against object storage (`skein-bench storage`)\n\n{}- {} spans of the canonical corpus into each side over OTLP/HTTP; then a stop (flush, and for S3 the uploads) and a restart. S3 is {}. The S3 sides restart with their cache and staged copies deleted, so every object is read from the bucket: with a cache ({}), the first pass over the traces (cold) fills it and the second (warm) reads it; without one (`--cache-size 0`) every read past the resident indexes is a range request. Queries read parts only; every answer is checked.\n\n",
        machine(&v["machine"]),
        p["spans"],
        f(&p["s3"], 0),
        f(&p["cache_size"], 0),
    );
    let row = |name: &str, cell: &dyn Fn(&Value) -> String| {
        let cells: Vec<String> = sides
            .iter()
            .map(|x| {
                if x.is_null() {
                    "–".into()
                } else {
                    cell(x).replace("null", "–")
                }
            })
            .collect();
        format!("| {name} | {} |\n", cells.join(" | "))
    };
    s.push_str("| | local disk | S3, cached | S3, no cache |\n|---|---:|---:|---:|\n");
    s.push_str(&row("ingest (spans/s)", &|x| f(&x["ingest_spans_per_sec"], 0)));
    s.push_str(&row("stop: flush (+ upload) (s)", &|x| f(&x["stop_seconds"], 2)));
    for (key, name) in [
        ("trace_by_id_cold", "trace by id, first pass"),
        ("trace_by_id_warm", "trace by id, second pass"),
        ("attribute_filter", "attribute filter (limit 100)"),
        ("services", "services"),
    ] {
        s.push_str(&row(&format!("{name}: p50 ms"), &|x| {
            f(&x[key]["latency"]["p50_ms"], 3)
        }));
        s.push_str(&row(&format!("{name}: bucket GETs / KiB per query"), &|x| {
            format!(
                "{} / {:.1}",
                f(&x[key]["bucket_gets_per_query"], 2),
                x[key]["bucket_bytes_per_query"].as_f64().unwrap_or(0.0) / 1024.0
            )
        }));
    }
    s.push_str(&row("cache hit ratio (block reads)", &|x| f(&x["cache_hit_ratio"], 3)));
    s.push_str(&row("bytes: parts / in the bucket", &|x| {
        format!("{} / {}", f(&x["part_bytes"], 0), f(&x["bucket_bytes"], 0))
    }));
    s.push('\n');
    s
}

/// The BENCHMARKS.md section of a `ui` run.
fn render_ui(v: &Value) -> String {
    let p = &v["params"];
    let r = &v["results"];
    let mut s = format!(
        "## Web UI: render time per view\n\nEach view loaded from scratch {} times in headless Chromium against a server holding the agent corpus ({} spans, {} logs); the time from navigation start until the view shows its data (fetches and DOM), median and worst. Target: every median at most {} ms ({}).\n\n",
        p["runs"],
        p["spans"],
        p["logs"],
        r["target_ms"],
        if r["meets_target"] == true { "met" } else { "**missed**" }
    );
    s.push_str(&machine(&v["machine"]));
    s.push_str("\n| view | path | median ms | max ms | slowest API fetch, median ms |\n|---|---|---:|---:|---:|\n");
    for (name, x) in r["views"].as_object().into_iter().flatten() {
        s.push_str(&format!(
            "| {name} | `{}` | {:.0} | {:.0} | {} |\n",
            x["path"].as_str().unwrap_or(""),
            x["median_ms"].as_f64().unwrap_or(f64::NAN),
            x["max_ms"].as_f64().unwrap_or(f64::NAN),
            f(&x["slowest_api_median_ms"], 0)
        ));
    }
    s.push('\n');
    s
}

/// The BENCHMARKS.md section of a `sql` run.
fn render_sql(v: &Value) -> String {
    let p = &v["params"];
    let r = &v["results"];
    let mut s = format!(
        "## SQL\n\n`POST /api/v1/sql` over the canonical corpus ({} spans in the last hour), {} runs: `{}`. Target: at most {} s over 10M spans ({}); the answers' counts add up to the spans stored: {}.\n\n",
        p["spans"],
        p["runs"],
        p["query"].as_str().unwrap_or(""),
        r["target_s"],
        if r["meets_target"] == true { "met" } else { "**missed**" },
        r["counts_verified"]
    );
    s.push_str(&machine(&v["machine"]));
    s.push_str(&format!(
        "\n| median s | max s |\n|---:|---:|\n| {} | {} |\n\n",
        f(&r["median_s"], 3),
        f(&r["max_s"], 3)
    ));
    s
}

fn render_promql(v: &Value) -> String {
    let p = &v["params"];
    let r = &v["results"];
    let mut s = format!(
        "## PromQL against Prometheus (`skein-bench promql`)\n\n{} counter series over {} h at {} s ({} samples), remote-written in time order to Skein and to {} on the same machine; Skein's hot tier flushed and compaction settled before timing; {} runs of each query on each, medians. \
         Both answers agree point by point (relative error ≤ 1e-9). Targets: instant ≤ {} ms, range ≤ {} ms ({}); within 2× of Prometheus: {}.\n\n",
        thousands(&p["series"]),
        p["hours"],
        p["scrape_s"],
        thousands(&p["samples"]),
        f(&p["prometheus"], 0),
        p["runs"],
        r["target_instant_ms"],
        r["target_range_ms"],
        if r["meets_targets"] == true {
            "met"
        } else {
            "**missed**"
        },
        if r["within_2x_of_prometheus"] == true {
            "yes"
        } else {
            "**no**"
        },
    );
    s.push_str(&machine(&v["machine"]));
    s.push_str("\n| query | Skein p50 ms | Prometheus p50 ms | Skein / Prometheus | points compared |\n|---|---:|---:|---:|---:|\n");
    for (key, name, q) in [
        ("instant_ms", "instant, every series", &p["instant_query"]),
        (
            "range_ms",
            "range, 1/10 of the series, whole span at 60 s",
            &p["range_query"],
        ),
    ] {
        let x = &r[key];
        s.push_str(&format!(
            "| {name}: `{}` | {} | {} | {} | {} |\n",
            f(q, 0),
            f(&x["skein"], 1),
            f(&x["prometheus"], 1),
            f(&x["ratio"], 2),
            thousands(&x["points_compared"])
        ));
    }
    let load = &r["load_seconds"];
    let rate = &r["samples_per_s"];
    s.push_str(&format!(
        "\nRemote-write load (time spent in each server's requests): Skein {} s ({} samples/s), Prometheus {} s ({} samples/s). Skein's peak RSS {} MiB, data on disk {} MiB.\n\n",
        f(&load["skein"], 1),
        thousands(&rate["skein"]),
        f(&load["prometheus"], 1),
        thousands(&rate["prometheus"]),
        thousands(&Value::from(r["skein_peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0)),
        thousands(&Value::from(r["skein_disk_bytes"].as_f64().unwrap_or(0.0) / 1048576.0)),
    ));
    s
}

fn render_llm(v: &Value) -> String {
    let r = &v["results"];
    let c = &v["corpus"];
    let p = &v["params"];
    let mut s = String::from("## LLM columns at ingest, in process (`skein-bench llm`)\n\n");
    s.push_str(&machine(&v["machine"]));
    s.push_str(&format!(
        "- {} spans of the agent corpus ({} traces, {} of them model calls), in batches of {} from {} writer threads, durability `{}`, into two engines at once, a chunk of about {} spans at a time in alternating order: the spans as generated, and the same spans with every `gen_ai.` key renamed `gen_ax.` (the same bytes; no GenAI view, so no LLM columns filled and no calls tables). Both store strings over {} bytes as payloads, so both keep the same payloads. Generation is off the clock; each chunk's clock runs until its flushes and merges are done. Checked: both hold every span, the first counts exactly the generator's model calls, the second none.\n\n",
        thousands(&c["spans"]),
        thousands(&c["traces"]),
        thousands(&c["llm_spans"]),
        p["batch"],
        p["writers"],
        f(&p["durability"], 0),
        thousands(&p["chunk"]),
        p["payload_bytes"],
    ));
    s.push_str("| metric | with GenAI keys | renamed |\n|---|---:|---:|\n");
    let (a, b) = (&r["with"], &r["without"]);
    let rows: Vec<(&str, String, String)> = vec![
        (
            "span ingest (spans/s)",
            thousands(&a["ingest_spans_per_sec"]),
            thousands(&b["ingest_spans_per_sec"]),
        ),
        (
            "ingest CPU per span (µs)",
            f(&a["ingest_cpu_us_per_span"], 2),
            f(&b["ingest_cpu_us_per_span"], 2),
        ),
        (
            "model calls counted",
            thousands(&a["model_calls"]),
            thousands(&b["model_calls"]),
        ),
        (
            "span part bytes",
            thousands(&a["span_part_bytes"]),
            thousands(&b["span_part_bytes"]),
        ),
        (
            "bytes on disk",
            thousands(&a["bytes_on_disk"]),
            thousands(&b["bytes_on_disk"]),
        ),
        ("payloads", thousands(&a["payloads"]), thousands(&b["payloads"])),
    ];
    for (name, x, y) in rows {
        s.push_str(&format!("| {name} | {x} | {y} |\n"));
    }
    s.push_str(&format!(
        "\nIngest with the LLM columns is {:.1}% slower than without.\n\n",
        r["ingest_slowdown_with_llm_columns"].as_f64().unwrap_or(0.0) * 100.0
    ));
    s
}

pub fn render(all: &Map<String, Value>) -> String {
    let mut s = String::from(
        "# Skein benchmarks\n\nWritten by `skein-bench` from `benchmarks.json`; every number comes from a run, none is typed by hand. \
         This machine is shared and noisy: compare ratios within one run, and read medians.\n\n\
         Reproduce: `cargo build --release -p skein -p skein-bench`, then `target/release/skein-bench <mode>`.\n\n",
    );
    if all.contains_key("e2e") || all.contains_key("e2e_agent") {
        s.push_str(&render_comparison(all.get("e2e"), all.get("e2e_agent")));
    }
    if let Some(v) = all.get("e2e") {
        s.push_str(&render_e2e(v));
    }
    if let Some(v) = all.get("e2e_agent") {
        s.push_str(&render_e2e(v));
    }
    if let Some(v) = all.get("ingest_matrix") {
        s.push_str(&render_matrix(v));
    }
    if let Some(v) = all.get("engine") {
        s.push_str(&render_engine(v));
    }
    if let Some(v) = all.get("engine_agent") {
        s.push_str(&render_engine(v));
    }
    if let Some(v) = all.get("text") {
        s.push_str(&render_text(v));
    }
    if let Some(v) = all.get("llm") {
        s.push_str(&render_llm(v));
    }
    if let Some(v) = all.get("mcp") {
        s.push_str(&render_mcp(v));
    }
    if let Some(v) = all.get("ui") {
        s.push_str(&render_ui(v));
    }
    if let Some(v) = all.get("storage") {
        s.push_str(&render_storage(v));
    }
    if let Some(v) = all.get("sql") {
        s.push_str(&render_sql(v));
    }
    if let Some(v) = all.get("promql") {
        s.push_str(&render_promql(v));
    }
    if let Some(v) = all.get("ladder") {
        s.push_str(&render_ladder(v));
    }
    s
}
