//! Backups: a consistent copy of a data directory's parts and payload
//! packs, taken while ingest goes on, with a manifest of every file's size
//! and BLAKE3; restore into a new data directory; verify either.
//!
//! A backup holds the relative names of a data directory
//! (`parts/spans/<id>.parquet`, its `.idx`, `.txt`, `.calls` or `.samples`,
//! `parts/payloads/<id>.pack`) and `manifest.json`, so a restore is a copy
//! and the restored directory opens like any other. There is no WAL in a
//! backup: the hot tier is flushed first (see `Engine::backup`), so the
//! parts cover every record acknowledged before the backup began.
//!
//! Consistency: the engine holds part and pack removals back for the
//! whole copy (`storage::hold`), so every file listed at the start is still
//! there when its turn comes; a merge that ran meanwhile left both its
//! inputs and (unlisted) its output, and recovery keeps one copy of each
//! record as it always does (an output names the parts it replaces).

pub mod manifest;
pub(crate) mod repo;
mod verify;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::fsutil;
use crate::storage::PartStore;
pub use manifest::{Manifest, ManifestFile};
pub use repo::Location;
use repo::{Hashing, Repo, SourceReader};
pub use verify::{Damage, VerifyReport, verify};

/// Where a data directory's parts are, relative to it.
const PARTS: &str = "parts";

/// Where a data directory may hold other whole data directories, each
/// under its own name (a server's tenants: `tenants/<name>/…`). A backup,
/// restore or verify of a data directory or backup covers those nested
/// below it too, each as its own (`nested`), at the same relative place.
pub const NESTED_DIR: &str = "tenants";

/// The nested data directory a relative file name belongs to, if any.
pub(crate) fn nested_name(file: &str) -> Option<&str> {
    let rest = file.strip_prefix(NESTED_DIR)?.strip_prefix('/')?;
    rest.split_once('/').map(|(name, _)| name)
}

/// The names of the nested data directories (or backups) at `loc`.
pub fn nested(loc: &Location) -> Result<Vec<String>> {
    let names: std::collections::BTreeSet<String> = repo::open(loc)?
        .list()?
        .iter()
        .filter_map(|(n, _)| nested_name(n).map(str::to_string))
        .collect();
    Ok(names.into_iter().collect())
}

/// What a backup wrote.
#[derive(Debug, Clone, Serialize)]
pub struct BackupReport {
    pub location: String,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Records with a sequence number below this are in the backup: every
    /// record acknowledged before it began.
    pub covers_seq: u64,
    pub created_unix_ms: u64,
}

/// What a restore wrote.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreReport {
    pub data_dir: String,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// When the backup restored was taken (Unix ms).
    pub backup_created_unix_ms: u64,
    /// The nested backups restored with it (see [`NESTED_DIR`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<String>,
}

/// Copies `names` of `store` to an empty `to`, manifest last. The caller
/// keeps them from being removed meanwhile.
pub(crate) fn write(
    store: &dyn PartStore,
    names: &[String],
    to: &Location,
    source: &Path,
    covers_seq: u64,
    created_unix_ms: u64,
) -> Result<BackupReport> {
    let started = Instant::now();
    let target = repo::open(to)?;
    repo::ensure_empty(&*target, "backup destination", &to.to_string())?;
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let src = store.open(name)?;
        let len = src.len();
        let (reader, seen) = Hashing::new(SourceReader::new(src));
        let rel = format!("{PARTS}/{name}");
        target.write(&rel, len, Box::new(reader))?;
        if seen.bytes() != len {
            return Err(Error::corrupt(
                store.describe(name),
                format!("read {} bytes of {len} while backing it up", seen.bytes()),
            ));
        }
        files.push(ManifestFile {
            name: rel,
            bytes: len,
            blake3: seen.hex(),
        });
    }
    let bytes = files.iter().map(|f| f.bytes).sum();
    let count = files.len() as u64;
    let m = Manifest::new(source.display().to_string(), covers_seq, created_unix_ms, files);
    let encoded = m.encode();
    target.write(
        manifest::NAME,
        encoded.len() as u64,
        Box::new(std::io::Cursor::new(encoded)),
    )?;
    Ok(BackupReport {
        location: to.to_string(),
        files: count,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        covers_seq,
        created_unix_ms,
    })
}

