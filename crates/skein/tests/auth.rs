//! Tokens and scopes against the real binary: every HTTP surface refuses a
//! missing or unknown token (401, `WWW-Authenticate: Bearer`) and a token
//! without the scope (403), health stays open, `/metrics` needs `read` and
//! counts the failures, SIGHUP reloads the tokens file, the CLI's `--token`
//! is what it sends, and an address beyond loopback without tokens refuses
//! to start. (OTLP/gRPC and OTLP/HTTP with the OpenTelemetry SDK's own
//! exporters: tests/conformance.rs.)

mod common;

use std::process::Command;

use common::Server;
use reqwest::blocking::Client;

const TOKENS: &str = "[[token]]\nname = \"ci\"\nsecret = \"1ngest\"\nscopes = [\"ingest\"]\n\n[[token]]\nname = \"ro\"\nsecret = \"r3ad\"\nscopes = [\"read\"]\n";

fn status(c: &Client, method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    let mut r = match method {
        "POST" => c
            .post(url)
            .header("content-type", "application/json")
            .body(body.unwrap_or("").to_string()),
        _ => c.get(url),
    };
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let resp = r.send().unwrap();
    let code = resp.status().as_u16();
    let www = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = resp.text().unwrap();
    (code, format!("{www}|{text}"))
}

#[test]
fn every_http_surface_checks_tokens_and_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, TOKENS).unwrap();
    let server = Server::start(&dir.path().join("data"), &["--auth-tokens", tokens.to_str().unwrap()]);
    let c = Client::new();
    let api = &server.api;
    let span = r#"[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","service":"auth-test","name":"op","start_time_unix_nano":1700000000000000000,"duration_ns":1000}]"#;

    // Health stays open.
    assert_eq!(status(&c, "GET", &format!("{api}/healthz"), None, None).0, 200);
    assert_eq!(status(&c, "GET", &format!("{api}/readyz"), None, None).0, 200);

    // Reads: none or unknown → 401 with the challenge; ingest → 403; read → 200.
    for path in [
        "/api/v1/services",
        "/api/v1/spans?last=1h",
        "/api/v1/openapi.json",
        "/metrics",
    ] {
        let url = format!("{api}{path}");
        let (code, text) = status(&c, "GET", &url, None, None);
        assert_eq!(code, 401, "{path}: {text}");
        assert!(text.starts_with("Bearer"), "{path}: {text}");
        assert!(text.contains("bearer token is required"), "{text}");
        assert_eq!(status(&c, "GET", &url, Some("guess"), None).0, 401, "{path}");
        let (code, text) = status(&c, "GET", &url, Some("1ngest"), None);
        assert_eq!(code, 403, "{path}: {text}");
        assert!(text.contains("lacks the read scope"), "{text}");
        assert_eq!(status(&c, "GET", &url, Some("r3ad"), None).0, 200, "{path}");
    }
    // The web UI's shell and files hold no data: open (its API calls are
    // not); the exposition at /metrics still needs the token.
    let page = c
        .get(format!("{api}/traces"))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let page = c
        .get(format!("{api}/metrics"))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert!(page.text().unwrap().contains("<html"));
    assert_eq!(
        c.get(format!("{api}/ui/js/api.js")).send().unwrap().status().as_u16(),
        200
    );
    let api_html = c
        .get(format!("{api}/api/v1/services"))
        .header("accept", "text/html")
        .send()
        .unwrap();
    assert_eq!(api_html.status().as_u16(), 401);
    // MCP is read too.
    let mcp = format!("{api}/mcp");
    assert_eq!(status(&c, "POST", &mcp, None, Some("{}")).0, 401);
    assert_eq!(status(&c, "POST", &mcp, Some("1ngest"), Some("{}")).0, 403);

    // Writes: the JSON span API on the API port, OTLP/HTTP on its own.
    let spans = format!("{api}/api/v1/spans");
    assert_eq!(status(&c, "POST", &spans, None, Some(span)).0, 401);
    assert_eq!(status(&c, "POST", &spans, Some("r3ad"), Some(span)).0, 403);
    let (code, text) = status(&c, "POST", &spans, Some("1ngest"), Some(span));
    assert_eq!(code, 200, "{text}");
    let otlp = format!("{}/v1/traces", server.otlp_http);
    let resp = c
        .post(&otlp)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let resp = c
        .post(&otlp)
        .header("content-type", "application/json")
        .bearer_auth("1ngest")
        .body(r#"{"resourceSpans":[]}"#)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        status(&c, "GET", &format!("{}/healthz", server.otlp_http), None, None).0,
        200
    );

    // The failures are counted.
    let (_, metrics) = status(&c, "GET", &format!("{api}/metrics"), Some("r3ad"), None);
    assert!(
        metrics.contains("skein_auth_failures_total{reason=\"unauthenticated\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("skein_auth_failures_total{reason=\"forbidden\"}"));

    // The CLI sends --token.
    let cli = |token: Option<&str>| {
        let mut cmd = Command::new(common::bin());
        cmd.args(["services", "--server", api, "--format", "json"]);
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        cmd.output().unwrap()
    };
    let ok = cli(Some("r3ad"));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("auth-test"));
    let refused = cli(None);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("bearer token is required"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // SIGHUP reads the file again: the old read secret goes, a new one works;
    // a file that no longer parses leaves the tokens as they were.
    std::fs::write(&tokens, TOKENS.replace("r3ad", "n3w")).unwrap();
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) };
    let services = format!("{api}/api/v1/services");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while status(&c, "GET", &services, Some("n3w"), None).0 != 200 {
        assert!(std::time::Instant::now() < deadline, "SIGHUP did not reload the tokens");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(status(&c, "GET", &services, Some("r3ad"), None).0, 401);
    std::fs::write(&tokens, "not toml [[").unwrap();
    unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server.log_text().contains("the tokens in force stay as they were") {
        assert!(std::time::Instant::now() < deadline, "{}", server.log_text());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(status(&c, "GET", &services, Some("n3w"), None).0, 200);
}

#[test]
fn bad_token_settings_refuse_to_start_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(common::bin());
        cmd.args(["serve", "--data-dir", dir.path().join("data").to_str().unwrap()])
            .args([
                "--otlp-grpc-addr",
                "127.0.0.1:0",
                "--otlp-http-addr",
                "127.0.0.1:0",
                "--api-addr",
            ])
            .args(args);
        cmd.env_remove("SKEIN_AUTH_TOKENS");
        if let Some(e) = env {
            cmd.env("SKEIN_AUTH_TOKENS", e);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // Beyond loopback without tokens (refused before anything binds).
    let e = run(&["0.0.0.0:0"], None);
    assert!(
        e.contains("--api-addr 0.0.0.0:0") && e.contains("--allow-unauthenticated"),
        "{e}"
    );
    // A tokens file with an unknown scope: the line is named.
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\n\n[[token]]\nname = \"b\"\nsecret = \"y\"\nscopes = [\"write\"]\n").unwrap();
    let e = run(&["127.0.0.1:0", "--auth-tokens", f.to_str().unwrap()], None);
    assert!(e.contains("bad.toml, line 6") && e.contains("\"write\""), "{e}");
    let e = run(&["127.0.0.1:0"], Some("read"));
    assert!(e.contains("SKEIN_AUTH_TOKENS, entry 1"), "{e}");
}
