//! The documents of a part's index: blocks of consecutive rows.

/// Rows of a part that share one document: the index narrows to blocks of
/// this many consecutive rows, and every row of a block is a candidate.
///
/// Why not one document per row: tantivy's cost is mostly per document and
/// per term occurrence, and a part built from log lines spent three times
/// as long on its text index as on its Parquet file with a document per
/// row (500k lines: 4.2 s against 2.0 s). Neighbouring rows share most of
/// their words (one service, one code path), so a block holds each term
/// once. Re-checking up to this many rows per hit costs little: they are
/// neighbours in one Parquet page. The price is that postings are no
/// longer exact per row, so `NOT` narrows nothing in a part.
/// Part of the bundle format: changing it changes the bundle version.
pub const BLOCK_ROWS: u32 = 32;
