//! The audit log on the real binary, with tokens: an admin request is
//! recorded with the token's name, the client's address, the route and the
//! outcome; a refused attempt (a read token on an admin route, no token)
//! too; a SIGHUP reload too; `GET /api/v1/audit` needs `admin`, and
//! `--audit-log FILE` puts the log elsewhere, as fsynced JSON lines.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use reqwest::blocking::Client;
use serde_json::Value;

const TOKENS: &str = "[[token]]\nname = \"ops\"\nsecret = \"4dmin\"\nscopes = [\"admin\"]\n\n[[token]]\nname = \"ro\"\nsecret = \"r3ad\"\nscopes = [\"read\"]\n";

fn audit(c: &Client, s: &Server) -> Vec<Value> {
    let r = c
        .get(format!("{}/api/v1/audit", s.api))
        .bearer_auth("4dmin")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().unwrap();
    v["entries"].as_array().unwrap().clone()
}

#[test]
fn admin_actions_and_refusals_are_audited_with_who_where_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, TOKENS).unwrap();
    let log = dir.path().join("elsewhere/audit.jsonl");
    let s = Server::start(
        &dir.path().join("data"),
        &[
            "--auth-tokens",
            tokens.to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
        ],
    );
    let c = Client::new();
    let erasures = format!("{}/api/v1/erasures", s.api);

    // A read token may not erase, nor read the log; no token neither.
    let r = c
        .post(&erasures)
        .bearer_auth("r3ad")
        .json(&serde_json::json!({"trace_id": "0af7651916cd43dd8448eb211c80319c"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = c
        .get(format!("{}/api/v1/audit", s.api))
        .bearer_auth("r3ad")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = c.post(&erasures).json(&serde_json::json!({})).send().unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // The admin token may.
    let r = c
        .post(&erasures)
        .bearer_auth("4dmin")
        .json(&serde_json::json!({"trace_id": "0af7651916cd43dd8448eb211c80319c"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let id = r.json::<Value>().unwrap()["id"].as_str().unwrap().to_string();
    // A bad request by the admin is an error in the log.
    let r = c
        .post(&erasures)
        .bearer_auth("4dmin")
        .json(&serde_json::json!({}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Reads of non-admin routes are not audited.
    let r = c
        .get(format!("{}/api/v1/services", s.api))
        .bearer_auth("r3ad")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    let entries = audit(&c, &s);
    let got: Vec<(String, Value, String, Value)> = entries
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["who"].clone(),
                e["outcome"].as_str().unwrap().to_string(),
                e["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "POST /api/v1/erasures".into(),
                "ro".into(),
                "refused".into(),
                403.into()
            ),
            ("GET /api/v1/audit".into(), "ro".into(), "refused".into(), 403.into()),
            (
                "POST /api/v1/erasures".into(),
                Value::Null,
                "refused".into(),
                401.into()
            ),
            ("POST /api/v1/erasures".into(), "ops".into(), "ok".into(), 200.into()),
            ("POST /api/v1/erasures".into(), "ops".into(), "error".into(), 400.into()),
        ],
        "{entries:?}"
    );
    for e in &entries {
        assert_eq!(e["client"], "127.0.0.1", "{e}");
        assert!(humantime::parse_rfc3339(e["time"].as_str().unwrap()).is_ok(), "{e}");
    }
    assert!(entries[3]["summary"].as_str().unwrap().contains(&id), "{entries:?}");
    // Criteria values are not in the log.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("0af7651916cd43dd8448eb211c80319c"), "{text}");
    assert_eq!(text.lines().count(), 6, "{text}"); // and the GET above
    assert!(!dir.path().join("data/audit.log").exists());

    // A token reload on SIGHUP.
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(s.pid() as i32, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let entries = audit(&c, &s);
        if let Some(e) = entries.iter().find(|e| e["action"] == "reload tokens") {
            assert_eq!(e["who"], "SIGHUP");
            assert_eq!(e["outcome"], "ok");
            assert!(e["summary"].as_str().unwrap().contains("2 tokens"), "{e}");
            break;
        }
        assert!(Instant::now() < deadline, "no reload entry: {entries:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
