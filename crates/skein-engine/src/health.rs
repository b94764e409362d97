//! Faults: states of the engine that need an operator. The engine keeps
//! answering queries through them, but something it must do on write or in
//! the background is failing, and only a person can fix the cause (a full
//! or failing disk, a directory that was removed, a permission taken away).
//!
//! A WAL fault lasts until a restart: after a failed fsync (or a write
//! failing other than for want of space) the log refuses every append (see
//! `wal`). A WAL write that fails with ENOSPC is a `disk` fault instead: it
//! leaves nothing behind, and the next write that fits clears it. A flush or compaction fault clears the
//! next time that task succeeds, so a disk that recovers shows as healthy
//! again without a restart.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// What is failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// The WAL failed a write or fsync and refuses writes: ingest is down.
    Wal,
    /// Writing frozen hot tiers to parts fails: memory grows until ingest
    /// has to refuse writes.
    Flush,
    /// Merging parts (or collecting payload garbage) fails: reads fan out
    /// over more and more parts.
    Compaction,
    /// A payload failed its check on read (its bytes do not hash to its
    /// name: a damaged pack). Writes and other reads go on: the engine is
    /// degraded, not down. Lasts until a restart.
    Payload,
    /// Objects cannot be uploaded to object storage (or its lease was
    /// lost): they wait on local disk, writes go on. Clears once an upload
    /// succeeds.
    Upload,
    /// Enforcing retention (dropping or rewriting expired parts, evicting
    /// under disk pressure) fails: disk use grows past the policy. Writes
    /// and reads go on. Clears when a round succeeds.
    Retention,
    /// Payload garbage collection fails: unreferenced payloads keep their
    /// space. Clears when a collection succeeds.
    Gc,
    /// The disk is (nearly) full: free space is below `--min-free-disk`,
    /// or a WAL write failed with ENOSPC. Ingest is refused (503, retry
    /// later) until space returns; queries go on. Clears by itself.
    Disk,
    /// An object read back from object storage failed its checksum or is
    /// not the size it was written at (changed or truncated in the
    /// bucket). That read is an error naming the object; everything else
    /// works, so the engine is degraded. Lasts until a restart.
    Corrupt,
    /// A part's full-text index cannot be built after it was written (its
    /// file cannot be read, or the index cannot be stored). Text queries
    /// scan that part: the same answers, slower, so the engine is degraded.
    /// Lasts while such a part does, or until a restart.
    TextIndex,
}

impl FaultKind {
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Wal,
        FaultKind::Flush,
        FaultKind::Compaction,
        FaultKind::Payload,
        FaultKind::Upload,
        FaultKind::Retention,
        FaultKind::Gc,
        FaultKind::Disk,
        FaultKind::Corrupt,
        FaultKind::TextIndex,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Wal => "wal",
            FaultKind::Flush => "flush",
            FaultKind::Compaction => "compaction",
            FaultKind::Payload => "payload",
            FaultKind::Upload => "upload",
            FaultKind::Retention => "retention",
            FaultKind::Gc => "gc",
            FaultKind::Disk => "disk",
            FaultKind::Corrupt => "corrupt",
            FaultKind::TextIndex => "text_index",
        }
    }

    /// Whether the engine is degraded rather than not ready with this
    /// fault in force: it keeps answering queries and the fault either
    /// leaves writes working (a damaged payload, failing retention or GC)
    /// or heals by itself (a full disk refuses writes with 503 and
    /// `Retry-After` until space returns, without a restart).
    pub fn degrades_only(self) -> bool {
        matches!(
            self,
            FaultKind::Payload
                | FaultKind::Upload
                | FaultKind::Retention
                | FaultKind::Gc
                | FaultKind::Disk
                | FaultKind::Corrupt
                | FaultKind::TextIndex
        )
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fault in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// The newest failure's message, naming what failed and where.
    pub message: String,
    /// When the first failure of this run of failures happened.
    pub since_unix_nano: u64,
    /// Failures since the task last succeeded.
    pub failures: u64,
}

/// The faults in force and how many failures each kind ever had.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    state: Mutex<FaultState>,
}

#[derive(Debug, Default)]
struct FaultState {
    current: BTreeMap<FaultKind, Fault>,
    totals: BTreeMap<FaultKind, u64>,
}

impl Faults {
    /// Records a failure of `kind`.
    pub(crate) fn fail(&self, kind: FaultKind, message: String) {
        let mut st = self.state.lock();
        *st.totals.entry(kind).or_default() += 1;
        let fault = st.current.entry(kind).or_insert_with(|| Fault {
            kind,
            message: String::new(),
            since_unix_nano: now_unix_nano(),
            failures: 0,
        });
        fault.message = message;
        fault.failures += 1;
    }

    /// Records that `kind` succeeded: its fault, if any, is over.
    pub(crate) fn clear(&self, kind: FaultKind) {
        self.state.lock().current.remove(&kind);
    }

    pub(crate) fn get(&self, kind: FaultKind) -> Option<Fault> {
        self.state.lock().current.get(&kind).cloned()
    }

    /// The faults in force, in [`FaultKind`] order.
    pub(crate) fn current(&self) -> Vec<Fault> {
        self.state.lock().current.values().cloned().collect()
    }

    /// Failures ever, by kind (every kind listed, zeros included).
    pub(crate) fn totals(&self) -> BTreeMap<String, u64> {
        let st = self.state.lock();
        FaultKind::ALL
            .iter()
            .map(|k| (k.as_str().to_string(), st.totals.get(k).copied().unwrap_or(0)))
            .collect()
    }
}

fn now_unix_nano() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_counts_its_failures_until_it_clears() {
        let f = Faults::default();
        assert!(f.current().is_empty());
        f.fail(FaultKind::Flush, "first".into());
        f.fail(FaultKind::Flush, "second".into());
        let since = f.get(FaultKind::Flush).unwrap().since_unix_nano;
        let current = f.current();
        assert_eq!(current.len(), 1);
        assert_eq!(current[0].message, "second");
        assert_eq!(current[0].failures, 2);
        f.clear(FaultKind::Flush);
        assert!(f.current().is_empty());
        // A new run of failures starts its own count and time.
        f.fail(FaultKind::Flush, "third".into());
        let again = f.get(FaultKind::Flush).unwrap();
        assert_eq!(again.failures, 1);
        assert!(again.since_unix_nano >= since);
        // Totals keep every failure, and list every kind.
        let totals = f.totals();
        assert_eq!(totals["flush"], 3);
        assert_eq!(totals["wal"], 0);
        assert_eq!(totals["compaction"], 0);
    }
}
