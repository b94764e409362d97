//! Real text (stack traces, JSON log lines, CJK sentences) and the queries a
//! person would type for it, through both indexes; and highlights marking
//! exactly the matched terms.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;
use skein_text::{Field, MemTextIndex, PartTextIndex, PartTextIndexBuilder, Query};

const PYTHON: &str = r#"Traceback (most recent call last):
  File "/app/worker.py", line 42, in handle
    conn = pool.acquire(timeout=5)
  File "/usr/lib/python3.12/site-packages/db/pool.py", line 118, in acquire
    raise PoolTimeout("connection pool exhausted after 5s")
db.pool.PoolTimeout: connection pool exhausted after 5s"#;

const JAVA: &str = "java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, request timed out after 30000ms.
\tat com.zaxxer.hikari.pool.HikariPool.createTimeoutException(HikariPool.java:696)
\tat com.example.PoolTimeoutException.<init>(PoolTimeoutException.java:12)
\tat com.example.OrderService.placeOrder(OrderService.java:88)
Caused by: java.net.ConnectException: Connection refused";

const GO: &str = "panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a2b3c]

goroutine 17 [running]:
main.(*Server).handle(0xc000010000, {0x6b8f40, 0xc00001c0a0})
\t/src/server.go:57 +0x1c
net/http.HandlerFunc.ServeHTTP(0x0?, {0x6b8f40?, 0xc00001c0a0?}, 0x0?)
\t/usr/local/go/src/net/http/server.go:2136 +0x29

goroutine 1 [chan receive]:
main.main()
\t/src/main.go:21 +0x85";

const JSON_ERROR: &str = r#"{"level":"error","ts":"2024-05-01T12:00:00Z","msg":"upstream connect error","error":"dial tcp 10.0.0.7:5432: connect: connection refused","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}"#;
const JSON_INFO: &str = r#"{"level":"info","msg":"request served","status":200,"duration_ms":12}"#;
const JSON_WARN: &str = r#"{"level":"warn","msg":"retry scheduled","attempt":3,"backoff":"2s"}"#;
const JAPANESE: &str = "データベースへの接続がタイムアウトしました。3秒後に再試行します。";
const CHINESE: &str = "数据库连接超时，正在重试（第3次）";
const KOREAN: &str = "데이터베이스 연결 시간 초과";

fn corpus() -> BTreeMap<u32, Vec<(Field, &'static str)>> {
    BTreeMap::from([
        (
            10,
            vec![
                (Field::Name, "PoolTimeout"),
                (Field::Message, PYTHON),
                (Field::Body, "worker failed; will retry"),
            ],
        ),
        (
            11,
            vec![
                (Field::Name, "java.sql.SQLTransientConnectionException"),
                (Field::Message, JAVA),
            ],
        ),
        (12, vec![(Field::Body, GO)]),
        (13, vec![(Field::Body, JSON_ERROR)]),
        (14, vec![(Field::Body, JSON_INFO)]),
        (15, vec![(Field::Body, JSON_WARN)]),
        (16, vec![(Field::Body, JAPANESE)]),
        (17, vec![(Field::Body, CHINESE)]),
        (18, vec![(Field::Body, KOREAN)]),
        (
            19,
            vec![
                (Field::Message, "timeout waiting for lock"),
                (Field::Body, "giving up, no retry"),
            ],
        ),
        (
            20,
            vec![
                (Field::Body, "upstream: connection refused by peer"),
                (
                    Field::Payload,
                    "You are a helpful assistant. Summarize the error for the on-call engineer.",
                ),
            ],
        ),
        // A row without text: only in the row set.
        (21, vec![]),
    ])
}

