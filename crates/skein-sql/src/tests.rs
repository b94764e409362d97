//! SQL over a real engine (hot tier and parts), against naive answers
//! computed from the records themselves.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use futures::StreamExt;
use proptest::prelude::*;
use serde_json::Value;
use skein_engine::{Engine, EngineOptions};
use skein_model::{KeyValue, Resource, Span, SpanId, TraceId};

use crate::output::JsonAnswer;
use crate::{Sql, SqlError, SqlOptions};

fn engine(dir: &std::path::Path) -> Arc<Engine> {
    let mut o = EngineOptions::new(dir);
    o.background = false;
    o.durability = skein_engine::Durability::None;
    Arc::new(Engine::open(o).unwrap())
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn query(sql: &Sql, q: &str) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut a = sql.run(q).await?;
    let mut out = JsonAnswer::new(&a.schema);
    while let Some(b) = a.stream.next().await {
        let b: RecordBatch = b.map_err(|e| sql.error(e))?;
        out.add(&b, usize::MAX).unwrap();
    }
    Ok(out.rows)
}

fn one(sql: &Sql, rt: &tokio::runtime::Runtime, q: &str) -> Value {
    let rows = rt.block_on(query(sql, q)).unwrap_or_else(|e| panic!("{q}: {e}"));
    assert_eq!(rows.len(), 1, "{q}: {rows:?}");
    rows[0][0].clone()
}

/// A span of `service` at `t` with `http.route` = `route`.
fn span(i: u64, service: &str, route: &str, t: u64) -> Span {
    Span {
        trace_id: TraceId::from_u128(1 + u128::from(i) / 3),
        span_id: SpanId::from_u64(1 + i),
        name: format!("op-{}", i % 4),
        start_time_unix_nano: t,
        end_time_unix_nano: t + 1000 * (i + 1),
        attributes: vec![KeyValue::new("http.route", route), KeyValue::new("n", i as i64)],
        resource: Arc::new(Resource::with_service(service)),
        ..Default::default()
    }
}

const SERVICES: [&str; 3] = ["api", "db", "web"];
const ROUTES: [&str; 3] = ["/a", "/b", "/users"];

#[test]
fn counts_agree_across_hot_tier_and_parts() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let spans: Vec<Span> = (0..300)
        .map(|i| span(i, SERVICES[i as usize % 3], ROUTES[i as usize % 3], 1_000_000 + i * 10))
        .collect();
    e.ingest_spans(spans[..200].to_vec()).unwrap();
    e.flush().unwrap();
    e.ingest_spans(spans[200..].to_vec()).unwrap();
    let sql = Sql::new(e.clone(), SqlOptions::default()).unwrap();
    let rt = rt();
    assert_eq!(one(&sql, &rt, "SELECT count(*) FROM spans"), Value::from(300));
    assert_eq!(
        one(&sql, &rt, "SELECT count(*) FROM spans WHERE service_name = 'db'"),
        Value::from(100)
    );
    assert_eq!(
        one(
            &sql,
            &rt,
            "SELECT count(*) FROM spans WHERE attributes['http.route'] = '/users'"
        ),
        Value::from(100)
    );
    // An int attribute compared as the text the map holds.
    assert_eq!(
        one(&sql, &rt, "SELECT count(*) FROM spans WHERE attributes['n'] = '42'"),
        Value::from(1)
    );
    assert_eq!(
        one(
            &sql,
            &rt,
            "SELECT min(span_id) || '/' || count(*) FROM spans WHERE trace_id = '00000000000000000000000000000002'"
        ),
        Value::from("0000000000000004/3")
    );
    // A span re-ingested after its first copy reached a part counts once.
    e.ingest_spans(vec![spans[0].clone()]).unwrap();
    assert_eq!(one(&sql, &rt, "SELECT count(*) FROM spans"), Value::from(300));
    assert_eq!(
        one(
            &sql,
            &rt,
            "SELECT resource_attributes['service.name'] FROM spans LIMIT 1"
        )
        .as_str()
        .map(|s| SERVICES.contains(&s)),
        Some(true)
    );
}

#[test]
fn only_queries_are_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let sql = Sql::new(engine(dir.path()), SqlOptions::default()).unwrap();
    let rt = rt();
    for q in [
        "CREATE TABLE t (a INT)",
        "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
        "INSERT INTO spans SELECT * FROM spans",
        "DELETE FROM spans",
        "DROP TABLE spans",
        "COPY (SELECT 1) TO '/tmp/x.csv'",
        "SET datafusion.execution.batch_size = 1",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM read_csv('/etc/passwd')",
    ] {
        match rt.block_on(query(&sql, q)) {
            Err(SqlError::Invalid(m)) => assert!(!m.is_empty(), "{q}"),
            other => panic!("{q} was not refused: {:?}", other.map(|r| r.len())),
        }
    }
    match rt.block_on(query(&sql, "SELEC 1")) {
        Err(SqlError::Invalid(m)) => assert!(m.contains("SELEC"), "{m}"),
        other => panic!("{:?}", other.map(|r| r.len())),
    }
}

