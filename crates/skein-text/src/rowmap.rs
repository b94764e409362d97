//! What a compaction did to one input part's rows: which survived, and the
//! row each became in the output.
//!
//! Compaction is a k-way merge on time that only drops rows (duplicates),
//! so it keeps the relative order of each input's rows: the map is
//! monotonic, and two bitmaps describe it exactly, the input rows kept and
//! the output rows they became, matched in order (the k-th kept row became
//! the k-th output row). That is what lets a merged part's text index keep
//! its inputs' postings instead of tokenizing every row again.

use roaring::RoaringBitmap;

use crate::TextError;
use crate::ascending::Ascending;

/// The rows of one input that survive a merge, and where they went.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RowMap {
    kept: RoaringBitmap,
    out: RoaringBitmap,
    kept_order: Ascending,
    out_order: Ascending,
}

/// In [`RowMap::dense`]: the input row was dropped.
pub(crate) const DROPPED: u32 = u32::MAX;

impl RowMap {
    pub fn new() -> RowMap {
        RowMap::default()
    }

    /// Input row `from` became output row `to`. Both must grow from call to
    /// call (a merge visits each input's rows in order): anything else is
    /// refused, since the map would no longer be monotonic.
    pub fn keep(&mut self, from: u32, to: u32) -> Result<(), TextError> {
        // Both checked before either is appended, so the two stay matched.
        if self.kept_order.is_next(from) && self.out_order.is_next(to) {
            self.kept_order.append(&mut self.kept, from);
            self.out_order.append(&mut self.out, to);
            return Ok(());
        }
        Err(TextError::Corrupt(format!(
            "row map: input row {from} to output row {to} is out of order"
        )))
    }

    /// Rows kept.
    pub fn len(&self) -> u64 {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// The output row input row `row` became, if it survived.
    pub fn get(&self, row: u32) -> Option<u32> {
        if !self.kept.contains(row) {
            return None;
        }
        let k = self.kept.rank(row).checked_sub(1)?;
        self.out.select(u32::try_from(k).ok()?)
    }

    /// The map as a table indexed by input row ([`DROPPED`] for a row that
    /// did not survive): 4 bytes per input row, for the merge of one input's
    /// index at a time, which looks up every row it holds.
    pub(crate) fn dense(&self) -> Vec<u32> {
        let len = self.kept.max().map_or(0, |m| m as usize + 1);
        let mut table = vec![DROPPED; len];
        for (from, to) in self.kept.iter().zip(self.out.iter()) {
            table[from as usize] = to;
        }
        table
    }
}

/// `row` through a [`RowMap::dense`] table.
pub(crate) fn carry(table: &[u32], row: u32) -> Option<u32> {
    table.get(row as usize).copied().filter(|&to| to != DROPPED)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Against a naive model: a merge of inputs, some rows dropped.
        #[test]
        fn a_row_map_is_the_merge_it_recorded(
            steps in prop::collection::vec((0..4usize, any::<bool>()), 0..400),
        ) {
            let mut maps = vec![RowMap::new(); 4];
            let mut naive: Vec<Vec<Option<u32>>> = vec![Vec::new(); 4];
            let mut next_out = 0u32;
            for (input, keep) in steps {
                let row = naive[input].len() as u32;
                if keep {
                    maps[input].keep(row, next_out).unwrap();
                    naive[input].push(Some(next_out));
                    next_out += 1;
                } else {
                    naive[input].push(None);
                }
            }
            for (map, naive) in maps.iter().zip(&naive) {
                let table = map.dense();
                for (row, want) in naive.iter().enumerate() {
                    prop_assert_eq!(map.get(row as u32), *want);
                    prop_assert_eq!(carry(&table, row as u32), *want);
                }
                prop_assert_eq!(map.get(naive.len() as u32 + 5), None);
                prop_assert_eq!(map.len() as usize, naive.iter().flatten().count());
            }
        }
    }

    #[test]
    fn an_out_of_order_map_is_refused() {
        let mut m = RowMap::new();
        m.keep(3, 10).unwrap();
        assert!(m.keep(2, 11).is_err());
        assert!(m.keep(4, 9).is_err());
        m.keep(4, 11).unwrap();
        assert_eq!(m.get(4), Some(11));
        assert_eq!(m.len(), 2);
    }
}
