//! Shared texts: a text many rows hold (a system prompt referenced by ten
//! thousand spans) is indexed once, under a *key*, and each row holding it
//! is *linked* to the key. A term's rows are then the rows holding it
//! themselves plus the rows linked to any key whose text holds it.
//!
//! Indexing per key instead of per row keeps an index's size and build
//! time proportional to the distinct text, not to how often it repeats.
//! Matching is unchanged: a linked row holds its shared texts' terms in
//! their field exactly as if the text were its own value.
//!
//! Encoded as one bundle member: `u32 count`, then per key
//! `u32 length, roaring bitmap (serialized)`, little-endian; keys are
//! `0..count`.

use roaring::RoaringBitmap;

use crate::TextError;

/// Which rows hold each shared text, by key.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Links {
    rows: Vec<RoaringBitmap>,
}

impl Links {
    /// A new key, with no rows linked yet.
    pub(crate) fn new_key(&mut self) -> Result<u32, TextError> {
        let key = u32::try_from(self.rows.len()).map_err(|_| TextError::TooLarge("shared texts"))?;
        self.rows.push(RoaringBitmap::new());
        Ok(key)
    }

    /// Links `row` to `key`; false when the key was never made.
    pub(crate) fn link(&mut self, key: u32, row: u32) -> Option<bool> {
        self.rows.get_mut(key as usize).map(|rows| rows.insert(row))
    }

    /// Links every row linked to `from` to `to` too (both keys made).
    pub(crate) fn link_rows_of(&mut self, from: u32, to: u32) {
        if let Some(rows) = self.rows.get(from as usize).cloned()
            && let Some(into) = self.rows.get_mut(to as usize)
        {
            *into |= rows;
        }
    }

    /// A new key whose text `rows` hold.
    pub(crate) fn push(&mut self, rows: RoaringBitmap) -> Result<u32, TextError> {
        let key = self.new_key()?;
        self.rows[key as usize] = rows;
        Ok(key)
    }

    /// The rows of each key, in key order.
    pub(crate) fn sets(&self) -> &[RoaringBitmap] {
        &self.rows
    }

    /// Estimated heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.rows.iter().map(|r| r.serialized_size() + 32).sum()
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The rows linked to any of `keys` (keys out of range hold none).
    pub(crate) fn rows_of(&self, keys: impl IntoIterator<Item = u32>) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        for k in keys {
            if let Some(rows) = self.rows.get(k as usize) {
                out |= rows;
            }
        }
        out
    }

    /// [`rows_of`](Self::rows_of), only the rows also in `within`: the work
    /// is in proportion to the rows kept.
    pub(crate) fn rows_within(&self, keys: impl IntoIterator<Item = u32>, within: &RoaringBitmap) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        for k in keys {
            if let Some(rows) = self.rows.get(k as usize) {
                out |= rows & within;
            }
        }
        out
    }

    pub(crate) fn encode(&self) -> Result<Vec<u8>, TextError> {
        let mut out = Vec::new();
        let count = u32::try_from(self.rows.len()).map_err(|_| TextError::TooLarge("shared texts"))?;
        out.extend_from_slice(&count.to_le_bytes());
        for rows in &self.rows {
            let len = u32::try_from(rows.serialized_size()).map_err(|_| TextError::TooLarge("a link set"))?;
            out.extend_from_slice(&len.to_le_bytes());
            rows.serialize_into(&mut out)?;
        }
        Ok(out)
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Links, TextError> {
        let corrupt = |what: &str| TextError::Corrupt(format!("shared text links: {what}"));
        let mut rest = bytes;
        let mut take = |n: usize| -> Result<&[u8], TextError> {
            if rest.len() < n {
                return Err(corrupt("end of data"));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let u32_of = |b: &[u8]| b.first_chunk::<4>().map(|a| u32::from_le_bytes(*a));
        let count = u32_of(take(4)?).ok_or_else(|| corrupt("count"))?;
        // Each key takes at least its 4-byte length: a count the data cannot
        // hold is damage, not an allocation to attempt.
        if count as usize > bytes.len() / 4 {
            return Err(corrupt("count larger than the data"));
        }
        let mut rows = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let len = u32_of(take(4)?).ok_or_else(|| corrupt("length"))? as usize;
            let set = RoaringBitmap::deserialize_from(take(len)?).map_err(|e| corrupt(&e.to_string()))?;
            rows.push(set);
        }
        if !rest.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Links { rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_round_trip_and_refuse_damage() {
        let mut l = Links::default();
        let a = l.new_key().unwrap();
        let b = l.new_key().unwrap();
        l.link(a, 3);
        l.link(a, 9);
        l.link(b, 9);
        l.link(b, 100_000);
        assert_eq!(l.link(7, 1), None);
        let bytes = l.encode().unwrap();
        assert_eq!(Links::decode(&bytes).unwrap(), l);
        assert_eq!(l.rows_of([b]).iter().collect::<Vec<_>>(), vec![9, 100_000]);
        assert_eq!(l.rows_of([a, b, 42]).len(), 3);
        assert!(Links::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(Links::decode(&[0xff, 0xff, 0xff, 0x7f]).is_err());
        let mut long = bytes.clone();
        long.push(0);
        assert!(Links::decode(&long).is_err());
    }
}
