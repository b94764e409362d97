//! Tenants against the real binary: a token bound to a tenant writes into
//! and reads only that tenant, on every surface (the JSON span API,
//! OTLP/HTTP, OTLP/gRPC, search, trace by id, full text, payloads,
//! aggregations, export, the live tail, PromQL, SQL, MCP, erasure, the
//! audit log, /metrics); a trusted gateway's tenant header; retention per
//! tenant; and tenants' data surviving a SIGKILL.

mod common;

use std::io::BufRead;
use std::time::Duration;

use common::{Server, now_ns};
use reqwest::blocking::Client;
use serde_json::{Value, json};

const TOKENS: &str = r#"
[[token]]
name = "acme"
secret = "acme-secret"
scopes = ["ingest", "read"]
tenant = "acme"

[[token]]
name = "beta"
secret = "beta-secret"
scopes = ["ingest", "read"]
tenant = "beta"

[[token]]
name = "acme-admin"
secret = "acme-admin-secret"
scopes = ["admin"]
tenant = "acme"

[[token]]
name = "gateway"
secret = "gateway-secret"
scopes = ["ingest", "read"]

[[token]]
name = "root"
secret = "root-secret"
scopes = ["admin"]
"#;

const HOUR_NS: u64 = 3_600_000_000_000;
/// The same trace and span ids in both tenants: a tenant cannot replace
/// (or see) another's span by sending its ids.
const TRACE: &str = "5b8efff798038103d269b633813fc60c";

fn tenants() -> [(&'static str, &'static str); 2] {
    [("acme", "acme-secret"), ("beta", "beta-secret")]
}

/// A prompt long enough to be a payload, naming its tenant.
fn prompt(tenant: &str) -> String {
    format!("{tenant}-prompt ").repeat(400)
}

fn spans(tenant: &str, t0: u64) -> Value {
    json!({"spans": [
        {"trace_id": TRACE, "span_id": "00f067aa0ba902b7", "name": format!("{tenant}-root"),
         "service": format!("{tenant}-svc"), "start_time_unix_nano": t0, "duration_ns": 1_000_000,
         "attributes": {"owner": tenant, "gen_ai.input.messages": prompt(tenant)}},
        // Old enough for acme's retention (spans=1h) to hide it.
        {"trace_id": "0000000000000000000000000000000a", "span_id": "00000000000000aa", "name": format!("{tenant}-old"),
         "service": format!("{tenant}-svc"), "start_time_unix_nano": t0 - 2 * HOUR_NS, "duration_ns": 1_000,
         "attributes": {"owner": tenant}},
    ]})
}

fn logs(tenant: &str, t0: u64) -> Value {
    json!({"resourceLogs": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": format!("{tenant}-svc")}}]},
        "scopeLogs": [{"logRecords": [{"timeUnixNano": t0.to_string(), "severityText": "INFO",
            "body": {"stringValue": format!("word{tenant} happened")},
            "attributes": [{"key": "owner", "value": {"stringValue": tenant}}]}]}]}]})
}

fn metrics(tenant: &str, t0: u64) -> Value {
    json!({"resourceMetrics": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": format!("{tenant}-svc")}}]},
        "scopeMetrics": [{"metrics": [{"name": format!("jobs_{tenant}_total"), "sum": {"aggregationTemporality": 2, "isMonotonic": true,
            "dataPoints": [{"timeUnixNano": t0.to_string(), "asDouble": 3.0,
                "attributes": [{"key": "owner", "value": {"stringValue": tenant}}]}]}}]}]}]})
}

