//! Conformance: parts written by Skein are plain Parquet that DuckDB (a
//! reader nobody here wrote) opens, with the right rows and values.

use std::path::Path;
use std::process::Command;

use skein_engine::testdata;
use skein_engine::{Engine, EngineOptions};
use skein_model::corpus::Corpus;

/// How to get what this test drives. A missing client fails the test (it
/// never skips: a skipped conformance test reads as a passing one).
const INSTALL: &str =
    "./test.sh installs it, or: python3 -m pip install -r tests/requirements.txt (from the repository root)";

/// Runs a DuckDB query through its Python package and returns its rows,
/// one `|`-separated line each.
fn duckdb(sql: &str) -> String {
    let script =
        "import duckdb, sys\nfor row in duckdb.sql(sys.argv[1]).fetchall():\n    print('|'.join(str(v) for v in row))";
    let out = Command::new("python3").args(["-c", script, sql]).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains("No module named 'duckdb'") {
                panic!("DuckDB's Python package is missing: {INSTALL}");
            }
            panic!("duckdb failed on {sql}: {err}");
        }
        Err(e) => panic!("cannot run python3 ({e}); this test needs it with DuckDB: {INSTALL}"),
    }
}

fn parts(dir: &Path, signal: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("parts").join(signal))
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension().is_some_and(|x| x == "parquet")).then(|| p.display().to_string())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn duckdb_reads_span_log_and_metric_parts() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::with_shape(500, 10, 5, 10, testdata::END_NS);
    let spans = corpus.spans(0..500);
    {
        let mut o = EngineOptions::new(dir.path());
        o.background = false;
        let e = Engine::open(o).unwrap();
        e.ingest_spans(spans[..2500].to_vec()).unwrap();
        e.flush().unwrap();
        e.ingest_spans(spans[2500..].to_vec()).unwrap();
        e.ingest_logs(testdata::logs(300)).unwrap();
        e.ingest_metrics(testdata::metric_points(40)).unwrap();
        e.flush().unwrap();
        e.compact().unwrap();
        e.close().unwrap();
    }
    let span_parts = parts(dir.path(), "spans");
    assert_eq!(span_parts.len(), 1, "compacted into one part");
    let f = &span_parts[0];
    let count = duckdb(&format!("SELECT count(*), count(DISTINCT trace_id) FROM '{f}'"));
    assert_eq!(count, "5000|500");
    // One span, by id: its values as ingested.
    let s = &spans[1234];
    let row = duckdb(&format!(
        "SELECT name, service_name, kind, duration_ns, epoch_ns(start_time_unix_nano), status_code, \
         json_extract_string(attributes, '$[0].value.stringValue') \
         FROM '{f}' WHERE span_id = from_hex('{}')",
        s.span_id.to_hex()
    ));
    let want = format!(
        "{}|{}|{}|{}|{}|{}|{}",
        s.name,
        s.service_name(),
        s.kind as i8,
        s.duration_ns(),
        s.start_time_unix_nano,
        s.status.code as i8,
        s.attributes[0].value.as_str().unwrap()
    );
    assert_eq!(row, want);
    // Aggregates over the whole file agree with the corpus.
    let errors = spans.iter().filter(|s| s.is_error()).count();
    let total_ns: u64 = spans.iter().map(|s| s.duration_ns()).sum();
    let agg = duckdb(&format!(
        "SELECT count(*) FILTER (WHERE status_code = 2), sum(duration_ns) FROM '{f}'"
    ));
    assert_eq!(agg, format!("{errors}|{total_ns}"));
    // Rows are sorted by start time, as the footer declares.
    let sorted = duckdb(&format!(
        "SELECT bool_and(a <= b) FROM (SELECT start_time_unix_nano a, lead(start_time_unix_nano) OVER () b FROM '{f}') WHERE b IS NOT NULL"
    ));
    assert_eq!(sorted, "True");

    let logs = &parts(dir.path(), "logs")[0];
    assert_eq!(
        duckdb(&format!(
            "SELECT count(*), count(*) FILTER (WHERE severity_number >= 17) FROM '{logs}'"
        )),
        "300|75"
    );
    let metrics = &parts(dir.path(), "metrics")[0];
    assert_eq!(
        duckdb(&format!(
            "SELECT count(*), count(DISTINCT series_id), sum(value_int) FILTER (WHERE metric_type = 'sum') FROM '{metrics}'"
        )),
        format!("40|15|{}", (0..40).filter(|i| i % 5 == 1).sum::<i64>())
    );
}
