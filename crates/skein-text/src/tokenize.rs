//! The one tokenizer: used to index values, to read query terms, and by the
//! naive model that decides every answer. The rules are in the crate docs;
//! this module is their implementation.
//!
//! A value becomes a sequence of [`Token`]s (the positions a phrase walks),
//! each with the [`Piece`]s an identifier or a CJK bigram splits into. The
//! index holds a token's [`Token::terms`]: its whole text and every piece.

use caseless::Caseless;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// The longest run of word characters that becomes one token; longer runs
/// (base64 blobs, minified code) are cut into chunks this long. tantivy drops
/// terms over 64 KiB, and a term that long is never typed, so the cap keeps
/// the index and the naive model agreeing while keeping blobs out of the
/// dictionary. Folding can grow a chunk (at most 18× for one code point),
/// which stays far below tantivy's limit.
pub const MAX_WORD_BYTES: usize = 255;

/// A token: one position of a value's token sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The folded text (lower-cased, case-folded, NFKC).
    pub text: String,
    /// Byte range of the token in the original value.
    pub start: usize,
    pub end: usize,
    /// What the token splits into; empty for a plain word.
    pub pieces: Vec<Piece>,
}

/// A sub-token: indexed and searchable as a term, but not a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    pub start: usize,
    pub end: usize,
    pub kind: PieceKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    /// Text between connectors: `example` and `pooltimeoutexception` in
    /// `com.example.PoolTimeoutException`. Only when there are two or more.
    Part,
    /// The finest pieces of an identifier, in order: parts further split on
    /// case changes (`com`, `example`, `pool`, `timeout`, `exception`). Only
    /// when there are two or more.
    Word,
    /// One character of a CJK bigram.
    Char,
}

impl Token {
    /// Every term the index holds for this token: the whole text and the
    /// pieces (possibly repeated).
    pub fn terms(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.text.as_str()).chain(self.pieces.iter().map(|p| p.text.as_str()))
    }

    /// The identifier's word pieces in order, or none for a token that does
    /// not split. (Word pieces are always the last pieces of a token.)
    pub fn words(&self) -> &[Piece] {
        let first = self
            .pieces
            .iter()
            .position(|p| p.kind == PieceKind::Word)
            .unwrap_or(self.pieces.len());
        &self.pieces[first..]
    }
}

/// Characters that join an identifier's parts: the identifier stays one
/// token and each part is also a term.
pub fn is_connector(c: char) -> bool {
    matches!(c, '_' | '.' | '/' | '\\' | '-' | ':' | '@' | '#' | '$')
}

fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || is_connector(c)
    } else {
        c.is_alphanumeric() || is_combining_mark(c)
    }
}

/// Han, Hiragana, Katakana, Hangul (and Bopomofo): scripts written without
/// spaces between words, indexed as overlapping bigrams.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF       // Hangul Jamo
        | 0x2E80..=0x2FDF     // CJK and Kangxi radicals
        | 0x3005 | 0x3007     // 々 〇
        | 0x3021..=0x3029 | 0x3038..=0x303B
        | 0x3040..=0x30FF     // Hiragana, Katakana (with ー)
        | 0x3100..=0x312F | 0x31A0..=0x31BF // Bopomofo
        | 0x3130..=0x318F     // Hangul compatibility Jamo
        | 0x31F0..=0x31FF     // Katakana phonetic extensions
        | 0x3400..=0x4DBF     // CJK extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xA960..=0xA97F     // Hangul Jamo extended A
        | 0xAC00..=0xD7FF     // Hangul syllables, Jamo extended B
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0xFF66..=0xFF9F     // halfwidth Katakana
        | 0xFFA0..=0xFFDC     // halfwidth Hangul
        | 0x1B000..=0x1B16F   // Kana supplement and extended
        | 0x20000..=0x3FFFF   // CJK extensions B and later
    )
}

/// Lower-case with full Unicode case folding (`Straße` → `strasse`) and NFKC
/// (full-width and compatibility forms fold to their plain letters).
pub fn fold(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.chars().nfkc().default_case_fold().nfkc().collect()
    }
}

/// The tokens of `text`, in order.
pub fn tokenize(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if is_word_char(c) {
            word_start.get_or_insert(i);
        } else if let Some(start) = word_start.take() {
            word(text, start, i, &mut out);
        }
    }
    if let Some(start) = word_start {
        word(text, start, text.len(), &mut out);
    }
    out
}

/// A run of word characters: split into CJK and other runs (`error発生` is
/// `error` then `発生`); a combining mark stays with what it follows.
fn word(text: &str, start: usize, end: usize, out: &mut Vec<Token>) {
    // Most words are ASCII: one run, neither CJK nor combining marks (the
    // Unicode table lookups below were a fifth of tokenizing log lines).
    if text.as_bytes()[start..end].is_ascii() {
        run(text, start, end, false, out);
        return;
    }
    let mut run_start = start;
    let mut run_cjk: Option<bool> = None;
    for (i, c) in text[start..end].char_indices() {
        let cjk = if is_combining_mark(c) {
            run_cjk.unwrap_or(false)
        } else {
            is_cjk(c)
        };
        match run_cjk {
            Some(prev) if prev != cjk => {
                run(text, run_start, start + i, prev, out);
                run_start = start + i;
                run_cjk = Some(cjk);
            }
            Some(_) => {}
            None => run_cjk = Some(cjk),
        }
    }
    if let Some(cjk) = run_cjk {
        run(text, run_start, end, cjk, out);
    }
}

