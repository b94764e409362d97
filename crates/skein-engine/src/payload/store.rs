//! The packs of a data directory and the resident index over them:
//! reference → (pack, offset, length). Memory is O(payloads): about 100
//! bytes each, never their bytes; and the dictionaries of the few packs
//! read last.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use super::pack::{self, Dictionary, PackEntry, PackIndex, PackInput};
use super::{Blob, FrameCache, PayloadRef};
use crate::error::Result;
use crate::hash::FastMap;
use crate::storage::{ObjectSource, PartStore};

/// Decompressed frames a pack writer keeps: it reads them in order, so a
/// few suffice.
const PACK_FRAME_CACHE_BYTES: usize = 4 << 20;

/// Counters for `/api/v1/stats`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PayloadStats {
    /// Distinct payloads stored.
    pub payloads: u64,
    /// Their compressed bytes.
    pub payload_bytes: u64,
    /// Their bytes as sent.
    pub payload_logical_bytes: u64,
    pub payload_packs: u64,
}

struct Pack {
    id: u64,
    src: Arc<dyn ObjectSource>,
    /// Where its dictionary lies, if it has one.
    dictionary: Option<(u64, u32)>,
}

/// Dictionaries kept ready to decompress with: those of the packs read
/// last (a pack's is 64 KiB at most, so memory stays bounded however many
/// packs there are).
const CACHED_DICTIONARIES: usize = 8;

#[derive(Default)]
struct Index {
    /// Reference → (pack id, where in it).
    entries: FastMap<PayloadRef, (u64, PackEntry)>,
    packs: FastMap<u64, Pack>,
    stats: PayloadStats,
}

/// What one garbage collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Payloads no record refers to, forgotten.
    pub removed: u64,
    pub packs_rewritten: u64,
    pub packs_deleted: u64,
    /// Bytes of pack files deleted, less those written anew.
    pub bytes_freed: u64,
}

pub struct PayloadStore {
    store: Arc<dyn PartStore>,
    index: RwLock<Index>,
    next_pack: AtomicU64,
    /// (pack id, its dictionary), the most recently used last.
    dictionaries: Mutex<Vec<(u64, Arc<Dictionary>)>>,
}

impl PayloadStore {
    /// The object prefix packs live under.
    pub const PREFIX: &str = "payloads";

    /// Opens every pack of `store` and indexes its payloads.
    pub fn open(store: Arc<dyn PartStore>) -> Result<PayloadStore> {
        let mut index = Index::default();
        let mut max_id = 0;
        for name in store.list(Self::PREFIX)? {
            let Some(id) = pack::parse_pack_name(&name) else {
                continue;
            };
            max_id = max_id.max(id);
            let src = store.open(&name)?;
            let read = pack::read_index(&*src, &store.describe(&name))?;
            index.add(src, id, read);
        }
        Ok(PayloadStore {
            store,
            index: RwLock::new(index),
            next_pack: AtomicU64::new(max_id + 1),
            dictionaries: Mutex::new(Vec::new()),
        })
    }

    /// Takes the packs again from a store someone else writes (a
    /// read-only engine): opens the new ones, forgets those gone. Gone
    /// packs are forgotten first, so a payload a rewrite moved to a new
    /// pack is found there.
    pub fn refresh(&self) -> Result<()> {
        let listed: std::collections::BTreeMap<u64, String> = self
            .store
            .list(Self::PREFIX)?
            .into_iter()
            .filter_map(|n| Some((pack::parse_pack_name(&n)?, n)))
            .collect();
        let (new, gone): (Vec<u64>, Vec<u64>) = {
            let ix = self.index.read();
            (
                listed.keys().filter(|id| !ix.packs.contains_key(id)).copied().collect(),
                ix.packs.keys().filter(|id| !listed.contains_key(id)).copied().collect(),
            )
        };
        let mut opened = Vec::with_capacity(new.len());
        for id in new {
            let name = &listed[&id];
            let src = self.store.open(name)?;
            let read = pack::read_index(&*src, &self.store.describe(name))?;
            opened.push((src, id, read));
        }
        let mut ix = self.index.write();
        for id in gone {
            ix.remove_pack(id);
        }
        for (src, id, read) in opened {
            ix.add(src, id, read);
        }
        Ok(())
    }

    pub fn contains(&self, id: &PayloadRef) -> bool {
        self.index.read().entries.contains_key(id)
    }

