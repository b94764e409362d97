//! Merged parts' indexes against the naive model: parts built from random
//! rows are merged as compaction merges them (a time merge that interleaves
//! the inputs and drops some rows), twice over, and the merged index never
//! loses a row the naive model matches in the merged part, nor names a row
//! the part does not hold; and a window of its rows has exactly the
//! candidates of the whole index in that window. Whichever segments the
//! merge carries as they are and whichever it merges.

use proptest::prelude::*;
use roaring::RoaringBitmap;
use skein_text::{Field, PartTextIndex, PartTextIndexBuilder, Query, RowMap, SegmentPolicy};

const WORDS: &[&str] = &[
    "PoolTimeout",
    "connection_pool",
    "db.query",
    "timeout",
    "refused",
    "4bf92f3577b34da6",
    "東京都",
    "Straße",
    "retry",
    "error",
    "zebra",
    "quetzal",
];

const QUERIES: &[&str] = &[
    "pool",
    "timeout",
    "PoolTimeout",
    "connection_pool",
    "query",
    "refused",
    "東京",
    "strasse",
    "zebra",
    "quetzal",
    "retry AND NOT error",
    "\"connection refused\"",
    "body:zebra",
    "payload:quetzal",
    "name:retry OR message:timeout",
    "ze*",
    "payload:str*",
];

/// A row: its own values, and the shared texts (of its part) it links to.
#[derive(Debug, Clone)]
struct Row {
    own: Vec<(Field, String)>,
    shared: Vec<usize>,
}

/// A part as the model sees it: every row's values, shared ones included.
type Model = Vec<Vec<(Field, String)>>;

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..6).prop_map(|w| w.join(" "))
}

fn field() -> impl Strategy<Value = Field> {
    prop::sample::select(Field::ALL.to_vec())
}

fn row() -> impl Strategy<Value = Row> {
    (
        prop::collection::vec((field(), text()), 0..3),
        prop::collection::vec(0usize..3, 0..2),
    )
        .prop_map(|(own, shared)| Row { own, shared })
}

