//! PII redaction at ingest against the real binary: with the built-in rules
//! and a rules file, spans and logs carrying personal data and secrets are
//! stored with masks, hashes and dropped attributes. Every record is read
//! back whole (the NDJSON export, payloads inline) after a restart (so from
//! the WAL replay and the parts): no raw value is anywhere in it, and the
//! data directory's files do not hold them either.

mod common;

use common::Server;

const RAW: &[&str] = &[
    "ana.lopez@example.com",
    "4111 1111 1111 1111",
    "DE89 3704 0044 0532 0130 00",
    "+44 20 7946 0958",
    "203.0.113.7",
    "sk-proj-abcdefghijklmnopqrstuvwx1234",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "hunter2-very-secret",
    "u-customer-42",
    "internal-note-xyz",
];

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn personal_data_never_reaches_storage_and_queries_show_the_masks() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\naction = \"hash\"\nkeys = [\"user.id\"]\n\n[[rule]]\naction = \"drop\"\nkeys = [\"internal.*\"]\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(
        &data,
        &[
            "--redact-defaults",
            "--redact",
            rules.to_str().unwrap(),
            "--payload-threshold",
            "64",
        ],
    );
    let c = reqwest::blocking::Client::new();
    let prompt = format!(
        "[{{\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"content\":\"I am {} and my card is {}. {}\"}}]}}]",
        RAW[0],
        RAW[1],
        "padding ".repeat(40)
    );
    let spans = serde_json::json!([{
        "trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331",
        "service": "pii", "name": "chat", "start_time_unix_nano": 1_700_000_000_000_000_000u64, "duration_ns": 1000,
        "status": {"code": "error", "message": format!("failed for {} from {}", RAW[0], RAW[4])},
        "attributes": {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": prompt,
            "user.id": RAW[8], "internal.note": RAW[9], "db.password": RAW[7],
            "http.request.header.authorization": format!("Bearer {}", RAW[5]),
            "note": format!("iban {} phone {} jwt {}", RAW[2], RAW[3], RAW[6]),
        },
        "resource": {"host.ip": RAW[4]}
    }]);
    let r = c
        .post(format!("{}/api/v1/spans", server.api))
        .json(&spans)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    let logs = serde_json::json!({"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "pii"}}]},
        "scopeLogs": [{"logRecords": [{"timeUnixNano": "1700000000000000100", "severityNumber": 17,
            "body": {"stringValue": format!("login failed for {} with key {}", RAW[0], RAW[5])},
            "attributes": [{"key": "user.id", "value": {"stringValue": RAW[8]}}]}]}]}]});
    let r = c
        .post(format!("{}/v1/logs", server.otlp_http))
        .header("content-type", "application/json")
        .body(logs.to_string())
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().unwrap());

    // Restart: the records come back from the WAL (and a part).
    server.stop();
    server.restart();
    let mut everything = String::new();
    for signal in ["spans", "logs"] {
        let body = c
            .get(format!(
                "{}/api/v1/export?signal={signal}&since=1600000000000000000&payloads=inline",
                server.api
            ))
            .send()
            .unwrap()
            .text()
            .unwrap();
        assert!(body.contains("\"export_complete\":true"), "{body}");
        everything.push_str(&body);
    }
    for raw in RAW {
        assert!(!everything.contains(raw), "{raw} is stored: {everything}");
    }
    for mask in [
        "[EMAIL]",
        "[CARD]",
        "[IBAN]",
        "[PHONE]",
        "[IP]",
        "[JWT]",
        "[REDACTED]",
        "hash:",
    ] {
        assert!(everything.contains(mask), "{mask} missing: {everything}");
    }
    assert!(!everything.contains("internal.note"), "{everything}");
    // The same user hashes the same in a span and a log line: still groups.
    let hashes: Vec<&str> = everything
        .match_indices("hash:")
        .map(|(i, _)| &everything[i..i + 21])
        .collect();
    assert!(
        hashes.len() >= 2 && hashes.iter().all(|h| *h == hashes[0]),
        "{hashes:?}"
    );

    server.stop();
    let mut files = Vec::new();
    files_under(&data, &mut files);
    assert!(!files.is_empty());
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        for raw in RAW {
            assert!(
                !bytes.windows(raw.len()).any(|w| w == raw.as_bytes()),
                "{raw} in {}",
                f.display()
            );
        }
    }
}
