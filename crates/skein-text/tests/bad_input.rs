//! Bad input: damaged index bundles are refused at open, never a panic; a
//! resealed bundle with a damaged table of contents is an error too; query
//! syntax errors name their position (random queries never panic the parser).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use proptest::prelude::*;
use skein_text::{Field, PartTextIndex, PartTextIndexBuilder, Query, TextError};

/// A small real bundle, built once.
fn bundle() -> &'static [u8] {
    static BUNDLE: OnceLock<Vec<u8>> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let mut b = PartTextIndexBuilder::new().unwrap_or_else(|e| panic!("{e}"));
        let docs: [&[(Field, &str)]; 3] = [
            &[(Field::Body, "connection refused by db.query PoolTimeout")],
            &[
                (Field::Message, "goroutine 17 [running] 東京都"),
                (Field::Name, "HTTPServer"),
            ],
            &[(Field::Payload, "You are a helpful assistant")],
        ];
        for (row, doc) in docs.iter().enumerate() {
            // One row per block of the index: candidates are exact here.
            b.add(row as u32 * skein_text::BLOCK_ROWS, doc)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        b.finish().unwrap_or_else(|e| panic!("{e}"))
    })
}

const FOOTER_LEN: usize = 36;

/// Recomputes the checksum, as a writer that damaged the bytes before
/// sealing them would have.
fn reseal(bytes: &mut [u8]) {
    let len = bytes.len();
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..len - 16]);
    bytes[len - 16..len - 8].copy_from_slice(&sum.to_le_bytes());
}

/// Opens and, if that succeeds, searches: neither may panic.
fn open_and_search(bytes: Vec<u8>) -> Result<(), TextError> {
    let q = Query::parse("connection OR pool* OR \"goroutine 17\" OR -x 東京").unwrap_or_else(|e| panic!("{e}"));
    let ix = PartTextIndex::open(bytes)?;
    ix.search(&q)?;
    Ok(())
}

#[test]
fn the_bundle_opens_and_answers() {
    let ix = PartTextIndex::open(bundle().to_vec()).unwrap_or_else(|e| panic!("{e}"));
    let q = Query::parse("pool").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ix.search(&q).map(|r| r.iter().collect::<Vec<_>>()).ok(), Some(vec![0]));
    assert!(open_and_search(bundle().to_vec()).is_ok());
}

#[test]
fn empty_and_short_inputs_are_errors() {
    for n in [0, 1, 8, FOOTER_LEN - 1, FOOTER_LEN] {
        assert!(PartTextIndex::open(vec![0u8; n]).is_err(), "{n} zero bytes");
    }
    let b = bundle();
    assert!(PartTextIndex::open(b[..b.len() - 1].to_vec()).is_err());
    assert!(PartTextIndex::open(b[1..].to_vec()).is_err());
    // A different version, resealed, is refused by name.
    let mut v = b.to_vec();
    let at = v.len() - 20;
    v[at] = 9;
    reseal(&mut v);
    assert!(matches!(PartTextIndex::open(v), Err(TextError::Version(9))));
}

#[test]
fn an_empty_index_opens() {
    let b = PartTextIndexBuilder::new()
        .and_then(|b| b.finish())
        .unwrap_or_else(|e| panic!("{e}"));
    let ix = PartTextIndex::open(b).unwrap_or_else(|e| panic!("{e}"));
    let q = Query::parse("anything").unwrap_or_else(|e| panic!("{e}"));
    assert!(ix.search(&q).map(|r| r.is_empty()).unwrap_or(false));
}

#[derive(Debug, Clone)]
enum Damage {
    Flip { at: usize, bit: u8 },
    Truncate { len: usize },
    Insert { at: usize, byte: u8 },
    Overwrite { at: usize, bytes: Vec<u8> },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        any::<usize>().prop_map(|len| Damage::Truncate { len }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Damage::Insert { at, byte }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Damage::Overwrite { at, bytes }),
    ]
}

