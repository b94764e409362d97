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
//! After a failed write or fsync the log refuses further appends: the kernel
//! may have dropped the dirty pages, so retrying could acknowledge data that
//! is not on disk (the "fsyncgate" lesson).

pub mod frame;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

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

const SEGMENT_MAGIC: &[u8; 8] = b"SKEINWAL";
const SEGMENT_EXT: &str = "wal";
/// Version of the record payload layout inside frames.
const RECORD_VERSION: u8 = 1;
/// version u8, signal u8, seq_base u64, count u32.
const RECORD_HEADER: usize = 14;

/// One decoded WAL record (a batch of one signal).
#[derive(Debug)]
pub struct WalRecord {
    pub signal: Signal,
    pub seq_base: u64,
    pub count: u32,
    /// The batch body (see `codec`).
    pub body: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Segment {
    first_seq: u64,
    path: PathBuf,
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
    poisoned: Option<String>,
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
}

fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.{SEGMENT_EXT}")
}

/// Lists segments in sequence order.
fn list_segments(dir: &Path) -> Result<Vec<Segment>> {
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

impl Wal {
    /// Opens the log in `dir`, replaying every intact record into `apply` in
    /// log order, healing a torn tail, and failing on corruption unless
    /// `salvage` is set (then the log is cut at the damage, and the loss is
    /// reported in the warnings).
    pub fn open(
        dir: &Path,
        durability: Durability,
        min_next_seq: u64,
        salvage: bool,
        mut apply: impl FnMut(WalRecord) -> Result<()>,
    ) -> Result<(Wal, ReplayReport)> {
        fsutil::create_dir_all(dir)?;
        fsutil::remove_tmp_files(dir)?;
        let segments = list_segments(dir)?;
        let mut report = ReplayReport {
            next_seq: min_next_seq.max(1),
            ..Default::default()
        };
        for (i, seg) in segments.iter().enumerate() {
            let is_last = i + 1 == segments.len();
            let bytes = fs::read(&seg.path).ctx(|| format!("read WAL segment {}", seg.path.display()))?;
            report.segments += 1;
            if bytes.len() < SEGMENT_MAGIC.len() || &bytes[..SEGMENT_MAGIC.len()] != SEGMENT_MAGIC {
                if is_last && SEGMENT_MAGIC.starts_with(&bytes) {
                    // Created but its header never fully written: empty.
                    continue;
                }
                return Err(Error::corrupt(
                    format!("WAL segment {}", seg.path.display()),
                    "missing SKEINWAL header",
                ));
            }
            let body = &bytes[SEGMENT_MAGIC.len()..];
            let scan = frame::scan(body);
            for (offset, payload) in &scan.frames {
                let rec = decode_record(payload).map_err(|e| {
                    Error::corrupt(
                        format!(
                            "WAL segment {} at byte {}",
                            seg.path.display(),
                            offset + SEGMENT_MAGIC.len()
                        ),
                        e,
                    )
                })?;
                report.next_seq = report.next_seq.max(rec.seq_base + rec.count as u64);
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
                    if !salvage {
                        return Err(Error::corrupt(
                            format!("WAL segment {} at byte {at}", seg.path.display()),
                            format!(
                                "{reason}. Acknowledged data may be damaged, so skein will not guess; \
                                 restore the file, or start with --wal-salvage to cut the log here \
                                 (losing the {} bytes after it)",
                                body.len() - offset
                            ),
                        ));
                    }
                    report.warnings.push(format!(
                        "WAL segment {} at byte {at}: {reason}; salvage cut {} bytes",
                        seg.path.display(),
                        body.len() - offset
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
        // New writes always start a fresh segment: replayed ones stay intact
        // until their records are in parts.
        let (file, seg) = create_segment(dir, report.next_seq)?;
        let mut all = segments;
        // A segment already named after `next_seq` holds no records (any
        // record in it would have a sequence number at or past its name): it
        // was created by an earlier open and never written, or salvage cut
        // it empty. `create_segment` just recreated that file; list it once,
        // or deleting the duplicate entry later fails (or deletes the live
        // segment).
        all.retain(|s| s.first_seq != seg.first_seq);
        all.push(seg);
        let wal = Wal {
            dir: dir.to_path_buf(),
            durability,
            state: Mutex::new(State {
                file: Arc::new(file),
                file_len: SEGMENT_MAGIC.len() as u64,
                segments: all,
                pending: Vec::new(),
                appended: 0,
                synced: 0,
                syncing: false,
                spare: None,
                next_seq: report.next_seq,
                poisoned: None,
            }),
            synced_cv: Condvar::new(),
            stats: Mutex::new(WalStats::default()),
            spare_lock: Mutex::new(()),
        };
        Ok((wal, report))
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
        if body.len() + RECORD_HEADER > frame::MAX_PAYLOAD {
            return Err(Error::Invalid(format!(
                "batch of {} compressed bytes exceeds the WAL frame limit of {} bytes; send smaller batches",
                body.len(),
                frame::MAX_PAYLOAD
            )));
        }
        let mut st = self.state.lock();
        if let Some(p) = &st.poisoned {
            return Err(Error::Other(format!(
                "WAL unavailable after an earlier I/O failure: {p}"
            )));
        }
        let seq_base = st.next_seq;
        st.next_seq += count as u64;
        let mut header = [0u8; RECORD_HEADER];
        header[0] = RECORD_VERSION;
        header[1] = signal.code();
        header[2..10].copy_from_slice(&seq_base.to_le_bytes());
        header[10..14].copy_from_slice(&count.to_le_bytes());
        let payload_len = RECORD_HEADER + body.len();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.update(body);
        st.pending.extend_from_slice(&(payload_len as u32).to_le_bytes());
        st.pending.extend_from_slice(&crc.finalize().to_le_bytes());
        st.pending.extend_from_slice(&header);
        st.pending.extend_from_slice(body);
        let frame_len = (frame::HEADER_LEN + payload_len) as u64;
        st.appended += frame_len;
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
                self.write_pending(&mut st)?;
            }
        }
        Ok(seq_base)
    }

    /// Group commit: become the syncer or wait for one to cover `ticket`.
    fn wait_durable<'a>(&'a self, mut st: parking_lot::MutexGuard<'a, State>, ticket: u64) -> Result<()> {
        loop {
            if let Some(p) = &st.poisoned {
                return Err(Error::Other(format!("WAL write failed: {p}")));
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
            let end = st.appended;
            let file = st.file.clone();
            let offset = st.file_len;
            st.file_len += buf.len() as u64;
            drop(st);
            let started = Instant::now();
            let result = file.write_all_at(&buf, offset).and_then(|_| file.sync_data());
            let elapsed = started.elapsed();
            st = self.state.lock();
            st.syncing = false;
            match result {
                Ok(()) => {
                    st.synced = end;
                    let mut s = self.stats.lock();
                    s.fsyncs += 1;
                    s.fsync_nanos += elapsed.as_nanos() as u64;
                }
                Err(e) => st.poisoned = Some(e.to_string()),
            }
            self.synced_cv.notify_all();
        }
    }

    /// Writes buffered frames to the OS (no fsync). Caller holds the lock.
    fn write_pending(&self, st: &mut State) -> Result<()> {
        if st.syncing {
            // Fsync mode only: the syncer in flight will write these bytes
            // with its next round.
            return Ok(());
        }
        if st.pending.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut st.pending);
        if let Err(e) = st.file.write_all_at(&buf, st.file_len) {
            st.poisoned = Some(e.to_string());
            return Err(Error::io("write WAL", e));
        }
        st.file_len += buf.len() as u64;
        Ok(())
    }

    /// fsyncs everything appended so far (used by interval mode's ticker and
    /// on shutdown).
    pub fn sync(&self) -> Result<()> {
        let mut st = self.state.lock();
        while st.syncing {
            self.synced_cv.wait(&mut st);
        }
        self.write_pending(&mut st)?;
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
            Err(e) => {
                st.poisoned = Some(e.to_string());
                Err(Error::io("fsync WAL", e))
            }
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
        self.write_pending(&mut st)?;
        st.file.sync_data().ctx(|| "fsync WAL segment".to_string())?;
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
                    if let Err(e) = wal.sync() {
                        tracing::error!("WAL interval fsync failed: {e}");
                    }
                }
            })
            .ok()
    }
}

