//! Merging parts' text indexes into the index of the part compaction made
//! of them, instead of tokenizing every row again.
//!
//! Every document keeps the number it was written with, counted across
//! the inputs' segments in order. What changes is how those numbers read:
//! each input's [sources](crate::sources) carry over, their rows carried
//! through the input's [`RowMap`], and the links of shared texts are
//! carried row by row. A row dropped by the merge (a duplicate) is gone
//! from every source's rows, so candidates stay a superset of the hits and
//! never name a row the part does not hold.
//!
//! The inputs' tantivy segments are carried into the merged index as they
//! are, bytes copied: a segment's documents do not depend on which part
//! holds it. Only runs of adjacent small segments are merged into one by
//! tantivy (its segment merge: postings concatenated, term dictionaries
//! rebuilt, nothing re-tokenized), and all of them when the index would
//! otherwise hold too many ([`SegmentPolicy`]). Merging every segment at
//! every compaction rebuilt each term dictionary at every level a row
//! climbed: on 10M log records, most of what full text added to
//! compaction (docs/text.md has the figures). A query reads any number of
//! segments; it looks a term up only in those whose documents can reach
//! its window.
//!
//! tantivy stacks the segments' documents in the order given when the
//! index has no sort field (ours has none); a merged run's row numbers are
//! checked against its inputs' in that order, so a tantivy that did
//! otherwise would fail the merge (and the part's index be rebuilt or
//! skipped), never answer wrongly.

use roaring::RoaringBitmap;
use tantivy::directory::RamDirectory;
use tantivy::index::SegmentReader;

use crate::TextError;
use crate::bundle::BundleDirectory;
use crate::links::Links;
use crate::part::{self, PartTextIndex, PartTextIndexBuilder, ROW_FIELD, Segment};
use crate::rowmap::{RowMap, carry};

impl PartTextIndex {
    /// The index of a part merged from parts with the indexes `inputs`, in
    /// order, each with what the merge did to its rows. Returns the bytes
    /// of the merged part's index file.
    ///
    /// Memory: the merged index (as a build holds it), plus 4 bytes per
    /// row of one input at a time (its row map as a table).
    pub fn merge(inputs: &[(&PartTextIndex, &RowMap)]) -> Result<Vec<u8>, TextError> {
        PartTextIndex::merge_with(inputs, SegmentPolicy::default())
    }

    /// [`PartTextIndex::merge`], carrying the inputs' segments by `policy`.
    pub fn merge_with(inputs: &[(&PartTextIndex, &RowMap)], policy: SegmentPolicy) -> Result<Vec<u8>, TextError> {
        part::guarded(|| merge(inputs, policy))
    }
}

/// Which of the inputs' segments a merge carries as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentPolicy {
    /// A segment of at least this many documents (blocks of 32 rows, or
    /// shared texts) is carried as it is; runs of smaller adjacent ones
    /// are merged into one.
    pub keep_docs: u32,
    /// A merged index holds at most this many segments: past it, all are
    /// merged into one (a query looks a term up in each segment its
    /// window reaches).
    pub max_segments: usize,
}

impl Default for SegmentPolicy {
    /// Keeps a segment of 1,024 documents (32,768 rows in blocks) or
    /// more, up to 64 segments: the small segments merged are those of
    /// small flushes (a hot tier frozen by age, a quiet signal) and of
    /// parts' few shared texts.
    fn default() -> SegmentPolicy {
        SegmentPolicy {
            keep_docs: 1024,
            max_segments: 64,
        }
    }
}