/// A part: its shared texts and rows.
fn part() -> impl Strategy<Value = (Vec<(Field, String)>, Vec<Row>)> {
    (
        prop::collection::vec((field(), text()), 3),
        prop::collection::vec(row(), 1..90),
    )
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn build(shared: &[(Field, String)], rows: &[Row]) -> Result<(PartTextIndex, Model), TestCaseError> {
    let mut b = PartTextIndexBuilder::new().map_err(fail)?;
    let mut keys = Vec::new();
    let mut model = Vec::new();
    for (row, r) in rows.iter().enumerate() {
        let own: Vec<(Field, &str)> = r.own.iter().map(|(f, t)| (*f, t.as_str())).collect();
        b.add(row as u32, &own).map_err(fail)?;
        for &s in &r.shared {
            // Shared texts are added when a row first needs them.
            while keys.len() <= s {
                let (f, t) = &shared[keys.len()];
                keys.push(b.add_shared(*f, t).map_err(fail)?);
            }
            b.link(row as u32, keys[s]).map_err(fail)?;
        }
        let mut all = r.own.clone();
        all.extend(r.shared.iter().map(|&s| shared[s].clone()));
        model.push(all);
    }
    let ix = PartTextIndex::open(b.finish().map_err(fail)?).map_err(fail)?;
    Ok((ix, model))
}

/// Merges `inputs` as a compaction would: `plan` says which input gives the
/// next row and whether that row survives.
fn merge(inputs: &[(PartTextIndex, Model)], plan: &[(usize, bool)]) -> Result<(PartTextIndex, Model), TestCaseError> {
    merge_with(inputs, plan, SegmentPolicy::default())
}

fn merge_with(
    inputs: &[(PartTextIndex, Model)],
    plan: &[(usize, bool)],
    policy: SegmentPolicy,
) -> Result<(PartTextIndex, Model), TestCaseError> {
    let mut maps = vec![RowMap::new(); inputs.len()];
    let mut next = vec![0usize; inputs.len()];
    let mut model = Vec::new();
    let mut steps = plan.iter().cycle();
    while next.iter().zip(inputs).any(|(n, (_, m))| *n < m.len()) {
        let (pick, keep) = *steps.next().unwrap_or(&(0, true));
        // The first input, from `pick` on, with rows left.
        let i = (0..inputs.len())
            .map(|k| (pick + k) % inputs.len())
            .find(|&i| next[i] < inputs[i].1.len())
            .unwrap_or(0);
        let row = next[i];
        next[i] += 1;
        if keep {
            maps[i].keep(row as u32, model.len() as u32).map_err(fail)?;
            model.push(inputs[i].1[row].clone());
        }
    }
    let pairs: Vec<(&PartTextIndex, &RowMap)> = inputs.iter().map(|(ix, _)| ix).zip(&maps).collect();
    let bytes = PartTextIndex::merge_with(&pairs, policy).map_err(fail)?;
    let ix = PartTextIndex::open(bytes).map_err(fail)?;
    prop_assert!(
        ix.segments() <= policy.max_segments.max(1),
        "{} segments",
        ix.segments()
    );
    Ok((ix, model))
}

fn check(ix: &PartTextIndex, model: &Model) -> Result<(), TestCaseError> {
    let universe: RoaringBitmap = (0..model.len() as u32).collect();
    prop_assert_eq!(ix.rows(), &universe);
    for text in QUERIES {
        let q = Query::parse(text).map_err(fail)?;
        let scan: RoaringBitmap = model
            .iter()
            .enumerate()
            .filter(|(_, d)| q.matches(&d.iter().map(|(f, t)| (*f, t.as_str())).collect::<Vec<_>>()))
            .map(|(r, _)| r as u32)
            .collect();
        let candidates = ix.search(&q).map_err(fail)?;
        prop_assert!(
            candidates.is_subset(&universe),
            "{:?}: rows the part does not hold",
            text
        );
        prop_assert!(scan.is_subset(&candidates), "{:?} lost {:?}", text, &scan - &candidates);
        // A window's candidates are exactly the whole part's in the window,
        // however the rows came through merges.
        let n = model.len() as u32;
        for window in [
            0..n,
            n / 3..2 * n / 3 + 1,
            n.saturating_sub(5)..n,
            n / 2..n / 2,
            1..u32::MAX,
        ] {
            let mut want = candidates.clone();
            want.remove_range(..window.start);
            want.remove_range(window.end..);
            let got = ix.search_within(&q, window.clone()).map_err(fail)?;
            prop_assert_eq!(got, want, "{:?} in {:?}", text, window);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn merged_indexes_never_lose_a_hit(
        parts in prop::collection::vec(part(), 3..5),
        plan in prop::collection::vec((0usize..4, prop::bool::weighted(0.85)), 1..60),
        plan2 in prop::collection::vec((0usize..4, prop::bool::weighted(0.85)), 1..60),
        // Segments of 0, 1 or 2 documents and up carried as they are; the
        // rest merged in runs, or all once there would be too many.
        keep_docs in 0u32..4,
        max_segments in 1usize..8,
    ) {
        let policy = SegmentPolicy { keep_docs, max_segments };
        let mut built = Vec::new();
        for (shared, rows) in &parts {
            built.push(build(shared, rows)?);
        }
        let last = built.pop().ok_or_else(|| fail("no parts"))?;
        let inputs = built.len();
        let first = merge_with(&built, &plan, policy)?;
        prop_assert_eq!(first.0.sources(), inputs);
        check(&first.0, &first.1)?;
        // A merged part merged again, beside a fresh one.
        let second = merge_with(&[first, last], &plan2, policy)?;
        prop_assert_eq!(second.0.sources(), inputs + 1);
        check(&second.0, &second.1)?;
    }
}

/// tantivy's merge stacks the documents of the segments in the order
/// given: the merge checks it and fails otherwise, so many inputs with
/// different documents merge, and each keeps its own rows.
#[test]
fn tantivy_stacks_merged_documents_in_order() {
    let mut inputs = Vec::new();
    for p in 0..12 {
        let rows: Vec<Row> = (0..40 + p * 7)
            .map(|r| Row {
                own: vec![(Field::Body, format!("part{p} row{r} common"))],
                shared: vec![],
            })
            .collect();
        inputs.push(build(&[], &rows).unwrap_or_else(|e| panic!("{e}")));
    }
    let plan: Vec<(usize, bool)> = (0..97).map(|i| (i * 5 % 12, i % 11 != 0)).collect();
    let (ix, model) = merge(&inputs, &plan).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ix.sources(), 12);
    for p in [0, 5, 11] {
        let q = Query::parse(&format!("part{p}")).unwrap_or_else(|e| panic!("{e}"));
        let want: RoaringBitmap = model
            .iter()
            .enumerate()
            .filter(|(_, d)| d[0].1.starts_with(&format!("part{p} ")))
            .map(|(r, _)| r as u32)
            .collect();
        let got = ix.search(&q).unwrap_or_else(|e| panic!("{e}"));
        // Blocks are 32 rows: exact here since each part's words are its own.
        assert_eq!(got, want, "part{p}");
    }
}

/// Parts without any text merge too (an index without documents).
#[test]
fn indexes_without_documents_merge() {
    let rows = vec![
        Row {
            own: vec![],
            shared: vec![],
        };
        10
    ];
    let a = build(&[], &rows).unwrap_or_else(|e| panic!("{e}"));
    let b = build(&[], &rows).unwrap_or_else(|e| panic!("{e}"));
    let (ix, model) = merge(&[a, b], &[(0, true), (1, false)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ix.rows().len(), model.len() as u64);
    let q = Query::parse("zebra").unwrap_or_else(|e| panic!("{e}"));
    assert!(ix.search(&q).unwrap_or_else(|e| panic!("{e}")).is_empty());
}
