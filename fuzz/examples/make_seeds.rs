//! Writes the small seed inputs in `fuzz/seeds/<target>/`:
//! `cargo run --manifest-path fuzz/Cargo.toml --example make_seeds`.
//!
//! Seeds are valid inputs of each decoder, kept small (the fuzzer's default
//! input size limit is 4 KiB) so that mutations stay cheap.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message;
use serde_json::json;
use skein_engine::Signal;
use skein_engine::codec::encode_batch;
use skein_engine::envelope::Envelope;
use skein_engine::part::index::{INDEX_ZSTD_LEVEL, IndexBuilder, encode};
use skein_engine::payload::{FrameBuilder, PayloadRef, encode_frames};
use skein_engine::testdata;
use skein_engine::wal::{RecordHeader, RecordKind};
use skein_model::otlp::{logs_to_otlp, metrics_to_otlp, spans_to_otlp};
use skein_model::remote_write;
use skein_model::{LogRecord, MetricPoint, Span};

fn dir(target: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, bytes: &[u8]) {
    assert!(
        bytes.len() <= 4096,
        "{name}: {} bytes is over the 4 KiB input limit",
        bytes.len()
    );
    fs::write(d.join(name), bytes).unwrap();
}

fn prefixed(first: u8, rest: &[u8]) -> Vec<u8> {
    let mut v = vec![first];
    v.extend_from_slice(rest);
    v
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn spans() -> Vec<Span> {
    testdata::spans(1, 3)
}

fn logs() -> Vec<LogRecord> {
    testdata::logs(3)
}

fn points() -> Vec<MetricPoint> {
    // One point of each metric kind.
    testdata::metric_points(5)
}

fn main() {
    let (spans, logs, points) = (spans(), logs(), points());
    let (traces_req, logs_req, metrics_req) = (spans_to_otlp(&spans), logs_to_otlp(&logs), metrics_to_otlp(&points));

    let d = dir("otlp_protobuf");
    write(&d, "spans", &prefixed(0, &traces_req.encode_to_vec()));
    write(
        &d,
        "one_span",
        &prefixed(0, &spans_to_otlp(&spans[..1]).encode_to_vec()),
    );
    write(&d, "logs", &prefixed(1, &logs_req.encode_to_vec()));
    write(&d, "metrics", &prefixed(2, &metrics_req.encode_to_vec()));
    for (i, p) in points.iter().enumerate() {
        write(
            &d,
            &format!("metric_kind_{i}"),
            &prefixed(2, &metrics_to_otlp(std::slice::from_ref(p)).encode_to_vec()),
        );
    }

    let d = dir("otlp_json");
    write(
        &d,
        "spans.json",
        &serde_json::to_vec(&spans_to_otlp(&spans[..2])).unwrap(),
    );
    write(&d, "logs.json", &serde_json::to_vec(&logs_req).unwrap());
    write(&d, "metrics.json", &serde_json::to_vec(&metrics_req).unwrap());
    write(
        &d,
        "lenient.json",
        br#"{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736",
"span_id":"00f067aa0ba902b7","name":"x","kind":"SPAN_KIND_SERVER","start_time_unix_nano":1,
"end_time_unix_nano":"2","status":{"code":2},"attributes":[{"key":"d","value":{"doubleValue":"NaN"}}]}]}]}]}"#,
    );

    let d = dir("json_span_api");
    write(
        &d,
        "doc_example.json",
        br#"[{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
  "parent_span_id": null, "name": "GET /cart", "service": "checkout",
  "kind": "server", "start_time_unix_nano": 1700000000000000000,
  "duration_ns": 1200000, "status": "ok",
  "attributes": {"http.status_code": 200}, "resource": {"host.name": "a"},
  "events": [{"name": "retry", "time_unix_nano": 1700000000000500000}]}]"#,
    );
    let api_spans: Vec<_> = spans
        .iter()
        .map(|s| {
            json!({
                "trace_id": s.trace_id.to_string(),
                "span_id": s.span_id.to_string(),
                "parent_span_id": s.parent_span_id.map(|p| p.to_string()),
                "name": s.name,
                "service": s.service_name(),
                "kind": s.kind as i32,
                "start_time_unix_nano": s.start_time_unix_nano.to_string(),
                "end_time_unix_nano": s.end_time_unix_nano,
                "status": {"code": "error", "message": "boom"},
                "scope": {"name": "lib", "version": "1.0"},
                "attributes": {"n": 1, "f": 0.5, "b": true, "list": ["a", 1]},
                "links": [{"trace_id": s.trace_id.to_string(), "span_id": s.span_id.to_string(), "trace_state": "k=v"}],
            })
        })
        .collect();
    write(
        &d,
        "spans_object.json",
        json!({ "spans": api_spans }).to_string().as_bytes(),
    );

    let d = dir("gzip");
    let body = traces_req.encode_to_vec();
    write(&d, "fits", &prefixed(255, &gz(&body)));
    write(&d, "too_large", &prefixed(1, &gz(&body)));
    write(&d, "empty", &prefixed(0, &gz(b"")));
    let mut two = gz(b"first member ");
    two.extend_from_slice(&gz(b"second member"));
    write(&d, "multi_member", &prefixed(8, &two));
    write(&d, "bomb", &prefixed(16, &gz(&[0u8; 65536])));

    // Frames of real WAL records, encoded as `Wal::append` encodes them.
    let d = dir("wal_frames");
    let mut log = Vec::new();
    // A payload record, as the batch after it would bring it.
    let prompt = b"You are a helpful assistant. ".repeat(12);
    RecordHeader {
        kind: RecordKind::Payloads,
        seq_base: 1,
        count: 1,
    }
    .append_frame(
        &{
            let mut frames = FrameBuilder::default();
            frames.push(PayloadRef::of(&prompt), &prompt).unwrap();
            encode_frames(&frames.finish().unwrap()).unwrap()
        },
        &mut log,
    );
    let mut seq = 1;
    for (signal, body) in [
        (Signal::Spans, encode_batch(&spans).unwrap()),
        (Signal::Logs, b"a short body".to_vec()),
        (Signal::Metrics, vec![7u8; 40]),
    ] {
        let header = RecordHeader {
            kind: RecordKind::Batch(signal),
            seq_base: seq,
            count: 3,
        };
        header.append_frame(&body, &mut log);
        seq += 3;
    }
    write(&d, "clean", &log);
    write(&d, "torn", &log[..log.len() - 5]);
    let mut zero_fill = log.clone();
    zero_fill.extend_from_slice(&[0; 24]);
    write(&d, "zero_fill", &zero_fill);
    log[HEADER + 1] ^= 0x40;
    write(&d, "corrupt", &log);

    let d = dir("wal_batch");
    let batches = [
        (0u8, encode_batch(&spans).unwrap()),
        (1, encode_batch(&logs).unwrap()),
        (2, encode_batch(&points).unwrap()),
    ];
    for (sel, batch) in &batches {
        write(&d, &format!("batch_{sel}"), &prefixed(*sel, batch));
        // The postcard bytes inside, for the mode that compresses them here.
        let raw = zstd::bulk::decompress(batch, 1 << 20).unwrap();
        write(&d, &format!("raw_{sel}"), &prefixed(sel | 0x80, &raw));
    }

    let d = dir("part_index");
    let mut spans_ix = IndexBuilder::default();
    for s in &spans {
        spans_ix.add(s);
    }
    let mut logs_ix = IndexBuilder::default();
    for l in &logs {
        logs_ix.add(l);
    }
    let mut points_ix = IndexBuilder::default();
    for p in &points {
        points_ix.add(p);
    }
    for (name, ix) in [("spans", spans_ix), ("logs", logs_ix), ("metrics", points_ix)] {
        let file = encode(&ix.finish(), INDEX_ZSTD_LEVEL).unwrap();
        write(&d, &format!("{name}_file"), &prefixed(0, &file));
        let body = &file[Envelope::HEADER_LEN..];
        write(&d, &format!("{name}_zstd"), &prefixed(1, body));
        let raw = zstd::bulk::decompress(body, 1 << 20).unwrap();
        write(&d, &format!("{name}_raw"), &prefixed(2, &raw));
    }

    let d = dir("remote_write");
    for (name, req) in remote_write_requests() {
        let raw = req.encode_to_vec();
        write(&d, &format!("{name}_body"), &prefixed(0, &remote_write::encode(&req)));
        write(&d, &format!("{name}_raw"), &prefixed(1, &raw));
    }

    // Payloads: a WAL payload record (two frames, one holding two
    // payloads), the legacy record, and a pack file of the same payloads.
    let d = dir("payloads");
    let payloads: [&[u8]; 3] = [&prompt, b"{\"role\":\"user\",\"content\":\"why is the pool empty?\"}", &[0, 159, 146, 150, 255]];
    let mut frames = FrameBuilder::default();
    for p in payloads {
        frames.push(PayloadRef::of(p), p).unwrap();
    }
    let mut blobs = frames.finish().unwrap();
    let mut second = FrameBuilder::default();
    second.push(PayloadRef::of(b"a second frame"), b"a second frame").unwrap();
    blobs.extend(second.finish().unwrap());
    write(&d, "frames", &prefixed(0, &encode_frames(&blobs).unwrap()));
    let mut legacy = Vec::new();
    for p in payloads {
        let z = zstd::bulk::compress(p, 3).unwrap();
        legacy.extend_from_slice(&PayloadRef::of(p).0);
        legacy.extend_from_slice(&(p.len() as u64).to_le_bytes());
        legacy.extend_from_slice(&(z.len() as u32).to_le_bytes());
        legacy.extend_from_slice(&z);
    }
    write(&d, "legacy", &prefixed(1, &legacy));
    let refs: Vec<&_> = blobs.iter().collect();
    let (pack, _) = skein_engine::payload::pack::encode(&refs).unwrap();
    write(&d, "pack", &prefixed(2, &pack));

    // Text queries (the first line), each over a record (the lines after).
    let d = dir("text_query");
    let record = "connection refused by db.query PoolTimeout after 30s\n\
                  com.example.PoolTimeoutException\n\
                  goroutine 17 [running]: データベースへの接続がタイムアウトしました\n\
                  {\"role\":\"system\",\"content\":\"You are a helpful assistant. Straße\"}";
    for (name, query) in [
        ("word", "pool"),
        ("phrase", "\"connection refused\""),
        ("prefix_fields", "body:conn* AND name:PoolTimeout"),
        ("boolean", "(timeout OR refused) AND NOT payload:assistant"),
        ("identifier", "example.PoolTimeout"),
        ("cjk", "接続"),
        ("folding", "STRASSE"),
        ("syntax_error", "(pool AND"),
    ] {
        write(&d, name, format!("{query}\n{record}").as_bytes());
    }
}