fn merge(inputs: &[(&PartTextIndex, &RowMap)], policy: SegmentPolicy) -> Result<Vec<u8>, TextError> {
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
    let Some(first) = inputs.first() else {
        return PartTextIndexBuilder::empty(&rows, &links, &sources);
    };
    let planned = plan(inputs, policy)?;
    if planned.is_empty() {
        return PartTextIndexBuilder::empty(&rows, &links, &sources);
    }
    let mut metas = first.0.index.load_metas()?;
    metas.segments.clear();
    let mut files = Vec::new();
    for piece in planned {
        match piece {
            Planned::Kept(segment) => {
                let mut one = metas.clone();
                one.segments = vec![segment.tantivy.meta().clone()];
                part::segment_files(segment.files, &one, &mut files)?;
                metas.segments.extend(one.segments);
            }
            Planned::Merged(run) => {
                let ram = RamDirectory::create();
                let segments: Vec<tantivy::Segment> = run.iter().map(|s| s.tantivy.clone()).collect();
                let alive = vec![None; segments.len()];
                let settings = first.0.index.settings().clone();
                let merged = tantivy::indexer::merge_filtered_segments(&segments, settings, alive, ram.clone())?;
                check_order(&merged, run.iter().map(|s| s.ours))?;
                let one = merged.load_metas()?;
                part::segment_files(&ram, &one, &mut files)?;
                metas.segments.extend(one.segments);
            }
        }
    }
    let docs = part::documents(&metas)?;
    if docs != docs_before {
        return Err(TextError::Corrupt(format!(
            "the merged index has {docs} documents, its inputs {docs_before}"
        )));
    }
    files.insert(0, part::meta_file(&metas)?);
    part::write_bundle(files, &rows, &links, &sources)
}

/// A segment of the merged index.
enum Planned<'a> {
    /// An input's segment, carried as it is from its bundle's files.
    Kept(InputSegment<'a>),
    /// A run of adjacent inputs' segments, merged into one.
    Merged(Vec<InputSegment<'a>>),
}

/// A segment of an input: tantivy's handle, what a search reads of it,
/// and the files of the bundle that holds it.
#[derive(Clone)]
struct InputSegment<'a> {
    tantivy: tantivy::Segment,
    ours: &'a Segment,
    files: &'a BundleDirectory,
}

/// The segments of the index merged from `inputs`, in order: every
/// segment with documents, the small ones merged in runs.
fn plan<'a>(inputs: &[(&'a PartTextIndex, &RowMap)], policy: SegmentPolicy) -> Result<Vec<Planned<'a>>, TextError> {
    let mut all = Vec::new();
    for (ix, _) in inputs {
        let segments = ix.index.searchable_segments()?;
        if segments.len() != ix.segments.len() {
            return Err(TextError::Corrupt("an index whose segments changed while open".into()));
        }
        for (tantivy, ours) in segments.into_iter().zip(&ix.segments) {
            if ours.max_doc > 0 {
                all.push(InputSegment {
                    tantivy,
                    ours,
                    files: &ix.files,
                });
            }
        }
    }
    // A segment is named by its id in the merged index: were one in two
    // inputs (never, short of a part copied), carrying both would collide.
    let mut ids = std::collections::HashSet::new();
    let unique = all.iter().all(|s| ids.insert(s.tantivy.id()));
    let mut planned = Vec::new();
    let mut run = Vec::new();
    let end_run = |run: &mut Vec<InputSegment<'a>>, planned: &mut Vec<Planned<'a>>| match run.len() {
        0 => {}
        1 => planned.extend(run.pop().map(Planned::Kept)),
        _ => planned.push(Planned::Merged(std::mem::take(run))),
    };
    for segment in all.iter().cloned() {
        if segment.ours.max_doc >= policy.keep_docs {
            end_run(&mut run, &mut planned);
            planned.push(Planned::Kept(segment));
        } else {
            run.push(segment);
        }
    }
    end_run(&mut run, &mut planned);
    if !unique || planned.len() > policy.max_segments {
        return Ok(match all.len() {
            0 => Vec::new(),
            _ => vec![Planned::Merged(all)],
        });
    }
    Ok(planned)
}

/// The rows of `rows` that survive, as output rows. The map is monotonic,
/// so they come out sorted and are appended rather than inserted.
fn carried(rows: &RoaringBitmap, table: &[u32]) -> Result<RoaringBitmap, TextError> {
    RoaringBitmap::from_sorted_iter(rows.iter().filter_map(|r| carry(table, r)))
        .map_err(|_| TextError::Corrupt("a row map that is not monotonic".into()))
}

