//! The write-ahead log: every batch is framed, appended and (by default)
//! fsynced before it is acknowledged.
//!
//! # Group commit
//! Appenders copy their frame into a shared buffer under a mutex and take a
//! ticket (the log position their frame ends at). One of them becomes the
//! syncer: it takes the whole buffer, writes and `fdatasync`s it outside the
//! mutex, then wakes everyone whose ticket it covered. Concurrent writers
//! therefore share one fsync, and an acknowledgement always means the frame
//! is on stable storage.
//!
//! # Sequence numbers
//! Each record gets a sequence number, assigned under the same mutex that
//! orders frames, so log order is sequence order. Replay uses them to skip
//! records already in parts; the hot tier uses them so that the newest
//! version of a span wins however threads interleave.
//!
//! # Segments
//! The log is a series of segment files named by their first sequence
//! number. The engine rotates to a new segment whenever it freezes the hot
//! tier, so a segment only holds records of frozen (or older) tiers and is
//! deleted once they are durable in parts. The next segment's file is
//! created ahead as a spare (`next.wal.tmp`), so a rotation, which ingest
//! waits for, is a rename and a directory fsync.
//!
//! # Failure
//! After a failed fsync (or a write failing for another reason than space)
//! the log refuses further appends: the kernel may have dropped the dirty
//! pages, so retrying could acknowledge data that is not on disk (the
//! "fsyncgate" lesson).
//!
//! A *write* that fails with ENOSPC (or EDQUOT) is different, and the log
//! recovers from it by itself when space returns. Why that is safe:
//! - `pwrite` refused the bytes for want of blocks; no fsync failed, so
//!   nothing the kernel had accepted was dropped, and every byte before the
//!   write's offset was written (and, in fsync mode, fsynced) by earlier
//!   rounds that succeeded.
//! - The write may have put part of its buffer down before it failed. The
//!   file is cut back to the offset it started at (`ftruncate`, which frees
//!   blocks and needs none) and the offset is not advanced, so the next
//!   write lands exactly where the failed one began: no torn frame ever
//!   sits between intact ones. If the cut fails the log is poisoned as
//!   before.
//! - If the process dies before the cut is durable, the bytes past the
//!   last acknowledged frame are a torn tail (truncated at replay) or whole
//!   frames of batches that were refused; replaying those is what a crash
//!   before an acknowledgement may do anyway, and sequence numbers and keys
//!   make it harmless. A later fdatasync makes the cut size durable.
//! - Who hears of it: in fsync mode every frame of the failed round
//!   belongs to an appender still waiting for its acknowledgement; each of
//!   them gets [`Error::DiskFull`], and nothing is acknowledged. In the
//!   other modes frames already acknowledged (left in the buffer while a
//!   sync was in flight) stay buffered to be written by the next write;
//!   only the failing appender's own frames are dropped, and it gets the
//!   error.

pub mod frame;
pub mod record;
mod replay;
mod segment;

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use record::{RecordHeader, RecordKind, WalRecord};
pub use replay::{RecoveryMode, ReplayReport};
use segment::{SEGMENT_MAGIC, SPARE_NAME, Segment, create_segment, new_segment_file, promote_spare};

use crate::error::{Error, IoContext, Result};
use crate::fsutil;
use crate::record::Signal;

/// When an acknowledged batch is on stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync before acknowledging (group commit). Nothing acknowledged is
    /// ever lost.
    Fsync,
    /// Written to the OS before acknowledging, fsynced every `ms`: a process
    /// crash loses nothing; an OS crash or power loss loses at most the last
    /// `ms` milliseconds.
    Interval { ms: u64 },
    /// Written to the OS before acknowledging, never fsynced by the log (the
    /// OS writes it back): survives a process crash, not an OS crash.
    None,
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Durability::Fsync => f.write_str("fsync"),
            Durability::Interval { ms } => write!(f, "interval:{ms}ms"),
            Durability::None => f.write_str("none"),
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = String;
    /// `fsync`, `none`, `interval` (100 ms) or `interval:250ms`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "none" => Ok(Durability::None),
            "interval" => Ok(Durability::Interval { ms: 100 }),
            other => {
                let ms = other
                    .strip_prefix("interval:")
                    .map(|v| v.trim_end_matches("ms"))
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|ms| *ms > 0);
                ms.map(|ms| Durability::Interval { ms }).ok_or_else(|| {
                    format!("unknown durability {other:?}: use fsync, interval, interval:<ms>ms or none")
                })
            }
        }
    }
}

