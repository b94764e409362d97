//! The *sources* of a part's text index: which documents came from which
//! original index, and how that index's row numbers read in this part.
//!
//! A flush part's index has one source, whose block numbers are the part's
//! own rows (block `b` is rows `32b..32b+32`). When parts are merged their
//! indexes are merged as they are (tantivy's segment merge, which stacks
//! documents in segment order) and each input's sources carry over with
//! their documents: a document keeps the block number it was written with,
//! in its source's rows, and the source says where those rows are now.
//!
//! Every merge keeps the relative order of each input's rows (see
//! [`RowMap`](crate::RowMap)), so by induction the map from an original
//! source row to the part's row is monotonic, and two things describe it
//! exactly: `out`, the part's rows that came from the source, and
//! `starts[b]`, the first of them that came from a source row at or after
//! block `b`'s first. Block `b`'s rows are then `out ∩ [starts[b],
//! starts[b + 1])`: a range intersection, however many merges away.
//!
//! Shared texts keep their documents too: their keys are offset by the
//! keys of the inputs before (`keys`), and the links, always in the part's
//! own rows, are carried row by row at each merge.
//!
//! Encoded as one bundle member, little-endian: `u32 count`, then per
//! source `u32 first doc, u32 end doc, u32 key offset, u8 kind`; kind 0 is
//! the part's own rows, kind 1 is followed by `u32 length, out (roaring),
//! u32 count, starts (u32 each)`.

use std::ops::Range;

use roaring::RoaringBitmap;

use crate::TextError;
use crate::blocks::BLOCK_ROWS;
use crate::rowmap::carry;

/// One source's documents and how its rows read in this part.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Source {
    /// Its documents, numbered across the index's segments in order.
    pub(crate) docs: Range<u32>,
    /// Added to its shared texts' keys.
    pub(crate) keys: u32,
    pub(crate) rows: SourceRows,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SourceRows {
    /// Block numbers are this part's rows.
    Own,
    /// See the module documentation.
    Carried { out: RoaringBitmap, starts: Vec<u32> },
}

impl Source {
    /// The span of the part's rows that block `block` of this source names
    /// (for a carried source, the rows of `out` in it); `None` past the
    /// source's blocks.
    pub(crate) fn block_span(&self, block: u32) -> Option<Range<u32>> {
        match &self.rows {
            SourceRows::Own => {
                let start = block.saturating_mul(BLOCK_ROWS);
                Some(start..start.saturating_add(BLOCK_ROWS))
            }
            SourceRows::Carried { starts, .. } => {
                let b = block as usize;
                Some(*starts.get(b)?..*starts.get(b + 1)?)
            }
        }
    }

    /// Adds the rows of `blocks` (sorted) that lie in `window` to `rows`
    /// (a superset when the source is the part's own: rows past the part's
    /// are removed later). The work is in proportion to the rows added, so
    /// a query that needs only the newest rows does not pay for the rest.
    pub(crate) fn block_rows(&self, blocks: &[u32], rows: &mut RoaringBitmap, window: &Range<u32>) {
        let clip = |(from, to): (u32, u32)| {
            let (from, to) = (from.max(window.start), to.min(window.end));
            (from < to).then_some((from, to))
        };
        match &self.rows {
            SourceRows::Own => insert_runs(
                rows,
                blocks.iter().filter_map(|&b| {
                    let span = self.block_span(b)?;
                    clip((span.start, span.end))
                }),
            ),
            SourceRows::Carried { out, .. } => {
                // Ranges stop at the source's last row (damaged starts
                // could name any row: a range to u32::MAX would be 4G rows).
                let end = out.max().map_or(0, |m| m.saturating_add(1));
                let mut ranges = RoaringBitmap::new();
                let bounds = blocks.iter().filter_map(|&b| {
                    let span = self.block_span(b)?;
                    clip((span.start.min(end), span.end.min(end)))
                });
                insert_runs(&mut ranges, bounds);
                ranges &= out;
                *rows |= ranges;
            }
        }
    }

