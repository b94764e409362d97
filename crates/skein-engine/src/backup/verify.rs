//! `skein verify`: checks every file of a data directory or a backup, by
//! its own checksums and structure, and a backup's files also against the
//! sizes and BLAKE3 digests of its manifest.
//!
//! What each kind of file is checked by:
//! - Parquet parts and calls tables: the footer, the `skein.part` metadata
//!   (parts), and every page decoded. Parquet written by Skein has no page
//!   checksums, so in a data directory a flipped byte inside a value can
//!   pass; in a backup the manifest's BLAKE3 catches any change.
//! - sidecar indexes: their envelope's CRC32 and a full decode;
//! - full-text indexes: their bundle checksum and tantivy opening them;
//! - payload packs: the index's CRC32, and every payload decompressed and
//!   hashed against its name;
//! - WAL segments: every frame's CRC32 and record decoding (a torn tail, an
//!   unacknowledged last write, is a note, not damage).

use std::collections::BTreeMap;
use std::sync::Arc;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::Serialize;

use super::manifest::{self, Manifest};
use super::repo::{self, Hashing, Location, Repo, SourceReader};
use crate::error::Result;
use crate::part::{self, PartMeta, index};
use crate::payload::pack;
use crate::storage::{ObjectSource, ParquetSource};

/// What verify found.
#[derive(Debug, Clone, Serialize, Default)]
pub struct VerifyReport {
    pub location: String,
    /// A backup (it has a manifest) rather than a data directory.
    pub backup: bool,
    pub files_checked: u64,
    pub bytes_checked: u64,
    /// Empty when everything is intact.
    pub damaged: Vec<Damage>,
    /// What is worth knowing but not damage (a torn WAL tail, files Skein
    /// does not know).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Damage {
    /// Relative to the location.
    pub file: String,
    pub problem: String,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.damaged.is_empty()
    }
}

/// Checks every file at `loc`.
pub fn verify(loc: &Location) -> Result<VerifyReport> {
    let repo = repo::open(loc)?;
    let files = repo.list()?;
    let mut report = VerifyReport {
        location: loc.to_string(),
        ..Default::default()
    };
    // Nested data directories (a server's tenants) are checked below, each
    // on its own.
    let files: Vec<(String, u64)> = files
        .into_iter()
        .filter(|(n, _)| super::nested_name(n).is_none())
        .collect();
    let sizes: BTreeMap<&str, u64> = files.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    if sizes.contains_key(manifest::NAME) {
        report.backup = true;
        check_against_manifest(&*repo, &sizes, &mut report);
    }
    for (name, size) in &files {
        if name == manifest::NAME {
            continue;
        }
        let Some(kind) = Kind::of(name) else {
            if !ignored(name) {
                report
                    .notes
                    .push(format!("{name}: not a file skein knows; not checked"));
            }
            continue;
        };
        report.files_checked += 1;
        report.bytes_checked += size;
        match check_file(&*repo, name, kind) {
            Ok(None) => {}
            Ok(Some(note)) => report.notes.push(format!("{name}: {note}")),
            Err(problem) => report.damaged.push(Damage {
                file: name.clone(),
                problem,
            }),
        }
    }
    for name in super::nested(loc)? {
        let prefix = format!("{}/{name}/", super::NESTED_DIR);
        let inner = verify(&loc.child(&prefix))?;
        report.files_checked += inner.files_checked;
        report.bytes_checked += inner.bytes_checked;
        report.damaged.extend(inner.damaged.into_iter().map(|d| Damage {
            file: format!("{prefix}{}", d.file),
            problem: d.problem,
        }));
        report
            .notes
            .extend(inner.notes.into_iter().map(|n| format!("{prefix}{n}")));
    }
    Ok(report)
}

/// Every file the manifest lists is there, of its size and digest, and
/// nothing else is.
fn check_against_manifest(repo: &dyn Repo, sizes: &BTreeMap<&str, u64>, report: &mut VerifyReport) {
    let damage = |file: &str, problem: String| Damage {
        file: file.to_string(),
        problem,
    };
    let read = repo
        .open(manifest::NAME)
        .and_then(|src| {
            src.read_at(0, src.len() as usize)
                .map_err(|e| crate::Error::io("read", e))
        })
        .and_then(|b| Manifest::decode(&b, manifest::NAME));
    let m = match read {
        Ok(m) => m,
        Err(e) => {
            report.damaged.push(damage(manifest::NAME, e.to_string()));
            return;
        }
    };
    let listed: BTreeMap<&str, &manifest::ManifestFile> = m.files.iter().map(|f| (f.name.as_str(), f)).collect();
    for f in &m.files {
        let Some(&size) = sizes.get(f.name.as_str()) else {
            report
                .damaged
                .push(damage(&f.name, "missing: the manifest lists it".into()));
            continue;
        };
        if size != f.bytes {
            report
                .damaged
                .push(damage(&f.name, format!("{size} bytes, the manifest says {}", f.bytes)));
            continue;
        }
        match digest(repo, &f.name) {
            Ok(hex) if hex == f.blake3 => {}
            Ok(hex) => report
                .damaged
                .push(damage(&f.name, format!("BLAKE3 {hex}, the manifest says {}", f.blake3))),
            Err(e) => report.damaged.push(damage(&f.name, e.to_string())),
        }
    }
    for name in sizes.keys() {
        if *name != manifest::NAME && !listed.contains_key(name) {
            report.damaged.push(damage(name, "not in the manifest".into()));
        }
    }
}

