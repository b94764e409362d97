//! Retention and disk pressure: records older than their signal's
//! retention are dropped, and below `--min-free-disk` ingest is refused
//! (and, with `--on-disk-full evict`, the oldest parts go first).
//!
//! # Where the line is drawn
//! A signal's *floor* is `now − retention` (wall clock, [`Clock`]); a
//! record is expired when its time (span start, log time, metric point
//! time: [`Record::time`](crate::record::Record::time)) is below it.
//! Expired records are never answered, whether or not a round has removed
//! them yet: every query the engine answers narrows its window to start at
//! the floor (`Engine::live`), and every query path already re-checks each
//! record against its window (an index only narrows). Trace lookups, which
//! take no window, filter by the floor too. Ingest refuses records already
//! expired, and WAL replay skips them.
//!
//! # A round (every `--retention-interval`)
//! Per signal, under the compaction lock (so a merge never runs on a part
//! being dropped or rewritten):
//! - a part whose newest record is below the floor is dropped whole;
//! - a part that straddles the floor is rewritten keeping the live rows
//!   (compaction's streaming merge with one input and a floor: the index,
//!   full-text index and calls table are built or merged for the rows
//!   kept);
//! - the hot tiers' expired rows are marked dead (a flush leaves them out);
//! - then payload garbage collection forgets the payloads only expired
//!   records held and rewrites or deletes packs, so the disk really drops.
//!
//! # Crash safety
//! - Dropping a part: it leaves the engine's state first (queries holding
//!   a snapshot keep reading the open file), then its Parquet file is
//!   deleted (the commit point: a part exists iff its Parquet file does),
//!   then its sidecars; recovery deletes sidecars left without their part.
//!   A deletion a crash makes undone brings back a part that the next round
//!   drops again.
//! - Rewriting: the output is durable before it is installed and names the
//!   input in `replaces`, keeping its sequence range and `covers_seq`, so
//!   replay is unchanged; recovery deletes an input a crash left behind.
//! - A dropped part may be the one with its signal's highest `covers_seq`.
//!   Recovery then replays from a lower point, but WAL segments go once
//!   their tier is flushed, and any record still in the log with such a
//!   sequence number was in a dropped (expired) part: replay skips expired
//!   records, so nothing comes back. (An eviction, which drops parts that
//!   are not expired, can bring back records of a part whose segment a
//!   crash kept: at worst data that was about to be evicted.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use skein_model::{LogRecord, MetricPoint, Span};

use super::Inner;
use super::tier::Stored;
use crate::error::{Error, Result};
use crate::health::FaultKind;
use crate::part::{self, Part};
use crate::record::Signal;

/// How long each signal's records are kept; `None`: forever.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    pub spans: Option<Duration>,
    pub logs: Option<Duration>,
    pub metrics: Option<Duration>,
}

impl Retention {
    pub fn of(&self, s: Signal) -> Option<Duration> {
        match s {
            Signal::Spans => self.spans,
            Signal::Logs => self.logs,
            Signal::Metrics => self.metrics,
        }
    }

    pub fn is_forever(&self) -> bool {
        Signal::ALL.iter().all(|s| self.of(*s).is_none())
    }
}

impl std::fmt::Display for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = Signal::ALL
            .iter()
            .map(|s| match self.of(*s) {
                Some(d) => format!("{}={}", s.as_str(), format_duration(d)),
                None => format!("{}=forever", s.as_str()),
            })
            .collect();
        f.write_str(&each.join(","))
    }
}

impl std::str::FromStr for Retention {
    type Err = String;

    /// `spans=7d,logs=3d,metrics=30d`; a bare duration (or `all=` /
    /// `default=`) sets the signals not named; `forever` (or `off`) keeps
    /// a signal for ever.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut default: Option<Option<Duration>> = None;
        let mut named: [Option<Option<Duration>>; 3] = [None; 3];
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => ("all", item),
            };
            let d = if matches!(value, "forever" | "off" | "none") {
                None
            } else {
                let d = parse_duration(value).map_err(|e| format!("retention {item:?}: {e}"))?;
                if d.is_zero() {
                    return Err(format!(
                        "retention {item:?}: a retention of 0 would drop every record; use forever to keep them"
                    ));
                }
                Some(d)
            };
            let slot = match key {
                "all" | "default" | "*" => &mut default,
                "spans" | "traces" => &mut named[0],
                "logs" => &mut named[1],
                "metrics" => &mut named[2],
                other => {
                    return Err(format!(
                        "retention {item:?}: unknown signal {other:?}; use spans, logs, metrics or all"
                    ));
                }
            };
            if slot.is_some() {
                return Err(format!("retention {s:?} sets {key} twice"));
            }
            *slot = Some(d);
        }
        let pick = |i: usize| named[i].or(default).flatten();
        Ok(Retention {
            spans: pick(0),
            logs: pick(1),
            metrics: pick(2),
        })
    }
}

