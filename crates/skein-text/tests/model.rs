//! The indexes against the naive model: on random documents and queries,
//! neither the part index (through its bundle bytes) nor the hot-tier index
//! ever loses a row the naive model matches, and candidates filtered by
//! `matches` are exactly a full scan.

use std::collections::BTreeMap;

use proptest::prelude::*;
use roaring::RoaringBitmap;
use skein_text::{Field, MemTextIndex, PartTextIndex, PartTextIndexBuilder, Query};

/// Words of code and logs that exercise every tokenizer rule: case changes,
/// connectors, hex ids, numbers, folding, CJK, other scripts.
const VOCAB: &[&str] = &[
    "PoolTimeout",
    "connection_pool",
    "ConnectionPool",
    "connection.pool",
    "pool_timeout",
    "db.query",
    "timeout",
    "Timeout",
    "pool",
    "Connection",
    "refused",
    "4bf92f3577b34da6",
    "DEADbeef42CAFE00",
    "8080",
    "3.14",
    "HTTPServer",
    "v2Api",
    "com.example.PoolTimeoutException",
    "ＰｏｏｌＴｉｍｅｏｕｔ",
    "エラー",
    "発生",
    "東京都",
    "猫",
    "연결",
    "Ошибка",
    "σφάλμα",
    "Straße",
    "STRASSE",
    "goroutine",
    "retry",
    "error",
    "ERROR",
    "x",
    // One letter whose folded form holds spaces (NFKC: "صلى الله عليه وسلم").
    "\u{FDFA}",
];

const SEPARATORS: &[&str] = &[
    " ", " ", " ", "", "_", ".", ": ", ", ", "\n", "(", ")", "=", "-", "/", "\"", "。", "\t",
];

/// Query words: the vocabulary and what people type for it.
const QUERY_WORDS: &[&str] = &[
    "PoolTimeout",
    "pooltimeout",
    "pool",
    "timeout",
    "connection_pool",
    "connection",
    "refused",
    "db.query",
    "query",
    "4bf92f3577b34da6",
    "deadbeef42cafe00",
    "8080",
    "3.14",
    "14",
    "HTTPServer",
    "server",
    "api",
    "PoolTimeoutException",
    "example.PoolTimeout",
    "エラー",
    "エラー発生",
    "東京",
    "京",
    "猫",
    "연결",
    "ошибка",
    "ΣΦΆΛΜΑ",
    "strasse",
    "goroutine",
    "retry",
    "error",
    "x",
    "error=timeout",
    "timeouterror",
    "\u{FDFA}",
];

fn field() -> impl Strategy<Value = Field> {
    prop::sample::select(Field::ALL.to_vec())
}

fn value() -> impl Strategy<Value = String> {
    let words = |n: std::ops::Range<usize>| {
        prop::collection::vec((prop::sample::select(VOCAB), prop::sample::select(SEPARATORS)), n)
            .prop_map(|words| words.into_iter().flat_map(|(w, s)| [w, s]).collect::<String>())
    };
    // Long values too (prompts, stack traces), which the part index cuts
    // into remembered pieces: some repeat a shared text around their own
    // words, as prompts do.
    prop_oneof![
        6 => words(0..8),
        1 => words(20..80),
        1 => (words(0..4), words(0..4)).prop_map(|(a, b)| format!("{a} {} {b}", SHARED_PROSE.repeat(8))),
        // A system prompt around a user turn, as in one request after
        // another: indexes remember its pieces and do not cut them again.
        2 => (words(0..4), words(0..4)).prop_map(|(a, b)| format!("{a} {} {b}", system_prompt())),
    ]
}

/// A shared text: as often as not a system prompt around a few words, so
/// that the part index finds the prompt's pieces well known and indexes
/// them once, as a group, for the texts that hold them.
fn shared_value() -> impl Strategy<Value = String> {
    let words = prop::collection::vec((prop::sample::select(VOCAB), prop::sample::select(SEPARATORS)), 0..4)
        .prop_map(|words| words.into_iter().flat_map(|(w, s)| [w, s]).collect::<String>());
    prop_oneof![
        1 => value(),
        1 => (words.clone(), words).prop_map(|(a, b)| format!("{a} {} {b}", system_prompt())),
    ]
}

/// Rules, each naming different words, long enough to be cut into several
/// pieces that recur whole from one text to the next.
fn system_prompt() -> String {
    (0..16)
        .map(|i| {
            let w = |k: usize| VOCAB[(i * 3 + k) % VOCAB.len()];
            format!(
                "Rule {i}: keep every answer brief and polite, then check {} {} {}. ",
                w(0),
                w(1),
                w(2)
            )
        })
        .collect()
}

/// Prose that, repeated, is long enough to be cut into several pieces.
const SHARED_PROSE: &str = "You are a careful assistant. Answer the user about PoolTimeout errors in \
    the connection_pool of db.query, and never invent a 4bf92f3577b34da6 trace id. Retry politely, \
    explain each error, keep answers short, and mention Straße or 東京都 only when asked. \
    Always check the HTTPServer logs first, then the goroutine dumps, then the v2Api gateway.";

fn doc() -> impl Strategy<Value = Vec<(Field, String)>> {
    prop::collection::vec((field(), value()), 0..4)
}

fn leaf() -> impl Strategy<Value = String> {
    let word = prop::sample::select(QUERY_WORDS).prop_map(str::to_owned);
    let prefix = (prop::sample::select(QUERY_WORDS), 1usize..6).prop_map(|(w, n)| {
        let cut: String = w.chars().take(n).collect();
        format!("{cut}*")
    });
    let phrase =
        prop::collection::vec(prop::sample::select(QUERY_WORDS), 2..4).prop_map(|ws| format!("\"{}\"", ws.join(" ")));
    let atom = prop_oneof![4 => word, 2 => prefix, 2 => phrase];
    (prop::option::weighted(0.3, field()), atom).prop_map(|(f, a)| match f {
        Some(f) => format!("{}:{a}", f.name()),
        None => a,
    })
}

