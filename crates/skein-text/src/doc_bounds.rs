//! Which of a segment's documents can name rows in a window of the part's
//! rows, so a windowed search seeks past the postings of the others.
//!
//! A newest-first search narrows the part's newest few thousand rows first.
//! Reading a common word's whole posting list for that (every block of a
//! ten-million-row part) was most of the search; tantivy's skip list can
//! jump to a document without decoding the blocks before it, if the search
//! knows which documents it needs.
//!
//! Documents are numbered in the order they were written, which is mostly
//! the order of their rows (a flush adds rows in order; a merge stacks its
//! inputs' documents, each input's in its order). So the documents are cut
//! into chunks of [`CHUNK`], and each chunk keeps the least and the most of
//! the rows its documents name: a block's rows, or the rows linked to a
//! shared text. A window reads the chunks whose rows meet it. The bounds
//! are exact minima and maxima, so they hold however the rows are ordered;
//! the order only decides how much a window skips (a shared text linked
//! from old and new rows keeps its chunk in every window, and no other).

use std::ops::Range;

use tantivy::columnar::ColumnValues;

use crate::links::Links;
use crate::sources::{self, Source};

/// Documents per chunk: tantivy's posting blocks hold 128.
pub(crate) const CHUNK: u32 = 128;

/// Per chunk of a segment's documents, the rows they name.
#[derive(Debug, Clone, Default)]
pub(crate) struct DocBounds {
    /// Chunk `c` (documents `c * CHUNK..`, numbered within the segment)
    /// names rows in `rows[c]` only (empty: none).
    rows: Vec<Range<u32>>,
    max_doc: u32,
}

impl DocBounds {
    /// The bounds of a segment of `max_doc` documents whose numbers are
    /// `numbers` (a block, or a shared text's key with `shared` set, its
    /// rows in `links`), its first document being `base` across the
    /// index's segments.
    pub(crate) fn new(
        numbers: &dyn ColumnValues<u64>,
        max_doc: u32,
        base: u32,
        all_sources: &[Source],
        links: &Links,
        shared: u64,
    ) -> DocBounds {
        let mut rows = Vec::with_capacity(max_doc.div_ceil(CHUNK) as usize);
        let mut buf = vec![0u64; CHUNK as usize];
        let mut source = 0;
        for first in (0..max_doc).step_by(CHUNK as usize) {
            let chunk = &mut buf[..(max_doc - first).min(CHUNK) as usize];
            numbers.get_range(u64::from(first), chunk);
            let (mut start, mut end) = (u32::MAX, 0);
            for (doc, &number) in (base + first..).zip(chunk.iter()) {
                let named = match (
                    sources::source_of(all_sources, doc, source),
                    u32::try_from(number & !shared),
                ) {
                    (Some(s), Ok(n)) => {
                        source = s;
                        match number & shared {
                            0 => all_sources[s].block_span(n),
                            _ => linked_rows(links, &all_sources[s], n),
                        }
                    }
                    // A search that reads these fails (no source, or a
                    // number past u32): they are read, as every row's.
                    _ => Some(0..u32::MAX),
                };
                if let Some(r) = named {
                    start = start.min(r.start);
                    end = end.max(r.end);
                }
            }
            rows.push(start..end);
        }
        DocBounds { rows, max_doc }
    }

    /// The documents (numbered within the segment) that may name rows in
    /// `window`, in ascending ranges.
    pub(crate) fn docs_within(&self, window: &Range<u32>) -> Vec<Range<u32>> {
        let mut docs: Vec<Range<u32>> = Vec::new();
        if window.is_empty() {
            return docs;
        }
        let meets = |r: &Range<u32>| r.start < window.end && window.start < r.end;
        for (c, _) in self.rows.iter().enumerate().filter(|(_, r)| meets(r)) {
            let first = (c as u32).saturating_mul(CHUNK);
            let chunk = first..first.saturating_add(CHUNK).min(self.max_doc);
            match docs.last_mut() {
                Some(last) if last.end == chunk.start => last.end = chunk.end,
                _ => docs.push(chunk),
            }
        }
        docs
    }

    /// Estimated heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        8 * self.rows.len()
    }
}

/// From the first to the last row linked to shared text `key` of `source`,
/// if any is.
fn linked_rows(links: &Links, source: &Source, key: u32) -> Option<Range<u32>> {
    let rows = links.sets().get(key.saturating_add(source.keys) as usize)?;
    Some(rows.min()?..rows.max()?.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window reads exactly the chunks whose rows meet it, adjacent ones
    /// as one range; a chunk that names no rows is never read.
    #[test]
    fn a_window_reads_the_chunks_whose_rows_meet_it() {
        let c = CHUNK;
        #[allow(clippy::reversed_empty_ranges)]
        let bounds = DocBounds {
            rows: vec![0..100, 100..200, u32::MAX..0, 150..400, 390..391],
            max_doc: 5 * c - 5,
        };
        let within = |w: Range<u32>| bounds.docs_within(&w);
        assert_eq!(within(0..1), vec![0..c]);
        assert_eq!(within(99..100), vec![0..c]);
        assert_eq!(within(100..101), vec![c..2 * c]);
        assert_eq!(within(99..101), vec![0..2 * c]);
        assert_eq!(within(199..200), vec![c..2 * c, 3 * c..4 * c]);
        assert_eq!(within(200..201), vec![3 * c..4 * c]);
        assert_eq!(within(390..391), vec![3 * c..5 * c - 5]);
        assert_eq!(within(400..u32::MAX), vec![]);
        assert_eq!(within(150..150), vec![]);
        assert_eq!(within(0..u32::MAX), vec![0..2 * c, 3 * c..5 * c - 5]);
    }
}
