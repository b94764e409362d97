//! The packs of a data directory and the resident index over them:
//! reference → (pack, frame, where in it). Memory is O(payloads): about 100
//! bytes each, never their bytes; and the frames and dictionaries of the
//! few packs read last.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use super::pack::{self, Dictionary, PackEntry, PackIndex, PackReader};
use super::{Blob, FrameBuilder, FrameCache, PayloadRef};
use crate::error::Result;
use crate::hash::FastMap;
use crate::storage::{ObjectSource, PartStore};

/// Decompressed frames a pack writer keeps, for the payloads it frames
/// anew: it reads them in order, so a few suffice.
const PACK_FRAME_CACHE_BYTES: usize = 4 << 20;

/// Decompressed frames kept for reads (the payloads of one trace or one
/// page of results mostly share a few frames): a frame is a megabyte at
/// most, so memory stays bounded.
const RECENT_FRAMES: usize = 4;

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
    /// Dictionaries by pack id.
    dictionaries: Recent<u64, Arc<Dictionary>>,
    /// Decompressed frames.
    frames: Recent<FrameAt, Arc<[u8]>>,
}

/// The few values used last, by key, the most recently used last: a cache
/// whose memory is bounded by its length.
struct Recent<K, V> {
    cap: usize,
    items: Mutex<Vec<(K, V)>>,
}

impl<K: PartialEq, V: Clone> Recent<K, V> {
    fn new(cap: usize) -> Recent<K, V> {
        Recent {
            cap,
            items: Mutex::new(Vec::with_capacity(cap)),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let mut items = self.items.lock();
        let at = items.iter().position(|(k, _)| k == key)?;
        let hit = items.remove(at);
        let value = hit.1.clone();
        items.push(hit);
        Some(value)
    }

    /// Keeps `value` (unless another thread put one for `key` meanwhile),
    /// forgetting the least recently used past the cap.
    fn put(&self, key: K, value: V) {
        let mut items = self.items.lock();
        if !items.iter().any(|(k, _)| *k == key) {
            if items.len() == self.cap {
                items.remove(0);
            }
            items.push((key, value));
        }
    }

    fn retain(&self, keep: impl Fn(&K) -> bool) {
        self.items.lock().retain(|(k, _)| keep(k));
    }
}

/// A frame of a pack: (pack id, its offset there).
type FrameAt = (u64, u64);

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
            dictionaries: Recent::new(CACHED_DICTIONARIES),
            frames: Recent::new(RECENT_FRAMES),
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

    /// A stored payload's pack and the offset of its frame there, if it is
    /// here: reading payloads in this order reads each frame once.
    pub fn place(&self, id: &PayloadRef) -> Option<(u64, u64)> {
        let ix = self.index.read();
        ix.entries
            .get(id)
            .map(|(pack_id, entry)| (*pack_id, entry.frame.offset))
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
        let key = (pack_id, entry.frame.offset);
        let frame = match self.frames.get(&key) {
            Some(frame) => frame,
            None => {
                let dictionary = match dictionary {
                    Some(at) => Some(self.dictionary(pack_id, &*src, at, &what)?),
                    None => None,
                };
                let frame: Arc<[u8]> = pack::read_frame(&*src, &entry, dictionary.as_deref(), &what)?.into();
                self.frames.put(key, frame.clone());
                frame
            }
        };
        // Checked on every read, cached frame or not.
        pack::payload_in_frame(&frame, &entry, &what).map(Some)
    }

    /// Pack `id`'s dictionary, from the cache or read at `at`.
    fn dictionary(&self, id: u64, src: &dyn ObjectSource, at: (u64, u32), what: &str) -> Result<Arc<Dictionary>> {
        if let Some(d) = self.dictionaries.get(&id) {
            return Ok(d);
        }
        let d = Arc::new(pack::read_dictionary(src, at, what)?);
        self.dictionaries.put(id, d.clone());
        Ok(d)
    }

