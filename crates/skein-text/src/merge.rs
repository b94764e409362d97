//! Merging parts' text indexes into the index of the part compaction made
//! of them, instead of tokenizing every row again.
//!
//! tantivy merges the inputs' segments into one (its own segment merge:
//! postings are concatenated, nothing is re-tokenized), and every document
//! keeps the number it was written with. What changes is how those numbers
//! read: each input's [sources](crate::sources) carry over, their rows
//! carried through the input's [`RowMap`], and the links of shared texts
//! are carried row by row. A query then opens one segment however many
//! parts were merged, and a row dropped by the merge (a duplicate) is gone
//! from every source's rows, so candidates stay a superset of the hits and
//! never name a row the part does not hold.
//!
//! tantivy stacks the segments' documents in the order given when the
//! index has no sort field (ours has none); the merged row numbers are
//! checked against the inputs' in that order, so a tantivy that did
//! otherwise would fail the merge (and the part's index be rebuilt or
//! skipped), never answer wrongly.

use roaring::RoaringBitmap;
use tantivy::directory::RamDirectory;
use tantivy::index::SegmentReader;

use crate::TextError;
use crate::links::Links;
use crate::part::{self, PartTextIndex, PartTextIndexBuilder, ROW_FIELD};
use crate::rowmap::{RowMap, carry};

impl PartTextIndex {
    /// The index of a part merged from parts with the indexes `inputs`, in
    /// order, each with what the merge did to its rows. Returns the bytes
    /// of the merged part's index file.
    ///
    /// Memory: the merged index (as a build holds it), plus 4 bytes per
    /// row of one input at a time (its row map as a table).
    pub fn merge(inputs: &[(&PartTextIndex, &RowMap)]) -> Result<Vec<u8>, TextError> {
        part::guarded(|| merge(inputs))
    }
}

fn merge(inputs: &[(&PartTextIndex, &RowMap)]) -> Result<Vec<u8>, TextError> {
    let too_large = || TextError::TooLarge("documents in a merged index");
    let mut rows = RoaringBitmap::new();
    let mut links = Links::default();
    let mut sources = Vec::new();
    let mut docs_before: u32 = 0;
    for (ix, map) in inputs {
        let table = map.dense();
        let keys_before = u32::try_from(links.len()).map_err(|_| TextError::TooLarge("shared texts"))?;
        for s in &ix.sources {
            sources.push(s.carried(&ix.rows, &table, docs_before, keys_before)?);
        }
        for set in ix.links.sets() {
            links.push(carried(set, &table)?)?;
        }
        rows |= carried(&ix.rows, &table)?;
        let docs = ix.segments.iter().try_fold(0u32, |n, s| n.checked_add(s.max_doc));
        docs_before = docs.and_then(|d| docs_before.checked_add(d)).ok_or_else(too_large)?;
    }
    let indices: Vec<tantivy::Index> = inputs
        .iter()
        .filter(|(ix, _)| ix.segments.iter().any(|s| s.max_doc > 0))
        .map(|(ix, _)| ix.index.clone())
        .collect();
    if indices.is_empty() {
        return PartTextIndexBuilder::empty(&rows, &links, &sources);
    }
    let ram = RamDirectory::create();
    let merged = tantivy::indexer::merge_indices(&indices, ram.clone())?;
    check_order(&merged, inputs)?;
    let (files, docs) = part::tantivy_files(&ram, &merged)?;
    if docs != docs_before {
        return Err(TextError::Corrupt(format!(
            "the merged index has {docs} documents, its inputs {docs_before}"
        )));
    }
    part::write_bundle(files, &rows, &links, &sources)
}

/// The rows of `rows` that survive, as output rows. The map is monotonic,
/// so they come out sorted and are appended rather than inserted.
fn carried(rows: &RoaringBitmap, table: &[u32]) -> Result<RoaringBitmap, TextError> {
    RoaringBitmap::from_sorted_iter(rows.iter().filter_map(|r| carry(table, r)))
        .map_err(|_| TextError::Corrupt("a row map that is not monotonic".into()))
}

/// The merged documents are the inputs' in order: their numbers (blocks
/// and shared texts' keys) match one for one.
fn check_order(merged: &tantivy::Index, inputs: &[(&PartTextIndex, &RowMap)]) -> Result<(), TextError> {
    let mut want = inputs
        .iter()
        .flat_map(|(ix, _)| ix.segments.iter())
        .flat_map(|seg| (0..seg.max_doc).map(move |d| seg.rows.get_val(d)));
    let reordered = || TextError::Corrupt("tantivy's merge did not keep the documents in order".into());
    for segment in merged.searchable_segments()? {
        let reader = SegmentReader::open(&segment)?;
        let column = reader.fast_fields().u64(ROW_FIELD)?;
        for d in 0..reader.max_doc() {
            if want.next() != Some(column.values.get_val(d)) {
                return Err(reordered());
            }
        }
    }
    match want.next() {
        Some(_) => Err(reordered()),
        None => Ok(()),
    }
}