fn get(c: &Client, url: &str, token: &str) -> (u16, Value) {
    let r = c.get(url).bearer_auth(token).send().unwrap();
    let code = r.status().as_u16();
    let text = r.text().unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn get_ok(c: &Client, url: &str, token: &str) -> Value {
    let (code, v) = get(c, url, token);
    assert_eq!(code, 200, "GET {url}: {v}");
    v
}

fn post(c: &Client, url: &str, token: &str, body: &Value) -> (u16, Value) {
    let r = c.post(url).bearer_auth(token).json(body).send().unwrap();
    let code = r.status().as_u16();
    let text = r.text().unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Every `owner` value in a JSON answer, wherever it is.
fn owners(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("owner", Value::String(s)) => out.push(s.clone()),
                    _ => owners(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| owners(x, out)),
        _ => {}
    }
}

/// Asserts that an answer holds records of `tenant` only (and some).
fn only(tenant: &str, what: &str, v: &Value) {
    let text = v.to_string();
    let other = if tenant == "acme" { "beta" } else { "acme" };
    assert!(!text.contains(other), "{tenant}'s {what} shows {other}'s data: {text}");
    assert!(
        text.contains(tenant),
        "{tenant}'s {what} shows nothing of {tenant}: {text}"
    );
    let mut found = Vec::new();
    owners(v, &mut found);
    assert!(found.iter().all(|o| o == tenant), "{what}: {found:?}");
}

fn ingest(s: &Server, c: &Client, tenant: &str, token: &str, t0: u64) {
    let (code, v) = post(c, &format!("{}/api/v1/spans", s.api), token, &spans(tenant, t0));
    assert_eq!(code, 200, "{v}");
    for (path, body) in [("logs", logs(tenant, t0)), ("metrics", metrics(tenant, t0))] {
        let r = c
            .post(format!("{}/v1/{path}", s.otlp_http))
            .bearer_auth(token)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{path}: {}", r.text().unwrap());
    }
}

/// One span over OTLP/gRPC with `token` (and the tenant header, if given).
fn grpc_span(s: &Server, token: &str, header: Option<&str>, service: &str, t0: u64) -> Result<(), tonic::Status> {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let span = skein_model::Span {
        trace_id: skein_model::TraceId::from_hex("0000000000000000000000000000000b").unwrap(),
        span_id: skein_model::SpanId::from_hex("00000000000000bb").unwrap(),
        name: "grpc-op".into(),
        start_time_unix_nano: t0,
        end_time_unix_nano: t0 + 1_000,
        resource: std::sync::Arc::new(skein_model::Resource {
            attributes: vec![skein_model::KeyValue::new("service.name", service)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let request = skein_model::otlp::spans_to_otlp(&[span]);
    let endpoint = s.grpc.clone();
    let token = format!("Bearer {token}");
    let header = header.map(str::to_string);
    tokio::runtime::Runtime::new().unwrap().block_on(async move {
        let mut client = TraceServiceClient::connect(endpoint).await.unwrap();
        let mut r = tonic::Request::new(request);
        r.metadata_mut().insert("authorization", token.parse().unwrap());
        if let Some(h) = header {
            r.metadata_mut().insert("x-scope-orgid", h.parse().unwrap());
        }
        client.export(r).await.map(|_| ())
    })
}

/// An MCP tool call over `/mcp`, as a client that speaks JSON-RPC.
fn mcp(s: &Server, c: &Client, token: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    let r = c
        .post(format!("{}/mcp", s.api))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().unwrap();
    assert!(v["result"]["isError"] != json!(true), "{v}");
    v["result"].clone()
}

#[test]
fn a_tenant_token_reads_and_writes_its_tenant_only() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, TOKENS).unwrap();
    let mut s = Server::start(
        &dir.path().join("data"),
        &[
            "--auth-tokens",
            tokens.to_str().unwrap(),
            "--tenant-header",
            "X-Scope-OrgID",
            "--tenant-retention",
            "acme:spans=1h",
            "--payload-threshold",
            "256",
        ],
    );
    let c = Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let api = s.api.clone();
    let t0 = now_ns() - HOUR_NS / 4;

    // The live tail of acme, open before anything is sent.
    let tail = c
        .get(format!("{api}/api/v1/tail?signal=spans"))
        .bearer_auth("acme-secret")
        .send()
        .unwrap();
    assert_eq!(tail.status(), 200);
    let (tail_tx, tail_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(tail).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data:")
                && tail_tx.send(data.trim().to_string()).is_err()
            {
                return;
            }
        }
    });

    // beta first, so acme's tail would see beta's spans if it could.
    for (tenant, token) in [("beta", "beta-secret"), ("acme", "acme-secret")] {
        ingest(&s, &c, tenant, token, t0);
    }
    grpc_span(&s, "beta-secret", None, "beta-grpc", t0).unwrap();
    let first = tail_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(first.contains("acme-root"), "{first}");
    while let Ok(more) = tail_rx.recv_timeout(Duration::from_millis(500)) {
        assert!(more.contains("acme"), "acme's tail shows {more}");
    }

    for (tenant, token) in tenants() {
        let q = |path: &str| get_ok(&c, &format!("{api}{path}"), token);
        only(tenant, "services", &q("/api/v1/services?last=1h"));
        only(tenant, "spans", &q("/api/v1/spans?last=3h"));
        let trace = q(&format!("/api/v1/traces/{TRACE}"));
        only(tenant, "trace", &trace);
        assert_eq!(trace["spans"].as_array().unwrap().len(), 1, "{trace}");
        assert_eq!(trace["spans"][0]["name"], format!("{tenant}-root"));
        only(tenant, "logs", &q("/api/v1/logs?last=1h"));
        only(tenant, "summary", &q("/api/v1/summary?last=1h"));
        only(tenant, "metric names", &q("/api/v1/metrics/names?last=1h"));
        // Full text: a tenant's own word is found, the other's is not.
        let other = if tenant == "acme" { "beta" } else { "acme" };
        let own = q(&format!("/api/v1/logs?text=word{tenant}&last=1h"));
        assert_eq!(own["logs"].as_array().unwrap().len(), 1, "{own}");
        let theirs = q(&format!("/api/v1/logs?text=word{other}&last=1h"));
        assert_eq!(theirs["logs"].as_array().unwrap().len(), 0, "{theirs}");
        let theirs = q(&format!("/api/v1/spans?text={other}-prompt&last=1h"));
        assert_eq!(theirs["spans"].as_array().unwrap().len(), 0, "{theirs}");
        // Payloads: a tenant's own by reference; the other's is not there.
        let spans = q(&format!("/api/v1/spans?service={tenant}-svc&last=1h"));
        let own_ref = spans["spans"][0]["attributes"]["gen_ai.input.messages"]["$payload"]
            .as_str()
            .unwrap_or_else(|| panic!("no payload reference: {spans}"))
            .to_string();
        let other_token = if tenant == "acme" { "beta-secret" } else { "acme-secret" };
        let (code, _) = get(&c, &format!("{api}/api/v1/payloads/{own_ref}"), token);
        assert_eq!(code, 200);
        let (code, v) = get(&c, &format!("{api}/api/v1/payloads/{own_ref}"), other_token);
        assert_eq!(code, 404, "{tenant}'s payload read with the other token: {v}");
        // Export.
        let r = c
            .get(format!("{api}/api/v1/export?last=3h"))
            .bearer_auth(token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().unwrap();
        assert!(text.contains(tenant) && !text.contains(other), "{text}");
        // PromQL.
        let series = q(&format!(
            "/prometheus/api/v1/query?query=jobs_{tenant}_total&time={}",
            t0 / 1_000_000_000 + 1
        ));
        only(tenant, "PromQL", &series);
        let theirs = q(&format!(
            "/prometheus/api/v1/query?query=jobs_{other}_total&time={}",
            t0 / 1_000_000_000 + 1
        ));
        assert_eq!(theirs["data"]["result"], json!([]), "{theirs}");
        // SQL.
        let (code, v) = post(
            &c,
            &format!("{api}/api/v1/sql"),
            token,
            &json!({"query": "SELECT service_name, name FROM spans ORDER BY name"}),
        );
        assert_eq!(code, 200, "{v}");
        only(tenant, "SQL", &v);
        // MCP.
        let listed = mcp(&s, &c, token, "list_services", json!({"last": "1h"}));
        only(tenant, "MCP list_services", &listed["structuredContent"]);
        let got = mcp(&s, &c, token, "get_trace", json!({"trace_id": TRACE}));
        only(tenant, "MCP get_trace", &got["structuredContent"]);
    }

    // Retention per tenant: acme keeps spans 1 hour, beta for ever.
    let old = |token| get_ok(&c, &format!("{api}/api/v1/spans?last=3h&limit=100"), token).to_string();
    assert!(!old("acme-secret").contains("acme-old"));
    assert!(old("beta-secret").contains("beta-old"));
    // The gRPC span went to beta.
    assert!(old("beta-secret").contains("grpc-op"));

    // The gateway's header chooses for a token without a tenant; a
    // tenant's token may only repeat its own.
    let services_as = |token: &str, tenant: &str| {
        c.get(format!("{api}/api/v1/services?last=1h"))
            .bearer_auth(token)
            .header("X-Scope-OrgID", tenant)
            .send()
            .unwrap()
    };
    let r = services_as("gateway-secret", "beta");
    assert_eq!(r.status(), 200);
    only("beta", "services through the gateway", &r.json().unwrap());
    let r = services_as("acme-secret", "beta");
    assert_eq!(r.status(), 403);
    assert!(r.text().unwrap().contains("for tenant acme"));
    assert_eq!(services_as("gateway-secret", "../etc").status(), 400);
    let denied = grpc_span(&s, "acme-secret", Some("beta"), "x", t0).unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    grpc_span(&s, "gateway-secret", Some("gamma"), "gamma-svc", t0).unwrap();
    let gamma = services_as("gateway-secret", "gamma").text().unwrap();
    assert!(
        gamma.contains("gamma-svc") && !gamma.contains("acme") && !gamma.contains("beta"),
        "{gamma}"
    );
    // The home space (no tenant, no header) holds none of them.
    let home = get_ok(&c, &format!("{api}/api/v1/spans?last=3h"), "gateway-secret");
    assert_eq!(home["spans"].as_array().unwrap().len(), 0, "{home}");

    // Erasure by acme's admin erases in acme only: beta's span with the
    // same trace id stays.
    let (code, v) = post(
        &c,
        &format!("{api}/api/v1/erasures"),
        "acme-admin-secret",
        &json!({"trace_id": TRACE}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(get(&c, &format!("{api}/api/v1/traces/{TRACE}"), "acme-secret").0, 404);
    only(
        "beta",
        "trace after acme's erasure",
        &get_ok(&c, &format!("{api}/api/v1/traces/{TRACE}"), "beta-secret"),
    );
    // Its audit entries are acme's; the operator sees every tenant's.
    let audit = get_ok(&c, &format!("{api}/api/v1/audit"), "acme-admin-secret");
    let entries = audit["entries"].as_array().unwrap();
    assert!(
        !entries.is_empty() && entries.iter().all(|e| e["tenant"] == "acme"),
        "{audit}"
    );
    let all = get_ok(&c, &format!("{api}/api/v1/audit"), "root-secret");
    assert!(all["entries"].as_array().unwrap().len() >= entries.len());
    // Backups are the operator's.
    let (code, v) = post(
        &c,
        &format!("{api}/api/v1/backups"),
        "acme-admin-secret",
        &json!({"to": dir.path().join("b").to_str().unwrap()}),
    );
    assert_eq!(code, 403, "{v}");
    // A tenant's /metrics counts its own records.
    let m = c
        .get(format!("{api}/metrics"))
        .bearer_auth("beta-secret")
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(!m.contains("skein_tenants_open"), "{m}");
    let m = c
        .get(format!("{api}/metrics"))
        .bearer_auth("gateway-secret")
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(m.contains("skein_tenants_open 3"), "{m}");

    // Each tenant's data is its own engine's, on disk in its own directory,
    // and what was acknowledged survives a SIGKILL (tenants reopen at start).
    for t in ["acme", "beta", "gamma"] {
        assert!(s.data_dir.join("tenants").join(t).join("wal").is_dir(), "{t}");
    }
    s.kill();
    s.restart();
    let after = get_ok(&c, &format!("{api}/api/v1/spans?last=3h&limit=100"), "beta-secret");
    only("beta", "spans after a restart", &after);
    assert!(after.to_string().contains("grpc-op"), "{after}");
    assert!(s.log_text().contains("tenant beta: opened"));
}

#[test]
fn a_bad_tenant_in_the_tokens_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\ntenant = \"a/b\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(common::bin())
        .args([
            "serve",
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
            "--auth-tokens",
            tokens.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 1") && err.contains("tenant \"a/b\""), "{err}");
}

fn skein_cli(args: &[&str]) -> Value {
    let out = std::process::Command::new(common::bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "skein {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn start_with_tokens(dir: &std::path::Path, data: &std::path::Path, extra: &[&str]) -> Server {
    let tokens = dir.join("tokens.toml");
    std::fs::write(&tokens, TOKENS).unwrap();
    let mut flags = vec!["--auth-tokens", tokens.to_str().unwrap()];
    flags.extend_from_slice(extra);
    Server::start(data, &flags)
}

/// The operator's backup holds every tenant (each at `tenants/<name>` of
/// the backup), verify checks them all and names a damaged tenant file,
/// and a restore brings every tenant back, each still apart.
#[test]
fn backups_restore_and_verify_every_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_tokens(dir.path(), &dir.path().join("data"), &[]);
    let c = Client::new();
    let t0 = now_ns() - HOUR_NS / 4;
    for (tenant, token) in tenants() {
        ingest(&s, &c, tenant, token, t0);
    }
    let to = dir.path().join("backup");
    let (code, report) = post(
        &c,
        &format!("{}/api/v1/backups", s.api),
        "root-secret",
        &json!({"to": to.to_str().unwrap()}),
    );
    assert_eq!(code, 200, "{report}");
    for t in ["acme", "beta"] {
        assert!(report["tenants"][t]["files"].as_u64().unwrap() > 0, "{report}");
        assert!(to.join("tenants").join(t).join("manifest.json").is_file());
    }
    let verified = skein_cli(&["verify", "--data-dir", to.to_str().unwrap()]);
    assert_eq!(verified["ok"], true, "{verified}");
    let tenant_files = |v: &Value| v["files_checked"].as_u64().unwrap();
    assert!(
        tenant_files(&verified) > report["files"].as_u64().unwrap(),
        "{verified}"
    );

    let restored = dir.path().join("restored");
    let r = skein_cli(&[
        "restore",
        "--from",
        to.to_str().unwrap(),
        "--data-dir",
        restored.to_str().unwrap(),
    ]);
    assert_eq!(r["nested"], json!(["acme", "beta"]), "{r}");
    drop(s);
    let s2 = start_with_tokens(dir.path(), &restored, &[]);
    for (tenant, token) in tenants() {
        only(
            tenant,
            "restored spans",
            &get_ok(&c, &format!("{}/api/v1/spans?last=3h", s2.api), token),
        );
    }
    drop(s2);

    // A damaged file of a tenant is named with its place.
    let parts = to.join("tenants/beta/parts/spans");
    let part = std::fs::read_dir(&parts)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let mut bytes = std::fs::read(&part).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&part, bytes).unwrap();
    let out = std::process::Command::new(common::bin())
        .args(["verify", "--data-dir", to.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let damaged = v["damaged"].to_string();
    assert!(damaged.contains("tenants/beta/parts/spans/"), "{v}");
}

/// With parts in a bucket, each tenant's live under `PREFIX/tenants/<name>`
/// and the home engine leaves them alone across restarts.
#[test]
fn with_a_bucket_each_tenant_has_its_own_prefix() {
    let moto = common::moto::Moto::start();
    moto.create_bucket("tenants-test");
    let dir = tempfile::tempdir().unwrap();
    let mut flags: Vec<String> = vec!["--storage".into(), "s3://tenants-test/p".into()];
    flags.extend(common::moto::s3_flags(&moto.url()));
    flags.extend(["--shutdown-timeout", "20"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut s = start_with_tokens(dir.path(), &dir.path().join("data"), &flags);
    let c = Client::new();
    let t0 = now_ns() - HOUR_NS / 4;
    for (tenant, token) in tenants() {
        ingest(&s, &c, tenant, token, t0);
    }
    // A clean stop flushes every space and uploads its parts.
    assert!(s.stop().success());
    for t in ["acme", "beta"] {
        let objects = moto.objects("tenants-test", &format!("p/tenants/{t}/spans/"));
        assert!(objects.iter().any(|o| o.parquet), "{t}: {objects:?}");
    }
    // The home space got nothing: every span was a tenant's.
    let home = moto.objects("tenants-test", "p/spans/");
    assert!(home.is_empty(), "{home:?}");
    let before = moto.objects("tenants-test", "p/tenants/").len();
    // Without its local copies, each tenant is read back from its prefix.
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    s.restart();
    for (tenant, token) in tenants() {
        only(
            tenant,
            "spans read back from the bucket",
            &get_ok(&c, &format!("{}/api/v1/spans?last=3h", s.api), token),
        );
    }
    assert!(moto.objects("tenants-test", "p/tenants/").len() >= before);
}
