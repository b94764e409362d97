//! Appending increasing row numbers to a roaring bitmap cheaply.
//!
//! Neither of roaring's ways to add a row is cheap everywhere: `insert`
//! searches for the row's container, and within an array container for
//! its place (a merge of big parts spent a sixth of its time so), while
//! `push` checks that the row comes last by finding the container's
//! greatest row, which in a bitmap container (more than 4,096 rows of one
//! 65,536) is a scan of its words from the top, per row: a quarter of a
//! log part's merge went there, for the terms most rows hold. Knowing the
//! last row appended, an [`Ascending`] pushes into array containers and
//! sets the bit in bitmap ones.

use roaring::RoaringBitmap;

/// What an append to one bitmap needs to know of the appends before it.
/// Rows added to the bitmap otherwise (an `insert`) must come before the
/// last appended, and none may be removed: it counts the rows of the last
/// container, and may only count too few, which costs a slower `push`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Ascending {
    last: Option<u32>,
    /// Rows in the container of `last`.
    in_container: u32,
}

/// Rows an array container holds at most (roaring's `ARRAY_LIMIT`); with
/// more it is a bitmap.
const ARRAY_LIMIT: u32 = 4096;

impl Ascending {
    /// Whether `row` comes after every row appended so far.
    pub fn is_next(&self, row: u32) -> bool {
        self.last.is_none_or(|last| row > last)
    }

    /// Appends `row` to `rows` if it comes after every row appended so far;
    /// returns whether it did.
    pub fn append(&mut self, rows: &mut RoaringBitmap, row: u32) -> bool {
        match self.last {
            Some(last) if row <= last => return false,
            Some(last) if last >> 16 == row >> 16 => self.in_container += 1,
            _ => self.in_container = 1,
        }
        self.last = Some(row);
        if self.in_container <= ARRAY_LIMIT {
            rows.push(row);
        } else {
            rows.insert(row);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Rows offered in increasing order with repeats and stragglers
        /// among them, dense runs (bitmap containers) and sparse ones
        /// (array containers), across container boundaries: the bitmap
        /// holds exactly the rows past all before them.
        #[test]
        fn appended_rows_are_the_rows_past_all_before(
            steps in prop::collection::vec((0u32..3, 0u32..6000, 0u32..3), 1..40)
        ) {
            let (mut rows, mut ascending) = (RoaringBitmap::new(), Ascending::default());
            let mut want = std::collections::BTreeSet::new();
            let mut row = 0u32;
            for (gap, run, step) in steps {
                // A jump (maybe past a container), then a run.
                row += gap * 40_000;
                for _ in 0..run {
                    prop_assert!(ascending.append(&mut rows, row));
                    want.insert(row);
                    // A repeat and an earlier row are refused.
                    prop_assert!(!ascending.append(&mut rows, row));
                    prop_assert!(!ascending.append(&mut rows, row.saturating_sub(step)));
                    row += 1 + step;
                }
            }
            prop_assert!(rows.iter().eq(want.iter().copied()));
        }
    }
}
