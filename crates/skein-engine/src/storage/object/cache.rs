//! The local cache of a bucket: whole objects this process wrote (kept
//! after their upload) and 1 MiB blocks of objects read back, bounded in
//! bytes together and evicted least recently used first.
//!
//! Crash safety: nothing here is the only copy of anything. A whole object
//! enters the cache by a rename of its staged file after the bucket holds it;
//! a block is written `.tmp` and renamed, with an xxh3 trailer checked the
//! first time this process reads it, so a block torn by a crash is dropped
//! and fetched again. Opening checks every whole file's size against the
//! bucket's listing and deletes what does not match or is not listed.
//!
//! Open handles: a whole file is read through a [`Resident`], which
//! eviction empties before it deletes the file, so an evicted object's disk
//! space is freed even while a part that reads it stays open (its reads go
//! to the bucket from then on).

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use crate::error::{IoContext, Result};
use crate::fsutil::TMP_SUFFIX;
use crate::storage::{LocalFile, ObjectSource};

/// Bytes a remote object is fetched and cached in. A point read costs one
/// request for at most this much; a scan one request per block.
pub(crate) const BLOCK: u64 = 1 << 20;
const BLOCK_SUFFIX: &str = ".blk";
const TRAILER: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Whole(String),
    Block(String, u64),
}

impl Key {
    fn name(&self) -> &str {
        match self {
            Key::Whole(n) | Key::Block(n, _) => n,
        }
    }
}

struct Entry {
    bytes: u64,
    tick: u64,
    /// A block's file, once opened and its trailer checked.
    block: Option<Arc<File>>,
}

#[derive(Default)]
struct State {
    entries: BTreeMap<Key, Entry>,
    by_tick: BTreeMap<u64, Key>,
    total: u64,
    next_tick: u64,
    /// Open whole files by object name (staged or cached).
    residents: HashMap<String, Weak<Resident>>,
}

impl State {
    fn touch(&mut self, key: &Key) -> Option<&mut Entry> {
        let tick = self.next_tick;
        let e = self.entries.get_mut(key)?;
        self.by_tick.remove(&e.tick);
        e.tick = tick;
        self.by_tick.insert(tick, key.clone());
        self.next_tick += 1;
        Some(e)
    }

    fn insert(&mut self, key: Key, bytes: u64) {
        self.remove(&key);
        let tick = self.next_tick;
        self.next_tick += 1;
        self.by_tick.insert(tick, key.clone());
        self.entries.insert(
            key,
            Entry {
                bytes,
                tick,
                block: None,
            },
        );
        self.total += bytes;
    }

    fn remove(&mut self, key: &Key) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.by_tick.remove(&e.tick);
        self.total -= e.bytes;
        Some(e)
    }
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct CacheStats {
    pub cache_dir: String,
    pub cache_capacity_bytes: u64,
    pub cache_bytes: u64,
    pub cache_objects: u64,
    pub cache_blocks: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_evictions: u64,
}