    /// This source as one of a merged part's: its documents and keys
    /// moved by `docs_before` and `keys_before` (those of the inputs
    /// before), its rows carried through `table` (a
    /// [`RowMap::dense`](crate::RowMap) of its part; `universe` is that
    /// part's rows, for a source of the part's own).
    pub(crate) fn carried(
        &self,
        universe: &RoaringBitmap,
        table: &[u32],
        docs_before: u32,
        keys_before: u32,
    ) -> Result<Source, TextError> {
        let too_many = || TextError::TooLarge("documents or shared texts in a merged index");
        let docs = self.docs.start.checked_add(docs_before).ok_or_else(too_many)?
            ..self.docs.end.checked_add(docs_before).ok_or_else(too_many)?;
        let keys = self.keys.checked_add(keys_before).ok_or_else(too_many)?;
        let (from, blocks): (&RoaringBitmap, Box<dyn Fn(usize) -> u32 + '_>) = match &self.rows {
            SourceRows::Own => (universe, Box::new(|b| (b as u32).saturating_mul(BLOCK_ROWS))),
            SourceRows::Carried { out, starts } => (out, Box::new(|b| starts.get(b).copied().unwrap_or(u32::MAX))),
        };
        let count = match &self.rows {
            SourceRows::Own => universe.max().map_or(0, |m| m / BLOCK_ROWS + 1) as usize,
            SourceRows::Carried { starts, .. } => starts.len().saturating_sub(1),
        };
        let mut out = RoaringBitmap::new();
        // The map is monotonic, so rows are appended in order; one that is
        // not would be lost from the index, so it fails the merge instead.
        let mut append = |to: u32| {
            out.push(to)
                .then_some(())
                .ok_or_else(|| TextError::Corrupt("a row map that is not monotonic".into()))
        };
        let mut starts = Vec::with_capacity(count + 1);
        let mut moved = from.iter().filter_map(|r| carry(table, r).map(|to| (r, to))).peekable();
        for b in 0..count {
            let first = blocks(b);
            while let Some(&(r, to)) = moved.peek() {
                if r >= first {
                    break;
                }
                append(to)?;
                moved.next();
            }
            starts.push(moved.peek().map_or(NONE_LATER, |&(_, to)| to));
        }
        for (_, to) in moved {
            append(to)?;
        }
        starts.push(NONE_LATER);
        // No later row survived: the range starts past the source's last
        // row, and is empty.
        let end = out.max().map_or(0, |m| m.saturating_add(1));
        for s in starts.iter_mut().rev() {
            if *s != NONE_LATER {
                break;
            }
            *s = end;
        }
        Ok(Source {
            docs,
            keys,
            rows: SourceRows::Carried { out, starts },
        })
    }
}

/// Inserts the ranges `from..to` (sorted by `from`), joining those that
/// touch: a common word's blocks are most of a part, and one insertion per
/// run costs far less than one per block.
fn insert_runs(rows: &mut RoaringBitmap, ranges: impl Iterator<Item = (u32, u32)>) {
    let mut run: Option<(u32, u32)> = None;
    for (from, to) in ranges {
        match &mut run {
            Some((_, end)) if from <= *end => *end = (*end).max(to),
            _ => {
                if let Some((a, b)) = run.replace((from, to)) {
                    rows.insert_range(a..b);
                }
            }
        }
    }
    if let Some((a, b)) = run {
        rows.insert_range(a..b);
    }
}

/// A placeholder in `starts` while they are carried.
const NONE_LATER: u32 = u32::MAX;

pub(crate) fn encode(sources: &[Source]) -> Result<Vec<u8>, TextError> {
    let mut out = Vec::new();
    let count = u32::try_from(sources.len()).map_err(|_| TextError::TooLarge("sources"))?;
    out.extend_from_slice(&count.to_le_bytes());
    for s in sources {
        out.extend_from_slice(&s.docs.start.to_le_bytes());
        out.extend_from_slice(&s.docs.end.to_le_bytes());
        out.extend_from_slice(&s.keys.to_le_bytes());
        match &s.rows {
            SourceRows::Own => out.push(0),
            SourceRows::Carried { out: rows, starts } => {
                out.push(1);
                let len = u32::try_from(rows.serialized_size()).map_err(|_| TextError::TooLarge("a source"))?;
                out.extend_from_slice(&len.to_le_bytes());
                rows.serialize_into(&mut out)?;
                let n = u32::try_from(starts.len()).map_err(|_| TextError::TooLarge("a source"))?;
                out.extend_from_slice(&n.to_le_bytes());
                for s in starts {
                    out.extend_from_slice(&s.to_le_bytes());
                }
            }
        }
    }
    Ok(out)
}