struct State {
    file: Arc<File>,
    /// Bytes of the current segment already handed to the OS.
    file_len: u64,
    segments: Vec<Segment>,
    pending: Vec<u8>,
    /// Total bytes ever appended (logical log position).
    appended: u64,
    /// Logical position known durable.
    synced: u64,
    syncing: bool,
    /// The next segment's file, created ahead (`SPARE_NAME`, header synced)
    /// so a rotation under the engine's gate only renames it.
    spare: Option<File>,
    next_seq: u64,
    /// Set by the first failed write or fsync, naming it; every append is
    /// refused from then on.
    poisoned: Option<String>,
    /// Appends whose frames are in `pending` (fsync mode: each waits for
    /// its round).
    pending_tickets: usize,
    /// Bytes at the start of `pending` that were acknowledged already
    /// (interval and none modes: buffered while a sync was in flight).
    pending_acked: usize,
    /// Rounds whose write failed for want of space: each appender whose
    /// ticket falls in one is told so (see the module's "Failure").
    failed_rounds: Vec<FailedRound>,
}

/// Tickets `(start, end]` of a round whose write failed with ENOSPC, and
/// how many of its appenders have yet to hear of it.
struct FailedRound {
    start: u64,
    end: u64,
    waiters: usize,
    reason: String,
}

/// Whether a write failed for want of space: the one failure the log
/// recovers from by itself.
fn is_out_of_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Counters exposed as self-metrics.
#[derive(Debug, Default, Clone)]
pub struct WalStats {
    pub fsyncs: u64,
    pub fsync_nanos: u64,
    pub appends: u64,
    pub bytes: u64,
    pub segments: usize,
}

pub struct Wal {
    dir: PathBuf,
    durability: Durability,
    state: Mutex<State>,
    synced_cv: Condvar,
    stats: Mutex<WalStats>,
    /// One spare is created at a time: two creators of the same path could
    /// otherwise leave a handle to a promoted, live segment as the spare.
    spare_lock: Mutex<()>,
    /// Tests: the first syncer waits for this many appends before writing,
    /// so that the others queue behind it.
    #[cfg(test)]
    hold_first_sync_for: Option<u64>,
    /// Tests: writes put down half their bytes, then fail with ENOSPC.
    #[cfg(test)]
    no_space: std::sync::atomic::AtomicBool,
}

/// Reads every intact record of the segments in `dir`, changing nothing
/// (a torn or damaged frame ends its segment's scan, as salvage would cut
/// it); returns how many segments were read. For offline checks
/// (`skein verify --erasure`), which may run beside a live server.
pub fn for_each_record(dir: &Path, mut apply: impl FnMut(WalRecord) -> Result<()>) -> Result<usize> {
    let segments = segment::list_segments(dir)?;
    for seg in &segments {
        let bytes = match fs::read(&seg.path) {
            Ok(b) => b,
            // Deleted by a flush meanwhile: its records are in parts.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(format!("read WAL segment {}", seg.path.display()), e)),
        };
        let Some(body) = bytes.strip_prefix(SEGMENT_MAGIC) else {
            continue;
        };
        for (_, payload) in &frame::scan(body).frames {
            if let Ok(rec) = WalRecord::decode(payload) {
                apply(rec)?;
            }
        }
    }
    Ok(segments.len())
}

impl Wal {
    /// Opens the log in `dir`, replaying every intact record into `apply` in
    /// log order and healing a torn tail; damage to acknowledged data is
    /// handled as `mode` says.
    pub fn open(
        dir: &Path,
        durability: Durability,
        min_next_seq: u64,
        mode: RecoveryMode,
        apply: impl FnMut(WalRecord) -> Result<()>,
    ) -> Result<(Wal, ReplayReport)> {
        fsutil::create_dir_all(dir)?;
        fsutil::remove_tmp_files(dir)?;
        let (mut segments, report) = replay::replay(dir, min_next_seq, mode, apply)?;
        // New writes always start a fresh segment: replayed ones stay intact
        // until their records are in parts.
        let (file, seg) = create_segment(dir, report.next_seq)?;
        // A segment already named after `next_seq` holds no records (any
        // record in it would have a sequence number at or past its name): it
        // was created by an earlier open and never written, or salvage cut
        // it empty. `create_segment` just recreated that file; list it once,
        // or deleting the duplicate entry later fails (or deletes the live
        // segment).
        segments.retain(|s| s.first_seq != seg.first_seq);
        segments.push(seg);
        let wal = Wal {
            dir: dir.to_path_buf(),
            durability,
            state: Mutex::new(State {
                file: Arc::new(file),
                file_len: SEGMENT_MAGIC.len() as u64,
                segments,
                pending: Vec::new(),
                appended: 0,
                synced: 0,
                syncing: false,
                spare: None,
                next_seq: report.next_seq,
                poisoned: None,
                pending_tickets: 0,
                pending_acked: 0,
                failed_rounds: Vec::new(),
            }),
            synced_cv: Condvar::new(),
            stats: Mutex::new(WalStats::default()),
            spare_lock: Mutex::new(()),
            #[cfg(test)]
            hold_first_sync_for: None,
            #[cfg(test)]
            no_space: std::sync::atomic::AtomicBool::new(false),
        };
        Ok((wal, report))
    }

