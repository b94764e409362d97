//! The audit log: every admin action — each request to a route that needs
//! the `admin` scope (allowed or refused) and each token reload on SIGHUP
//! — appended as one JSON line to `DATA_DIR/audit.log` (or
//! `--audit-log FILE`), and readable at `GET /api/v1/audit` (admin). What writes it from requests
//! is `audit_layer`.
//!
//! A line: `{"time": RFC 3339, "who": token name (null: no tokens are
//! set, or none was presented), "client": address, "action": "METHOD
//! /route" or "reload tokens", "summary": what the handler says it did,
//! "outcome": "ok", "refused" or "error", "status": HTTP status}`.
//!
//! Durability: a line is written and fsynced before the request's answer
//! leaves, so an acknowledged admin action is in the log. A crash mid-write
//! can leave a torn last line; readers skip lines that do not parse, and
//! the next write starts on a fresh line. The log holds no criteria values
//! (an erasure's user id would otherwise outlive its erasure): handlers
//! summarize with keys and ids only.

use std::io::{BufRead, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// One line of the log.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub time: String,
    pub who: Option<String>,
    /// The tenant the action was for (none: the home space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub client: Option<String>,
    pub action: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl Entry {
    pub fn now(action: impl Into<String>, outcome: impl Into<String>) -> Entry {
        Entry {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            who: None,
            tenant: None,
            client: None,
            action: action.into(),
            summary: String::new(),
            outcome: outcome.into(),
            status: None,
        }
    }
}

/// What a handler tells the log about what it did (a response extension).
#[derive(Debug, Clone)]
pub struct Summary(pub String);

pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl AuditLog {
    pub fn new(path: PathBuf) -> AuditLog {
        AuditLog {
            path,
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `e` and fsyncs it. Blocking: call off the async threads.
    pub fn append(&self, e: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(e).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut slot = self.file.lock();
        if slot.is_none() {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let mut opts = std::fs::OpenOptions::new();
            opts.create(true).append(true).read(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            let mut f = opts.open(&self.path)?;
            // A torn last line (a crash mid-write) must not swallow the
            // next entry: start on a fresh line.
            let len = f.metadata()?.len();
            if len > 0 {
                f.seek(std::io::SeekFrom::Start(len - 1))?;
                let mut last = [0u8; 1];
                std::io::Read::read_exact(&mut f, &mut last)?;
                if last[0] != b'\n' {
                    f.write_all(b"\n")?;
                }
            }
            *slot = Some(f);
        }
        let f = slot.as_mut().expect("opened above");
        let r = f.write_all(&line).and_then(|_| f.sync_data());
        if r.is_err() {
            // Reopen next time (the file may have been moved away).
            *slot = None;
        }
        r
    }

    /// The last `limit` entries, oldest first (lines that do not parse are
    /// skipped). Memory: `limit` entries; time: one pass over the file.
    pub fn tail(&self, limit: usize) -> std::io::Result<Vec<Entry>> {
        self.tail_where(limit, |_| true)
    }

    /// [`AuditLog::tail`] of the entries `keep` keeps.
    pub fn tail_where(&self, limit: usize, keep: impl Fn(&Entry) -> bool) -> std::io::Result<Vec<Entry>> {
        let f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = std::collections::VecDeque::with_capacity(limit.min(1024));
        for line in std::io::BufReader::new(f).lines() {
            let Ok(e) = serde_json::from_str::<Entry>(&line?) else {
                continue;
            };
            if !keep(&e) {
                continue;
            }
            if out.len() == limit {
                out.pop_front();
            }
            if limit > 0 {
                out.push_back(e);
            }
        }
        Ok(out.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_lines_that_survive_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/audit.log");
        let log = AuditLog::new(path.clone());
        log.append(&Entry::now("POST /api/v1/erasures", "ok")).unwrap();
        drop(log);
        // A crash in the middle of a line.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"time":"2026-"#).unwrap();
        drop(f);
        let log = AuditLog::new(path.clone());
        let mut e = Entry::now("reload tokens", "ok");
        e.who = Some("SIGHUP".into());
        log.append(&e).unwrap();
        let all = log.tail(10).unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].action, "POST /api/v1/erasures");
        assert_eq!(all[1], e);
        assert_eq!(log.tail(1).unwrap(), vec![e]);
        assert!(log.tail(0).unwrap().is_empty());
        assert!(AuditLog::new(dir.path().join("none")).tail(5).unwrap().is_empty());
    }
}
