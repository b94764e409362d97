//! Term ids and the memo that keeps text from being tokenized twice, shared
//! by the part index builder and the hot index.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use rustc_hash::FxBuildHasher;

use crate::tokenize::tokenize;

/// The terms an index has seen, by id, and the term ids of recent chunks.
///
/// Text is cut at ASCII whitespace before it is tokenized, and a chunk seen
/// lately is not tokenized again: the tokenizer never joins across
/// whitespace (it is never a word character), so a value's terms are the
/// union of its chunks' terms, and log lines and prompts repeat most of
/// their words (a system prompt inside every request's messages). This is
/// what keeps an index from costing as much as the Parquet file beside it.
///
/// Long text (prompts, stack traces) is first cut into *pieces* at
/// content-defined points ([`crate::pieces`]), and a piece seen twice
/// lately is not even split into chunks again: a system prompt inside ten
/// thousand requests' messages costs a few lookups each, not one per word.
#[derive(Debug, Default, Clone)]
pub(crate) struct Vocabulary {
    ids: HashMap<Box<str>, u32, FxBuildHasher>,
    terms: Vec<Box<str>>,
    chunks: Memo,
    pieces: Memo,
    piece_bytes: usize,
    /// Hashes of pieces seen once: a piece is remembered from its second
    /// sighting (see [`text`](Self::text)).
    pieces_seen: HashSet<u64, FxBuildHasher>,
    /// Per term id, the last [`dedup`](Self::dedup) that saw it: dedup
    /// without sorting (sorting the ids of every block and piece was a
    /// tenth of a flush).
    seen: Vec<u32>,
    stamp: u32,
}

/// Text → the ids of its terms, for text seen lately. Keyed by the xxh3 of
/// the text, so the text is hashed once per lookup (a piece is hundreds of
/// bytes; a get then an insert hashed it twice with a slower hash), with
/// the text itself kept to compare: two texts with one hash only make the
/// newer one replace the older, never a wrong answer.
#[derive(Debug, Default, Clone)]
struct Memo {
    map: HashMap<u64, Memoized, FxBuildHasher>,
}

/// A text and the ids of its terms.
type Memoized = (Box<str>, Box<[u32]>);

impl Memo {
    fn hash(text: &str) -> u64 {
        xxhash_rust::xxh3::xxh3_64(text.as_bytes())
    }

    fn get(&self, hash: u64, text: &str) -> Option<&[u32]> {
        match self.map.get(&hash) {
            Some((seen, ids)) if **seen == *text => Some(ids),
            _ => None,
        }
    }

    fn insert(&mut self, hash: u64, text: &str, ids: Box<[u32]>) {
        self.map.insert(hash, (text.into(), ids));
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn clear(&mut self) {
        self.map.clear();
    }
}

/// Bytes of pieces remembered before that memo starts over.
const PIECE_BYTES: usize = 8 << 20;
/// Pieces seen once whose hashes are kept before that set starts over.
const PIECES_SEEN: usize = 1 << 18;

/// Distinct terms a vocabulary holds before it starts over (between
/// documents): ids and numbers make terms unique, and the vocabulary must
/// stay a small cache, not a second dictionary of the part.
pub(crate) const VOCABULARY_TERMS: usize = 1 << 20;
/// Chunks whose term ids are remembered.
const CHUNKS: usize = 1 << 16;

impl Vocabulary {
    /// Appends the ids of `chunk`'s terms to `out` (repeats included).
    fn chunk(&mut self, chunk: &str, out: &mut Vec<u32>) {
        let hash = Memo::hash(chunk);
        if let Some(ids) = self.chunks.get(hash, chunk) {
            out.extend_from_slice(ids);
            return;
        }
        if self.chunks.len() >= CHUNKS {
            self.chunks.clear();
        }
        let start = out.len();
        for token in tokenize(chunk) {
            for term in token.terms() {
                let id = match self.ids.get(term) {
                    Some(&id) => id,
                    None => {
                        let id = self.terms.len() as u32;
                        self.ids.insert(term.into(), id);
                        self.terms.push(term.into());
                        id
                    }
                };
                out.push(id);
            }
        }
        self.chunks.insert(hash, chunk, out[start..].into());
    }

    /// Appends the ids of `text`'s terms to `out` (repeats included).
    pub(crate) fn text(&mut self, text: &str, out: &mut Vec<u32>) {
        self.text_or_known(text, out, None);
    }

    /// [`text`](Self::text), except that the pieces of `text` this
    /// vocabulary knows well (seen at least twice lately) are not added to
    /// `out` but listed in `known`, as byte ranges of `text` in order: the
    /// parts it shares with other texts (a system prompt), which an index
    /// can keep once for all of them.
    pub(crate) fn text_with_known(&mut self, text: &str, out: &mut Vec<u32>, known: &mut Vec<Range<usize>>) {
        self.text_or_known(text, out, Some(known));
    }

