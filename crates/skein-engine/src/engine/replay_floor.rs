//! The replay floor: which log records a dropped part held, kept after the
//! part is gone (file `replay-floor` in the data directory, JSON).
//!
//! Recovery replays a signal's log records above the highest `covers_seq`
//! of its parts: those at or below it are in some part. When a part is
//! dropped (evicted on a full disk, or expired) its records may still sit
//! in a log segment the flush that wrote the part did not get to remove
//! before a crash; without its part, nothing would keep them from being
//! replayed, and dropped data would come back. So before a part's files
//! go, its `covers_seq` (and the highest sequence number it held, so the
//! log never numbers new records at or below a floor) is raised here.
//!
//! Crash safety: the file is written temp → fsync → rename before the
//! part's files are removed. A crash between the two leaves a floor at
//! most as high as the part it names, which still exists: it holds those
//! records, so the floor skips nothing the parts do not hold. A missing
//! file is a floor of zero (a data directory from before it existed).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil;
use crate::record::Signal;

pub(crate) const FILE: &str = "replay-floor";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReplayFloor {
    /// By [`Signal::index`]: records of that signal at or below are never
    /// replayed.
    pub covers: [u64; 3],
    /// The highest sequence number a dropped part held.
    pub max_seq: u64,
}

impl ReplayFloor {
    pub fn load(data_dir: &Path) -> Result<ReplayFloor> {
        let path = data_dir.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                ReplayFloor::decode(&bytes).map_err(|detail| Error::corrupt(path.display().to_string(), detail))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ReplayFloor::default()),
            Err(e) => Err(Error::corrupt(path.display().to_string(), e.to_string())),
        }
    }

    /// Raises the floor of `signal` to a part about to be dropped, durably
    /// when it changes.
    pub fn raise(&mut self, data_dir: &Path, signal: Signal, covers_seq: u64, max_seq: u64) -> Result<()> {
        let mut next = *self;
        next.covers[signal.index()] = next.covers[signal.index()].max(covers_seq);
        next.max_seq = next.max_seq.max(max_seq).max(covers_seq);
        if next != *self {
            fsutil::write_atomic(data_dir, FILE, &next.encode())?;
            *self = next;
        }
        Ok(())
    }

    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<ReplayFloor, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not a replay floor: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_floor_is_read_back_and_only_rises() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ReplayFloor::load(dir.path()).unwrap(), ReplayFloor::default());
        let mut f = ReplayFloor::default();
        f.raise(dir.path(), Signal::Logs, 40, 45).unwrap();
        f.raise(dir.path(), Signal::Logs, 30, 31).unwrap();
        let back = ReplayFloor::load(dir.path()).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.covers, [0, 40, 0]);
        assert_eq!(back.max_seq, 45);
        std::fs::write(dir.path().join(FILE), b"{").unwrap();
        let err = ReplayFloor::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("replay-floor") && err.contains("not a replay floor"),
            "{err}"
        );
    }
}