/// The merged documents are the run's in order: their numbers (blocks
/// and shared texts' keys) match one for one.
fn check_order<'a>(merged: &tantivy::Index, run: impl Iterator<Item = &'a Segment>) -> Result<(), TextError> {
    let mut want = run.flat_map(|seg| (0..seg.max_doc).map(move |d| seg.rows.get_val(d)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Field, Query};

    /// A part's index of `rows` rows, `word` in each, in one segment.
    fn part(rows: u32, word: &str) -> PartTextIndex {
        let mut b = PartTextIndexBuilder::new().unwrap();
        for row in 0..rows {
            b.add(row, &[(Field::Body, &format!("{word} row{}", row % 7))]).unwrap();
        }
        PartTextIndex::open(b.finish().unwrap()).unwrap()
    }

    fn ids(ix: &PartTextIndex) -> Vec<tantivy::index::SegmentId> {
        ix.index.searchable_segments().unwrap().iter().map(|s| s.id()).collect()
    }

    /// Rows of `inputs` appended one after another.
    fn appended(inputs: &[&PartTextIndex]) -> Vec<RowMap> {
        let mut out = 0;
        inputs
            .iter()
            .map(|ix| {
                let mut map = RowMap::new();
                for row in ix.rows() {
                    map.keep(row, out).unwrap();
                    out += 1;
                }
                map
            })
            .collect()
    }

    fn hits(ix: &PartTextIndex, q: &str) -> u64 {
        ix.search(&Query::parse(q).unwrap()).unwrap().len()
    }

    /// A big segment is carried as it is (the same segment, bytes copied),
    /// a run of small ones is merged into one, and the merged index
    /// answers for every input's rows.
    #[test]
    fn big_segments_are_carried_and_runs_of_small_ones_merged() {
        let policy = SegmentPolicy {
            keep_docs: 64,
            max_segments: 8,
        };
        // 64 and 96 documents; 10, 20 and 3.
        let (big, small1, small2, big2, small3) = (
            part(64 * 32, "alpha"),
            part(320, "beta"),
            part(640, "gamma"),
            part(96 * 32, "delta"),
            part(96, "epsilon"),
        );
        let inputs = [&big, &small1, &small2, &big2, &small3];
        let maps = appended(&inputs);
        let pairs: Vec<_> = inputs.iter().copied().zip(&maps).collect();
        let merged = PartTextIndex::open(PartTextIndex::merge_with(&pairs, policy).unwrap()).unwrap();
        let got = ids(&merged);
        assert_eq!(got.len(), 4, "big, small1+small2, big2, small3");
        assert_eq!(got[0], ids(&big)[0]);
        assert_eq!(got[2], ids(&big2)[0]);
        assert_eq!(got[3], ids(&small3)[0], "a run of one is carried");
        assert!(!ids(&small1).contains(&got[1]) && !ids(&small2).contains(&got[1]));
        for (word, rows) in [
            ("alpha", 2048),
            ("beta", 320),
            ("gamma", 640),
            ("delta", 3072),
            ("epsilon", 96),
        ] {
            assert_eq!(hits(&merged, word), rows, "{word}");
        }
        // Merged again, the carried segments are carried again.
        let maps = appended(&[&merged, &big]);
        let again = PartTextIndex::merge_with(&[(&merged, &maps[0]), (&big, &maps[1])], policy);
        // `big`'s segment is in both inputs: carrying both would name one
        // segment twice, so every segment is merged into one.
        let again = PartTextIndex::open(again.unwrap()).unwrap();
        assert_eq!(again.segments(), 1);
        assert_eq!(hits(&again, "alpha"), 2 * 2048);
        assert_eq!(hits(&again, "delta"), 3072);
    }

    /// Past `max_segments`, every segment is merged into one.
    #[test]
    fn too_many_segments_are_merged_into_one() {
        let parts: Vec<PartTextIndex> = (0..5).map(|p| part(64 * 32, &format!("w{p}"))).collect();
        let inputs: Vec<&PartTextIndex> = parts.iter().collect();
        let maps = appended(&inputs);
        let pairs: Vec<_> = inputs.iter().copied().zip(&maps).collect();
        for (max_segments, want) in [(5, 5), (4, 1)] {
            let policy = SegmentPolicy {
                keep_docs: 64,
                max_segments,
            };
            let merged = PartTextIndex::open(PartTextIndex::merge_with(&pairs, policy).unwrap()).unwrap();
            assert_eq!(merged.segments(), want, "at most {max_segments}");
            for p in 0..5 {
                assert_eq!(hits(&merged, &format!("w{p}")), 2048);
            }
        }
    }
}