    fn text_or_known(&mut self, text: &str, out: &mut Vec<u32>, mut known: Option<&mut Vec<Range<usize>>>) {
        for piece in crate::pieces::pieces(text) {
            if piece.len() < crate::pieces::MIN_PIECE {
                for chunk in piece.split_ascii_whitespace() {
                    self.chunk(chunk, out);
                }
                continue;
            }
            let hash = Memo::hash(piece);
            if let Some(ids) = self.pieces.get(hash, piece) {
                match known.as_deref_mut() {
                    Some(known) => {
                        // A piece is a subslice of `text`.
                        let start = piece.as_ptr() as usize - text.as_ptr() as usize;
                        known.push(start..start + piece.len());
                    }
                    None => out.extend_from_slice(ids),
                }
                continue;
            }
            let start = out.len();
            for chunk in piece.split_ascii_whitespace() {
                self.chunk(chunk, out);
            }
            self.dedup_from(out, start);
            // Remembered from its second sighting: most pieces of log
            // lines never come again, and copying each into the memo was a
            // tenth of indexing them.
            if self.pieces_seen.len() >= PIECES_SEEN {
                self.pieces_seen.clear();
            }
            if self.pieces_seen.insert(hash) {
                continue;
            }
            let ids: Box<[u32]> = out[start..].into();
            if self.piece_bytes + piece.len() > PIECE_BYTES {
                self.pieces.clear();
                self.piece_bytes = 0;
            }
            self.piece_bytes += piece.len() + 4 * ids.len();
            self.pieces.insert(hash, piece, ids);
        }
    }

    /// Drops repeated ids from `ids`, keeping first occurrences in order.
    pub(crate) fn dedup(&mut self, ids: &mut Vec<u32>) {
        self.dedup_from(ids, 0);
    }

    /// [`dedup`](Self::dedup) of `ids[start..]`.
    fn dedup_from(&mut self, ids: &mut Vec<u32>, start: usize) {
        if self.seen.len() < self.terms.len() {
            self.seen.resize(self.terms.len(), 0);
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        let (seen, stamp) = (&mut self.seen, self.stamp);
        let mut kept = start;
        for i in start..ids.len() {
            let id = ids[i];
            // Every id is one of this vocabulary's terms.
            let Some(s) = seen.get_mut(id as usize) else { continue };
            if *s != stamp {
                *s = stamp;
                ids[kept] = id;
                kept += 1;
            }
        }
        ids.truncate(kept);
    }

    pub(crate) fn term(&self, id: u32) -> &str {
        &self.terms[id as usize]
    }

    /// The id of `term`, if seen.
    pub(crate) fn id(&self, term: &str) -> Option<u32> {
        self.ids.get(term).copied()
    }

    /// Every term seen, with its id.
    pub(crate) fn terms(&self) -> impl Iterator<Item = (u32, &str)> {
        self.terms.iter().enumerate().map(|(id, t)| (id as u32, &**t))
    }

    /// Distinct terms seen.
    pub(crate) fn len(&self) -> usize {
        self.terms.len()
    }

    /// Starts over once it holds `limit` terms. Only when no document is
    /// being gathered: their ids point here.
    pub(crate) fn trim(&mut self, limit: usize) {
        if self.terms.len() >= limit {
            *self = Vocabulary::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_first_occurrences_and_memos_agree() {
        let mut v = Vocabulary::default();
        let text = format!("{} tail words tail", "alpha beta gamma alpha ".repeat(20));
        let mut first = Vec::new();
        v.text(&text, &mut first);
        let mut again = Vec::new();
        v.text(&text, &mut again);
        let distinct = |ids: &[u32]| ids.iter().copied().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(distinct(&first), distinct(&again), "the memo gives the same terms");
        v.dedup(&mut first);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(first.len(), sorted.len());
        assert_eq!(distinct(&first), distinct(&again));
        let words: Vec<&str> = first.iter().map(|&id| v.term(id)).collect();
        assert_eq!(&words[..3], &["alpha", "beta", "gamma"]);
        // Many dedups in a row never confuse one call's marks with another's.
        for _ in 0..1000 {
            let mut ids = again.clone();
            v.dedup(&mut ids);
            assert_eq!(ids.len(), sorted.len());
        }
    }

    /// A piece is remembered from its second sighting, and from its third
    /// on it comes from the memo with the same terms.
    #[test]
    fn a_piece_is_remembered_once_seen_twice() {
        let mut v = Vocabulary::default();
        let text = (0..40).map(|i| format!("rule{i} applies here ")).collect::<String>();
        let mut sightings = Vec::new();
        for _ in 0..3 {
            let mut ids = Vec::new();
            v.text(&text, &mut ids);
            sightings.push((v.pieces.len(), ids));
        }
        assert_eq!(sightings[0].0, 0, "nothing remembered after one sighting");
        assert!(sightings[1].0 > 0, "remembered after two");
        assert_eq!(sightings[2].0, sightings[1].0);
        let distinct = |ids: &[u32]| ids.iter().copied().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(distinct(&sightings[0].1), distinct(&sightings[2].1));
    }
}