/// Decodes sources and checks them against the index: documents in order,
/// none past `docs`, keys within `keys`.
pub(crate) fn decode(bytes: &[u8], docs: u32, keys: usize) -> Result<Vec<Source>, TextError> {
    let corrupt = |what: &str| TextError::Corrupt(format!("text index sources: {what}"));
    let mut rest = bytes;
    let mut take = |n: usize| -> Result<&[u8], TextError> {
        if rest.len() < n {
            return Err(corrupt("end of data"));
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    fn u32_of(b: &[u8]) -> u32 {
        b.first_chunk::<4>().map_or(0, |a| u32::from_le_bytes(*a))
    }
    let count = u32_of(take(4)?) as usize;
    // Each source takes at least 13 bytes.
    if count > bytes.len() / 13 {
        return Err(corrupt("count larger than the data"));
    }
    let mut sources = Vec::with_capacity(count);
    let mut next_doc = 0;
    for _ in 0..count {
        let start = u32_of(take(4)?);
        let end = u32_of(take(4)?);
        let key_offset = u32_of(take(4)?);
        if start < next_doc || end < start || end > docs || key_offset as usize > keys {
            return Err(corrupt("documents or keys out of range"));
        }
        next_doc = end;
        let rows = match take(1)?[0] {
            0 => SourceRows::Own,
            1 => {
                let len = u32_of(take(4)?) as usize;
                let out = RoaringBitmap::deserialize_from(take(len)?).map_err(|e| corrupt(&e.to_string()))?;
                let n = u32_of(take(4)?) as usize;
                let raw = take(n.checked_mul(4).ok_or_else(|| corrupt("starts"))?)?;
                let starts = raw.chunks_exact(4).map(u32_of).collect();
                SourceRows::Carried { out, starts }
            }
            _ => return Err(corrupt("unknown kind")),
        };
        sources.push(Source {
            docs: start..end,
            keys: key_offset,
            rows,
        });
    }
    if !rest.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(sources)
}

/// The index of the source holding document `doc`, searching from `from`
/// (documents are read in order); `None` when no source holds it.
pub(crate) fn source_of(sources: &[Source], doc: u32, from: usize) -> Option<usize> {
    let mut i = from;
    if sources.get(i).is_some_and(|s| s.docs.start > doc) {
        i = 0;
    }
    while let Some(s) = sources.get(i) {
        if s.docs.contains(&doc) {
            return Some(i);
        }
        if s.docs.start > doc {
            return None;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::rowmap::RowMap;

    /// Carries the rows of blocks through merges (random drops, random
    /// interleaving with other inputs) and compares with following each
    /// row by hand.
    fn merge_step(rows: u32, pattern: &[(bool, u8)]) -> (RowMap, Vec<Option<u32>>) {
        // Input rows in order; each is kept or not, with `gap` rows of
        // other inputs before it in the output.
        let mut map = RowMap::new();
        let mut naive = Vec::new();
        let mut out = 0u32;
        for r in 0..rows {
            let (keep, gap) = pattern
                .get(r as usize % pattern.len().max(1))
                .copied()
                .unwrap_or((true, 0));
            out += u32::from(gap % 3);
            if keep {
                map.keep(r, out).unwrap();
                naive.push(Some(out));
                out += 1;
            } else {
                naive.push(None);
            }
        }
        (map, naive)
    }

    proptest! {
        #[test]
        fn carried_blocks_are_the_rows_they_became(
            rows in 1..300u32,
            first in prop::collection::vec((prop::bool::weighted(0.8), any::<u8>()), 1..40),
            second in prop::collection::vec((prop::bool::weighted(0.8), any::<u8>()), 1..40),
        ) {
            let universe: RoaringBitmap = (0..rows).collect();
            let own = Source { docs: 0..3, keys: 0, rows: SourceRows::Own };
            let (m1, n1) = merge_step(rows, &first);
            let once = own.carried(&universe, &m1.dense(), 5, 2).unwrap();
            prop_assert_eq!(once.docs.clone(), 5..8);
            prop_assert_eq!(once.keys, 2);
            let mid_rows = n1.iter().flatten().max().map_or(0, |m| m + 1);
            let mid_universe: RoaringBitmap = n1.iter().flatten().copied().collect();
            let (m2, n2) = merge_step(mid_rows, &second);
            let twice = once.carried(&mid_universe, &m2.dense(), 0, 0).unwrap();
            for b in 0..rows.div_ceil(BLOCK_ROWS) + 1 {
                let want: RoaringBitmap = (b * BLOCK_ROWS..(b + 1) * BLOCK_ROWS)
                    .filter_map(|r| n1.get(r as usize).copied().flatten())
                    .filter_map(|m| n2.get(m as usize).copied().flatten())
                    .collect();
                let mut got = RoaringBitmap::new();
                twice.block_rows(&[b], &mut got, &(0..u32::MAX));
                prop_assert_eq!(got, want, "block {}", b);
            }
            let bytes = encode(std::slice::from_ref(&twice)).unwrap();
            prop_assert_eq!(decode(&bytes, 8, 2).unwrap(), vec![twice]);
        }
    }

    #[test]
    fn sources_are_found_by_document_and_damage_is_refused() {
        let s = |docs: Range<u32>| Source {
            docs,
            keys: 0,
            rows: SourceRows::Own,
        };
        let sources = vec![s(0..3), s(3..3), s(3..10), s(12..13)];
        assert_eq!(source_of(&sources, 0, 0), Some(0));
        assert_eq!(source_of(&sources, 4, 0), Some(2));
        assert_eq!(source_of(&sources, 4, 3), Some(2));
        assert_eq!(source_of(&sources, 1, 2), Some(0));
        assert_eq!(source_of(&sources, 11, 0), None);
        assert_eq!(source_of(&sources, 12, 1), Some(3));
        let bytes = encode(&sources).unwrap();
        assert_eq!(decode(&bytes, 13, 0).unwrap(), sources);
        assert!(decode(&bytes, 12, 0).is_err(), "documents past the index");
        assert!(decode(&bytes[..bytes.len() - 1], 13, 0).is_err());
        let mut unordered = encode(&[s(3..5), s(0..2)]).unwrap();
        assert!(decode(&unordered, 13, 0).is_err());
        unordered.push(0);
        assert!(decode(&unordered, 13, 0).is_err());
    }
}