/// `90s`, `15m`, `12h`, `7d`, `2w` (a number and one unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 90s, 15m, 12h, 7d, 2w)"))?;
    let secs = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        "ms" => return Ok(Duration::from_millis(n)),
        _ => return Err(format!("{s:?} is not a duration (e.g. 90s, 15m, 12h, 7d, 2w)")),
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{s:?} is too long a duration"))
}

fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match () {
        _ if d.subsec_nanos() != 0 => format!("{}ms", d.as_millis()),
        _ if s != 0 && s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s != 0 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s != 0 && s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// The wall clock retention measures age by; tests substitute their own.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl Clock {
    pub fn system() -> Clock {
        Clock(Arc::new(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        }))
    }

    /// A clock that reads `now` (ns since the epoch), for tests.
    pub fn manual(now: Arc<AtomicU64>) -> Clock {
        Clock(Arc::new(move || now.load(Ordering::SeqCst)))
    }

    pub fn now_unix_nano(&self) -> u64 {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// The free space below which ingest is refused.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum MinFreeDisk {
    /// 5% of the filesystem or 1 GiB, whichever is smaller.
    #[default]
    Auto,
    Bytes(u64),
    /// A share of the filesystem, in percent.
    Percent(f64),
}

impl MinFreeDisk {
    /// The floor in bytes on a filesystem of `total` bytes.
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            MinFreeDisk::Auto => (total / 20).min(1 << 30),
            MinFreeDisk::Bytes(b) => b,
            MinFreeDisk::Percent(p) => (total as f64 * p / 100.0) as u64,
        }
    }
}

impl std::str::FromStr for MinFreeDisk {
    type Err = String;

    /// `5%`, `1GiB`, `512MiB`, `100MB`, a byte count, `0` (off) or `auto`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t == "auto" {
            return Ok(MinFreeDisk::Auto);
        }
        if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("min free disk {s:?}: {p:?} is not a percentage"))?;
            if !(0.0..100.0).contains(&p) {
                return Err(format!("min free disk {s:?}: a percentage is from 0 to below 100"));
            }
            return Ok(MinFreeDisk::Percent(p));
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (n, unit) = t.split_at(split);
        let n: u64 = n
            .parse()
            .map_err(|_| format!("min free disk {s:?}: use a size (1GiB, 512MiB, 100MB) or a percentage (5%)"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => 1000,
            "kib" => 1 << 10,
            "m" | "mb" => 1_000_000,
            "mib" => 1 << 20,
            "g" | "gb" => 1_000_000_000,
            "gib" => 1 << 30,
            "t" | "tb" => 1_000_000_000_000,
            "tib" => 1 << 40,
            other => return Err(format!("min free disk {s:?}: unknown unit {other:?}")),
        };
        n.checked_mul(mult)
            .map(MinFreeDisk::Bytes)
            .ok_or_else(|| format!("min free disk {s:?} is too large"))
    }
}

/// What happens when free space falls below the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDiskFull {
    /// Refuse ingest until space returns (the default).
    #[default]
    Refuse,
    /// Refuse ingest, and drop the oldest parts until the floor is met.
    Evict,
}

impl std::str::FromStr for OnDiskFull {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "refuse" => Ok(OnDiskFull::Refuse),
            "evict" => Ok(OnDiskFull::Evict),
            other => Err(format!("--on-disk-full {other:?}: use refuse or evict")),
        }
    }
}

/// What retention and eviction did, for `/api/v1/stats` and `/metrics`.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct RetentionStats {
    /// Rounds that completed.
    pub rounds: u64,
    /// Parts dropped whole, their records all expired.
    pub parts_dropped: u64,
    /// Parts that straddled the line, rewritten with their live rows.
    pub parts_rewritten: u64,
    /// Records removed for being expired (parts and hot tiers).
    pub records_expired: u64,
    /// Part bytes freed (payload packs count in the payload GC's figures).
    pub bytes_freed: u64,
    /// Parts dropped to make room under `--on-disk-full evict`.
    pub parts_evicted: u64,
    /// Free bytes on the data directory's filesystem, when last measured.
    pub disk_free_bytes: u64,
    pub disk_total_bytes: u64,
    /// The `--min-free-disk` floor on that filesystem, in bytes.
    pub min_free_disk_bytes: u64,
}

