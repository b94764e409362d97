//! Where a backup lives: a local directory or a bucket prefix, holding the
//! same relative names as a data directory (`parts/spans/<id>.parquet`, …)
//! and `manifest.json`.
//!
//! Crash safety: every file is written whole or not at all — in a
//! directory `NAME.tmp` → fsync → rename → fsync dir, in a bucket a
//! conditional PUT or a multipart upload completed after its last part —
//! and the manifest is written last, so a backup without one is an
//! interrupted backup, which restore refuses.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{self, TMP_SUFFIX};
use crate::storage::object::{PutError, Remote, RemoteConfig};
use crate::storage::{LocalFile, ObjectSource};

/// A backup's place, as the user wrote it.
#[derive(Debug, Clone)]
pub enum Location {
    Dir(PathBuf),
    /// `s3://BUCKET/PREFIX`, reached with these settings over the `AWS_*`
    /// environment (as `--storage` is).
    Bucket(RemoteConfig),
}

impl Location {
    /// `s3://…` is a bucket; anything else a directory.
    pub fn parse(s: &str, bucket_options: Vec<(String, String)>) -> Location {
        if s.contains("://") {
            Location::Bucket(RemoteConfig {
                url: s.to_string(),
                options: bucket_options,
            })
        } else {
            Location::Dir(PathBuf::from(s))
        }
    }
}

impl Location {
    /// The location `rel` (`a/b/`) inside this one.
    pub fn child(&self, rel: &str) -> Location {
        let rel = rel.trim_matches('/');
        match self {
            Location::Dir(p) => Location::Dir(p.join(rel)),
            Location::Bucket(c) => Location::Bucket(RemoteConfig {
                url: format!("{}/{rel}", c.url.trim_end_matches('/')),
                options: c.options.clone(),
            }),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(p) => write!(f, "{}", p.display()),
            Location::Bucket(c) => f.write_str(&c.url),
        }
    }
}

/// The files of one backup.
pub(crate) trait Repo: Send + Sync {
    /// Every file, relative names, sorted, with its size.
    fn list(&self) -> Result<Vec<(String, u64)>>;
    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>>;
    /// Writes `len` bytes from `reader` as `name`, atomically.
    fn write(&self, name: &str, len: u64, reader: Box<dyn Read + Send>) -> Result<()>;
    fn describe(&self, name: &str) -> String;
}

pub(crate) fn open(loc: &Location) -> Result<Box<dyn Repo>> {
    Ok(match loc {
        Location::Dir(p) => Box::new(DirRepo { root: p.clone() }),
        Location::Bucket(cfg) => Box::new(BucketRepo {
            remote: Arc::new(Remote::connect(cfg)?),
        }),
    })
}

/// Refuses a place that holds anything already: a backup never mixes with
/// another's files, nor a restore with a data directory's.
pub(crate) fn ensure_empty(repo: &dyn Repo, what: &str, place: &str) -> Result<()> {
    let found = repo.list()?;
    if let Some((first, _)) = found.first() {
        return Err(Error::Invalid(format!(
            "{what} {place} is not empty ({} files, e.g. {first}); give an empty or new one",
            found.len()
        )));
    }
    Ok(())
}

struct DirRepo {
    root: PathBuf,
}

impl Repo for DirRepo {
    fn list(&self) -> Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        if self.root.exists() {
            walk(&self.root, "", &mut out)?;
        }
        out.sort();
        Ok(out)
    }

    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>> {
        let path = self.root.join(name);
        Ok(Arc::new(
            LocalFile::open(&path).ctx(|| format!("open {}", path.display()))?,
        ))
    }

    fn write(&self, name: &str, _len: u64, mut reader: Box<dyn Read + Send>) -> Result<()> {
        let dst = self.root.join(name);
        let dir = dst.parent().unwrap_or(&self.root).to_path_buf();
        fsutil::create_dir_all(&dir)?;
        let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", dst.display()));
        let mut put = || -> Result<()> {
            let mut f = File::create(&tmp).ctx(|| format!("create {}", tmp.display()))?;
            io::copy(&mut reader, &mut f).ctx(|| format!("write {}", tmp.display()))?;
            f.flush().ctx(|| format!("write {}", tmp.display()))?;
            f.sync_all().ctx(|| format!("fsync {}", tmp.display()))?;
            fs::rename(&tmp, &dst).ctx(|| format!("rename {} to {}", tmp.display(), dst.display()))
        };
        if let Err(e) = put() {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fsutil::fsync_dir(&dir)
    }

    fn describe(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }
}