/// Remote write requests: float samples with a staleness marker, and
/// native histograms (integer and float, sparse spans, both signs, a
/// zero bucket, a stale one).
fn remote_write_requests() -> Vec<(&'static str, remote_write::WriteRequest)> {
    use remote_write::{Histogram, Label, Sample, TimeSeries, WriteRequest};
    let labels = |pairs: &[(&str, &str)]| -> Vec<Label> {
        pairs
            .iter()
            .map(|(n, v)| Label {
                name: n.to_string(),
                value: v.to_string(),
            })
            .collect()
    };
    let floats = TimeSeries {
        labels: labels(&[("__name__", "http_requests_total"), ("job", "api"), ("code", "200")]),
        samples: vec![
            Sample {
                value: 1.0,
                timestamp: 1_000,
            },
            Sample {
                value: f64::from_bits(0x7ff0_0000_0000_0002),
                timestamp: 2_000,
            },
        ],
        histograms: Vec::new(),
    };
    let mut float_histogram = Histogram::from_buckets(3_000, 1, (0.0, 0), &[(0, 2), (1, 1)], &[], 2.5);
    float_histogram.count = Some(remote_write::histogram::Count::Float(3.0));
    float_histogram.positive_counts = vec![2.0, 1.0];
    float_histogram.positive_deltas.clear();
    let histograms = TimeSeries {
        labels: labels(&[("__name__", "rpc_duration_seconds"), ("instance", "h:9100")]),
        samples: Vec::new(),
        histograms: vec![
            Histogram::from_buckets(
                1_000,
                3,
                (0.001, 4),
                &[(-9, 1), (-8, 3), (2, 2), (7, 1)],
                &[(1, 2)],
                4.75,
            ),
            float_histogram,
            Histogram {
                sum: f64::from_bits(0x7ff0_0000_0000_0002),
                timestamp: 4_000,
                ..Default::default()
            },
        ],
    };
    vec![
        (
            "floats",
            WriteRequest {
                timeseries: vec![floats.clone()],
            },
        ),
        (
            "histograms",
            WriteRequest {
                timeseries: vec![histograms.clone()],
            },
        ),
        (
            "both",
            WriteRequest {
                timeseries: vec![floats, histograms],
            },
        ),
    ]
}

const HEADER: usize = skein_engine::wal::frame::HEADER_LEN;