/// Counters behind [`RetentionStats`].
#[derive(Debug, Default)]
pub(crate) struct RetentionCounters {
    rounds: AtomicU64,
    parts_dropped: AtomicU64,
    parts_rewritten: AtomicU64,
    records_expired: AtomicU64,
    bytes_freed: AtomicU64,
    parts_evicted: AtomicU64,
    disk_free: AtomicU64,
    disk_total: AtomicU64,
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub parts_dropped: u64,
    pub parts_rewritten: u64,
    pub records_expired: u64,
    pub bytes_freed: u64,
    pub parts_evicted: u64,
}

/// Free and total bytes of the filesystem holding `path`.
pub(crate) fn disk_space(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `st` a writable statvfs for the
    // duration of the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((st.f_bavail as u64 * frsize, st.f_blocks as u64 * frsize))
}

impl Inner {
    /// Records of `s` older than this (ns since the epoch) are expired; 0
    /// when the signal is kept for ever.
    pub(crate) fn floor(&self, s: Signal) -> u64 {
        match self.opts.retention.of(s) {
            Some(d) => self
                .opts
                .clock
                .now_unix_nano()
                .saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64),
            None => 0,
        }
    }

    /// Refuses a write when free space is below `--min-free-disk`, before
    /// anything of it is written; keeps the `disk` fault up to date.
    pub(crate) fn check_disk(&self) -> Result<()> {
        let (free, total) = match disk_space(&self.opts.data_dir) {
            Ok(v) => v,
            Err(e) => {
                // Not knowing is no reason to refuse: a write that does
                // not fit still fails cleanly (see `wal`).
                tracing::warn!("free space of {}: {e}", self.opts.data_dir.display());
                return Ok(());
            }
        };
        self.retention_counters.disk_free.store(free, Ordering::Relaxed);
        self.retention_counters.disk_total.store(total, Ordering::Relaxed);
        let floor = self.opts.min_free_disk.bytes(total);
        if free >= floor && free > 0 {
            // A fault from a WAL write that ran out of space stays until
            // there is more room than then (or a write fits).
            if free > self.disk_full_at.load(Ordering::Relaxed) {
                self.faults.clear(FaultKind::Disk);
            }
            return Ok(());
        }
        let reason = format!(
            "{} free on {}, below --min-free-disk {}: ingest is refused until space returns{}",
            human_bytes(free),
            self.opts.data_dir.display(),
            human_bytes(floor),
            if self.opts.on_disk_full == OnDiskFull::Evict {
                " (evicting the oldest parts)"
            } else {
                ""
            }
        );
        self.faults.fail(FaultKind::Disk, reason.clone());
        if self.opts.on_disk_full == OnDiskFull::Evict {
            self.wake_retention();
        }
        Err(Error::DiskFull { reason })
    }

    /// Whether free space is below the floor (or gone) now, as `(free,
    /// floor)`; no fault recorded.
    pub(super) fn below_floor(&self) -> Option<(u64, u64)> {
        let (free, total) = disk_space(&self.opts.data_dir).ok()?;
        self.retention_counters.disk_free.store(free, Ordering::Relaxed);
        self.retention_counters.disk_total.store(total, Ordering::Relaxed);
        let floor = self.opts.min_free_disk.bytes(total);
        (free < floor || free == 0).then_some((free, floor))
    }

    /// Whether a `disk` fault is over: free space is at or above the floor
    /// and, if a WAL write ran out of space, more than there was then.
    pub(super) fn disk_recovered(&self) -> bool {
        let Ok((free, total)) = disk_space(&self.opts.data_dir) else {
            return false;
        };
        self.retention_counters.disk_free.store(free, Ordering::Relaxed);
        self.retention_counters.disk_total.store(total, Ordering::Relaxed);
        free >= self.opts.min_free_disk.bytes(total) && free > self.disk_full_at.load(Ordering::Relaxed)
    }

    pub(crate) fn wake_retention(&self) {
        let mut w = self.retention_wake.lock();
        *w = true;
        self.retention_cv.notify_all();
    }

    /// One round: drops and rewrites expired parts, kills expired hot
    /// rows, evicts under disk pressure if asked, then collects payloads.
    pub(crate) fn enforce_retention(&self) -> Result<RetentionReport> {
        let mut report = RetentionReport::default();
        {
            let _no_merges = self.compact_lock.lock();
            if !self.opts.retention.is_forever() {
                self.expire::<Span>(&mut report)?;
                self.expire::<LogRecord>(&mut report)?;
                self.expire::<MetricPoint>(&mut report)?;
            }
            if self.opts.on_disk_full == OnDiskFull::Evict {
                self.evict(&mut report)?;
            }
        }
        if report != RetentionReport::default() {
            tracing::info!(
                "retention: dropped {} parts, rewrote {}, evicted {}, expired {} records, freed {} part bytes",
                report.parts_dropped,
                report.parts_rewritten,
                report.parts_evicted,
                report.records_expired,
                report.bytes_freed
            );
            // Payloads only the removed records held are garbage now.
            self.tracked(FaultKind::Gc, || self.collect_payload_garbage())?;
        }
        let c = &self.retention_counters;
        c.rounds.fetch_add(1, Ordering::Relaxed);
        c.parts_dropped.fetch_add(report.parts_dropped, Ordering::Relaxed);
        c.parts_rewritten.fetch_add(report.parts_rewritten, Ordering::Relaxed);
        c.records_expired.fetch_add(report.records_expired, Ordering::Relaxed);
        c.bytes_freed.fetch_add(report.bytes_freed, Ordering::Relaxed);
        c.parts_evicted.fetch_add(report.parts_evicted, Ordering::Relaxed);
        Ok(report)
    }

    fn expire<R: Stored>(&self, report: &mut RetentionReport) -> Result<()> {
        let floor = self.floor(R::SIGNAL);
        if floor == 0 {
            return Ok(());
        }
        // The hot tiers first: a flush in progress may still write a row
        // killed here into its part; the next round rewrites that part.
        let tiers: Vec<_> = self.state.read().tiers().cloned().collect();
        for t in tiers {
            report.records_expired += R::table(&t).write().expire_before(floor) as u64;
        }
        let parts = self.state.read().parts(R::SIGNAL).clone();
        for p in parts {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            if p.meta.max_time < floor {
                report.records_expired += p.meta.rows;
                report.bytes_freed += self.drop_part(R::SIGNAL, &p)?;
                report.parts_dropped += 1;
            } else if p.meta.min_time < floor {
                let before = p.file_bytes();
                let output = self.rewrite::<R>(std::slice::from_ref(&p), floor, p.meta.level)?;
                report.records_expired += p.meta.rows.saturating_sub(output.meta.rows);
                report.bytes_freed += before.saturating_sub(output.file_bytes());
                report.parts_rewritten += 1;
            }
        }
        Ok(())
    }

    /// Drops the oldest parts (by their newest record, any signal) while
    /// free space is below the floor. With parts in a bucket, the local
    /// cache of it goes instead, and parts never: deleting one from the
    /// bucket would free no local disk, only lose data.
    fn evict(&self, report: &mut RetentionReport) -> Result<()> {
        if self.opts.object_storage.is_some() {
            if let Some((free, floor)) = self.below_floor() {
                let freed = self.store.free_local(floor - free);
                report.bytes_freed += freed;
                if self.below_floor().is_some() {
                    tracing::warn!(
                        "disk full: {} free, below {}, with {} of the bucket's cache dropped; what is left is the WAL and parts waiting for their upload",
                        human_bytes(free),
                        human_bytes(floor),
                        human_bytes(freed)
                    );
                }
            }
            return Ok(());
        }
        while let Some((free, floor)) = self.below_floor() {
            let oldest = {
                let st = self.state.read();
                Signal::ALL
                    .iter()
                    .flat_map(|s| st.parts(*s).iter().map(move |p| (*s, p.clone())))
                    .min_by_key(|(_, p)| (p.meta.max_time, p.meta.id))
            };
            let Some((signal, part)) = oldest else {
                tracing::warn!(
                    "disk full: {} free, below {}, and no part is left to evict",
                    human_bytes(free),
                    human_bytes(floor)
                );
                return Ok(());
            };
            tracing::warn!(
                "disk full: {} free, below {}: evicting {} part {} ({} records up to {})",
                human_bytes(free),
                human_bytes(floor),
                signal.as_str(),
                part.meta.id,
                part.meta.rows,
                part.meta.max_time
            );
            report.bytes_freed += self.drop_part(signal, &part)?;
            report.parts_evicted += 1;
            // The payloads only it held go too, before space is measured
            // again.
            self.tracked(FaultKind::Gc, || self.collect_payload_garbage())?;
        }
        Ok(())
    }

    /// Removes a part from the state, then its files (see the module's
    /// crash safety); returns its bytes.
    pub(super) fn drop_part(&self, signal: Signal, p: &Arc<Part>) -> Result<u64> {
        let bytes = p.file_bytes();
        // Before the part goes, so its records never come back from a log
        // segment that still holds them.
        self.replay_floor
            .lock()
            .raise(&self.opts.data_dir, signal, p.meta.covers_seq, p.meta.max_seq)?;
        {
            let mut st = self.state.write();
            st.parts[signal.index()].retain(|q| q.meta.id != p.meta.id);
        }
        if signal == Signal::Spans {
            self.forget_shadows();
        }
        self.store.remove(&part::parquet_name(signal, p.meta.id))?;
        for name in part::sidecar_names(signal, p.meta.id) {
            self.store.remove(&name)?;
        }
        Ok(bytes)
    }

    pub(super) fn retention_loop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            {
                let mut w = self.retention_wake.lock();
                if !*w {
                    self.retention_cv.wait_for(&mut w, self.opts.retention_interval);
                }
                *w = false;
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            // A failure is retried at the next wake-up, like a success.
            let _ = self.tracked(FaultKind::Retention, || self.enforce_retention());
            // At most one round a second (or an interval, if shorter),
            // however often refused writes on a full disk wake it: a round
            // scans the hot tiers. A wake-up meanwhile is kept for after.
            let rest = Instant::now() + Duration::from_secs(1).min(self.opts.retention_interval);
            while !self.stop.load(Ordering::SeqCst) && Instant::now() < rest {
                let mut w = self.retention_wake.lock();
                self.retention_cv.wait_until(&mut w, rest);
            }
        }
    }

    pub(crate) fn retention_stats(&self) -> RetentionStats {
        let c = &self.retention_counters;
        let total = c.disk_total.load(Ordering::Relaxed);
        RetentionStats {
            rounds: c.rounds.load(Ordering::Relaxed),
            parts_dropped: c.parts_dropped.load(Ordering::Relaxed),
            parts_rewritten: c.parts_rewritten.load(Ordering::Relaxed),
            records_expired: c.records_expired.load(Ordering::Relaxed),
            bytes_freed: c.bytes_freed.load(Ordering::Relaxed),
            parts_evicted: c.parts_evicted.load(Ordering::Relaxed),
            disk_free_bytes: c.disk_free.load(Ordering::Relaxed),
            disk_total_bytes: total,
            min_free_disk_bytes: self.opts.min_free_disk.bytes(total),
        }
    }
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_parses_per_signal_with_a_default() {
        let r: Retention = "spans=7d,logs=3d,metrics=30d".parse().unwrap();
        assert_eq!(r.spans, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(r.logs, Some(Duration::from_secs(3 * 86_400)));
        assert_eq!(r.metrics, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(r.to_string(), "spans=7d,logs=3d,metrics=30d");
        let r: Retention = "14d,logs=2h".parse().unwrap();
        assert_eq!(r.spans, Some(Duration::from_secs(14 * 86_400)));
        assert_eq!(r.logs, Some(Duration::from_secs(7200)));
        assert_eq!(r.metrics, r.spans);
        let r: Retention = "all=1w,metrics=forever".parse().unwrap();
        assert_eq!(r.metrics, None);
        assert_eq!(r.spans, Some(Duration::from_secs(7 * 86_400)));
        assert!("".parse::<Retention>().unwrap().is_forever());
        for (bad, says) in [
            ("spans=7x", "not a duration"),
            ("traces=1d,spans=2d", "twice"),
            ("events=1d", "unknown signal"),
            ("spans=0d", "drop every record"),
        ] {
            let e = bad.parse::<Retention>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn min_free_disk_parses_sizes_and_shares() {
        assert_eq!("5%".parse::<MinFreeDisk>().unwrap(), MinFreeDisk::Percent(5.0));
        assert_eq!("1GiB".parse::<MinFreeDisk>().unwrap(), MinFreeDisk::Bytes(1 << 30));
        assert_eq!("100MB".parse::<MinFreeDisk>().unwrap(), MinFreeDisk::Bytes(100_000_000));
        assert_eq!("0".parse::<MinFreeDisk>().unwrap(), MinFreeDisk::Bytes(0));
        assert!("lots".parse::<MinFreeDisk>().is_err());
        assert!("150%".parse::<MinFreeDisk>().is_err());
        // The default: 5% or 1 GiB, whichever is smaller.
        assert_eq!(MinFreeDisk::Auto.bytes(10 << 30), (10u64 << 30) / 20);
        assert_eq!(MinFreeDisk::Auto.bytes(100 << 30), 1 << 30);
        assert_eq!(MinFreeDisk::Percent(10.0).bytes(1000), 100);
    }

    #[test]
    fn disk_space_reads_the_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let (free, total) = disk_space(dir.path()).unwrap();
        assert!(total > 0 && free <= total);
        assert!(disk_space(std::path::Path::new("/no/such/dir")).is_err());
    }
}