/// The spare segment's name. It ends in the temporary suffix, so a crash
/// before it is renamed into place leaves a file that opening removes.
const SPARE_NAME: &str = "next.wal.tmp";

fn create_segment(dir: &Path, first_seq: u64) -> Result<(File, Segment)> {
    let path = dir.join(segment_name(first_seq));
    let file = new_segment_file(&path)?;
    fsutil::fsync_dir(dir)?;
    Ok((file, Segment { first_seq, path }))
}

/// A segment file holding just its header, synced (its directory is not).
fn new_segment_file(path: &Path) -> Result<File> {
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
fn promote_spare(dir: &Path, spare: File, first_seq: u64) -> Result<(File, Segment)> {
    let path = dir.join(segment_name(first_seq));
    let from = dir.join(SPARE_NAME);
    fs::rename(&from, &path).ctx(|| format!("rename {} to {}", from.display(), path.display()))?;
    fsutil::fsync_dir(dir)?;
    Ok((spare, Segment { first_seq, path }))
}

fn decode_record(payload: &[u8]) -> std::result::Result<WalRecord, String> {
    if payload.len() < RECORD_HEADER {
        return Err(format!("record of {} bytes is shorter than its header", payload.len()));
    }
    if payload[0] != RECORD_VERSION {
        return Err(format!(
            "record version {} is not supported by this skein (expects {RECORD_VERSION})",
            payload[0]
        ));
    }
    let signal = Signal::from_code(payload[1]).ok_or_else(|| format!("unknown signal code {}", payload[1]))?;
    let seq_base = u64::from_le_bytes(payload[2..10].try_into().map_err(|_| "short header")?);
    let count = u32::from_le_bytes(payload[10..14].try_into().map_err(|_| "short header")?);
    Ok(WalRecord {
        signal,
        seq_base,
        count,
        body: payload[RECORD_HEADER..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path, salvage: bool) -> Result<(Wal, Vec<WalRecord>)> {
        let mut recs = Vec::new();
        let (wal, _) = Wal::open(dir, Durability::Fsync, 0, salvage, |r| {
            recs.push(r);
            Ok(())
        })?;
        Ok((wal, recs))
    }

    #[test]
    fn appends_replay_in_order_with_sequence_numbers() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, recs) = open(dir.path(), false).unwrap();
            assert!(recs.is_empty());
            assert_eq!(wal.append(Signal::Spans, 3, b"aaa").unwrap(), 1);
            assert_eq!(wal.append(Signal::Logs, 2, b"bb").unwrap(), 4);
            wal.rotate().unwrap();
            assert_eq!(wal.append(Signal::Metrics, 1, b"c").unwrap(), 6);
        }
        let (wal, recs) = open(dir.path(), false).unwrap();
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.signal, r.seq_base, r.count, r.body.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Signal::Spans, 1, 3, b"aaa".to_vec()),
                (Signal::Logs, 4, 2, b"bb".to_vec()),
                (Signal::Metrics, 6, 1, b"c".to_vec()),
            ]
        );
        assert_eq!(wal.next_seq(), 7);
        // Segments before seq 7 hold nothing newer: all but the current go.
        assert!(wal.remove_before(7).unwrap() >= 2);
        drop(wal);
        let (_, recs) = open(dir.path(), false).unwrap();
        assert!(recs.is_empty());
    }

    #[test]
    fn a_rotation_renames_the_spare_and_a_stray_spare_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, _) = open(dir.path(), false).unwrap();
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
        let (_, recs) = open(dir.path(), false).unwrap();
        let got: Vec<_> = recs.iter().map(|r| (r.seq_base, r.body.clone())).collect();
        assert_eq!(
            got,
            vec![(1, b"before".to_vec()), (3, b"after".to_vec()), (4, b"last".to_vec())]
        );
        assert!(!dir.path().join(SPARE_NAME).exists(), "opening removes a stray spare");
    }

    #[test]
    fn concurrent_appends_share_fsyncs_and_all_survive() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = open(dir.path(), false).unwrap();
        let wal = Arc::new(wal);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        wal.append(Signal::Spans, 1, format!("{t}-{i}").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let stats = wal.stats();
        assert_eq!(stats.appends, 400);
        assert!(stats.fsyncs <= 400);
        drop(wal);
        let (_, recs) = open(dir.path(), false).unwrap();
        assert_eq!(recs.len(), 400);
        let mut seqs: Vec<u64> = recs.iter().map(|r| r.seq_base).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "log order is sequence order");
        seqs.dedup();
        assert_eq!(seqs.len(), 400);
    }

    #[test]
    fn torn_tail_is_truncated_and_corruption_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (wal, _) = open(dir.path(), false).unwrap();
            for i in 0..5u8 {
                wal.append(Signal::Spans, 1, &[i; 100]).unwrap();
            }
        }
        let seg = list_segments(dir.path()).unwrap()[0].path.clone();
        let full = fs::read(&seg).unwrap();
        // Tear the last frame in half.
        fs::write(&seg, &full[..full.len() - 50]).unwrap();
        let (wal, recs) = open(dir.path(), false).unwrap();
        assert_eq!(recs.len(), 4);
        drop(wal);
        // Damage the second frame: refuse, naming the file and offset.
        let mut bytes = fs::read(&seg).unwrap();
        bytes[SEGMENT_MAGIC.len() + frame::HEADER_LEN + RECORD_HEADER + 100 + frame::HEADER_LEN + 20] ^= 0x55;
        fs::write(&seg, &bytes).unwrap();
        let err = open(dir.path(), false).err().unwrap().to_string();
        assert!(
            err.contains("fails its checksum") && err.contains(&seg.display().to_string()),
            "{err}"
        );
        assert!(err.contains("--wal-salvage"), "{err}");
        // Salvage keeps what precedes the damage.
        let (_, recs) = open(dir.path(), true).unwrap();
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