struct Indexes {
    docs: BTreeMap<u32, Vec<(Field, &'static str)>>,
    part: PartTextIndex,
    mem: MemTextIndex,
}

fn indexes() -> Indexes {
    let docs = corpus();
    let mut builder = PartTextIndexBuilder::new().unwrap_or_else(|e| panic!("{e}"));
    let mut mem = MemTextIndex::new();
    for (row, doc) in &docs {
        builder.add(*row, doc).unwrap_or_else(|e| panic!("{e}"));
        mem.add(*row, doc);
    }
    let bytes = builder.finish().unwrap_or_else(|e| panic!("{e}"));
    // Opened as the engine would from object storage or a file read.
    let part = PartTextIndex::open(bytes::Bytes::from(bytes)).unwrap_or_else(|e| panic!("{e}"));
    Indexes { docs, part, mem }
}

impl Indexes {
    /// The answer through each index (candidates re-checked), which must
    /// agree with each other and with a scan.
    fn answer(&self, text: &str) -> Vec<u32> {
        let q = Query::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let check = |c: RoaringBitmap| -> Vec<u32> { c.iter().filter(|r| q.matches(&self.docs[r])).collect() };
        let part = check(self.part.search(&q).unwrap_or_else(|e| panic!("{text}: {e}")));
        let mem = check(self.mem.search(&q));
        let scan: Vec<u32> = self
            .docs
            .iter()
            .filter(|(_, d)| q.matches(d))
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(part, scan, "{text}: part index");
        assert_eq!(mem, scan, "{text}: hot-tier index");
        scan
    }
}

#[test]
fn queries_people_type_find_the_rows_they_mean() {
    let ix = indexes();
    let cases: &[(&str, &[u32])] = &[
        // An identifier finds itself, inside dotted names, and its words.
        ("PoolTimeout", &[10, 11]),
        ("timeout", &[10, 11, 19]),
        ("PoolTimeoutException", &[11]),
        ("pool", &[10, 11]),
        ("db.pool", &[10]),
        ("HikariPool", &[11]),
        ("hikari", &[11]),
        ("ServeHTTP", &[12]),
        ("SQLTransientConnectionException", &[11]),
        ("exhaust*", &[10]),
        ("\"connection refused\"", &[11, 13, 20]),
        ("\"connection pool exhausted\"", &[10]),
        ("goroutine", &[12]),
        ("\"nil pointer dereference\"", &[12]),
        ("SIGSEGV", &[12]),
        ("server.go", &[12]),
        // JSON log lines: keys and values are words.
        ("\"level\":\"error\"", &[13]),
        ("4bf92f3577b34da6a3ce929d0e0e4736", &[13]),
        ("5432", &[13]),
        ("status", &[14]),
        ("retry", &[10, 15, 19]),
        // CJK words inside sentences, and a single character.
        ("接続", &[16]),
        ("タイムアウト", &[16]),
        ("再試行", &[16]),
        ("连接", &[17]),
        ("超时", &[17]),
        ("重试", &[17]),
        ("연결", &[18]),
        ("秒", &[16]),
        // Fields, NOT, OR.
        ("message:timeout AND NOT body:retry", &[11]),
        ("message:timeout -body:retry", &[11]),
        ("name:PoolTimeout", &[10]),
        ("body:PoolTimeout", &[]),
        ("payload:assistant", &[20]),
        ("refused -payload:assistant", &[11, 13]),
        ("goroutine OR 接続", &[12, 16]),
        (
            "(retry OR refused) AND NOT (body:warn OR name:PoolTimeout)",
            &[11, 13, 19, 20],
        ),
    ];
    for &(text, expected) in cases {
        assert_eq!(ix.answer(text), expected, "{text}");
    }
}

fn marked(q: &str, doc: &[(Field, &str)]) -> Vec<(Field, String)> {
    let q = Query::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
    let mut out = Vec::new();
    for h in q.highlights(doc) {
        let value = doc.iter().find(|(f, v)| *f == h.field && v.contains(&h.fragment));
        assert!(value.is_some(), "{h:?} is not a fragment of a {} value", h.field);
        for &(s, e) in &h.ranges {
            out.push((h.field, h.fragment[s..e].to_owned()));
        }
    }
    out
}

fn strs(v: &[(Field, &str)]) -> Vec<(Field, String)> {
    v.iter().map(|(f, s)| (*f, (*s).to_owned())).collect()
}

#[test]
fn highlights_mark_exactly_the_matched_terms() {
    let java = [(Field::Message, JAVA)];
    assert_eq!(
        marked("PoolTimeout", &java),
        strs(&[(Field::Message, "PoolTimeout"), (Field::Message, "PoolTimeout")])
    );
    assert_eq!(
        marked("\"connection refused\"", &java),
        strs(&[(Field::Message, "Connection refused")])
    );
    // A prefix marks each term it matched: the part `hikari` of
    // `com.zaxxer.hikari.pool.HikariPool` and each `HikariPool`.
    let hikari: Vec<String> = marked("hikari*", &java).into_iter().map(|(_, s)| s).collect();
    assert_eq!(hikari, ["HikariPool", "hikari", "HikariPool", "HikariPool"]);
    let doc = [(Field::Name, "PoolTimeout")];
    assert_eq!(marked("pool*", &doc), strs(&[(Field::Name, "PoolTimeout")]));
    assert_eq!(marked("time*", &doc), strs(&[(Field::Name, "Timeout")]));

    let doc = [
        (Field::Message, "timeout waiting for lock"),
        (Field::Body, "giving up after timeout, no retry"),
    ];
    assert_eq!(
        marked("timeout AND NOT fatal", &doc),
        strs(&[(Field::Message, "timeout"), (Field::Body, "timeout")])
    );
    assert_eq!(marked("message:timeout", &doc), strs(&[(Field::Message, "timeout")]));
    // The alternative that did not match is not marked, nor is NOT's term.
    assert_eq!(
        marked("(retry AND fatal) OR lock", &doc),
        strs(&[(Field::Message, "lock")])
    );
    assert_eq!(marked("lock -fatal", &doc), strs(&[(Field::Message, "lock")]));
    assert!(marked("lock AND NOT retry", &doc).is_empty());

    // Pieces of identifiers, not the whole token.
    let doc = [(Field::Body, "pool_size=10 connection_pool exhausted")];
    assert_eq!(
        marked("pool", &doc),
        strs(&[(Field::Body, "pool"), (Field::Body, "pool")])
    );
    assert_eq!(
        marked("connection_pool", &doc),
        strs(&[(Field::Body, "connection_pool")])
    );

    // CJK and folded text: ranges are bytes of the original.
    assert_eq!(
        marked("接続", &[(Field::Body, JAPANESE)]),
        strs(&[(Field::Body, "接続")])
    );
    assert_eq!(
        marked("タイムアウト", &[(Field::Body, JAPANESE)]),
        strs(&[(Field::Body, "タイムアウト")])
    );
    assert_eq!(marked("strasse", &[(Field::Body, "Hauptstraße 1, STRASSE")]).len(), 1);
    assert_eq!(
        marked("straße", &[(Field::Body, "Straße 1, STRASSE")]),
        strs(&[(Field::Body, "Straße"), (Field::Body, "STRASSE")])
    );
}

#[test]
fn highlight_fragments_are_windows_around_the_matches() {
    let long = format!(
        "{} PoolTimeout after 30s {}",
        "lorem ipsum ".repeat(20),
        "dolor sit amet ".repeat(20)
    );
    let q = Query::parse("timeout").unwrap_or_else(|e| panic!("{e}"));
    let hs = q.highlights(&[(Field::Body, &long)]);
    assert_eq!(hs.len(), 1);
    let h = &hs[0];
    assert!(h.fragment.len() < 120, "{:?}", h.fragment);
    assert!(
        !h.fragment.starts_with(' ') && !h.fragment.ends_with(' '),
        "{:?}",
        h.fragment
    );
    assert_eq!(h.ranges.len(), 1);
    let (s, e) = h.ranges[0];
    assert_eq!(&h.fragment[s..e], "Timeout");
    assert!(long.contains(&h.fragment));
    let json = serde_json::to_value(h).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["field"], "body");
    assert_eq!(json["ranges"][0][1].as_u64(), Some(e as u64));

    // Matches far apart are separate fragments.
    let far = format!("timeout {} timeout", "x ".repeat(300));
    assert_eq!(q.highlights(&[(Field::Body, &far)]).len(), 2);
}

/// The engine maps the index file and shares the mapping: the bundle is read
/// in place through it.
#[test]
fn opens_over_a_shared_file_mapping() {
    let mut b = PartTextIndexBuilder::new().unwrap_or_else(|e| panic!("{e}"));
    for (row, doc) in corpus() {
        b.add(row, &doc).unwrap_or_else(|e| panic!("{e}"));
    }
    let bytes = b.finish().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("part.txt.idx");
    std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: the test owns the file and nothing writes it while mapped.
    let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(&file) }.unwrap_or_else(|e| panic!("{e}")));
    let part = PartTextIndex::open_shared(map.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(part.size_bytes(), map.len());
    let q = Query::parse("goroutine OR 接続").unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<u32> = part.search(&q).map(|r| r.iter().collect()).unwrap_or_default();
    assert!(rows.contains(&12) && rows.contains(&16), "{rows:?}");
    drop(map);
    // The index keeps the mapping alive after the caller lets go.
    assert!(part.search(&q).is_ok());
}
