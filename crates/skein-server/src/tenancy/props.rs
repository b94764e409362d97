//! Property test of tenant isolation through the API router itself (the
//! gate, the handlers, the engines): random spans written by several
//! tenants and the home space, some flushed to parts and some still in the
//! hot tier, then random queries by every caller. No answer may hold
//! another space's record, and each answer holds what a naive model of
//! that caller's own records says it should.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::app::App;
use crate::auth::TokenSet;
use crate::config::ServerConfig;

/// The callers: a label (what their records carry as `owner`) and token.
const CALLERS: [(&str, &str); 4] = [("home", "h0me"), ("t1", "s1"), ("t2", "s2"), ("t3", "s3")];
const SERVICES: [&str; 3] = ["cart", "auth", "db"];
const WORDS: [&str; 3] = ["apple", "banana", "cherry"];

fn tokens() -> TokenSet {
    let mut text = String::from("[[token]]\nname = \"home\"\nsecret = \"h0me\"\nscopes = [\"ingest\", \"read\"]\n");
    for (t, secret) in &CALLERS[1..] {
        text.push_str(&format!(
            "[[token]]\nname = \"{t}\"\nsecret = \"{secret}\"\nscopes = [\"ingest\", \"read\"]\ntenant = \"{t}\"\n"
        ));
    }
    TokenSet::from_toml(&text, "tokens").expect("tokens parse")
}

#[derive(Debug, Clone)]
struct Write {
    caller: usize,
    trace: u8,
    span: u8,
    service: usize,
    word: usize,
    /// Seconds before now.
    age: u16,
}

#[derive(Debug, Clone)]
enum Ask {
    Service(usize),
    Word(usize),
    Trace(u8),
    Services,
}

fn write() -> impl Strategy<Value = Write> {
    (
        0..CALLERS.len(),
        0u8..4,
        0u8..6,
        0..SERVICES.len(),
        0..WORDS.len(),
        0u16..1800,
    )
        .prop_map(|(caller, trace, span, service, word, age)| Write {
            caller,
            trace,
            span,
            service,
            word,
            age,
        })
}

fn ask() -> impl Strategy<Value = Ask> {
    prop_oneof![
        (0..SERVICES.len()).prop_map(Ask::Service),
        (0..WORDS.len()).prop_map(Ask::Word),
        (0u8..4).prop_map(Ask::Trace),
        Just(Ask::Services),
    ]
}

fn trace_hex(t: u8) -> String {
    format!("{:032x}", 0xABC0 + t as u128)
}

async fn send(router: &axum::Router, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"));
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("router answers");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Every `owner` attribute in an answer.
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

fn run(writes: Vec<Write>, flush_after: usize, asks: Vec<(usize, Ask)>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServerConfig::new(dir.path().to_path_buf());
    config.tokens = Some(Arc::new(tokens()));
    let app = Arc::new(App::new(config));
    let mut opts = skein_engine::EngineOptions::new(dir.path());
    opts.background = false;
    let home = Arc::new(skein_engine::Engine::open(opts.clone()).expect("engine opens"));
    app.set_engine(home, opts);
    let router = crate::serve::api_router_with_mcp(app.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;

    rt.block_on(async {
        // The model: each caller's spans by (trace, span), the last write
        // winning.
        let mut model: Vec<BTreeMap<(u8, u8), Write>> = vec![BTreeMap::new(); CALLERS.len()];
        for (i, w) in writes.iter().enumerate() {
            let (owner, token) = CALLERS[w.caller];
            let span = json!({"trace_id": trace_hex(w.trace), "span_id": format!("{:016x}", 0x100 + w.span as u64),
                "name": format!("{} op", WORDS[w.word]), "service": SERVICES[w.service],
                "start_time_unix_nano": now - w.age as u64 * 1_000_000_000, "duration_ns": 1000,
                "attributes": {"owner": owner}});
            let (status, v) = send(&router, token, "POST", "/api/v1/spans", Some(json!({"spans": [span]}))).await;
            prop_assert_eq!(status, 200, "{}", v);
            model[w.caller].insert((w.trace, w.span), w.clone());
            if i + 1 == flush_after {
                for space in app.spaces() {
                    space.engine.flush().expect("flush");
                }
            }
        }
        for (caller, ask) in asks {
            let (owner, token) = CALLERS[caller];
            let mine = &model[caller];
            let (path, expect): (String, usize) = match &ask {
                Ask::Service(s) => (
                    format!("/api/v1/spans?service={}&last=1h&limit=1000", SERVICES[*s]),
                    mine.values().filter(|w| w.service == *s).count(),
                ),
                Ask::Word(x) => (
                    format!("/api/v1/spans?text={}&last=1h&limit=1000", WORDS[*x]),
                    mine.values().filter(|w| w.word == *x).count(),
                ),
                Ask::Trace(t) => (
                    format!("/api/v1/traces/{}", trace_hex(*t)),
                    mine.values().filter(|w| w.trace == *t).count(),
                ),
                Ask::Services => (
                    "/api/v1/services?last=1h".to_string(),
                    mine.values().map(|w| w.service).collect::<BTreeSet<_>>().len(),
                ),
            };
            let (status, v) = send(&router, token, "GET", &path, None).await;
            if matches!(ask, Ask::Trace(_)) && expect == 0 {
                prop_assert_eq!(status, 404, "{} {}: {}", owner, path, v);
                continue;
            }
            prop_assert_eq!(status, 200, "{} {}: {}", owner, path, v);
            let mut found = Vec::new();
            owners(&v, &mut found);
            prop_assert!(found.iter().all(|o| o == owner), "{} {}: {:?}", owner, path, found);
            let got = match ask {
                Ask::Services => v["services"].as_array().map_or(0, Vec::len),
                _ => found.len(),
            };
            prop_assert_eq!(got, expect, "{} {}: {}", owner, path, v);
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn no_answer_holds_another_tenants_record(
        writes in prop::collection::vec(write(), 1..40),
        flush_after in 0usize..40,
        asks in prop::collection::vec((0..CALLERS.len(), ask()), 1..24),
    ) {
        run(writes, flush_after, asks)?;
    }
}