    /// A stored payload's bytes, checked against its name, or `None` if it
    /// is not here.
    pub fn read(&self, id: &PayloadRef) -> Result<Option<Vec<u8>>> {
        let (src, entry, pack_id, dictionary) = {
            let ix = self.index.read();
            let Some((pack_id, entry)) = ix.entries.get(id) else {
                return Ok(None);
            };
            let Some(pack) = ix.packs.get(pack_id) else {
                return Ok(None);
            };
            (pack.src.clone(), *entry, pack.id, pack.dictionary)
        };
        let what = self.store.describe(&pack::pack_name(pack_id));
        let dictionary = match dictionary {
            Some(at) => Some(self.dictionary(pack_id, &*src, at, &what)?),
            None => None,
        };
        pack::read_payload(&*src, &entry, dictionary.as_deref(), &what).map(Some)
    }

    /// Pack `id`'s dictionary, from the cache or read at `at`.
    fn dictionary(&self, id: u64, src: &dyn ObjectSource, at: (u64, u32), what: &str) -> Result<Arc<Dictionary>> {
        let cached = {
            let mut cache = self.dictionaries.lock();
            let found = cache.iter().position(|(p, _)| *p == id).map(|i| cache.remove(i));
            found.inspect(|hit| cache.push(hit.clone()))
        };
        if let Some((_, d)) = cached {
            return Ok(d);
        }
        let d = Arc::new(pack::read_dictionary(src, at, what)?);
        let mut cache = self.dictionaries.lock();
        if !cache.iter().any(|(p, _)| *p == id) {
            if cache.len() == CACHED_DICTIONARIES {
                cache.remove(0);
            }
            cache.push((id, d.clone()));
        }
        Ok(d)
    }

    /// Writes the blobs not stored yet as one pack, durably, then makes
    /// them visible. Returns how many were new. The blobs are a hot
    /// tier's, so their bytes are trusted ([`Blob::decompress_trusted`]).
    pub fn write_pack<'a>(&self, blobs: impl IntoIterator<Item = &'a Blob>) -> Result<usize> {
        let mut new: Vec<&Blob> = Vec::new();
        {
            let ix = self.index.read();
            let mut seen = crate::hash::FastSet::default();
            for b in blobs {
                if !ix.entries.contains_key(&b.id) && seen.insert(b.id) {
                    new.push(b);
                }
            }
        }
        if new.is_empty() {
            return Ok(0);
        }
        // In frame order, each frame is decompressed once: the dictionary
        // sample reads a few payloads ahead, then the pack reads them all
        // in this order.
        super::sort_by_frame(&mut new);
        let frames = FrameCache::new(PACK_FRAME_CACHE_BYTES);
        let inputs: Vec<PackInput> = new.iter().map(|b| PackInput::from(*b)).collect();
        let (bytes, index) = pack::encode(&inputs, &|i| frames.read_trusted(new[i], "the hot tier"))?;
        let id = self.next_pack.fetch_add(1, Ordering::SeqCst);
        let name = pack::pack_name(id);
        // Committed (fsynced and renamed into place) before anything that
        // refers to these payloads is written or any WAL record carrying
        // them is deleted.
        self.store.put(&name, &bytes)?;
        let src = self.store.open(&name)?;
        self.index.write().add(src, id, index);
        Ok(new.len())
    }

    pub fn stats(&self) -> PayloadStats {
        self.index.read().stats.clone()
    }

    /// Forgets every payload not in `live`: no ingest can refer to it any
    /// more (the caller makes sure of that), so it is garbage. Returns the
    /// packs that now hold garbage.
    pub fn forget_all_but(&self, live: &crate::hash::FastSet<PayloadRef>, report: &mut GcReport) -> Vec<u64> {
        let mut ix = self.index.write();
        let dead: Vec<PayloadRef> = ix.entries.keys().filter(|id| !live.contains(*id)).copied().collect();
        let mut packs: Vec<u64> = Vec::new();
        for id in dead {
            if let Some((pack, e)) = ix.entries.remove(&id) {
                ix.stats.payloads -= 1;
                ix.stats.payload_bytes -= e.zlen as u64;
                ix.stats.payload_logical_bytes -= e.raw_len;
                report.removed += 1;
                packs.push(pack);
            }
        }
        packs.sort_unstable();
        packs.dedup();
        packs
    }

    /// Rewrites pack `id` without its garbage if at least half of its
    /// bytes are garbage, or if `force` (an erasure: any garbage); deletes
    /// it if all are. Crash safety: the new
    /// pack is committed before the old one is deleted; a crash between
    /// leaves both, and the next open indexes a payload from either.
    pub fn compact_pack(&self, id: u64, force: bool, report: &mut GcReport) -> Result<()> {
        let (src, dictionary, live, len) = {
            let ix = self.index.read();
            let Some(pack) = ix.packs.get(&id) else { return Ok(()) };
            let live: Vec<PackEntry> = ix.entries.values().filter(|(p, _)| *p == id).map(|(_, e)| *e).collect();
            (pack.src.clone(), pack.dictionary, live, pack.src.len())
        };
        let live_bytes: u64 = live.iter().map(|e| e.zlen as u64).sum();
        if !live.is_empty() && live_bytes * 2 > len && !force {
            return Ok(());
        }
        let name = pack::pack_name(id);
        let what = self.store.describe(&name);
        let mut written = 0;
        if !live.is_empty() {
            // The new pack samples its own dictionary from the payloads
            // it keeps: nothing of a dropped payload stays in it.
            let dictionary = match dictionary {
                Some(at) => Some(pack::read_dictionary(&*src, at, &what)?),
                None => None,
            };
            let inputs: Vec<PackInput> = live
                .iter()
                .map(|e| PackInput {
                    id: e.id,
                    raw_len: e.raw_len,
                    alone: None,
                })
                .collect();
            let (bytes, index) = pack::encode(&inputs, &|i| {
                pack::read_payload(&*src, &live[i], dictionary.as_ref(), &what)
            })?;
            let new_id = self.next_pack.fetch_add(1, Ordering::SeqCst);
            let new_name = pack::pack_name(new_id);
            self.store.put(&new_name, &bytes)?;
            written = bytes.len() as u64;
            let new_src = self.store.open(&new_name)?;
            let mut ix = self.index.write();
            ix.packs.insert(
                new_id,
                Pack {
                    id: new_id,
                    src: new_src,
                    dictionary: index.dictionary,
                },
            );
            ix.stats.payload_packs += 1;
            for e in index.entries {
                // Moved: only entries still in the old pack (a payload
                // forgotten meanwhile stays forgotten).
                if let Some(slot) = ix.entries.get_mut(&e.id)
                    && slot.0 == id
                {
                    *slot = (new_id, e);
                }
            }
            report.packs_rewritten += 1;
        } else {
            report.packs_deleted += 1;
        }
        {
            let mut ix = self.index.write();
            if ix.entries.values().any(|(p, _)| *p == id) {
                // Something came to refer to this pack meanwhile; keep it.
                return Ok(());
            }
            ix.packs.remove(&id);
            ix.stats.payload_packs -= 1;
        }
        // Readers holding the old source keep reading it: an open file
        // outlives its name.
        self.store.remove(&name)?;
        report.bytes_freed += len.saturating_sub(written);
        Ok(())
    }
}

