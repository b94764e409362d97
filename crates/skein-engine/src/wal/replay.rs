//! Replay: reading every segment at open, handing each intact record to the
//! caller in log order, and healing what a crash left.
//!
//! What a scan can end in, and what replay does about it:
//! - a *torn tail* (an unfinished final write, never acknowledged): cut off
//!   and reported as a warning;
//! - *corruption* (damage with data after it, so acknowledged data may be
//!   lost): refused, naming the file and byte, in [`RecoveryMode::Strict`];
//!   cut there and reported in [`RecoveryMode::Salvage`];
//! - a last segment created but with its header never fully written: empty.
//!
//! A cut is `set_len` + `fsync` of the segment, so a crash during replay
//! replays the same intact prefix again.

use std::fs::{self, OpenOptions};
use std::path::Path;

use super::frame;
use super::record::{RecordKind, WalRecord};
use super::segment::{SEGMENT_MAGIC, Segment, list_segments};
use crate::error::{Error, IoContext, Result};

/// What opening does when a segment holds damaged data that was
/// acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Refuse to open: skein will not guess about acknowledged data, and an
    /// operator can restore the file. The default.
    #[default]
    Strict,
    /// Cut the log at the damage, losing what follows it, and report the
    /// loss in the warnings (`--wal-salvage`).
    Salvage,
}

/// What replay found, for logs and `explain`.
#[derive(Debug, Default)]
pub struct ReplayReport {
    pub segments: usize,
    pub records: usize,
    pub truncated_bytes: u64,
    pub warnings: Vec<String>,
    /// One past the highest sequence number seen.
    pub next_seq: u64,
}

/// Replays every segment in `dir` into `apply`, in log order. Returns the
/// segments found and the report; `next_seq` is at least `min_next_seq`
/// (and at least 1).
pub(super) fn replay(
    dir: &Path,
    min_next_seq: u64,
    mode: RecoveryMode,
    mut apply: impl FnMut(WalRecord) -> Result<()>,
) -> Result<(Vec<Segment>, ReplayReport)> {
    let segments = list_segments(dir)?;
    let mut report = ReplayReport {
        next_seq: min_next_seq.max(1),
        ..Default::default()
    };
    for (i, seg) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        let bytes = fs::read(&seg.path).ctx(|| format!("read WAL segment {}", seg.path.display()))?;
        report.segments += 1;
        let Some(body) = bytes.strip_prefix(SEGMENT_MAGIC) else {
            if is_last && SEGMENT_MAGIC.starts_with(&bytes) {
                // Created but its header never fully written: empty.
                continue;
            }
            return Err(Error::corrupt(
                format!("WAL segment {}", seg.path.display()),
                "missing SKEINWAL header",
            ));
        };
        let scan = frame::scan(body);
        for (offset, payload) in &scan.frames {
            let rec = WalRecord::decode(payload).map_err(|e| {
                Error::corrupt(
                    format!(
                        "WAL segment {} at byte {}",
                        seg.path.display(),
                        offset + SEGMENT_MAGIC.len()
                    ),
                    e,
                )
            })?;
            // A payload record's count is of payloads, not sequence numbers.
            if let RecordKind::Batch(_) = rec.kind {
                report.next_seq = report.next_seq.max(rec.seq_base + rec.count as u64);
            }
            report.records += 1;
            apply(rec)?;
        }
        let cut = match scan.tail {
            frame::Tail::Clean => None,
            frame::Tail::Torn { offset, reason } => {
                let msg = format!(
                    "WAL segment {}: dropped unacknowledged torn tail at byte {} ({reason})",
                    seg.path.display(),
                    offset + SEGMENT_MAGIC.len()
                );
                if !is_last {
                    report.warnings.push(format!("{msg}; not the last segment"));
                } else {
                    report.warnings.push(msg);
                }
                Some(offset)
            }
            frame::Tail::Corrupt { offset, reason } => {
                let at = offset + SEGMENT_MAGIC.len();
                let lost = body.len() - offset;
                if mode == RecoveryMode::Strict {
                    return Err(Error::corrupt(
                        format!("WAL segment {} at byte {at}", seg.path.display()),
                        format!(
                            "{reason}. Acknowledged data may be damaged, so skein will not guess; \
                             restore the file, or start with --wal-salvage to cut the log here \
                             (losing the {lost} bytes after it)"
                        ),
                    ));
                }
                report.warnings.push(format!(
                    "WAL segment {} at byte {at}: {reason}; salvage cut {lost} bytes",
                    seg.path.display(),
                ));
                Some(offset)
            }
        };
        if let Some(offset) = cut {
            let new_len = (offset + SEGMENT_MAGIC.len()) as u64;
            report.truncated_bytes += bytes.len() as u64 - new_len;
            let f = OpenOptions::new()
                .write(true)
                .open(&seg.path)
                .ctx(|| format!("open {}", seg.path.display()))?;
            f.set_len(new_len).ctx(|| format!("truncate {}", seg.path.display()))?;
            f.sync_all().ctx(|| format!("fsync {}", seg.path.display()))?;
        }
    }
    Ok((segments, report))
}