    /// Writes the blobs not stored yet as one pack, durably, then makes
    /// them visible. Returns how many were new. `blobs` are all a hot
    /// tier holds, so their bytes are trusted ([`Blob::decompress_trusted`]).
    ///
    /// A frame goes into the pack as it is when every byte of it belongs
    /// to one of `blobs`. One that also holds a payload the tier dropped
    /// (garbage, once no row of the tier refers to it) is not written: the
    /// new payloads in it are framed anew, so no byte of a dropped payload
    /// reaches a pack.
    pub fn write_pack<'a>(&self, blobs: impl IntoIterator<Item = &'a Blob>) -> Result<usize> {
        let mut new: Vec<&Blob> = Vec::new();
        // Per frame, the bytes of it that `blobs` hold.
        let mut held: crate::hash::FastMap<usize, u64> = Default::default();
        {
            let ix = self.index.read();
            let mut seen = crate::hash::FastSet::default();
            let mut places = crate::hash::FastSet::default();
            for b in blobs {
                if places.insert((b.frame_key(), b.offset, b.raw_len)) {
                    *held.entry(b.frame_key()).or_default() += b.raw_len;
                }
                if !ix.entries.contains_key(&b.id) && seen.insert(b.id) {
                    new.push(b);
                }
            }
        }
        if new.is_empty() {
            return Ok(0);
        }
        let (whole, partial): (Vec<&Blob>, Vec<&Blob>) = new
            .into_iter()
            .partition(|b| held.get(&b.frame_key()) == Some(&b.frame.raw_len));
        let mut reframed = FrameBuilder::default();
        if !partial.is_empty() {
            let mut partial = partial;
            super::sort_by_frame(&mut partial);
            let frames = FrameCache::new(PACK_FRAME_CACHE_BYTES);
            for b in partial {
                reframed.push(b.id, &frames.read_trusted(b, "the hot tier")?)?;
            }
        }
        let reframed = reframed.finish()?;
        let mut all: Vec<&Blob> = whole.into_iter().chain(&reframed).collect();
        super::sort_by_frame(&mut all);
        let written = all.len();
        let (bytes, index) = pack::encode(&all)?;
        let id = self.next_pack.fetch_add(1, Ordering::SeqCst);
        let name = pack::pack_name(id);
        // Committed (fsynced and renamed into place) before anything that
        // refers to these payloads is written or any WAL record carrying
        // them is deleted.
        self.store.put(&name, &bytes)?;
        let src = self.store.open(&name)?;
        self.index.write().add(src, id, index);
        Ok(written)
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
                ix.stats.payload_bytes -= e.stored_bytes();
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
        let live_bytes: u64 = live.iter().map(PackEntry::stored_bytes).sum();
        if !live.is_empty() && live_bytes * 2 > len && !force {
            return Ok(());
        }
        let name = pack::pack_name(id);
        let what = self.store.describe(&name);
        let mut written = 0;
        if !live.is_empty() {
            // The payloads kept are framed anew: nothing of a dropped one
            // stays in the new pack. In frame order, each old frame is
            // decompressed once.
            let mut live = live;
            live.sort_unstable_by_key(|e| (e.frame.offset, e.at));
            let mut reader = PackReader::new(&*src, dictionary, &what)?;
            let mut framed = FrameBuilder::default();
            for e in &live {
                framed.push(e.id, &reader.read(e)?)?;
            }
            let framed = framed.finish()?;
            let (bytes, index) = pack::encode(&framed.iter().collect::<Vec<_>>())?;
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
        self.frames.retain(|(pack, _)| *pack != id);
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
                stats.payload_bytes -= e.stored_bytes();
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
                self.stats.payload_bytes += e.stored_bytes();
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

    /// A frame whose payloads are all written goes into the pack as it is;
    /// one holding a payload the tier dropped does not, and no byte of the
    /// dropped payload reaches the pack.
    #[test]
    fn frames_go_into_packs_whole_unless_they_hold_a_dropped_payload() {
        let dir = tempfile::tempdir().unwrap();
        let s = PayloadStore::open(Arc::new(LocalStore::open(dir.path(), &["payloads"]).unwrap())).unwrap();
        let texts: Vec<Vec<u8>> = ["kept first ", "dropped secret ", "kept last "]
            .iter()
            .map(|t| t.repeat(200).into_bytes())
            .collect();
        let framed = |texts: &[Vec<u8>]| {
            let mut fb = FrameBuilder::default();
            for t in texts {
                fb.push(PayloadRef::of(t), t).unwrap();
            }
            fb.finish().unwrap()
        };
        let pack_data = |id: u64| {
            let src = s.store.open(&pack::pack_name(id)).unwrap();
            let index = pack::read_index(&*src, "pack").unwrap();
            let frames: Vec<Vec<u8>> = index
                .entries
                .iter()
                .map(|e| pack::read_frame(&*src, e, None, "pack").unwrap())
                .collect();
            (index, frames)
        };
        let whole = framed(&texts);
        assert_eq!(s.write_pack(&whole).unwrap(), 3);
        let (index, _) = pack_data(1);
        assert!(
            index.entries.iter().all(|e| e.frame == index.entries[0].frame),
            "one frame"
        );
        assert_eq!(
            index.entries[0].frame.zlen as usize,
            whole[0].frame.zstd.len(),
            "as it was"
        );

        let other: Vec<Vec<u8>> = texts.iter().map(|t| [b"other ".as_slice(), t].concat()).collect();
        let blobs = framed(&other);
        assert_eq!(s.write_pack([&blobs[0], &blobs[2]]).unwrap(), 2);
        let (index, frames) = pack_data(2);
        assert_eq!(index.entries.len(), 2);
        for frame in &frames {
            assert!(
                !frame.windows(14).any(|w| w == b"dropped secret"),
                "a dropped payload's bytes"
            );
        }
        for (b, t) in [(&blobs[0], &other[0]), (&blobs[2], &other[2])] {
            assert_eq!(s.read(&b.id).unwrap().unwrap(), *t);
        }
        assert!(s.read(&blobs[1].id).unwrap().is_none());
    }
}