impl Index {
    /// Forgets a pack and the payloads found in it.
    fn remove_pack(&mut self, id: u64) {
        if self.packs.remove(&id).is_none() {
            return;
        }
        self.stats.payload_packs -= 1;
        let stats = &mut self.stats;
        self.entries.retain(|_, (pack, e)| {
            let keep = *pack != id;
            if !keep {
                stats.payloads -= 1;
                stats.payload_bytes -= e.zlen as u64;
                stats.payload_logical_bytes -= e.raw_len;
            }
            keep
        });
    }

    fn add(&mut self, src: Arc<dyn ObjectSource>, id: u64, index: PackIndex) {
        self.packs.insert(
            id,
            Pack {
                id,
                src,
                dictionary: index.dictionary,
            },
        );
        self.stats.payload_packs += 1;
        for e in index.entries {
            if let std::collections::hash_map::Entry::Vacant(v) = self.entries.entry(e.id) {
                v.insert((id, e));
                self.stats.payloads += 1;
                self.stats.payload_bytes += e.zlen as u64;
                self.stats.payload_logical_bytes += e.raw_len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStore;

    #[test]
    fn payloads_are_stored_once_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let open_store = || -> Arc<dyn PartStore> { Arc::new(LocalStore::open(dir.path(), &["payloads"]).unwrap()) };
        let blob = |t: &[u8]| Blob::compress(PayloadRef::of(t), t).unwrap();
        let (a, b) = (blob(&[1u8; 5000]), blob(b"second"));
        {
            let s = PayloadStore::open(open_store()).unwrap();
            assert_eq!(s.write_pack([&a, &a, &b]).unwrap(), 2);
            assert_eq!(s.write_pack([&a]).unwrap(), 0, "nothing new: no pack");
            assert_eq!(s.stats().payload_packs, 1);
        }
        let s = PayloadStore::open(open_store()).unwrap();
        let st = s.stats();
        assert_eq!((st.payloads, st.payload_logical_bytes), (2, 5006));
        assert_eq!(st.payload_bytes, (a.frame.zstd.len() + b.frame.zstd.len()) as u64);
        assert_eq!(s.read(&a.id).unwrap().unwrap(), vec![1u8; 5000]);
        assert!(s.read(&PayloadRef::of(b"never")).unwrap().is_none());
        // New packs do not reuse an id.
        s.write_pack([&blob(b"third")]).unwrap();
        assert_eq!(PayloadStore::open(open_store()).unwrap().stats().payload_packs, 2);
    }
}
