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
    short_chunks: ShortMemo,
    pieces: PieceMemo,
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

/// Chunks of at most [`ShortKey::MAX`] bytes with at most
/// [`ShortIds::MAX`] terms (most words), held in the map's slots: a lookup
/// reads one slot, where [`Memo`] reads a slot, then the text to compare
/// and the ids, each elsewhere on the heap. Indexing log lines is mostly
/// these lookups, and they were mostly waiting for memory.
#[derive(Debug, Default, Clone)]
struct ShortMemo {
    map: HashMap<ShortKey, ShortIds, FxBuildHasher>,
}

/// A short chunk's bytes, zero-padded, and its length in the last byte
/// (little-endian words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ShortKey([u64; 3]);

impl ShortKey {
    const MAX: usize = 23;

    /// Built in registers, from loads of the chunk itself. (Copying the
    /// chunk into a padded buffer and reading that back as words stalled
    /// each read on the copy: a quarter of every memo lookup.)
    fn of(chunk: &str) -> Option<ShortKey> {
        let bytes = chunk.as_bytes();
        if bytes.len() > Self::MAX {
            return None;
        }
        let word = |from: usize| word_at(bytes.get(from..).unwrap_or_default());
        let last = word(16) | (bytes.len() as u64) << 56;
        Some(ShortKey([word(0), word(8), last]))
    }
}

/// The first (up to) 8 bytes of `bytes` as a little-endian word, zero-padded:
/// two overlapping loads at most, never a byte at a time.
fn word_at(bytes: &[u8]) -> u64 {
    fn at<const N: usize>(bytes: &[u8], from: usize) -> [u8; N] {
        bytes
            .get(from..from + N)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; N])
    }
    let n = bytes.len().min(8);
    // Two loads of a size that fits, one at the start and one ending at
    // byte `n`: where they overlap they hold the same bytes, so OR joins them.
    match n {
        8 => u64::from_le_bytes(at(bytes, 0)),
        4..=7 => {
            let low = u64::from(u32::from_le_bytes(at(bytes, 0)));
            let high = u64::from(u32::from_le_bytes(at(bytes, n - 4)));
            low | high << ((n - 4) * 8)
        }
        2..=3 => {
            let low = u64::from(u16::from_le_bytes(at(bytes, 0)));
            let high = u64::from(u16::from_le_bytes(at(bytes, n - 2)));
            low | high << ((n - 2) * 8)
        }
        1 => u64::from(bytes[0]),
        _ => 0,
    }
}

#[derive(Debug, Clone, Copy)]
struct ShortIds {
    len: u8,
    ids: [u32; ShortIds::MAX],
}

impl ShortIds {
    const MAX: usize = 5;

    fn of(ids: &[u32]) -> Option<ShortIds> {
        let mut out = ShortIds {
            len: ids.len() as u8,
            ids: [0; Self::MAX],
        };
        out.ids.get_mut(..ids.len())?.copy_from_slice(ids);
        Some(out)
    }

    fn as_slice(&self) -> &[u32] {
        &self.ids[..self.len as usize]
    }
}

/// Pieces seen lately (from their second sighting), by the xxh3 of their
/// text, each with the piece that followed it last time: a system prompt
/// comes as the same run of pieces in every request, and following the run
/// costs a comparison of bytes per piece, not cutting and hashing them.
#[derive(Debug, Default, Clone)]
struct PieceMemo {
    map: HashMap<u64, KnownPiece, FxBuildHasher>,
}

#[derive(Debug, Clone)]
struct KnownPiece {
    text: Box<str>,
    ids: Box<[u32]>,
    /// It ended at a cut, not at the end of its text: only then are the
    /// same bytes elsewhere the same piece ([`crate::pieces::piece_end`]).
    cut: bool,
    /// The hash of the known piece that came next, the last time.
    next: Option<u64>,
}

impl PieceMemo {
    fn get_mut(&mut self, hash: u64, text: &str) -> Option<&mut KnownPiece> {
        self.map.get_mut(&hash).filter(|p| *p.text == *text)
    }

