//! Where part files live, behind one trait: the engine never calls `std::fs`
//! for parts directly, so object storage can stand in for the local disk.
//!
//! Crash safety of `LocalStore`: a sink writes `NAME.tmp`; `commit` fsyncs
//! it, renames it to `NAME` and fsyncs the directory. Readers and `list`
//! never see `.tmp` files, and `LocalStore::open` deletes leftovers.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{self, TMP_SUFFIX};

pub mod hold;
pub mod object;

/// Random-access reads of one stored object.
pub trait ObjectSource: Send + Sync {
    fn len(&self) -> u64;
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes>;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The same object for point reads, when it can serve them cheaper: a
    /// local file mapped into memory answers a read with a slice instead of
    /// a system call, a zeroed buffer and a copy. `None` when it cannot.
    fn for_point_reads(&self) -> io::Result<Option<Arc<dyn ObjectSource>>> {
        Ok(None)
    }
}

/// A new object being written; invisible until committed.
pub trait ObjectSink: Write + Send {
    /// Makes the object durable and visible under its name.
    fn commit(self: Box<Self>) -> Result<()>;
}

/// A flat namespace of immutable objects (`spans/0000000000000001.parquet`).
pub trait PartStore: Send + Sync {
    /// Names under `prefix`, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
    fn create(&self, name: &str) -> Result<Box<dyn ObjectSink>>;
    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>>;
    fn remove(&self, name: &str) -> Result<()>;
    /// Total bytes stored under `prefix`.
    fn size(&self, prefix: &str) -> Result<u64>;
    /// Where `name` lives, for messages.
    fn describe(&self, name: &str) -> String;

    /// Uploads, requests and cache of a store on object storage; `None`
    /// for local disk.
    fn object_storage_stats(&self) -> Option<object::ObjectStorageStats> {
        None
    }

    /// Frees up to `bytes` of local disk that holds only copies (a
    /// bucket's cache); the bytes freed. Local disk alone has none.
    fn free_local(&self, _bytes: u64) -> u64 {
        0
    }

    /// Takes the list of objects again, for a reader of a store someone
    /// else writes (a read-only server on a bucket); a no-op otherwise.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    /// Waits until every object written is in its final place (uploaded,
    /// for object storage), or `timeout` passes; true when it is.
    fn wait_uploaded(&self, _timeout: std::time::Duration) -> bool {
        true
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let mut sink = self.create(name)?;
        sink.write_all(bytes)
            .map_err(|e| Error::io(format!("write {}", self.describe(name)), e))?;
        sink.commit()
    }

    fn get(&self, name: &str) -> Result<Bytes> {
        let src = self.open(name)?;
        src.read_at(0, src.len() as usize)
            .map_err(|e| Error::io(format!("read {}", self.describe(name)), e))
    }
}

/// Parts in a local directory.
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    pub fn open(root: &Path, prefixes: &[&str]) -> Result<LocalStore> {
        fsutil::create_dir_all(root)?;
        for p in prefixes {
            let dir = root.join(p);
            fsutil::create_dir_all(&dir)?;
            fsutil::remove_tmp_files(&dir)?;
        }
        Ok(LocalStore {
            root: root.to_path_buf(),
        })
    }

    /// A store over `root` that changes nothing on opening (no directories
    /// made, no temporary files removed): for offline checks beside a
    /// running server (`skein verify --erasure`).
    pub fn read_only(root: &Path) -> LocalStore {
        LocalStore {
            root: root.to_path_buf(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

pub(crate) struct LocalFile {
    file: File,
    len: u64,
}

impl LocalFile {
    pub(crate) fn open(path: &Path) -> io::Result<LocalFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(LocalFile { file, len })
    }
}

impl ObjectSource for LocalFile {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(Bytes::from(buf))
    }

    fn for_point_reads(&self) -> io::Result<Option<Arc<dyn ObjectSource>>> {
        if self.len == 0 {
            return Ok(None);
        }
        // SAFETY: a mapped file changing underneath is undefined behaviour
        // (and a truncated one raises SIGBUS). Objects of a store are never
        // modified once committed: they are written as `.tmp`, renamed into
        // place and only ever deleted, and deleting keeps the mapping valid.
        // The data directory is this process's alone (lock file).
        let map = unsafe { memmap2::Mmap::map(&self.file)? };
        Ok(Some(Arc::new(InMemoryObject(Bytes::from_owner(map)))))
    }
}

/// An object whose bytes are in memory: a local file mapped for point
/// reads (scans stay on `pread`, so they do not count a whole part in the
/// resident set), or bytes at hand (tests, fuzz targets).
pub struct InMemoryObject(pub Bytes);

impl ObjectSource for InMemoryObject {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= self.0.len())
            .map(|r| self.0.slice(r))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of an object in memory"))
    }
}