/// Restores the backup at `from` into `data_dir`, which must be empty or
/// not exist.
///
/// Crash safety: files are copied into a sibling `<data_dir>.restoring`
/// directory, each checked against the manifest as it is copied, and the
/// directory is renamed into place only once all are there and synced. A
/// crash leaves either no data directory or a whole one; the next restore
/// clears a leftover `.restoring` directory.
pub fn restore(from: &Location, data_dir: &Path) -> Result<RestoreReport> {
    let started = Instant::now();
    if data_dir.exists() {
        let mut entries = std::fs::read_dir(data_dir).ctx(|| format!("list {}", data_dir.display()))?;
        if let Some(e) = entries.next() {
            let e = e.ctx(|| format!("list {}", data_dir.display()))?;
            return Err(Error::Invalid(format!(
                "restore target {} is not empty (it holds {}); give an empty or new directory",
                data_dir.display(),
                e.file_name().to_string_lossy()
            )));
        }
    }
    let src = repo::open(from)?;
    let listed = src.list()?;
    if !listed.iter().any(|(n, _)| n == manifest::NAME) {
        return Err(Error::Invalid(format!(
            "{from} has no {}: not a Skein backup, or one that was interrupted before it finished",
            manifest::NAME
        )));
    }
    let m = {
        let f = src.open(manifest::NAME)?;
        let b = f.read_at(0, f.len() as usize).ctx(|| src.describe(manifest::NAME))?;
        Manifest::decode(&b, &src.describe(manifest::NAME))?
    };
    let staging = PathBuf::from(format!("{}.restoring", data_dir.display()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).ctx(|| format!("remove the leftover {}", staging.display()))?;
    }
    let copied = copy_checked(&*src, &m, &staging);
    if let Err(e) = copied {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if data_dir.exists() {
        std::fs::remove_dir(data_dir).ctx(|| format!("replace the empty {}", data_dir.display()))?;
    }
    std::fs::rename(&staging, data_dir).ctx(|| format!("rename {} to {}", staging.display(), data_dir.display()))?;
    fsutil::fsync_dir(
        data_dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    )?;
    let mut report = RestoreReport {
        data_dir: data_dir.display().to_string(),
        files: m.files.len() as u64,
        bytes: m.files.iter().map(|f| f.bytes).sum(),
        seconds: 0.0,
        backup_created_unix_ms: m.created_unix_ms,
        nested: Vec::new(),
    };
    // Nested backups after the outer one: a crash in between leaves the
    // outer data directory whole and a nested one missing or whole (each
    // restore is all or nothing), and a new restore into a new directory
    // starts over.
    for name in src
        .list()?
        .iter()
        .filter_map(|(n, _)| nested_name(n))
        .collect::<std::collections::BTreeSet<_>>()
    {
        let rel = format!("{NESTED_DIR}/{name}");
        let inner = restore(&from.child(&rel), &data_dir.join(&rel))?;
        report.files += inner.files;
        report.bytes += inner.bytes;
        report.nested.push(name.to_string());
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Copies every file of `m` into `dir`, refusing one that differs from
/// the manifest (its name and what differs in the error).
fn copy_checked(src: &dyn Repo, m: &Manifest, dir: &Path) -> Result<()> {
    let dst = repo::open(&Location::Dir(dir.to_path_buf()))?;
    fsutil::create_dir_all(dir)?;
    for f in &m.files {
        let from = src.open(&f.name)?;
        let (reader, seen) = Hashing::new(SourceReader::new(from));
        dst.write(&f.name, f.bytes, Box::new(reader))?;
        if seen.bytes() != f.bytes || seen.hex() != f.blake3 {
            return Err(Error::corrupt(
                src.describe(&f.name),
                format!(
                    "{} bytes with BLAKE3 {}, the manifest says {} bytes with {}: the backup is damaged",
                    seen.bytes(),
                    seen.hex(),
                    f.bytes,
                    f.blake3
                ),
            ));
        }
    }
    // The parts directories a data directory has, even for signals the
    // backup holds nothing of.
    for p in ["spans", "logs", "metrics", "payloads"] {
        fsutil::create_dir_all(&dir.join(PARTS).join(p))?;
    }
    // The new directories themselves are durable before the rename that
    // publishes them.
    for p in ["spans", "logs", "metrics", "payloads"] {
        fsutil::fsync_dir(&dir.join(PARTS).join(p))?;
    }
    fsutil::fsync_dir(&dir.join(PARTS))?;
    fsutil::fsync_dir(dir)
}