fn run(text: &str, start: usize, end: usize, cjk: bool, out: &mut Vec<Token>) {
    if cjk {
        cjk_run(text, start, end, out);
        return;
    }
    let mut at = start;
    while at < end {
        let mut cut = (at + MAX_WORD_BYTES).min(end);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        identifier(text, at, cut, out);
        at = cut;
    }
}

/// A CJK run: one token per overlapping bigram, each with its two characters
/// as pieces, so that a word inside a sentence is found (`東京` in
/// `東京都に住む`) and so is a single character; a run of one character is
/// that character. A "character" is a base code point with the combining
/// marks after it.
fn cjk_run(text: &str, start: usize, end: usize, out: &mut Vec<Token>) {
    let mut units: Vec<(usize, usize)> = Vec::new();
    for (i, c) in text[start..end].char_indices() {
        let at = start + i;
        let stop = at + c.len_utf8();
        match units.last_mut() {
            Some(last) if is_combining_mark(c) => last.1 = stop,
            _ => units.push((at, stop)),
        }
    }
    if let [(s, e)] = units[..] {
        push(out, &text[s..e], s, e, Vec::new());
        return;
    }
    for pair in units.windows(2) {
        let [(s1, e1), (s2, e2)] = [pair[0], pair[1]];
        let pieces = vec![
            Piece {
                text: fold(&text[s1..e1]),
                start: s1,
                end: e1,
                kind: PieceKind::Char,
            },
            Piece {
                text: fold(&text[s2..e2]),
                start: s2,
                end: e2,
                kind: PieceKind::Char,
            },
        ];
        push(out, &text[s1..e2], s1, e2, pieces);
    }
}

fn push(out: &mut Vec<Token>, raw: &str, start: usize, end: usize, pieces: Vec<Piece>) {
    let text = fold(raw);
    // Folding never empties a non-empty string; the guard keeps an empty
    // term out of the index if some future table did.
    if !text.is_empty() {
        out.push(Token {
            text,
            start,
            end,
            pieces,
        });
    }
}

/// A non-CJK run: trimmed of connectors at both ends; split into parts at
/// connectors and parts into words at case changes.
fn identifier(text: &str, start: usize, end: usize, out: &mut Vec<Token>) {
    let s = &text[start..end];
    let Some(first) = s.find(|c: char| !is_connector(c)) else {
        return;
    };
    let Some(last) = s.rfind(|c: char| !is_connector(c)) else {
        return;
    };
    let last_end = last + s[last..].chars().next().map_or(1, char::len_utf8);
    let (start, end) = (start + first, start + last_end);
    let s = &text[start..end];
    if !s.contains(is_connector) && !has_upper(s) {
        push(out, s, start, end, Vec::new());
        return;
    }
    let mut parts: Vec<(usize, usize)> = Vec::new();
    let mut part_start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        if is_connector(c) {
            if let Some(p) = part_start.take() {
                parts.push((start + p, start + i));
            }
        } else {
            part_start.get_or_insert(i);
        }
    }
    if let Some(p) = part_start {
        parts.push((start + p, end));
    }
    let mut words: Vec<(usize, usize)> = Vec::new();
    for &(ps, pe) in &parts {
        case_split(&text[ps..pe], ps, &mut words);
    }
    let mut pieces = Vec::new();
    if parts.len() >= 2 {
        pieces.extend(parts.iter().map(|&(ps, pe)| Piece {
            text: fold(&text[ps..pe]),
            start: ps,
            end: pe,
            kind: PieceKind::Part,
        }));
    }
    if words.len() >= 2 {
        pieces.extend(words.iter().map(|&(ws, we)| Piece {
            text: fold(&text[ws..we]),
            start: ws,
            end: we,
            kind: PieceKind::Word,
        }));
    }
    push(out, s, start, end, pieces);
}

fn has_upper(s: &str) -> bool {
    if s.is_ascii() {
        s.bytes().any(|b| b.is_ascii_uppercase())
    } else {
        s.chars().any(char::is_uppercase)
    }
}

/// Hex ids (8 or more hex digits, at least one a digit) and numbers are not
/// split at case changes: `4bf92F35A77b34da` stays one word.
fn is_kept_whole(s: &str) -> bool {
    let all_hex = s.bytes().all(|b| b.is_ascii_hexdigit());
    let any_digit = s.bytes().any(|b| b.is_ascii_digit());
    all_hex && any_digit && (s.len() >= 8 || s.bytes().all(|b| b.is_ascii_digit()))
}