/// A `.tmp` file until committed. One dropped uncommitted (its writer
/// failed: a full disk) deletes its file, so the space comes back at once
/// rather than at the next start.
struct LocalSink {
    tmp: PathBuf,
    dst: PathBuf,
    /// `None` once committing began.
    file: Option<io::BufWriter<PacedWriteback>>,
}

impl Drop for LocalSink {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Bytes a part file is written back in, as it is written.
const WRITEBACK_CHUNK: u64 = 256 << 10;

/// A file whose pages are handed to the disk a chunk at a time while it is
/// written, one chunk in flight, rather than all left dirty for the final
/// fsync.
///
/// Why: a WAL fsync that grows its segment commits the filesystem journal,
/// and on ext4 (`data=ordered`) that commit first writes out the dirty data
/// of every file with blocks allocated in it, so an acknowledgement could
/// wait behind megabytes of a part being written at the same moment. Written
/// back 256 KiB at a time, at most that stands in front of it. Measured here
/// with a 4 MiB file written every 250 ms beside 60 KB appends, each
/// `fdatasync`ed, every 10 ms: append p99 11.6–13.0 ms with the file
/// written at once, 5.7–6.7 ms in 256 KiB steps (three runs each; with two
/// chunks in flight the gain mostly vanished). The writer waits for its
/// disk a chunk at a time instead of once at the end; it is a background
/// thread. Writeback is only scheduling: durability still comes from
/// `commit`'s fsync, which also reports any write error.
struct PacedWriteback {
    file: File,
    written: u64,
    /// Bytes written back so far.
    written_back: u64,
}

impl PacedWriteback {
    fn new(file: File) -> Self {
        PacedWriteback {
            file,
            written: 0,
            written_back: 0,
        }
    }

    /// Writes `[offset, offset + len)` back to the disk and waits for it.
    fn write_back(&self, offset: u64, len: u64) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: the descriptor is open for the duration of the call,
            // which touches no memory of ours. Its error is ignored on
            // purpose: this only schedules writes, and the fsync in
            // `commit` reports any failure to write.
            unsafe {
                libc::sync_file_range(
                    self.file.as_raw_fd(),
                    offset as libc::off64_t,
                    len as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }
}

impl Write for PacedWriteback {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        while self.written - self.written_back >= WRITEBACK_CHUNK {
            self.write_back(self.written_back, WRITEBACK_CHUNK);
            self.written_back += WRITEBACK_CHUNK;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl LocalSink {
    fn file(&mut self) -> io::Result<&mut io::BufWriter<PacedWriteback>> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("write to a committed sink"))
    }
}

impl Write for LocalSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file()?.flush()
    }
}

impl ObjectSink for LocalSink {
    fn commit(mut self: Box<Self>) -> Result<()> {
        let (tmp, dst) = (self.tmp.clone(), self.dst.clone());
        let file = self
            .file
            .take()
            .ok_or_else(|| Error::Other(format!("{} committed twice", tmp.display())))?;
        let put = || -> Result<()> {
            let file = file
                .into_inner()
                .map_err(|e| Error::io(format!("flush {}", tmp.display()), e.into_error()))?
                .file;
            file.sync_all().ctx(|| format!("fsync {}", tmp.display()))?;
            drop(file);
            fs::rename(&tmp, &dst).ctx(|| format!("rename {} to {}", tmp.display(), dst.display()))
        };
        if let Err(e) = put() {
            // Never renamed: nothing refers to it.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fsutil::fsync_dir(dst.parent().unwrap_or(Path::new(".")))
    }
}

impl PartStore for LocalStore {
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let dir = self.path(prefix);
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).ctx(|| format!("list {}", dir.display()))? {
            let entry = entry.ctx(|| format!("list {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if !name.ends_with(TMP_SUFFIX) {
                out.push(format!("{prefix}/{name}"));
            }
        }
        out.sort();
        Ok(out)
    }

