//! WAL segment files: `<first-seq:020>.wal`, each starting with the
//! `SKEINWAL` magic and then frames; and the spare, `next.wal.tmp`, created
//! ahead of a rotation.
//!
//! Crash safety: a new segment's header is fsynced and its directory entry
//! is fsynced before any record is appended to it, so an acknowledged
//! record never sits in a file whose name a crash could undo. The spare
//! ends in the temporary suffix: a crash before its rename leaves a file
//! that opening removes.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::fsutil;

/// The first bytes of every segment.
pub const SEGMENT_MAGIC: &[u8; 8] = b"SKEINWAL";
const SEGMENT_EXT: &str = "wal";
/// The spare segment's name.
pub const SPARE_NAME: &str = "next.wal.tmp";

/// A segment file and the sequence number its first record has (or will
/// have).
#[derive(Debug, Clone)]
pub struct Segment {
    pub first_seq: u64,
    pub path: PathBuf,
}

pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.{SEGMENT_EXT}")
}

/// Lists segments in sequence order.
pub fn list_segments(dir: &Path) -> Result<Vec<Segment>> {
    let mut segs = Vec::new();
    for entry in fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))? {
        let entry = entry.ctx(|| format!("list {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(&format!(".{SEGMENT_EXT}"))
            && let Ok(first_seq) = stem.parse::<u64>()
        {
            segs.push(Segment {
                first_seq,
                path: entry.path(),
            });
        }
    }
    segs.sort_by_key(|s| s.first_seq);
    Ok(segs)
}

/// Creates the segment starting at `first_seq`, durably (file and name).
pub fn create_segment(dir: &Path, first_seq: u64) -> Result<(File, Segment)> {
    let path = dir.join(segment_name(first_seq));
    let file = new_segment_file(&path)?;
    fsutil::fsync_dir(dir)?;
    Ok((file, Segment { first_seq, path }))
}

/// A segment file holding just its header, synced (its directory is not).
pub fn new_segment_file(path: &Path) -> Result<File> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .read(true)
        .open(path)
        .ctx(|| format!("create WAL segment {}", path.display()))?;
    file.write_all(SEGMENT_MAGIC)
        .ctx(|| format!("write {}", path.display()))?;
    file.sync_all().ctx(|| format!("fsync {}", path.display()))?;
    Ok(file)
}

/// Renames the spare into place as the segment starting at `first_seq`.
/// The directory is synced before anything is appended: a record
/// acknowledged from a file whose name a crash could undo would be lost.
pub fn promote_spare(dir: &Path, spare: File, first_seq: u64) -> Result<(File, Segment)> {
    let path = dir.join(segment_name(first_seq));
    let from = dir.join(SPARE_NAME);
    fs::rename(&from, &path).ctx(|| format!("rename {} to {}", from.display(), path.display()))?;
    fsutil::fsync_dir(dir)?;
    Ok((spare, Segment { first_seq, path }))
}