/// Splits a part before an upper-case letter that follows a lower-case one
/// (`poolTimeout`), or that starts a capitalised word after upper-case
/// letters or digits (`HTTPServer` → `HTTP` `Server`, `V2Api` → `V2` `Api`).
/// Letter–digit changes alone never split (`utf8`, `http2`, `x86`).
fn case_split(s: &str, offset: usize, out: &mut Vec<(usize, usize)>) {
    if is_kept_whole(s) || !has_upper(s) {
        out.push((offset, offset + s.len()));
        return;
    }
    let mut cut = 0;
    let mut chars = s.char_indices().peekable();
    let mut prev: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        if let Some(p) = prev
            && c.is_uppercase()
        {
            let next_lower = chars.peek().is_some_and(|&(_, n)| n.is_lowercase());
            if p.is_lowercase() || ((p.is_uppercase() || p.is_numeric()) && next_lower) {
                out.push((offset + cut, offset + i));
                cut = i;
            }
        }
        prev = Some(c);
    }
    out.push((offset + cut, offset + s.len()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        tokenize(s).into_iter().map(|t| t.text).collect()
    }

    fn terms(s: &str) -> Vec<String> {
        tokenize(s)
            .iter()
            .flat_map(|t| t.terms().map(str::to_owned).collect::<Vec<_>>())
            .collect()
    }

    fn words(s: &str) -> Vec<String> {
        tokenize(s)
            .iter()
            .flat_map(|t| t.words().iter().map(|p| p.text.clone()).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn identifiers_split_into_parts_and_words() {
        assert_eq!(terms("PoolTimeout"), ["pooltimeout", "pool", "timeout"]);
        assert_eq!(
            terms("connection_pool"),
            ["connection_pool", "connection", "pool", "connection", "pool"]
        );
        assert_eq!(terms("db.query"), ["db.query", "db", "query", "db", "query"]);
        assert_eq!(
            words("com.example.PoolTimeoutException"),
            ["com", "example", "pool", "timeout", "exception"]
        );
        assert!(terms("com.example.PoolTimeoutException").contains(&"pooltimeoutexception".to_owned()));
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert_eq!(words("getHTTPResponse"), ["get", "http", "response"]);
        assert_eq!(words("V2Api"), ["v2", "api"]);
        assert_eq!(terms("utf8 http2 x86"), ["utf8", "http2", "x86"]);
    }

    #[test]
    fn punctuation_and_whitespace_separate_and_connectors_trim() {
        assert_eq!(
            texts("error: connection refused (retry=3)"),
            ["error", "connection", "refused", "retry", "3"]
        );
        assert_eq!(
            texts("--verbose /usr/lib/ ... __init__"),
            ["verbose", "usr/lib", "init"]
        );
        assert!(texts("!!! () ,;").is_empty());
    }

    #[test]
    fn hex_ids_and_numbers_stay_whole() {
        assert_eq!(terms("4bf92F35A77b34dA"), ["4bf92f35a77b34da"]);
        assert_eq!(terms("0x7FFD5FBFF8A0"), ["0x7ffd5fbff8a0"]);
        assert_eq!(terms("1234567"), ["1234567"]);
        assert_eq!(
            terms("trace-4bf92F35A77b"),
            ["trace-4bf92f35a77b", "trace", "4bf92f35a77b", "trace", "4bf92f35a77b"]
        );
    }

    #[test]
    fn folding_is_unicode_aware() {
        assert_eq!(
            texts("Straße ΣΊΣΥΦΟΣ ＰｏｏｌＴｉｍｅｏｕｔ"),
            ["strasse", "σίσυφοσ", "pooltimeout"]
        );
        assert_eq!(words("ＰｏｏｌＴｉｍｅｏｕｔ"), ["pool", "timeout"]);
        assert_eq!(texts("Ошибка соединения"), ["ошибка", "соединения"]);
    }

    #[test]
    fn cjk_runs_are_bigrams_with_their_characters() {
        assert_eq!(texts("東京都に住む"), ["東京", "京都", "都に", "に住", "住む"]);
        assert_eq!(terms("猫"), ["猫"]);
        assert_eq!(terms("黒猫"), ["黒猫", "黒", "猫"]);
        assert_eq!(texts("error発生"), ["error", "発生"]);
        assert_eq!(
            texts("タイムアウト。再試行"),
            ["タイ", "イム", "ムア", "アウ", "ウト", "再試", "試行"]
        );
        assert_eq!(texts("연결 실패"), ["연결", "실패"]);
    }

    #[test]
    fn offsets_point_into_the_original() {
        let s = "x ＰｏｏｌＴｉｍｅｏｕｔ 東京";
        for t in tokenize(s) {
            assert!(s.get(t.start..t.end).is_some());
            for p in &t.pieces {
                assert!(t.start <= p.start && p.end <= t.end && s.get(p.start..p.end).is_some());
            }
        }
    }

    #[test]
    fn long_runs_are_cut_into_chunks() {
        let blob = "a".repeat(600);
        let toks = tokenize(&blob);
        assert_eq!(toks.len(), 3);
        assert!(toks.iter().all(|t| t.text.len() <= MAX_WORD_BYTES));
        let wide = "é".repeat(300);
        assert!(tokenize(&wide).iter().all(|t| t.end - t.start <= MAX_WORD_BYTES));
    }
}