/// Files under `dir`, as `prefix/name`; `.tmp` leftovers are not files of
/// the backup.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, u64)>) -> Result<()> {
    for entry in fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))? {
        let entry = entry.ctx(|| format!("list {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let meta = entry.metadata().ctx(|| format!("stat {}", entry.path().display()))?;
        if meta.is_dir() {
            walk(&entry.path(), &rel, out)?;
        } else if !name.ends_with(TMP_SUFFIX) {
            out.push((rel, meta.len()));
        }
    }
    Ok(())
}

struct BucketRepo {
    remote: Arc<Remote>,
}

impl Repo for BucketRepo {
    fn list(&self) -> Result<Vec<(String, u64)>> {
        let mut out: Vec<(String, u64)> = self.remote.list()?.into_iter().map(|l| (l.name, l.size)).collect();
        out.sort();
        Ok(out)
    }

    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>> {
        let len = self
            .remote
            .size(name)?
            .ok_or_else(|| Error::Invalid(format!("{} does not exist", self.remote.describe(name))))?;
        Ok(Arc::new(BucketObject {
            remote: self.remote.clone(),
            name: name.to_string(),
            len,
        }))
    }

    fn write(&self, name: &str, len: u64, reader: Box<dyn Read + Send>) -> Result<()> {
        match self.remote.upload_reader(name, len, reader) {
            Ok(()) => Ok(()),
            Err(PutError::Exists) => Err(Error::Invalid(format!(
                "{} exists already: another backup writes the same place",
                self.remote.describe(name)
            ))),
            Err(e) => Err(e.into_error()),
        }
    }

    fn describe(&self, name: &str) -> String {
        self.remote.describe(name)
    }
}

/// An object of a backup bucket, read by range requests.
struct BucketObject {
    remote: Arc<Remote>,
    name: String,
    len: u64,
}

impl ObjectSource for BucketObject {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<bytes::Bytes> {
        if len == 0 {
            return Ok(bytes::Bytes::new());
        }
        self.remote
            .get_range(&self.name, offset..offset + len as u64)
            .map_err(io::Error::other)
    }
}

/// Reads a stored object front to back, in 4 MiB requests.
pub(crate) struct SourceReader {
    src: Arc<dyn ObjectSource>,
    at: u64,
    buf: bytes::Bytes,
}

const READ_CHUNK: u64 = 4 << 20;

impl SourceReader {
    pub fn new(src: Arc<dyn ObjectSource>) -> SourceReader {
        SourceReader {
            src,
            at: 0,
            buf: bytes::Bytes::new(),
        }
    }
}

impl Read for SourceReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.buf.is_empty() {
            let left = self.src.len().saturating_sub(self.at);
            if left == 0 {
                return Ok(0);
            }
            let n = left.min(READ_CHUNK);
            self.buf = self.src.read_at(self.at, n as usize)?;
            self.at += n;
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

/// Hashes what passes through, to compare with (or write into) a manifest.
pub(crate) struct Hashing<R> {
    inner: R,
    hasher: Arc<parking_lot::Mutex<blake3::Hasher>>,
    bytes: Arc<std::sync::atomic::AtomicU64>,
}

/// What a [`Hashing`] reader saw, readable after the reader moved away.
#[derive(Clone)]
pub(crate) struct Seen {
    hasher: Arc<parking_lot::Mutex<blake3::Hasher>>,
    bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl Seen {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }
    pub fn hex(&self) -> String {
        self.hasher.lock().finalize().to_hex().to_string()
    }
}

impl<R: Read> Hashing<R> {
    pub fn new(inner: R) -> (Hashing<R>, Seen) {
        let seen = Seen {
            hasher: Arc::new(parking_lot::Mutex::new(blake3::Hasher::new())),
            bytes: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        };
        (
            Hashing {
                inner,
                hasher: seen.hasher.clone(),
                bytes: seen.bytes.clone(),
            },
            seen,
        )
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        self.hasher.lock().update(&out[..n]);
        self.bytes.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}
