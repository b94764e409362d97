//! Full-text search for Skein: a tokenizer that suits code and logs, a
//! query language, a per-part index (tantivy, bundled into one file) and a
//! hot-tier index, all answering with row numbers. It knows nothing of the
//! engine: it indexes `(row, document)` pairs, where a document is a list of
//! `(Field, &str)` values.
//!
//! # How it is used
//! ```text
//! a part           PartTextIndexBuilder::add(row, &doc)…; finish() -> bytes   (one file beside the part)
//! compaction        PartTextIndex::merge(&[(&input, &row_map)…]) -> bytes       (the inputs' indexes, merged)
//! read              PartTextIndex::open(bytes)?.search(&query)? -> candidate rows
//! hot tier          MemTextIndex::add(row, &doc); search(&query) -> candidate rows
//! every candidate   query.matches(&doc)      the answer (the naive model)
//! every hit         query.highlights(&doc)   fragments with the matched terms marked
//! ```
//! An index only narrows: its candidates include every row the naive model
//! matches (property-tested), and the engine re-checks each one.
//!
//! # Tokens
//! One tokenizer ([`tokenize()`]) reads records, query terms and the naive
//! model alike:
//! - Text splits on whitespace and punctuation. Letters, digits and
//!   combining marks make words, and so do the *connectors*
//!   `_ . / \ - : @ # $` inside a word; connectors at either end are dropped
//!   (`/usr/lib/` → `usr/lib`, `__init__` → `init`).
//! - An identifier is one token (`connection_pool`, `db.query`,
//!   `PoolTimeout`) with *pieces* that are terms too: its parts between
//!   connectors (`connection`, `pool`) and its *words*, the parts split
//!   again at case changes (`com.example.PoolTimeoutException` → `com`
//!   `example` `pool` `timeout` `exception`, and the part
//!   `pooltimeoutexception`). A case change is a lower-case letter followed
//!   by an upper-case one, or an upper-case letter starting a capitalised
//!   word after upper-case letters or digits (`HTTPServer` → `HTTP`
//!   `Server`, `V2Api` → `V2` `Api`). Letter/digit changes never split
//!   (`utf8`, `http2`), nor do hex ids (8 or more hex digits with a digit
//!   among them: `4bf92F35A77b34dA`) or numbers.
//! - Everything is folded: Unicode case folding and NFKC (`Straße` →
//!   `strasse`, full-width `ＰｏｏｌＴｉｍｅｏｕｔ` → `pooltimeout`).
//! - Han, Hiragana, Katakana and Hangul runs become overlapping bigrams, each
//!   with its two characters as pieces (`東京都` → `東京` `京都`; a run of
//!   one character is that character), so a word inside a sentence and a
//!   single character are both found. Other scripts (Cyrillic, Greek,
//!   Arabic…) are ordinary words. Scripts written without spaces that are
//!   not CJK (Thai, Lao, Khmer) are whole runs: a word inside one is not found.
//! - Runs longer than 255 bytes are cut into 255-byte tokens.
//!
//! # Matching
//! - A *term* matches a token when it equals the token or one of its
//!   pieces, or when the term is an identifier whose words appear
//!   consecutively among the token's words: `pool` and `PoolTimeout` match
//!   `com.example.PoolTimeoutException`, `connection_pool` matches
//!   `ConnectionPool` and `connection.pool`, but all-lower-case
//!   `pooltimeout` matches only that identifier (case changes are where
//!   Skein sees words). A query word that tokenizes into several tokens
//!   (`error=timeout`, a CJK word of three or more characters) is a phrase.
//! - A *phrase* matches when its tokens match (as terms) consecutive tokens
//!   of one value: `"connection refused"` matches `Connection  refused!`,
//!   `"Timeout: connection refused"` matches `PoolTimeout: connection
//!   refused`; `"pool timeout"` does not match `PoolTimeout` (one token).
//! - A *prefix* `pre*` (one token) matches a token with a term (the token
//!   or a piece) that starts with it, folded.
//! - A document is a bag of values: `a b` needs `a` and `b` somewhere in
//!   the allowed fields, a phrase needs one value.
//!
//! # Query syntax ([`parse`])
//! Words, `"phrases"` (`\"` escapes a quote), `prefix*`, `AND`, `OR`, `NOT`
//! (upper case; `-word` is NOT too), juxtaposition meaning AND, parentheses,
//! and `body:` `name:` `message:` `payload:` before a word, phrase, prefix or
//! group. Precedence: NOT, then AND, then OR. Errors ([`QueryError`]) name a
//! byte position: an empty query, a query with only NOT clauses (or an OR
//! alternative that is only NOT: it would match nearly everything), an
//! unclosed quote or parenthesis, an unknown field (`host:x`; quote it to
//! search for the text), an operator without its term, a term that is only
//! punctuation, nesting deeper than 64. `ERROR:`, `std::io` and `http://x`
//! are words, not fields; punctuation alone between terms is ignored.

mod ascending;
mod blocks;
mod bundle;
mod doc_bounds;
mod eval;
mod field;
mod links;
mod mem;
mod merge;
mod naive;
mod part;
mod pieces;
mod query;
mod reject;
mod rowmap;
mod sources;
pub mod tokenize;
mod vocabulary;

pub use ascending::Ascending;
pub use blocks::BLOCK_ROWS;
pub use field::{Doc, Field, FieldSet};
pub use mem::MemTextIndex;
pub use merge::SegmentPolicy;
pub use naive::Highlight;
pub use part::{DEFAULT_MEMORY_BUDGET, PartTextIndex, PartTextIndexBuilder};
pub use query::{Query, QueryError, parse};
pub use rowmap::RowMap;
pub use tokenize::tokenize;

/// Failures of building or opening a part's text index.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    #[error("text index is damaged: {0}")]
    Corrupt(String),
    #[error("text index format version {0} is not supported (this build reads version {v})", v = bundle::VERSION)]
    Version(u32),
    #[error("text index: too many {0}")]
    TooLarge(&'static str),
    #[error("text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("text index I/O: {0}")]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests {
    /// The engine shares indexes and queries across threads.
    #[test]
    fn indexes_and_queries_are_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<super::PartTextIndex>();
        shared::<super::MemTextIndex>();
        shared::<super::Query>();
        shared::<super::TextError>();
    }
}
