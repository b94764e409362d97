//! Content-defined pieces of long text, for remembering what was indexed
//! already: a text is cut after whitespace bytes where a rolling (gear)
//! hash of the bytes before has its low bits zero, so the same content cuts
//! the same way wherever it sits (a system prompt at the start of one
//! request's messages and after another's preamble), and a repeated piece
//! is recognised by a map lookup.
//!
//! Cuts fall only after ASCII whitespace, which the tokenizer never joins
//! across, so a text's terms are exactly the union of its pieces' terms.

/// Pieces shorter than this are not worth remembering (their chunks are).
pub(crate) const MIN_PIECE: usize = 128;

/// Low hash bits that must be zero at a cut: one whitespace byte in 64
/// qualifies, so pieces average a few hundred bytes of prose.
const MASK: u64 = (1 << 6) - 1;

/// 256 pseudo-random words (splitmix64), one per byte value.
const GEAR: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut state: u64 = 0x5EED_5EED_5EED_5EED;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
};

/// The pieces of `text`, in order; together they are `text`. (Indexing
/// cuts one piece at a time, with [`piece_end`].)
#[cfg(test)]
pub(crate) fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let (end, _) = piece_end(text.as_bytes(), start);
        let piece = &text[start..end];
        start = end;
        Some(piece)
    })
}

#[cfg(test)]
thread_local! {
    /// Calls of [`piece_end`] on this thread: what following a run saves.
    pub(crate) static CUTS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Where the piece of `bytes` that starts at `start` ends, and whether it
/// ends at a cut (`false`: at the end of the text).
///
/// Whether a piece ends at a cut depends only on its own bytes: the hash
/// starts over at the piece's start and shifts each byte out after 64 more,
/// so the same bytes starting a piece anywhere make the same piece. That is
/// what lets a vocabulary skip cutting a run of pieces it saw in that order
/// before (it compares the bytes instead).
pub(crate) fn piece_end(bytes: &[u8], start: usize) -> (usize, bool) {
    #[cfg(test)]
    CUTS.with(|c| c.set(c.get() + 1));
    let mut hash: u64 = 0;
    // The hash shifts a byte out after 64 more: at the first byte that may
    // end a piece it depends only on the 64 bytes before, so the bytes
    // before those need no hashing (the cuts are the same).
    let first_end = start + MIN_PIECE - 1;
    let warm = first_end.saturating_sub(64).max(start);
    for &b in bytes.get(warm..first_end).unwrap_or_default() {
        hash = (hash << 1).wrapping_add(GEAR[b as usize]);
    }
    for (i, &b) in bytes.iter().enumerate().skip(first_end) {
        hash = (hash << 1).wrapping_add(GEAR[b as usize]);
        // An ASCII byte is a whole character: cutting after it keeps both
        // sides valid UTF-8.
        if b.is_ascii_whitespace() && hash & MASK == 0 {
            return (i + 1, true);
        }
    }
    (bytes.len(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cuts of the plain definition: hash every byte of a piece.
    fn reference(text: &str) -> Vec<&str> {
        let bytes = text.as_bytes();
        let (mut out, mut start) = (Vec::new(), 0);
        while start < bytes.len() {
            let (mut hash, mut end) = (0u64, bytes.len());
            for (i, &b) in bytes.iter().enumerate().skip(start) {
                hash = (hash << 1).wrapping_add(GEAR[b as usize]);
                if b.is_ascii_whitespace() && i + 1 - start >= MIN_PIECE && hash & MASK == 0 {
                    end = i + 1;
                    break;
                }
            }
            out.push(&text[start..end]);
            start = end;
        }
        out
    }

    #[test]
    fn skipping_the_start_of_a_piece_cuts_the_same() {
        let mut text = String::new();
        for i in 0..5000u64 {
            let w = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
            text.push_str(&"xy".repeat(w as usize % 7 + 1));
            text.push(if w % 5 == 0 { '\n' } else { ' ' });
        }
        for t in [&text[..], &text[..100], "", "a b", &text[3..]] {
            assert_eq!(pieces(t).collect::<Vec<_>>(), reference(t));
        }
    }

    #[test]
    fn pieces_cover_the_text_and_resync_after_a_prefix() {
        let prompt: String = (0..400).map(|i| format!("word{} ", i % 37)).collect();
        let a = format!("{prompt}user turn one");
        let b = format!("a different preamble here. {prompt}user turn two");
        for t in [&a, &b] {
            assert_eq!(pieces(t).collect::<String>(), **t);
            assert!(pieces(t).all(|p| !p.is_empty()));
        }
        let pa: std::collections::HashSet<&str> = pieces(&a).collect();
        let shared = pieces(&b).filter(|p| pa.contains(p)).map(str::len).sum::<usize>();
        assert!(
            shared * 2 > prompt.len(),
            "most of the prompt's pieces recur: {shared} of {}",
            prompt.len()
        );
        assert_eq!(pieces("").count(), 0);
        assert_eq!(pieces("short text").collect::<Vec<_>>(), vec!["short text"]);
        let cjk = "東京都 ".repeat(200);
        assert_eq!(pieces(&cjk).collect::<String>(), cjk);
    }
}