/// Applies `d`; false if it left the bytes unchanged.
fn apply(bytes: &mut Vec<u8>, d: &Damage) -> bool {
    let before = bytes.clone();
    match d {
        Damage::Flip { at, bit } => {
            let i = at % bytes.len();
            bytes[i] ^= 1 << bit;
        }
        Damage::Truncate { len } => bytes.truncate(len % bytes.len()),
        Damage::Insert { at, byte } => bytes.insert(at % (bytes.len() + 1), *byte),
        Damage::Overwrite { at, bytes: new } => {
            let i = at % bytes.len();
            let n = new.len().min(bytes.len() - i);
            bytes[i..i + n].copy_from_slice(&new[..n]);
        }
    }
    *bytes != before
}

/// Where the table of contents starts (from the footer).
fn toc_start(bytes: &[u8]) -> usize {
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    let mut off = [0u8; 8];
    off.copy_from_slice(&footer[..8]);
    u64::from_le_bytes(off) as usize
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn damaged_bundles_are_refused_never_a_panic(d in damage()) {
        let mut bytes = bundle().to_vec();
        prop_assume!(apply(&mut bytes, &d));
        let outcome = catch_unwind(AssertUnwindSafe(|| PartTextIndex::open(bytes).map(|_| ())));
        match outcome {
            Ok(r) => prop_assert!(r.is_err(), "{:?} was accepted", d),
            Err(_) => prop_assert!(false, "{:?} panicked", d),
        }
    }

    /// Damage to the table of contents or footer fields that a checksum
    /// would not catch (resealed): an error or a working index, never a panic.
    #[test]
    fn resealed_damage_to_the_toc_is_an_error_never_a_panic(at in any::<usize>(), byte in any::<u8>()) {
        let mut bytes = bundle().to_vec();
        let start = toc_start(&bytes);
        let end = bytes.len() - 16;
        let i = start + at % (end - start);
        prop_assume!(bytes[i] != byte);
        bytes[i] = byte;
        reseal(&mut bytes);
        let outcome = catch_unwind(AssertUnwindSafe(|| open_and_search(bytes)));
        prop_assert!(outcome.is_ok(), "byte {} of the TOC set to {} panicked", i, byte);
    }

    #[test]
    fn any_query_text_parses_or_names_a_position(text in "[ a-zA-Z0-9():*\"\\-_.東京]{0,24}") {
        match Query::parse(&text) {
            Ok(q) => {
                let _ = q.matches(&[(Field::Body, "a b 東京 x-y")]);
            }
            Err(e) => {
                prop_assert!(e.position <= text.len(), "{:?}: {}", text, e);
                prop_assert!(text.is_char_boundary(e.position));
            }
        }
    }
}

/// Every byte of tantivy's files changed in turn and the bundle resealed
/// (damage the checksum cannot see): tantivy panics on some of these, which
/// must come back as an error.
#[test]
fn resealed_damage_to_tantivy_files_never_panics() {
    let b = bundle();
    for i in 0..toc_start(b) {
        let mut bytes = b.to_vec();
        bytes[i] ^= 0x5a;
        reseal(&mut bytes);
        let outcome = catch_unwind(AssertUnwindSafe(|| open_and_search(bytes)));
        assert!(outcome.is_ok(), "byte {i} of the bundle changed: a panic escaped");
    }
}

#[test]
fn query_errors_name_their_position() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        ("NOT timeout", 0),
        ("-retry -timeout", 0),
        ("error OR -retry", 9),
        ("\"connection refused", 0),
        ("timeout AND (pool OR db", 12),
        ("timeout)", 7),
        ("host:db1", 0),
        ("timeout AND", 8),
        ("東京 \"未完", 7),
    ];
    for &(q, position) in cases {
        match Query::parse(q) {
            Ok(_) => panic!("{q:?} parsed"),
            Err(e) => {
                assert_eq!(e.position, position, "{q:?}: {e}");
                assert_eq!(e.to_string(), format!("at position {position}: {}", e.message));
            }
        }
    }
}
