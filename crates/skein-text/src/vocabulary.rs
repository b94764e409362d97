//! Term ids and the memo that keeps text from being tokenized twice, shared
//! by the part index builder and the hot index.

use std::collections::HashMap;

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
/// content-defined points ([`crate::pieces`]), and a piece seen lately is
/// not even split into chunks again: a system prompt inside ten thousand
/// requests' messages costs a few lookups each, not one per word.
#[derive(Debug, Default, Clone)]
pub(crate) struct Vocabulary {
    ids: HashMap<Box<str>, u32, FxBuildHasher>,
    terms: Vec<Box<str>>,
    chunks: HashMap<Box<str>, Box<[u32]>, FxBuildHasher>,
    pieces: HashMap<Box<str>, Box<[u32]>, FxBuildHasher>,
    piece_bytes: usize,
}

/// Bytes of pieces remembered before that memo starts over.
const PIECE_BYTES: usize = 8 << 20;

/// Distinct terms a vocabulary holds before it starts over (between
/// documents): ids and numbers make terms unique, and the vocabulary must
/// stay a small cache, not a second dictionary of the part.
pub(crate) const VOCABULARY_TERMS: usize = 1 << 20;
/// Chunks whose term ids are remembered.
const CHUNKS: usize = 1 << 16;

impl Vocabulary {
    /// The ids of `chunk`'s terms.
    pub(crate) fn chunk(&mut self, chunk: &str) -> &[u32] {
        if !self.chunks.contains_key(chunk) {
            if self.chunks.len() >= CHUNKS {
                self.chunks.clear();
            }
            let mut ids = Vec::new();
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
                    ids.push(id);
                }
            }
            self.chunks.insert(chunk.into(), ids.into());
        }
        self.chunks.get(chunk).map(|ids| &ids[..]).unwrap_or_default()
    }

    /// Appends the ids of `text`'s terms to `out` (repeats included).
    pub(crate) fn text(&mut self, text: &str, out: &mut Vec<u32>) {
        for piece in crate::pieces::pieces(text) {
            if piece.len() < crate::pieces::MIN_PIECE {
                for chunk in piece.split_ascii_whitespace() {
                    out.extend_from_slice(self.chunk(chunk));
                }
                continue;
            }
            if let Some(ids) = self.pieces.get(piece) {
                out.extend_from_slice(ids);
                continue;
            }
            let start = out.len();
            for chunk in piece.split_ascii_whitespace() {
                out.extend_from_slice(self.chunk(chunk));
            }
            let mut ids = out[start..].to_vec();
            ids.sort_unstable();
            ids.dedup();
            if self.piece_bytes + piece.len() > PIECE_BYTES {
                self.pieces.clear();
                self.piece_bytes = 0;
            }
            self.piece_bytes += piece.len() + 4 * ids.len();
            self.pieces.insert(piece.into(), ids.into());
        }
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