    /// Why the log refuses writes, if it does (see [`Error::WalFailed`]).
    pub fn failure(&self) -> Option<String> {
        self.state.lock().poisoned.clone()
    }

    /// Marks the log failed after `what` failed with `e`, and returns the
    /// error every append gets from now on.
    fn poison(&self, st: &mut State, what: &str, e: std::io::Error) -> Error {
        let reason = format!("{what} {}: {e}", self.current_path(st).display());
        tracing::error!("WAL refuses writes from now on: {reason}");
        let reason = st.poisoned.get_or_insert(reason).clone();
        Error::WalFailed { reason }
    }

    fn current_path(&self, st: &State) -> PathBuf {
        st.segments.last().map_or_else(|| self.dir.clone(), |s| s.path.clone())
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The sequence number the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.state.lock().next_seq
    }

    /// Appends one batch of `count` records of `signal` and returns its first
    /// sequence number once the batch is as durable as the mode promises.
    pub fn append(&self, signal: Signal, count: u32, body: &[u8]) -> Result<u64> {
        self.append_with_payloads(signal, count, body, None)
    }

    /// [`append`](Wal::append), with the batch's new payloads (their count
    /// and `payload::encode_frames` body) framed just before it, in the same
    /// write and fsync: durable when the batch is.
    pub fn append_with_payloads(
        &self,
        signal: Signal,
        count: u32,
        body: &[u8],
        payloads: Option<(u32, &[u8])>,
    ) -> Result<u64> {
        for (what, len) in [("batch", body.len()), ("payloads", payloads.map_or(0, |p| p.1.len()))] {
            if len > RecordHeader::MAX_BODY {
                return Err(Error::Invalid(format!(
                    "{what} of {len} compressed bytes exceeds the WAL frame limit of {} bytes; send smaller batches",
                    RecordHeader::MAX_BODY
                )));
            }
        }
        let mut st = self.state.lock();
        if let Some(p) = &st.poisoned {
            return Err(Error::WalFailed { reason: p.clone() });
        }
        let seq_base = st.next_seq;
        st.next_seq += count as u64;
        let mut frame_len = 0;
        if let Some((n, blobs)) = payloads {
            let header = RecordHeader {
                kind: RecordKind::Payloads,
                seq_base,
                count: n,
            };
            frame_len += header.append_frame(blobs, &mut st.pending) as u64;
        }
        let header = RecordHeader {
            kind: RecordKind::Batch(signal),
            seq_base,
            count,
        };
        frame_len += header.append_frame(body, &mut st.pending) as u64;
        st.appended += frame_len;
        st.pending_tickets += 1;
        let ticket = st.appended;
        {
            let mut s = self.stats.lock();
            s.appends += 1;
            s.bytes += frame_len;
        }
        match self.durability {
            Durability::Fsync => self.wait_durable(st, ticket)?,
            Durability::Interval { .. } | Durability::None => {
                // Hand the bytes to the OS now, so a process crash keeps them.
                self.write_pending(&mut st, frame_len as usize)?;
                // Left buffered behind a sync in flight, they are
                // acknowledged now all the same (the next write puts them
                // down).
                st.pending_acked = st.pending.len();
            }
        }
        Ok(seq_base)
    }