fn query() -> impl Strategy<Value = String> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} AND {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} OR {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} AND NOT {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} -{b}")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("{a} (x OR NOT ({b}))")),
        ]
    })
}

fn as_doc(values: &[(Field, String)]) -> Vec<(Field, &str)> {
    values.iter().map(|(f, s)| (*f, s.as_str())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn indexes_never_lose_a_hit_and_agree_with_a_scan(
        docs in prop::collection::vec((doc(), prop::collection::vec(0usize..8, 0..3)), 1..12),
        shared in prop::collection::vec((field(), shared_value()), 8),
        queries in prop::collection::vec(query(), 1..8),
        stride in 1u32..5,
        reversed in any::<bool>(),
    ) {
        // Row numbers sparse and, sometimes, added out of order. A row
        // holds its own values and, linked, some shared texts: to the naive
        // model those are values of the row like any other.
        let mut rows: BTreeMap<u32, Vec<(Field, &str)>> = BTreeMap::new();
        let mut own: BTreeMap<u32, Vec<(Field, &str)>> = BTreeMap::new();
        let mut links: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, (d, linked)) in docs.iter().enumerate() {
            let row = i as u32 * stride + 7;
            let mut all = as_doc(d);
            all.extend(linked.iter().map(|&k| (shared[k].0, shared[k].1.as_str())));
            rows.insert(row, all);
            own.insert(row, as_doc(d));
            links.insert(row, linked.clone());
        }
        let mut order: Vec<u32> = rows.keys().copied().collect();
        if reversed {
            order.reverse();
        }
        let mut builder = PartTextIndexBuilder::new().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut mem = MemTextIndex::new();
        let mut part_keys = Vec::new();
        let mut mem_keys = Vec::new();
        for (f, text) in &shared {
            part_keys.push(builder.add_shared(*f, text).map_err(|e| TestCaseError::fail(e.to_string()))?);
            mem_keys.push(mem.add_shared(*f, text));
        }
        for row in &order {
            builder.add(*row, &own[row]).map_err(|e| TestCaseError::fail(e.to_string()))?;
            mem.add(*row, &own[row]);
            for &k in &links[row] {
                builder.link(*row, part_keys[k]).map_err(|e| TestCaseError::fail(e.to_string()))?;
                mem.link(*row, mem_keys[k]);
            }
        }
        let bytes = builder.finish().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let part = PartTextIndex::open(bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let universe: RoaringBitmap = rows.keys().copied().collect();
        prop_assert_eq!(part.rows(), &universe);
        prop_assert_eq!(mem.rows(), &universe);

        for text in &queries {
            // Random queries include ones the parser refuses (NOT alone).
            let Ok(q) = Query::parse(text) else { continue };
            let scan: RoaringBitmap = rows.iter().filter(|(_, d)| q.matches(d)).map(|(r, _)| *r).collect();
            let part_rows = part.search(&q).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mem_rows = mem.search(&q);
            for (name, candidates) in [("part", &part_rows), ("mem", &mem_rows)] {
                prop_assert!(candidates.is_subset(&universe), "{} {:?}: rows never added", name, text);
                prop_assert!(scan.is_subset(candidates), "{} {:?} lost {:?}", name, text, &scan - candidates);
                let answer: RoaringBitmap = candidates.iter().filter(|r| q.matches(&rows[r])).collect();
                prop_assert_eq!(&answer, &scan, "{} {:?}", name, text);
            }
            // A hit always has something to show, inside its fragment.
            for row in &scan {
                let hs = q.highlights(&rows[&row]);
                prop_assert!(!hs.is_empty(), "{:?} row {}: no highlight", text, row);
                for h in &hs {
                    for &(s, e) in &h.ranges {
                        prop_assert!(s < e && h.fragment.get(s..e).is_some(), "{:?}: range {}..{} of {:?}", text, s, e, h.fragment);
                    }
                }
            }
        }
    }
}

/// ASCII values (a mix of cases, connectors and numbers), which the quick
/// rejection reads without tokenizing.
fn ascii_doc() -> impl Strategy<Value = Vec<(Field, String)>> {
    let ascii: Vec<&str> = VOCAB.iter().copied().filter(|w| w.is_ascii()).collect();
    let seps: Vec<&str> = SEPARATORS.iter().copied().filter(|s| s.is_ascii()).collect();
    let ascii_value = prop::collection::vec((prop::sample::select(ascii), prop::sample::select(seps)), 0..12)
        .prop_map(|words| words.into_iter().flat_map(|(w, s)| [w, s]).collect::<String>());
    prop::collection::vec((field(), prop_oneof![4 => ascii_value, 1 => value()]), 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The quick rejection never rejects a match: `matches` (which tries it
    /// first) agrees with the full evaluation behind `highlights`.
    #[test]
    fn a_quick_rejection_never_loses_a_match(values in ascii_doc(), queries in prop::collection::vec(query(), 1..8)) {
        let doc = as_doc(&values);
        for text in &queries {
            let Ok(q) = Query::parse(text) else { continue };
            let full = !q.highlights(&doc).is_empty();
            prop_assert!(q.may_match(&doc) || !full, "{:?} rejected {:?}", text, doc);
            prop_assert_eq!(q.matches(&doc), full, "{:?} on {:?}", text, doc);
        }
    }
}