    /// The known piece that followed `prev` last time, if `bytes` start
    /// with it and it ended at a cut: then it is the piece `bytes` start
    /// with. Returns its hash.
    fn follow(&self, prev: u64, bytes: &[u8]) -> Option<(u64, &KnownPiece)> {
        let hash = self.map.get(&prev)?.next?;
        let piece = self.map.get(&hash)?;
        (piece.cut && bytes.starts_with(piece.text.as_bytes())).then_some((hash, piece))
    }

    /// Notes that the known piece `next` followed the known piece `prev`.
    fn chain(&mut self, prev: Option<u64>, next: u64) {
        if let Some(p) = prev.and_then(|prev| self.map.get_mut(&prev)) {
            p.next = Some(next);
        }
    }
}

/// A known piece at `start` of its text: its range listed in `known`
/// when the caller keeps known pieces apart, else its ids added to `out`.
fn add_known(piece: &KnownPiece, start: usize, out: &mut Vec<u32>, known: Option<&mut Vec<Range<usize>>>) {
    match known {
        Some(known) => known.push(start..start + piece.text.len()),
        None => out.extend_from_slice(&piece.ids),
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
        let short = ShortKey::of(chunk);
        if let Some(ids) = short.and_then(|key| self.short_chunks.map.get(&key)) {
            out.extend_from_slice(ids.as_slice());
            return;
        }
        // Short chunks with many terms (`a.b.c.d.e.f`) are here too.
        let hash = Memo::hash(chunk);
        if let Some(ids) = self.chunks.get(hash, chunk) {
            out.extend_from_slice(ids);
            return;
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
        let ids = &out[start..];
        if let (Some(key), Some(short_ids)) = (short, ShortIds::of(ids)) {
            if self.short_chunks.map.len() >= CHUNKS {
                self.short_chunks.map.clear();
            }
            self.short_chunks.map.insert(key, short_ids);
            return;
        }
        if self.chunks.len() >= CHUNKS {
            self.chunks.clear();
        }
        self.chunks.insert(hash, chunk, ids.into());
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
        let bytes = text.as_bytes();
        let mut start = 0;
        // The known piece just passed: the start of a run to follow.
        let mut prev: Option<u64> = None;
        while start < bytes.len() {
            let (hash, end) = match prev.and_then(|prev| self.pieces.follow(prev, &bytes[start..])) {
                Some((hash, piece)) => {
                    let end = start + piece.text.len();
                    add_known(piece, start, out, known.as_deref_mut());
                    (Some(hash), end)
                }
                None => {
                    let (end, cut) = crate::pieces::piece_end(bytes, start);
                    let hash = self.piece(&text[start..end], cut, start, out, known.as_deref_mut());
                    if let Some(hash) = hash {
                        self.pieces.chain(prev, hash);
                    }
                    (hash, end)
                }
            };
            prev = hash;
            start = end;
        }
    }

    /// Adds piece `piece` (at `start` of its text; `cut`: it ended at a
    /// cut) as [`text_or_known`](Self::text_or_known) does. Returns its
    /// hash if it is a known piece now.
    fn piece(
        &mut self,
        piece: &str,
        cut: bool,
        start: usize,
        out: &mut Vec<u32>,
        known: Option<&mut Vec<Range<usize>>>,
    ) -> Option<u64> {
        if piece.len() < crate::pieces::MIN_PIECE {
            for chunk in piece.split_ascii_whitespace() {
                self.chunk(chunk, out);
            }
            return None;
        }
        let hash = Memo::hash(piece);
        if let Some(p) = self.pieces.get_mut(hash, piece) {
            p.cut |= cut;
            add_known(p, start, out, known);
            return Some(hash);
        }
        let first = out.len();
        for chunk in piece.split_ascii_whitespace() {
            self.chunk(chunk, out);
        }
        self.dedup_from(out, first);
        // Remembered from its second sighting: most pieces of log lines
        // never come again, and copying each into the memo was a tenth of
        // indexing them.
        if self.pieces_seen.len() >= PIECES_SEEN {
            self.pieces_seen.clear();
        }
        if self.pieces_seen.insert(hash) {
            return None;
        }
        let ids: Box<[u32]> = out[first..].into();
        if self.piece_bytes + piece.len() > PIECE_BYTES {
            self.pieces.map.clear();
            self.piece_bytes = 0;
        }
        self.piece_bytes += piece.len() + 4 * ids.len();
        let known_piece = KnownPiece {
            text: piece.into(),
            ids,
            cut,
            next: None,
        };
        self.pieces.map.insert(hash, known_piece);
        Some(hash)
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
    use std::collections::BTreeSet;

    /// The terms of `text`, tokenized whole.
    fn naive_terms(text: &str) -> BTreeSet<String> {
        let tokens = crate::tokenize::tokenize(text);
        tokens.iter().flat_map(|t| t.terms()).map(str::to_string).collect()
    }

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
            sightings.push((v.pieces.map.len(), ids));
        }
        assert_eq!(sightings[0].0, 0, "nothing remembered after one sighting");
        assert!(sightings[1].0 > 0, "remembered after two");
        assert_eq!(sightings[2].0, sightings[1].0);
        let distinct = |ids: &[u32]| ids.iter().copied().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(distinct(&sightings[0].1), distinct(&sightings[2].1));
    }

    /// A prompt of many pieces, then a unique tail: seen twice, it is
    /// known, and from then on its pieces are followed as a run (one cut
    /// for the first piece, none for the rest), with the same terms.
    #[test]
    fn a_known_run_of_pieces_is_followed_not_cut() {
        let prompt: String = (0..600).map(|i| format!("rule{i} applies ")).collect();
        let mut v = Vocabulary::default();
        let terms = |v: &Vocabulary, ids: &[u32]| ids.iter().map(|&id| v.term(id).to_string()).collect::<BTreeSet<_>>();
        for round in 0..4 {
            let text = format!("{prompt}and then question {round}");
            let (mut ids, mut known) = (Vec::new(), Vec::new());
            let cuts = crate::pieces::CUTS.with(|c| c.get());
            v.text_with_known(&text, &mut ids, &mut known);
            let cuts = crate::pieces::CUTS.with(|c| c.get()) - cuts;
            let pieces: Vec<&str> = crate::pieces::pieces(&text).collect();
            assert!(pieces.len() > 10, "the prompt makes many pieces");
            if round < 2 {
                assert!(known.is_empty(), "round {round}: nothing known yet");
                assert_eq!(terms(&v, &ids), naive_terms(&text));
                continue;
            }
            assert_eq!(known.len(), pieces.len() - 1, "round {round}: all but the tail known");
            assert_eq!(known[0].start, 0);
            assert!(
                known.windows(2).all(|w| w[0].end == w[1].start),
                "known ranges are consecutive pieces"
            );
            assert!(cuts <= 2, "round {round}: {cuts} cuts: the run was followed, not cut");
            let mut all = terms(&v, &ids);
            let mut known_ids = Vec::new();
            v.text(&text[..known.last().unwrap().end], &mut known_ids);
            all.extend(terms(&v, &known_ids));
            assert_eq!(all, naive_terms(&text), "round {round}");
        }
    }

    /// Texts sharing runs of pieces in changing orders: the known ranges
    /// are always pieces of the text as cutting makes them, and the terms
    /// of `out` and of the known ranges are the text's terms.
    #[test]
    fn followed_runs_agree_with_cutting() {
        use proptest::prelude::*;
        let block = |seed: usize| -> String {
            (0..150)
                .map(|i| format!("w{}x{} ", seed, (i * 7 + seed) % 53))
                .collect()
        };
        let blocks = [block(1), block(2), block(3)];
        let mut runner = proptest::test_runner::TestRunner::default();
        // Often no tail: a text's last piece then ends at its end, not at a
        // cut, and must not be followed into a longer text.
        let texts = prop::collection::vec((0usize..4, 0usize..4, prop::option::of("[a-z ]{1,40}")), 1..30);
        runner
            .run(&texts, |plan| {
                let mut v = Vocabulary::default();
                for (a, b, tail) in plan {
                    let text: String = [a, b]
                        .iter()
                        .map(|&i| blocks.get(i).map_or("preamble text ", String::as_str))
                        .collect::<String>()
                        + tail.as_deref().unwrap_or_default();
                    let (mut ids, mut known) = (Vec::new(), Vec::new());
                    v.text_with_known(&text, &mut ids, &mut known);
                    let mut cut = Vec::new();
                    let mut at = 0;
                    for p in crate::pieces::pieces(&text) {
                        cut.push(at..at + p.len());
                        at += p.len();
                    }
                    for k in &known {
                        prop_assert!(cut.contains(k), "{k:?} is not a piece");
                    }
                    let mut got: BTreeSet<String> = ids.iter().map(|&id| v.term(id).to_string()).collect();
                    for k in &known {
                        got.extend(naive_terms(&text[k.clone()]));
                    }
                    prop_assert_eq!(got, naive_terms(&text));
                }
                Ok(())
            })
            .unwrap();
    }

    /// Chunks on both sides of the short memo's limits (bytes, terms) come
    /// back from the memos with the terms tokenizing gives.
    #[test]
    fn chunks_short_and_long_come_back_with_their_terms() {
        let chunks = [
            "a".to_string(),
            "PoolTimeout".into(),
            "a.b.c.d.e.f.g".into(),
            "x".repeat(ShortKey::MAX),
            "y".repeat(ShortKey::MAX + 1),
            "connection_pool.acquire_timeout".into(),
            "東京都".into(),
            "0xdeadbeef".into(),
        ];
        let mut v = Vocabulary::default();
        for round in 0..3 {
            for chunk in &chunks {
                let mut ids = Vec::new();
                v.chunk(chunk, &mut ids);
                let got: BTreeSet<String> = ids.iter().map(|&id| v.term(id).to_string()).collect();
                assert_eq!(got, naive_terms(chunk), "round {round}: {chunk}");
            }
        }
        assert!(v.short_chunks.map.len() >= 4, "short chunks are in the short memo");
        assert!(
            v.chunks.len() >= 2,
            "long ones, and short ones of many terms, in the other"
        );
        assert_eq!(ShortKey::of("ab"), ShortKey::of("ab"));
        assert_eq!(ShortKey::of(""), Some(ShortKey([0, 0, 0])));
        assert_ne!(
            ShortKey::of("ab"),
            ShortKey::of("ab\0"),
            "the length is part of the key"
        );
    }

    /// The key as it was defined: the bytes copied into a zeroed buffer,
    /// the length in its last byte, read as little-endian words.
    fn padded_key(chunk: &[u8]) -> ShortKey {
        let mut padded = [0u8; 24];
        padded[..chunk.len()].copy_from_slice(chunk);
        padded[ShortKey::MAX] = chunk.len() as u8;
        let word = |i: usize| u64::from_le_bytes(padded[i * 8..i * 8 + 8].try_into().unwrap());
        ShortKey([word(0), word(1), word(2)])
    }

    #[test]
    fn a_short_key_is_its_chunk_padded_at_every_length() {
        // Every length, bytes that differ at every position (a load of the
        // wrong bytes, or a shift off by a byte, changes the key).
        let text: String = (0..ShortKey::MAX as u8).map(|i| char::from(b'A' + i)).collect();
        for len in 0..=ShortKey::MAX {
            let chunk = &text[..len];
            assert_eq!(ShortKey::of(chunk), Some(padded_key(chunk.as_bytes())), "{chunk:?}");
        }
        assert_eq!(ShortKey::of(&"x".repeat(ShortKey::MAX + 1)), None);
        let multibyte = "東京都ü";
        assert_eq!(ShortKey::of(multibyte), Some(padded_key(multibyte.as_bytes())));
    }
}