    /// Group commit: become the syncer or wait for one to cover `ticket`.
    fn wait_durable<'a>(&'a self, mut st: parking_lot::MutexGuard<'a, State>, ticket: u64) -> Result<()> {
        loop {
            if let Some(p) = &st.poisoned {
                return Err(Error::WalFailed { reason: p.clone() });
            }
            // Before `synced`: a later round that succeeded moves `synced`
            // past this ticket, but this frame was never written.
            if let Some(i) = st
                .failed_rounds
                .iter()
                .position(|r| r.start < ticket && ticket <= r.end)
            {
                let round = &mut st.failed_rounds[i];
                let reason = round.reason.clone();
                round.waiters -= 1;
                if round.waiters == 0 {
                    st.failed_rounds.remove(i);
                }
                return Err(Error::DiskFull { reason });
            }
            if st.synced >= ticket {
                return Ok(());
            }
            if st.syncing {
                self.synced_cv.wait(&mut st);
                continue;
            }
            st.syncing = true;
            let buf = std::mem::take(&mut st.pending);
            let tickets = std::mem::take(&mut st.pending_tickets);
            let end = st.appended;
            let file = st.file.clone();
            let offset = st.file_len;
            // Nothing else writes the file while `syncing` is set, so the
            // offset can be taken back if the write fails for want of space.
            st.file_len += buf.len() as u64;
            drop(st);
            #[cfg(test)]
            self.hold_sync();
            let started = Instant::now();
            let wrote = self.write_at(&file, &buf, offset);
            let result = match &wrote {
                Ok(()) => file.sync_data().map_err(|e| ("fsync of", e)),
                Err(_) => Ok(()),
            };
            let elapsed = started.elapsed();
            st = self.state.lock();
            st.syncing = false;
            match (wrote, result) {
                (Ok(()), Ok(())) => {
                    st.synced = end;
                    let mut s = self.stats.lock();
                    s.fsyncs += 1;
                    s.fsync_nanos += elapsed.as_nanos() as u64;
                }
                (Err(e), _) if is_out_of_space(&e) => {
                    st.file_len = offset;
                    if let Some(reason) = self.cut_back(&mut st, &file, offset, &e) {
                        st.failed_rounds.push(FailedRound {
                            start: end - buf.len() as u64,
                            end,
                            waiters: tickets,
                            reason,
                        });
                    }
                }
                (Err(e), _) => {
                    self.poison(&mut st, "write of", e);
                }
                (Ok(()), Err((what, e))) => {
                    self.poison(&mut st, what, e);
                }
            }
            self.synced_cv.notify_all();
        }
    }

    /// `pwrite`s all of `buf` at `offset`.
    fn write_at(&self, file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
        #[cfg(test)]
        if self.no_space.load(std::sync::atomic::Ordering::SeqCst) {
            // Like a real full disk: part of the buffer may land first.
            file.write_all_at(&buf[..buf.len() / 2], offset)?;
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        file.write_all_at(buf, offset)
    }

    /// After a write at `offset` failed for want of space: cuts the file
    /// back to `offset`, so whatever part of the write landed is gone and
    /// the next write starts where it began. Returns the failure's message
    /// for the appenders, or `None` if the cut failed too and the log is
    /// poisoned.
    fn cut_back(&self, st: &mut State, file: &File, offset: u64, e: &std::io::Error) -> Option<String> {
        let reason = format!(
            "write of {}: {e}; the write was undone, and writes resume once there is space",
            self.current_path(st).display()
        );
        if let Err(cut) = file.set_len(offset) {
            self.poison(st, "cutting back a write that ran out of space in", cut);
            return None;
        }
        tracing::warn!("WAL refused a write: {reason}");
        Some(reason)
    }

    /// Writes buffered frames to the OS (no fsync). Caller holds the lock.
    /// `own` is how many bytes at the end of the buffer are the caller's
    /// (not acknowledged: dropped if the write runs out of space).
    fn write_pending(&self, st: &mut State, own: usize) -> Result<()> {
        if st.syncing {
            // Fsync mode only: the syncer in flight will write these bytes
            // with its next round.
            return Ok(());
        }
        if st.pending.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut st.pending);
        let tickets = std::mem::take(&mut st.pending_tickets);
        let file = st.file.clone();
        let offset = st.file_len;
        if let Err(e) = self.write_at(&file, &buf, offset) {
            if !is_out_of_space(&e) {
                return Err(self.poison(st, "write of", e));
            }
            let Some(reason) = self.cut_back(st, &file, offset, &e) else {
                return Err(Error::WalFailed {
                    reason: st.poisoned.clone().unwrap_or_default(),
                });
            };
            if self.durability == Durability::Fsync {
                // Frames of appenders waiting for a round (a `sync` or a
                // rotation got here first): none is acknowledged; each is
                // told when it wakes.
                st.failed_rounds.push(FailedRound {
                    start: st.appended - buf.len() as u64,
                    end: st.appended,
                    waiters: tickets,
                    reason: reason.clone(),
                });
            } else {
                // Frames acknowledged already stay, to be written next time;
                // the caller's own are dropped (it gets the error).
                let keep = buf.len().saturating_sub(own);
                let mut buf = buf;
                buf.truncate(keep);
                st.pending = buf;
                st.pending_acked = st.pending.len();
            }
            return Err(Error::DiskFull { reason });
        }
        st.file_len += buf.len() as u64;
        st.pending_acked = 0;
        Ok(())
    }

    /// fsyncs everything appended so far (used by interval mode's ticker and
    /// on shutdown).
    pub fn sync(&self) -> Result<()> {
        let mut st = self.state.lock();
        while st.syncing {
            self.synced_cv.wait(&mut st);
        }
        if let Some(p) = &st.poisoned {
            return Err(Error::WalFailed { reason: p.clone() });
        }
        self.write_pending(&mut st, 0)?;
        let end = st.appended;
        if st.synced >= end {
            return Ok(());
        }
        st.syncing = true;
        let file = st.file.clone();
        drop(st);
        let started = Instant::now();
        let result = file.sync_data();
        let elapsed = started.elapsed();
        let mut st = self.state.lock();
        st.syncing = false;
        self.synced_cv.notify_all();
        match result {
            Ok(()) => {
                st.synced = st.synced.max(end);
                let mut s = self.stats.lock();
                s.fsyncs += 1;
                s.fsync_nanos += elapsed.as_nanos() as u64;
                Ok(())
            }
            Err(e) => Err(self.poison(&mut st, "fsync of", e)),
        }
    }

    /// Closes the current segment (durably) and starts a new one. Returns the
    /// first sequence number of the new segment: every record before it is in
    /// a closed segment.
    pub fn rotate(&self) -> Result<u64> {
        self.sync()?;
        let mut st = self.state.lock();
        while st.syncing {
            self.synced_cv.wait(&mut st);
        }
        // An append may have slipped in between sync() and the lock.
        self.write_pending(&mut st, 0)?;
        if let Err(e) = st.file.sync_data() {
            return Err(self.poison(&mut st, "fsync of", e));
        }
        st.synced = st.appended;
        let first_seq = st.next_seq;
        if st.segments.last().is_some_and(|s| s.first_seq == first_seq) {
            // Nothing was appended since the last rotation.
            return Ok(first_seq);
        }
        let (file, seg) = match st.spare.take() {
            Some(spare) => promote_spare(&self.dir, spare, first_seq)?,
            None => create_segment(&self.dir, first_seq)?,
        };
        st.file = Arc::new(file);
        st.file_len = SEGMENT_MAGIC.len() as u64;
        st.segments.push(seg);
        Ok(first_seq)
    }

    /// Creates the file the next [`rotate`](Wal::rotate) will use, outside
    /// any lock the ingest path waits on: a rotation then costs a rename and
    /// a directory fsync instead of creating and syncing a file too. Does
    /// nothing if a spare is ready.
    pub fn prepare_spare(&self) -> Result<()> {
        let _one_creator = self.spare_lock.lock();
        if self.state.lock().spare.is_some() {
            return Ok(());
        }
        let file = new_segment_file(&self.dir.join(SPARE_NAME))?;
        self.state.lock().spare = Some(file);
        Ok(())
    }

    /// Deletes closed segments whose records all precede `seq` (they are in
    /// durable parts). Returns how many were deleted.
    pub fn remove_before(&self, seq: u64) -> Result<usize> {
        let doomed: Vec<Segment> = {
            let mut st = self.state.lock();
            let mut doomed = Vec::new();
            // A segment's records end where the next segment begins; the
            // current (last) segment is never deleted.
            while st.segments.len() > 1 && st.segments[1].first_seq <= seq {
                doomed.push(st.segments.remove(0));
            }
            doomed
        };
        for seg in &doomed {
            fs::remove_file(&seg.path).ctx(|| format!("remove WAL segment {}", seg.path.display()))?;
        }
        if !doomed.is_empty() {
            fsutil::fsync_dir(&self.dir)?;
        }
        Ok(doomed.len())
    }

    pub fn stats(&self) -> WalStats {
        let mut s = self.stats.lock().clone();
        s.segments = self.state.lock().segments.len();
        s
    }

    /// Bytes of WAL on disk.
    pub fn disk_bytes(&self) -> u64 {
        let segs = self.state.lock().segments.clone();
        segs.iter()
            .filter_map(|s| fs::metadata(&s.path).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Starts the interval-mode fsync ticker; it stops when `stop` is set.
    pub fn spawn_ticker(
        self: &Arc<Self>,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> Option<std::thread::JoinHandle<()>> {
        let Durability::Interval { ms } = self.durability else {
            return None;
        };
        let wal = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("skein-wal-sync".into())
            .spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(ms));
                    let Some(wal) = wal.upgrade() else { return };
                    // A failed log said so once, when it failed; it has
                    // nothing more to sync.
                    match wal.failure().is_none().then(|| wal.sync()) {
                        // Said once by the write that ran out of space;
                        // retried every tick until space returns.
                        Some(Err(Error::DiskFull { .. })) | Some(Ok(())) | None => {}
                        Some(Err(e)) => tracing::error!("WAL interval fsync failed: {e}"),
                    }
                }
            })
            .ok()
    }
}