/// The BLAKE3 of a whole file, read in chunks.
pub(crate) fn digest(repo: &dyn Repo, name: &str) -> Result<String> {
    let src = repo.open(name)?;
    let (mut r, seen) = Hashing::new(SourceReader::new(src));
    std::io::copy(&mut r, &mut std::io::sink())
        .map_err(|e| crate::Error::io(format!("read {}", repo.describe(name)), e))?;
    Ok(seen.hex())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Part,
    Calls,
    Samples,
    Index,
    Text,
    Pack,
    Wal,
    ReplayFloor,
}

impl Kind {
    fn of(name: &str) -> Option<Kind> {
        if let Some(rest) = name.strip_prefix("parts/") {
            if rest.starts_with("payloads/") {
                return rest.ends_with(".pack").then_some(Kind::Pack);
            }
            return if rest.ends_with(".parquet") {
                Some(Kind::Part)
            } else if rest.ends_with(".calls") {
                Some(Kind::Calls)
            } else if rest.ends_with(".samples") {
                Some(Kind::Samples)
            } else if rest.ends_with(".idx") {
                Some(Kind::Index)
            } else if part::is_text_index(rest) {
                Some(Kind::Text)
            } else {
                None
            };
        }
        if name == crate::engine::replay_floor::FILE {
            return Some(Kind::ReplayFloor);
        }
        (name.starts_with("wal/") && name.ends_with(".wal")).then_some(Kind::Wal)
    }
}

/// Files of a data directory that hold no telemetry: the lock, the
/// instance id, the object storage cache (re-fetched when damaged).
fn ignored(name: &str) -> bool {
    name == "LOCK" || name == "instance-id" || name.starts_with("cache/")
}

fn check_file(repo: &dyn Repo, name: &str, kind: Kind) -> std::result::Result<Option<String>, String> {
    let src = repo.open(name).map_err(|e| e.to_string())?;
    let whole = || -> std::result::Result<bytes::Bytes, String> {
        src.read_at(0, src.len() as usize).map_err(|e| format!("read: {e}"))
    };
    match kind {
        Kind::Part => check_parquet(src.clone(), true).map(|_| None),
        Kind::Calls => check_parquet(src.clone(), false).map(|_| None),
        Kind::Samples => crate::part::samples::SampleTable::read_from(src.clone(), name.to_string())
            .and_then(|t| t.verify())
            .map(|_| None)
            .map_err(|e| e.to_string()),
        Kind::Index => index::decode(&whole()?).map(|_| None).map_err(|e| e.to_string()),
        Kind::Text => skein_text::PartTextIndex::open(whole()?)
            .map(|_| None)
            .map_err(|e| e.to_string()),
        Kind::Pack => check_pack(&*src, name).map(|_| None),
        Kind::Wal => crate::wal::check_segment(&whole()?),
        Kind::ReplayFloor => crate::engine::replay_floor::ReplayFloor::decode(&whole()?).map(|_| None),
    }
}

/// Decodes every page; a part's footer must also carry its metadata.
fn check_parquet(src: Arc<dyn ObjectSource>, is_part: bool) -> std::result::Result<u64, String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(ParquetSource(src)).map_err(|e| e.to_string())?;
    if is_part {
        let meta = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == part::META_KEY))
            .and_then(|k| k.value.clone())
            .ok_or_else(|| format!("no {} metadata in the footer", part::META_KEY))?;
        serde_json::from_str::<PartMeta>(&meta).map_err(|e| format!("its {} metadata: {e}", part::META_KEY))?;
    }
    let mut rows = 0u64;
    for batch in builder.with_batch_size(8192).build().map_err(|e| e.to_string())? {
        rows += batch.map_err(|e| e.to_string())?.num_rows() as u64;
    }
    Ok(rows)
}

/// The index's checksum, then every payload against its name.
fn check_pack(src: &dyn ObjectSource, name: &str) -> std::result::Result<usize, String> {
    let mut index = pack::read_index(src, name).map_err(|e| e.to_string())?;
    // In frame order, each frame is decompressed once.
    index.entries.sort_unstable_by_key(|e| (e.frame.offset, e.at));
    let mut reader = pack::PackReader::new(src, index.dictionary, name).map_err(|e| e.to_string())?;
    for e in &index.entries {
        reader.read(e).map_err(|e| e.to_string())?;
    }
    Ok(index.entries.len())
}