#[test]
fn a_query_past_the_memory_pool_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let spans: Vec<Span> = (0..3000).map(|i| span(i, "api", "/a", 1_000 + i)).collect();
    e.ingest_spans(spans).unwrap();
    let opts = SqlOptions {
        memory_bytes: 64 << 10,
        ..Default::default()
    };
    let sql = Sql::new(e, opts).unwrap();
    let rt = rt();
    let q = "SELECT name, attributes, events, resource FROM spans ORDER BY name, span_id";
    match rt.block_on(query(&sql, q)) {
        Err(SqlError::TooLarge { detail, .. }) => assert!(!detail.is_empty()),
        other => panic!("expected too large: {:?}", other.map(|r| r.len())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Pushed filters only narrow: SQL counts equal the naive count of the
    /// records, whichever filters are combined and wherever the rows live.
    #[test]
    fn pushed_filters_never_change_answers(
        rows in prop::collection::vec((0usize..3, 0usize..3, 0u64..1000), 1..120),
        flush_at in 0usize..120,
        service in prop::option::of(0usize..3),
        route in prop::option::of(0usize..3),
        window in prop::option::of((0u64..1000, 0u64..1000)),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(dir.path());
        let spans: Vec<Span> = rows
            .iter()
            .enumerate()
            .map(|(i, (s, r, t))| span(i as u64, SERVICES[*s], ROUTES[*r], 1_000_000 + t))
            .collect();
        let cut = flush_at.min(spans.len());
        e.ingest_spans(spans[..cut].to_vec()).unwrap();
        e.flush().unwrap();
        e.ingest_spans(spans[cut..].to_vec()).unwrap();
        let mut conds = vec!["true".to_string()];
        if let Some(s) = service {
            conds.push(format!("service_name = '{}'", SERVICES[s]));
        }
        if let Some(r) = route {
            conds.push(format!("attributes['http.route'] = '{}'", ROUTES[r]));
        }
        if let Some((a, b)) = window {
            conds.push(format!(
                "start_time_unix_nano >= to_timestamp_nanos({}) AND start_time_unix_nano < to_timestamp_nanos({})",
                1_000_000 + a, 1_000_000 + b
            ));
        }
        let naive = rows
            .iter()
            .filter(|(s, r, t)| {
                service.is_none_or(|x| x == *s)
                    && route.is_none_or(|x| x == *r)
                    && window.is_none_or(|(a, b)| *t >= a && *t < b)
            })
            .count();
        let sql = Sql::new(e, SqlOptions::default()).unwrap();
        let q = format!("SELECT count(*) FROM spans WHERE {}", conds.join(" AND "));
        prop_assert_eq!(one(&sql, &rt(), &q), Value::from(naive), "{}", q);
    }
}

#[test]
fn scores_and_llm_calls_are_views() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let score = skein_model::genai::score::Score::record(
        "s1",
        TraceId::from_u128(7),
        Some(SpanId::from_u64(3)),
        Some("sess-1"),
        "helpful",
        &skein_model::AnyValue::Double(0.75),
        Some("fine"),
        "human",
        5_000,
    );
    e.ingest_logs(vec![score]).unwrap();
    let mut call = span(1, "agent", "/", 1_000);
    call.attributes.extend([
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", "openai"),
        KeyValue::new("gen_ai.request.model", "gpt-4o"),
        KeyValue::new("gen_ai.usage.input_tokens", 120i64),
        KeyValue::new("gen_ai.usage.output_tokens", 30i64),
    ]);
    e.ingest_spans(vec![call, span(2, "api", "/", 2_000)]).unwrap();
    let sql = Sql::new(e, SqlOptions::default()).unwrap();
    let rt = rt();
    let rows = rt
        .block_on(query(
            &sql,
            "SELECT id, trace_id, session_id, name, value, comment, source FROM scores",
        ))
        .unwrap();
    assert_eq!(
        rows,
        vec![vec![
            Value::from("s1"),
            Value::from("00000000000000000000000000000007"),
            Value::from("sess-1"),
            Value::from("helpful"),
            Value::from(0.75),
            Value::from("fine"),
            Value::from("human"),
        ]]
    );
    let rows = rt
        .block_on(query(
            &sql,
            "SELECT kind, provider, input_tokens, output_tokens FROM llm_calls",
        ))
        .unwrap();
    assert_eq!(
        rows,
        vec![vec![
            Value::from("llm"),
            Value::from("openai"),
            Value::from(120),
            Value::from(30)
        ]]
    );
}