pub(crate) struct Cache {
    dir: PathBuf,
    capacity: u64,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl Cache {
    /// Opens the cache in `dir`, keeping what `listed` (object name → size
    /// in the bucket) still vouches for.
    pub fn open(dir: &Path, capacity: u64, listed: &HashMap<String, u64>) -> Result<Cache> {
        let objects = dir.join("objects");
        let blocks = dir.join("blocks");
        crate::fsutil::create_dir_all(&objects)?;
        crate::fsutil::create_dir_all(&blocks)?;
        let mut found: Vec<(SystemTime, Key, u64)> = Vec::new();
        for (path, rel, len, mtime) in walk(&objects)? {
            match listed.get(&rel) {
                Some(&size) if size == len && !rel.ends_with(TMP_SUFFIX) => found.push((mtime, Key::Whole(rel), len)),
                _ => remove_file(&path),
            }
        }
        for (path, rel, len, mtime) in walk(&blocks)? {
            let key = parse_block(&rel).filter(|(name, n)| {
                listed
                    .get(name)
                    .is_some_and(|&size| len == block_len(size, *n) + TRAILER as u64)
            });
            match key {
                Some((name, n)) => found.push((mtime, Key::Block(name, n), len)),
                None => remove_file(&path),
            }
        }
        found.sort_by_key(|f| f.0);
        let cache = Cache {
            dir: dir.to_path_buf(),
            capacity,
            state: Mutex::new(State::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        };
        {
            let mut st = cache.state.lock();
            for (_, key, len) in found {
                st.insert(key, len);
            }
            cache.evict(&mut st);
        }
        Ok(cache)
    }

    fn whole_path(&self, name: &str) -> PathBuf {
        self.dir.join("objects").join(name)
    }

    fn block_path(&self, name: &str, n: u64) -> PathBuf {
        self.dir.join("blocks").join(format!("{name}.{n}{BLOCK_SUFFIX}"))
    }

    /// Whether `name` is cached whole.
    #[cfg(test)]
    pub fn has_whole(&self, name: &str) -> bool {
        self.state.lock().entries.contains_key(&Key::Whole(name.to_string()))
    }

    /// Takes a staged file the bucket now holds into the cache (a rename,
    /// so a reader that has it open goes on reading it). False when it
    /// could not be moved (another filesystem): the caller deletes it.
    pub fn adopt(&self, name: &str, staged: &Path, len: u64) -> bool {
        let dst = self.whole_path(name);
        if let Some(parent) = dst.parent()
            && fs::create_dir_all(parent).is_err()
        {
            return false;
        }
        if fs::rename(staged, &dst).is_err() {
            return false;
        }
        let mut st = self.state.lock();
        st.insert(Key::Whole(name.to_string()), len);
        self.evict(&mut st);
        true
    }

    /// The open whole file of `name` at `path` (staged or cached), shared
    /// by every reader of it.
    pub fn resident(&self, name: &str, path: Option<&Path>) -> io::Result<Option<Arc<Resident>>> {
        let mut st = self.state.lock();
        if let Some(r) = st.residents.get(name).and_then(Weak::upgrade) {
            return Ok(Some(r));
        }
        let cached = self.whole_path(name);
        let path = match path {
            Some(p) => p.to_path_buf(),
            None if st.touch(&Key::Whole(name.to_string())).is_some() => cached,
            None => return Ok(None),
        };
        let r = Arc::new(Resident {
            file: RwLock::new(Some(ResidentFile {
                plain: Arc::new(LocalFile::open(&path)?),
                mapped: None,
            })),
        });
        st.residents.retain(|_, w| w.strong_count() > 0);
        st.residents.insert(name.to_string(), Arc::downgrade(&r));
        Ok(Some(r))
    }

    /// Counts a read served by a whole file, for the LRU order.
    pub fn touch_whole(&self, name: &str) {
        self.state.lock().touch(&Key::Whole(name.to_string()));
    }

    /// `len` bytes at `offset` of block `n` of `name`, if cached and sound.
    pub fn read_block(&self, name: &str, n: u64, offset: u64, len: usize) -> Option<Bytes> {
        let key = Key::Block(name.to_string(), n);
        let file = {
            let mut st = self.state.lock();
            let Some(e) = st.touch(&key) else {
                self.misses.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            match &e.block {
                Some(f) => Some(f.clone()),
                None => {
                    let bytes = e.bytes;
                    match open_checked(&self.block_path(name, n), bytes) {
                        Some(f) => {
                            let f = Arc::new(f);
                            e.block = Some(f.clone());
                            Some(f)
                        }
                        None => None,
                    }
                }
            }
        };
        let read = file.and_then(|f| {
            let mut buf = vec![0u8; len];
            f.read_exact_at(&mut buf, offset).ok().map(|_| Bytes::from(buf))
        });
        match read {
            Some(b) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(b)
            }
            None => {
                // Damaged or gone: forget it; the caller fetches it again.
                self.misses.fetch_add(1, Ordering::Relaxed);
                self.state.lock().remove(&key);
                remove_file(&self.block_path(name, n));
                None
            }
        }
    }

    /// Whether a fetched block can be kept at all.
    pub fn keeps_blocks(&self) -> bool {
        self.capacity >= BLOCK + TRAILER as u64
    }

    /// Keeps a fetched block. A failure to write it only costs a later fetch.
    pub fn insert_block(&self, name: &str, n: u64, block: &[u8]) {
        let bytes = (block.len() + TRAILER) as u64;
        if bytes > self.capacity {
            return;
        }
        let path = self.block_path(name, n);
        if write_block(&path, block).is_err() {
            return;
        }
        let mut st = self.state.lock();
        st.insert(Key::Block(name.to_string(), n), bytes);
        self.evict(&mut st);
    }

    /// Drops everything cached of `name` (it was deleted).
    pub fn forget(&self, name: &str) {
        let mut st = self.state.lock();
        let keys: Vec<Key> = st
            .entries
            .range(Key::Whole(name.to_string())..)
            .map(|(k, _)| k.clone())
            .take_while(|k| k.name() == name)
            .collect();
        for key in keys {
            st.remove(&key);
            self.delete(&key);
        }
    }

    /// Evicts least recently used entries until `want` bytes are freed or
    /// nothing is left (the disk is full); returns the bytes freed.
    pub fn shrink(&self, want: u64) -> u64 {
        let mut st = self.state.lock();
        let target = st.total.saturating_sub(want);
        let before = st.total;
        self.evict_to(&mut st, target);
        before - st.total
    }

    fn evict(&self, st: &mut State) {
        self.evict_to(st, self.capacity);
    }

    fn evict_to(&self, st: &mut State, limit: u64) {
        while st.total > limit {
            let Some((_, key)) = st.by_tick.pop_first() else {
                break;
            };
            st.remove(&key);
            if let Key::Whole(name) = &key
                && let Some(r) = st.residents.get(name).and_then(Weak::upgrade)
            {
                r.release();
            }
            self.delete(&key);
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn delete(&self, key: &Key) {
        match key {
            Key::Whole(name) => remove_file(&self.whole_path(name)),
            Key::Block(name, n) => remove_file(&self.block_path(name, *n)),
        }
    }

    pub fn stats(&self) -> CacheStats {
        let st = self.state.lock();
        let blocks = st.entries.keys().filter(|k| matches!(k, Key::Block(..))).count() as u64;
        CacheStats {
            cache_dir: self.dir.display().to_string(),
            cache_capacity_bytes: self.capacity,
            cache_bytes: st.total,
            cache_objects: st.entries.len() as u64 - blocks,
            cache_blocks: blocks,
            cache_hits: self.hits.load(Ordering::Relaxed),
            cache_misses: self.misses.load(Ordering::Relaxed),
            cache_evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

/// The length of block `n` of an object of `size` bytes.
pub(crate) fn block_len(size: u64, n: u64) -> u64 {
    size.saturating_sub(n * BLOCK).min(BLOCK)
}

/// A whole local copy of an object, open for reading until eviction.
pub(crate) struct Resident {
    file: RwLock<Option<ResidentFile>>,
}

struct ResidentFile {
    plain: Arc<LocalFile>,
    mapped: Option<Arc<dyn ObjectSource>>,
}

impl Resident {
    /// The file to read from (mapped for point reads, when it maps), or
    /// `None` once evicted.
    pub fn source(&self, mapped: bool) -> Option<Arc<dyn ObjectSource>> {
        let f = self.file.read();
        let f = f.as_ref()?;
        if mapped && let Some(m) = &f.mapped {
            return Some(m.clone());
        }
        Some(f.plain.clone())
    }

    /// Maps the file for point reads; a failure only costs speed.
    pub fn map(&self) {
        let mut f = self.file.write();
        if let Some(f) = f.as_mut()
            && f.mapped.is_none()
        {
            f.mapped = f.plain.for_point_reads().ok().flatten();
        }
    }

    fn release(&self) {
        *self.file.write() = None;
    }
}

fn open_checked(path: &Path, bytes: u64) -> Option<File> {
    let f = File::open(path).ok()?;
    let mut buf = vec![0u8; bytes as usize];
    f.read_exact_at(&mut buf, 0).ok()?;
    let (body, trailer) = buf.split_at(buf.len().checked_sub(TRAILER)?);
    let want = u64::from_le_bytes(trailer.try_into().ok()?);
    (xxhash_rust::xxh3::xxh3_64(body) == want).then_some(f)
}

fn write_block(path: &Path, block: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", path.display()));
    let mut f = File::create(&tmp)?;
    f.write_all(block)?;
    f.write_all(&xxhash_rust::xxh3::xxh3_64(block).to_le_bytes())?;
    drop(f);
    // No fsync: a block lost or torn by a crash fails its trailer and is
    // fetched again.
    fs::rename(&tmp, path)
}

fn parse_block(rel: &str) -> Option<(String, u64)> {
    let stem = rel.strip_suffix(BLOCK_SUFFIX)?;
    let (name, n) = stem.rsplit_once('.')?;
    Some((name.to_string(), n.parse().ok()?))
}

fn remove_file(path: &Path) {
    if let Err(e) = fs::remove_file(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove cache file {}: {e}", path.display());
    }
}

/// Every file under `root`: (path, path relative to root, length, mtime).
fn walk(root: &Path) -> Result<Vec<(PathBuf, String, u64, SystemTime)>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).ctx(|| format!("list {}", dir.display()))? {
            let entry = entry.ctx(|| format!("list {}", dir.display()))?;
            let path = entry.path();
            let meta = entry.metadata().ctx(|| format!("stat {}", path.display()))?;
            if meta.is_dir() {
                dirs.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().to_string())
                .unwrap_or_default();
            out.push((path, rel, meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(items: &[(&str, u64)]) -> HashMap<String, u64> {
        items.iter().map(|(n, s)| (n.to_string(), *s)).collect()
    }

    #[test]
    fn blocks_are_kept_until_the_budget_is_spent_least_recently_used_first() {
        let dir = tempfile::tempdir().unwrap();
        let size = 3 * BLOCK;
        let l = listed(&[("spans/a", size)]);
        let cap = 2 * (BLOCK + TRAILER as u64);
        let cache = Cache::open(dir.path(), cap, &l).unwrap();
        let block = |n: u8| vec![n; BLOCK as usize];
        cache.insert_block("spans/a", 0, &block(0));
        cache.insert_block("spans/a", 1, &block(1));
        assert_eq!(
            cache.read_block("spans/a", 0, 10, 4).unwrap(),
            Bytes::from(vec![0u8; 4])
        );
        // Block 1 is now the least recently used: a third block evicts it.
        cache.insert_block("spans/a", 2, &block(2));
        assert!(cache.read_block("spans/a", 1, 0, 1).is_none());
        assert_eq!(cache.read_block("spans/a", 2, 0, 1).unwrap()[0], 2);
        assert_eq!(cache.stats().cache_blocks, 2);
        assert!(cache.stats().cache_bytes <= cap);
        drop(cache);

        // Reopened, the blocks the listing vouches for are still there.
        let cache = Cache::open(dir.path(), cap, &l).unwrap();
        assert_eq!(cache.read_block("spans/a", 0, 0, 1).unwrap()[0], 0);
        // An object no longer listed loses its blocks.
        drop(cache);
        let cache = Cache::open(dir.path(), cap, &HashMap::new()).unwrap();
        assert_eq!(cache.stats().cache_bytes, 0);
        assert!(walk(&dir.path().join("blocks")).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_block_is_dropped_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let l = listed(&[("logs/b", 100)]);
        let cache = Cache::open(dir.path(), 1 << 30, &l).unwrap();
        cache.insert_block("logs/b", 0, &[7u8; 100]);
        let path = cache.block_path("logs/b", 0);
        drop(cache);
        let mut bytes = fs::read(&path).unwrap();
        bytes[3] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let cache = Cache::open(dir.path(), 1 << 30, &l).unwrap();
        assert!(cache.read_block("logs/b", 0, 0, 10).is_none());
        assert!(!path.exists(), "the damaged block is deleted");
    }

    #[test]
    fn an_evicted_whole_file_stops_being_read_and_frees_its_space() {
        let dir = tempfile::tempdir().unwrap();
        let staged = dir.path().join("staged");
        fs::write(&staged, b"0123456789").unwrap();
        let l = listed(&[("spans/p", 10)]);
        let cache = Cache::open(&dir.path().join("cache"), 15, &l).unwrap();
        let r = cache.resident("spans/p", Some(&staged)).unwrap().unwrap();
        assert!(cache.adopt("spans/p", &staged, 10));
        assert!(!staged.exists());
        // Still read through the handle opened before the move.
        assert_eq!(&r.source(false).unwrap().read_at(2, 3).unwrap()[..], b"234");
        assert!(cache.has_whole("spans/p"));
        // A block of another object pushes it out.
        cache.insert_block("spans/p", 0, &[1u8; 6]);
        assert!(!cache.has_whole("spans/p"));
        assert!(r.source(false).is_none(), "the evicted file is let go");
        assert!(!cache.whole_path("spans/p").exists());
        cache.forget("spans/p");
        assert_eq!(cache.stats().cache_bytes, 0);
    }
}