#[cfg(test)]
impl Wal {
    fn hold_sync(&self) {
        if let Some(n) = self.hold_first_sync_for
            && self.stats.lock().fsyncs == 0
        {
            while self.stats.lock().appends < n {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// What `skein verify` finds of one WAL segment file's bytes: `Err` with
/// the damage (a missing header, a damaged frame with data after it, a frame
/// that does not decode), `Ok(Some(note))` for a torn tail (an unfinished
/// last write, never acknowledged: recovery cuts it), `Ok(None)` when clean.
pub fn check_segment(bytes: &[u8]) -> std::result::Result<Option<String>, String> {
    let Some(body) = bytes.strip_prefix(SEGMENT_MAGIC) else {
        if SEGMENT_MAGIC.starts_with(bytes) {
            return Ok(Some("an empty segment whose header was never fully written".into()));
        }
        return Err("missing SKEINWAL header".into());
    };
    let scan = frame::scan(body);
    for (offset, payload) in &scan.frames {
        WalRecord::decode(payload).map_err(|e| format!("record at byte {}: {e}", offset + SEGMENT_MAGIC.len()))?;
    }
    match scan.tail {
        frame::Tail::Clean => Ok(None),
        frame::Tail::Torn { offset, reason } => Ok(Some(format!(
            "an unacknowledged torn tail at byte {} ({reason}), which recovery cuts",
            offset + SEGMENT_MAGIC.len()
        ))),
        frame::Tail::Corrupt { offset, reason } => Err(format!(
            "damaged frame at byte {}: {reason}",
            offset + SEGMENT_MAGIC.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;

    use super::segment::{list_segments, segment_name};
    use super::*;

    fn open(dir: &Path, mode: RecoveryMode) -> Result<(Wal, Vec<WalRecord>)> {
        let mut recs = Vec::new();
        let (wal, _) = Wal::open(dir, Durability::Fsync, 0, mode, |r| {
            recs.push(r);
            Ok(())
        })?;
        Ok((wal, recs))
    }

    #[test]
    fn a_write_out_of_space_is_undone_and_writes_resume_when_space_returns() {
        use std::sync::atomic::Ordering::SeqCst;
        for durability in [Durability::Fsync, Durability::Interval { ms: 100 }, Durability::None] {
            let dir = tempfile::tempdir().unwrap();
            {
                let (wal, _) = Wal::open(dir.path(), durability, 0, RecoveryMode::Strict, |_| Ok(())).unwrap();
                assert_eq!(wal.append(Signal::Spans, 1, b"first").unwrap(), 1);
                let bytes = wal.disk_bytes();
                wal.no_space.store(true, SeqCst);
                // Half of each write lands before it fails: a torn frame,
                // unless it is cut away.
                let body = vec![7u8; 4000];
                for _ in 0..2 {
                    let e = wal.append(Signal::Spans, 2, &body).unwrap_err();
                    assert!(matches!(e, Error::DiskFull { .. }), "{durability}: {e}");
                    assert!(e.to_string().contains("writes resume once there is space"), "{e}");
                }
                assert_eq!(wal.disk_bytes(), bytes, "{durability}: the failed writes left nothing");
                assert!(wal.failure().is_none(), "{durability}: not poisoned");
                wal.no_space.store(false, SeqCst);
                // Space is back: the next write lands where the failed ones
                // began, and sequence numbers go on.
                assert_eq!(wal.append(Signal::Logs, 1, b"after").unwrap(), 6);
                wal.sync().unwrap();
            }
            let (_, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
            let got: Vec<_> = recs.iter().map(|r| (r.seq_base, r.body.clone())).collect();
            assert_eq!(
                got,
                vec![(1, b"first".to_vec()), (6, b"after".to_vec())],
                "{durability}"
            );
        }
    }

    #[test]
    fn acknowledged_frames_buffered_behind_a_sync_survive_a_write_out_of_space() {
        use std::sync::atomic::Ordering::SeqCst;
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, _) = Wal::open(dir.path(), Durability::None, 0, RecoveryMode::Strict, |_| Ok(())).unwrap();
            // As if a sync were in flight: the append is acknowledged with
            // its frame still buffered.
            wal.state.lock().syncing = true;
            assert_eq!(wal.append(Signal::Spans, 1, b"acked").unwrap(), 1);
            wal.state.lock().syncing = false;
            wal.no_space.store(true, SeqCst);
            assert!(matches!(
                wal.append(Signal::Spans, 1, b"refused"),
                Err(Error::DiskFull { .. })
            ));
            assert!(matches!(wal.sync(), Err(Error::DiskFull { .. })));
            wal.no_space.store(false, SeqCst);
            wal.sync().unwrap();
        }
        let (_, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        let got: Vec<_> = recs.iter().map(|r| r.body.clone()).collect();
        assert_eq!(got, vec![b"acked".to_vec()]);
    }

    #[test]
    fn appends_replay_in_order_with_sequence_numbers() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
            assert!(recs.is_empty());
            assert_eq!(wal.append(Signal::Spans, 3, b"aaa").unwrap(), 1);
            assert_eq!(wal.append(Signal::Logs, 2, b"bb").unwrap(), 4);
            wal.rotate().unwrap();
            assert_eq!(wal.append(Signal::Metrics, 1, b"c").unwrap(), 6);
            // A batch's payloads are framed just before it, under its
            // sequence numbers.
            let seq = wal
                .append_with_payloads(Signal::Logs, 1, b"d", Some((2, b"pp")))
                .unwrap();
            assert_eq!(seq, 7);
        }
        let (wal, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.kind, r.seq_base, r.count, r.body.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (RecordKind::Batch(Signal::Spans), 1, 3, b"aaa".to_vec()),
                (RecordKind::Batch(Signal::Logs), 4, 2, b"bb".to_vec()),
                (RecordKind::Batch(Signal::Metrics), 6, 1, b"c".to_vec()),
                (RecordKind::Payloads, 7, 2, b"pp".to_vec()),
                (RecordKind::Batch(Signal::Logs), 7, 1, b"d".to_vec()),
            ]
        );
        assert_eq!(wal.next_seq(), 8);
        // Segments before seq 8 hold nothing newer: all but the current go.
        assert!(wal.remove_before(8).unwrap() >= 2);
        drop(wal);
        let (_, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        assert!(recs.is_empty());
    }

    #[test]
    fn a_rotation_renames_the_spare_and_a_stray_spare_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, _) = open(dir.path(), RecoveryMode::Strict).unwrap();
            wal.append(Signal::Spans, 2, b"before").unwrap();
            wal.prepare_spare().unwrap();
            wal.prepare_spare().unwrap(); // one is enough
            assert!(dir.path().join(SPARE_NAME).exists());
            assert_eq!(wal.rotate().unwrap(), 3);
            assert!(!dir.path().join(SPARE_NAME).exists(), "the spare became the segment");
            assert!(dir.path().join(segment_name(3)).exists());
            wal.append(Signal::Spans, 1, b"after").unwrap();
            // A rotation without a spare creates the segment itself.
            assert_eq!(wal.rotate().unwrap(), 4);
            wal.append(Signal::Logs, 1, b"last").unwrap();
            // A spare left behind, as by a crash before its rotation.
            wal.prepare_spare().unwrap();
        }
        assert!(dir.path().join(SPARE_NAME).exists());
        let (_, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        let got: Vec<_> = recs.iter().map(|r| (r.seq_base, r.body.clone())).collect();
        assert_eq!(
            got,
            vec![(1, b"before".to_vec()), (3, b"after".to_vec()), (4, b"last".to_vec())]
        );
        assert!(!dir.path().join(SPARE_NAME).exists(), "opening removes a stray spare");
    }

    /// Group commit: writers that arrive while an fsync is in flight share
    /// the next one. The first syncer is held until all eight writers have
    /// appended, so the other seven queue behind it and one fsync covers
    /// them all: two in all, where fsyncing per append would take eight.
    #[test]
    fn concurrent_appends_share_fsyncs_and_all_survive() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = open(dir.path(), RecoveryMode::Strict).unwrap();
        wal.hold_first_sync_for = Some(8);
        let wal = Arc::new(wal);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || wal.append(Signal::Spans, 1, format!("writer {t}").as_bytes()).unwrap())
            })
            .collect();
        let mut seqs: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let stats = wal.stats();
        assert_eq!(stats.appends, 8);
        assert_eq!(stats.fsyncs, 2, "seven writers queued behind one fsync share the next");
        // Unheld, many writers still share fsyncs, and every record survives.
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .map(|i| wal.append(Signal::Spans, 1, format!("{t}-{i}").as_bytes()).unwrap())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        for t in threads {
            seqs.extend(t.join().unwrap());
        }
        drop(wal);
        let (_, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        assert_eq!(recs.len(), 408);
        let replayed: Vec<u64> = recs.iter().map(|r| r.seq_base).collect();
        assert!(replayed.windows(2).all(|w| w[0] < w[1]), "log order is sequence order");
        seqs.sort_unstable();
        assert_eq!(replayed, seqs, "every acknowledged append replays, once");
    }

