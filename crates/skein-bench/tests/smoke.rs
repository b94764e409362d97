//! The benchmark harness end to end on a small corpus with the debug build:
//! `e2e` at 20k spans and `ladder` up to 100k rows, checking that every
//! answer was verified and the report is complete.

use std::path::PathBuf;
use std::process::Command;

/// The `skein` binary of the same build (cargo builds every binary of the
/// workspace before running tests).
fn skein_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let bin = dir.join("skein");
    assert!(bin.exists(), "{} not built: run cargo test --workspace", bin.display());
    bin
}

fn bench(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_skein-bench"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skein-bench {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The report a run wrote into `dir`.
fn report(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("benchmarks.json")).unwrap()).unwrap()
}

#[test]
fn e2e_and_ladder_write_a_complete_verified_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let skein = skein_bin();
    let skein = skein.to_str().unwrap();
    bench(&[
        "e2e",
        "--skein-bin",
        skein,
        "--spans",
        "20000",
        "--out",
        out,
        "--trace-queries",
        "20",
        "--attr-queries",
        "20",
    ]);
    bench(&[
        "ladder",
        "--skein-bin",
        skein,
        "--min-level",
        "100k",
        "--max-level",
        "100k",
        // A hot tier small enough that the level's rows reach parts, whose
        // indexes the storage figures below count.
        "--server-arg=--hot-max-bytes=8MiB",
        "--out",
        out,
    ]);

    let json = report(dir.path());
    let e2e = &json["e2e"];
    assert_eq!(e2e["corpus"]["spans"], 20000);
    assert!(e2e["results"]["ingest"]["spans_per_sec"].as_f64().unwrap() > 0.0);
    assert_eq!(e2e["results"]["ingest"]["errors"], 0);
    for q in [
        "trace_by_id",
        "attribute_filter",
        "services",
        "summarize",
        "duration_filter",
        "logs_severity",
        "logs_body",
        "cli_get_trace",
    ] {
        let samples = e2e["results"]["queries"][q]["samples"].as_u64().unwrap_or(0);
        assert!(
            samples > 0,
            "query {q} has no verified samples: {}",
            e2e["results"]["queries"]
        );
    }
    assert!(e2e["results"]["disk"]["bytes_on_disk"].as_u64().unwrap() > 0);
    assert!(e2e["results"]["server"]["peak_rss_mib"].as_f64().unwrap() > 0.0);
    for key in [
        "cpu",
        "cores",
        "kernel",
        "git_commit",
        "command",
        "load_before",
        "load_after",
    ] {
        assert!(!e2e["machine"][key].is_null(), "machine.{key} missing");
    }
    let ladder = &json["ladder"];
    let level = &ladder["levels"][0];
    assert_eq!(level["rows"], 100_000);
    let queries = level["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 8);
    for name in ["log full-text search", "diagnosis (anomalies, 1h look-back)"] {
        assert!(
            queries.iter().any(|q| q["name"] == name),
            "the dashboard set has {name}: {queries:?}"
        );
    }
    // What the level costs the server, from its own statistics.
    let storage = &level["storage"];
    assert!(storage["parts"].as_u64().is_some(), "{storage}");
    assert!(storage["bytes_on_disk"].as_u64() > Some(0), "{storage}");
    assert!(storage["index_memory_bytes"].as_u64() > Some(0), "{storage}");

    let md = std::fs::read_to_string(dir.path().join("BENCHMARKS.md")).unwrap();
    for section in [
        "## End to end",
        "## Read-cliff ladder",
        "| parts | bytes on disk | index memory | server RSS |",
        "trace by id",
        "attribute filter",
        "Machine:",
    ] {
        assert!(md.contains(section), "BENCHMARKS.md lacks {section:?}");
    }
}

#[test]
fn mcp_mode_measures_rest_and_mcp_get_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let skein = skein_bin();
    bench(&[
        "mcp",
        "--skein-bin",
        skein.to_str().unwrap(),
        "--calls",
        "20",
        "--out",
        out,
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("benchmarks.json")).unwrap()).unwrap();
    let r = &json["mcp"]["results"];
    assert_eq!(r["rest_get_trace"]["samples"], 20);
    assert_eq!(r["mcp_get_trace"]["samples"], 20);
    assert!(r["mcp_get_trace"]["p50_ms"].as_f64().unwrap() > 0.0);
    let md = std::fs::read_to_string(dir.path().join("BENCHMARKS.md")).unwrap();
    assert!(md.contains("## MCP tool call overhead"), "{md}");
}

#[test]
fn llm_mode_checks_both_engines_and_reports_the_slowdown() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // The mode itself fails unless both engines hold every span, the GenAI
    // one counts the generator's model calls and the renamed one none.
    bench(&[
        "llm",
        "--spans",
        "20k",
        "--chunk",
        "5k",
        "--durability",
        "none",
        "--out",
        out,
    ]);
    let r = &report(dir.path())["llm"];
    assert_eq!(r["results"]["without"]["model_calls"], 0);
    assert_eq!(r["results"]["with"]["model_calls"], r["corpus"]["llm_spans"]);
    assert!(r["corpus"]["llm_spans"].as_u64().unwrap() > 0);
    assert!(r["results"]["ingest_slowdown_with_llm_columns"].is_number());
    let md = std::fs::read_to_string(dir.path().join("BENCHMARKS.md")).unwrap();
    assert!(md.contains("## LLM columns at ingest"), "{md}");
}

#[test]
fn promql_mode_compares_answers_with_the_real_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let skein = skein_bin();
    // The mode fails unless Skein's and Prometheus's answers agree point by
    // point; without Prometheus (./test.sh installs it) it fails too.
    bench(&[
        "promql",
        "--skein-bin",
        skein.to_str().unwrap(),
        "--series",
        "100",
        "--hours",
        "1",
        "--runs",
        "1",
        "--out",
        out,
    ]);
    let r = &report(dir.path())["promql"]["results"];
    assert_eq!(r["instant_ms"]["points_compared"], 10, "one per job");
    // Ten jobs by the range's steps: 240 scrapes span 59:45, the range
    // starts five minutes in, so 54:45 at 60 s is 55 steps.
    assert_eq!(r["range_ms"]["points_compared"], 550);
    assert!(r["instant_ms"]["skein"].as_f64().unwrap() > 0.0);
    let md = std::fs::read_to_string(dir.path().join("BENCHMARKS.md")).unwrap();
    assert!(md.contains("## PromQL against Prometheus"), "{md}");
}