    fn create(&self, name: &str) -> Result<Box<dyn ObjectSink>> {
        let dst = self.path(name);
        let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", dst.display()));
        let file = File::create(&tmp).ctx(|| format!("create {}", tmp.display()))?;
        Ok(Box::new(LocalSink {
            tmp,
            dst,
            file: Some(io::BufWriter::with_capacity(
                WRITEBACK_CHUNK as usize,
                PacedWriteback::new(file),
            )),
        }))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>> {
        let path = self.path(name);
        Ok(Arc::new(
            LocalFile::open(&path).ctx(|| format!("open {}", path.display()))?,
        ))
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.path(name);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
        }
    }

    fn size(&self, prefix: &str) -> Result<u64> {
        let mut total = 0;
        for name in self.list(prefix)? {
            total += fs::metadata(self.path(&name)).map(|m| m.len()).unwrap_or(0);
        }
        Ok(total)
    }

    fn describe(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

/// Adapts an [`ObjectSource`] to the Parquet reader.
#[derive(Clone)]
pub struct ParquetSource(pub Arc<dyn ObjectSource>);

impl parquet::file::reader::Length for ParquetSource {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

pub struct SourceRead {
    src: Arc<dyn ObjectSource>,
    pos: u64,
}

impl Read for SourceRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let remaining = self.src.len().saturating_sub(self.pos);
        let n = (buf.len() as u64).min(remaining) as usize;
        if n == 0 {
            return Ok(0);
        }
        let bytes = self.src.read_at(self.pos, n)?;
        buf[..n].copy_from_slice(&bytes);
        self.pos += n as u64;
        Ok(n)
    }
}

impl parquet::file::reader::ChunkReader for ParquetSource {
    type T = io::BufReader<SourceRead>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(io::BufReader::with_capacity(
            8 << 10,
            SourceRead {
                src: self.0.clone(),
                pos: start,
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.0
            .read_at(start, length)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_appear_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["spans"]).unwrap();
        let mut sink = store.create("spans/a").unwrap();
        sink.write_all(b"hello").unwrap();
        assert!(
            store.list("spans").unwrap().is_empty(),
            "uncommitted objects are invisible"
        );
        sink.commit().unwrap();
        assert_eq!(store.list("spans").unwrap(), vec!["spans/a".to_string()]);
        assert_eq!(&store.get("spans/a").unwrap()[..], b"hello");
        assert_eq!(store.size("spans").unwrap(), 5);
        // An abandoned sink leaves a .tmp that reopening cleans up.
        let sink = store.create("spans/b").unwrap();
        drop(sink);
        drop(store);
        let _store = LocalStore::open(dir.path(), &["spans"]).unwrap();
        assert!(!dir.path().join("spans/b.tmp").exists());
    }

    #[test]
    fn a_file_written_back_in_chunks_holds_every_byte_in_order() {
        // Writes of odd sizes, some larger than a chunk, so the writeback
        // steps fall inside writes and across the buffer's boundaries.
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["spans"]).unwrap();
        let mut sink = store.create("spans/big").unwrap();
        let mut want = Vec::new();
        let mut i = 0u32;
        for size in [1usize, 7, 100_003, 262_144, 300_001, 5, 1 << 20, 65_537]
            .into_iter()
            .cycle()
            .take(24)
        {
            let piece: Vec<u8> = (0..size)
                .map(|_| {
                    i = i.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (i >> 16) as u8
                })
                .collect();
            sink.write_all(&piece).unwrap();
            want.extend_from_slice(&piece);
        }
        assert!(want.len() as u64 > 20 * WRITEBACK_CHUNK);
        sink.commit().unwrap();
        let got = store.get("spans/big").unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got[..] == want[..], "the file differs from what was written");
    }

    #[test]
    fn a_mapped_file_reads_what_the_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["spans"]).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        store.put("spans/a", &data).unwrap();
        let src = store.open("spans/a").unwrap();
        let mapped = src.for_point_reads().unwrap().expect("local files map");
        assert_eq!(mapped.len(), src.len());
        for (off, len) in [(0, 10), (4093, 7), (9_990, 10), (0, 10_000), (10_000, 0)] {
            assert_eq!(mapped.read_at(off, len).unwrap(), src.read_at(off, len).unwrap());
        }
        for (off, len) in [(9_995, 6), (10_001, 0), (u64::MAX, 1)] {
            let e = mapped.read_at(off, len).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{off}+{len}");
        }
        // Nothing to map in an empty file; reads go through `read_at`.
        store.put("spans/empty", b"").unwrap();
        assert!(store.open("spans/empty").unwrap().for_point_reads().unwrap().is_none());
    }
}