    /// A write out of space that cannot be cut back (here /dev/full, which
    /// cannot be truncated) may have left a torn frame: the log is
    /// poisoned as for any other failure.
    #[test]
    fn a_write_out_of_space_that_cannot_be_undone_poisons_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = open(dir.path(), RecoveryMode::Strict).unwrap();
        wal.state.lock().file = Arc::new(OpenOptions::new().write(true).open("/dev/full").unwrap());
        let err = wal.append(Signal::Spans, 1, b"lost").unwrap_err();
        let Error::WalFailed { reason } = &err else {
            panic!("{err:?}")
        };
        assert!(reason.contains("cutting back"), "{reason}");
        assert!(matches!(
            wal.append(Signal::Spans, 1, b"x"),
            Err(Error::WalFailed { .. })
        ));
    }

    /// After a write that failed for another reason than space the log
    /// refuses every append with the typed error naming the failure, and
    /// says so through `failure`; nothing is retried onto a file whose
    /// dirty pages the kernel may have dropped.
    #[test]
    fn a_failed_write_refuses_every_later_append() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = open(dir.path(), RecoveryMode::Strict).unwrap();
        wal.append(Signal::Spans, 1, b"before").unwrap();
        assert_eq!(wal.failure(), None);
        // Every write to a file opened for reading fails (EBADF).
        let ro = dir.path().join("read-only");
        std::fs::write(&ro, b"").unwrap();
        wal.state.lock().file = Arc::new(OpenOptions::new().read(true).open(&ro).unwrap());
        let err = wal.append(Signal::Spans, 1, b"lost").unwrap_err();
        let Error::WalFailed { reason } = &err else {
            panic!("{err:?}")
        };
        assert!(reason.contains("Bad file descriptor"), "{reason}");
        assert!(err.is_unavailable());
        assert_eq!(wal.failure().as_deref(), Some(reason.as_str()));
        // The disk is fine again; the log still refuses, until a restart.
        wal.state.lock().file = Arc::new(
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.path().join("x"))
                .unwrap(),
        );
        for _ in 0..2 {
            let again = wal.append(Signal::Spans, 1, b"after").unwrap_err();
            assert!(
                matches!(&again, Error::WalFailed { reason: r } if r == reason),
                "{again:?}"
            );
        }
        assert!(matches!(wal.sync(), Err(Error::WalFailed { .. })));
        assert!(matches!(wal.rotate(), Err(Error::WalFailed { .. })));
        drop(wal);
        let (wal, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        assert_eq!(recs.len(), 1, "only the acknowledged append is in the log");
        assert_eq!(wal.failure(), None, "a restart starts healthy");
    }

    #[test]
    fn torn_tail_is_truncated_and_corruption_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, _) = open(dir.path(), RecoveryMode::Strict).unwrap();
            for i in 0..5u8 {
                wal.append(Signal::Spans, 1, &[i; 100]).unwrap();
            }
        }
        let seg = list_segments(dir.path()).unwrap()[0].path.clone();
        let full = fs::read(&seg).unwrap();
        // Tear the last frame in half.
        fs::write(&seg, &full[..full.len() - 50]).unwrap();
        let (wal, recs) = open(dir.path(), RecoveryMode::Strict).unwrap();
        assert_eq!(recs.len(), 4);
        drop(wal);
        // Damage the second frame: refuse, naming the file and offset.
        let mut bytes = fs::read(&seg).unwrap();
        bytes[SEGMENT_MAGIC.len() + frame::HEADER_LEN + RecordHeader::LEN + 100 + frame::HEADER_LEN + 20] ^= 0x55;
        fs::write(&seg, &bytes).unwrap();
        let err = open(dir.path(), RecoveryMode::Strict).err().unwrap().to_string();
        assert!(
            err.contains("fails its checksum") && err.contains(&seg.display().to_string()),
            "{err}"
        );
        assert!(err.contains("--wal-salvage"), "{err}");
        // Salvage keeps what precedes the damage.
        let (_, recs) = open(dir.path(), RecoveryMode::Salvage).unwrap();
        assert_eq!(recs.len(), 1);
    }

    #[test]
    fn durability_parses() {
        assert_eq!("fsync".parse::<Durability>().unwrap(), Durability::Fsync);
        assert_eq!(
            "interval:250ms".parse::<Durability>().unwrap(),
            Durability::Interval { ms: 250 }
        );
        assert!(
            "sometimes"
                .parse::<Durability>()
                .unwrap_err()
                .contains("unknown durability")
        );
    }
}
