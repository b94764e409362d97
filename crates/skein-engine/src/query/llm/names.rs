//! Strings interned back to back, for aggregations over many repeated names.

use crate::hash::FastMap;

/// Strings seen, each numbered once, stored back to back (a session list
/// interns tens of thousands of ids: one allocation each was a tenth of
/// its time).
#[derive(Default)]
pub(super) struct Names {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
    /// A name's hash → its number. A second name with the same 64-bit hash
    /// (vanishingly rare) is numbered in `clashes` instead.
    by_hash: FastMap<u64, u32>,
    clashes: Vec<u32>,
    /// The last few names numbered, compared before hashing, when the
    /// names are few and come up again and again (models, agents); empty
    /// for many (session ids).
    recent: Vec<u32>,
    next_recent: usize,
}

impl Names {
    /// Names that are few: the last eight are compared before hashing.
    pub(super) fn few() -> Names {
        Names {
            recent: vec![u32::MAX; 8],
            ..Names::default()
        }
    }

    pub(super) fn hash(s: &str) -> u64 {
        use std::hash::BuildHasher;
        std::hash::BuildHasherDefault::<crate::hash::WordHasher>::default().hash_one(s)
    }

    pub(super) fn name(&self, i: u32) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i as usize - 1] as usize };
        &self.text[start..self.ends[i as usize] as usize]
    }

    pub(super) fn find(&self, h: u64, s: &str) -> Option<u32> {
        match self.by_hash.get(&h) {
            Some(&i) if self.name(i) == s => Some(i),
            Some(_) => self.clashes.iter().copied().find(|&i| self.name(i) == s),
            None => None,
        }
    }

    pub(super) fn get(&self, s: &str) -> Option<u32> {
        self.find(Self::hash(s), s)
    }

    pub(super) fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.recent.iter().find(|&&i| i != u32::MAX && self.name(i) == s) {
            return i;
        }
        let i = self.id_hashed(Self::hash(s), s);
        if !self.recent.is_empty() {
            self.recent[self.next_recent] = i;
            self.next_recent = (self.next_recent + 1) % self.recent.len();
        }
        i
    }

    pub(super) fn id_hashed(&mut self, h: u64, s: &str) -> u32 {
        if let Some(i) = self.find(h, s) {
            return i;
        }
        let i = self.ends.len() as u32;
        self.text.push_str(s);
        self.ends.push(self.text.len() as u32);
        match self.by_hash.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(_) => self.clashes.push(i),
        }
        i
    }

    /// The names of `ids`, sorted.
    pub(super) fn sorted(&self, ids: &[u32]) -> Vec<String> {
        let mut v: Vec<String> = ids.iter().map(|&i| self.name(i).to_string()).collect();
        v.sort_unstable();
        v
    }
}

/// The numbers of one batch's dictionary values (see
/// [`NameKeys`](super::row::NameKeys)), each found on first use: the
/// batch's rows then cost an index each rather than a lookup by name.
#[derive(Default)]
pub(super) struct KeyMemo {
    batch: u64,
    /// By key: a number, [`KeyMemo::UNSET`] or [`KeyMemo::ABSENT`].
    ids: Vec<u32>,
}

impl KeyMemo {
    const UNSET: u32 = u32::MAX;
    const ABSENT: u32 = u32::MAX - 1;

    /// The number of `key` in `batch`: remembered, else `find`'s.
    pub(super) fn get(&mut self, batch: u64, key: u32, find: impl FnOnce() -> Option<u32>) -> Option<u32> {
        if self.batch != batch {
            self.batch = batch;
            self.ids.clear();
        }
        let k = key as usize;
        if k >= self.ids.len() {
            self.ids.resize(k + 1, Self::UNSET);
        }
        if self.ids[k] == Self::UNSET {
            self.ids[k] = find().unwrap_or(Self::ABSENT);
        }
        (self.ids[k] != Self::ABSENT).then_some(self.ids[k])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn names_are_numbered_once_even_when_hashes_clash() {
        let mut n = Names::default();
        let a = n.id_hashed(7, "alpha");
        let b = n.id_hashed(7, "beta");
        let c = n.id("gamma");
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(n.id_hashed(7, "beta"), b);
        assert_eq!(n.id_hashed(7, "alpha"), a);
        assert_eq!(n.find(7, "beta"), Some(b));
        assert_eq!(n.find(7, "delta"), None);
        assert_eq!((n.name(a), n.name(b), n.name(c)), ("alpha", "beta", "gamma"));
        assert_eq!(n.get("gamma"), Some(c));
        assert_eq!(n.sorted(&[c, a]), ["alpha", "gamma"]);

        // Remembering the last few changes no number.
        let mut few = Names::few();
        let names: Vec<String> = (0..20).map(|i| format!("model-{i}")).collect();
        for round in 0..3 {
            for (i, name) in names.iter().enumerate().take(5 + 5 * round) {
                assert_eq!(few.id(name), i as u32);
            }
        }
        assert_eq!(few.get("model-9"), Some(9));
    }

    #[test]
    fn key_memos_forget_at_a_new_batch() {
        let mut m = KeyMemo::default();
        let mut finds = 0;
        let mut find = |v: Option<u32>| {
            finds += 1;
            v
        };
        assert_eq!(m.get(1, 3, || find(Some(7))), Some(7));
        assert_eq!(m.get(1, 3, || find(Some(8))), Some(7));
        assert_eq!(m.get(1, 0, || find(None)), None);
        assert_eq!(m.get(1, 0, || find(Some(9))), None);
        assert_eq!(m.get(2, 3, || find(Some(8))), Some(8));
        assert_eq!(finds, 3);
    }
}
