//! One writer per bucket prefix: a lease object the writer creates with a
//! conditional put and renews well inside its time to live.
//!
//! Why it is safe: the lease is only ever created with `If-None-Match: *`
//! or replaced with `If-Match: <the etag read>`, so two processes racing
//! for it cannot both win. A writer that restarts from the same data
//! directory (same holder id) takes its own lease over at once, after a
//! SIGKILL too; another one must wait until the lease has not been renewed
//! for its whole time to live.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::{PutMode, UpdateVersion};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::remote::{PutError, Remote};
use crate::error::{Error, Result};

pub(crate) const LEASE_NAME: &str = "lease.json";
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(30);
/// Renewed this often, so a few failed renewals in a row still keep it.
pub(crate) const RENEW_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Holder {
    /// Stable per data directory.
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub data_dir: String,
    pub renewed_unix_ms: u64,
    pub ttl_ms: u64,
}

pub(crate) struct Lease {
    remote: Arc<Remote>,
    me: Mutex<(Holder, Option<String>)>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Lease {
    /// Takes the prefix's lease for `id`, or refuses naming who holds it.
    pub fn acquire(remote: Arc<Remote>, id: &str, data_dir: &str) -> Result<Lease> {
        let mut me = Holder {
            id: id.to_string(),
            host: hostname(),
            pid: std::process::id(),
            data_dir: data_dir.to_string(),
            renewed_unix_ms: now_ms(),
            ttl_ms: LEASE_TTL.as_millis() as u64,
        };
        for _ in 0..5 {
            let current = remote.get(LEASE_NAME)?;
            let mode = match &current {
                None => PutMode::Create,
                Some((bytes, tag)) => {
                    let held: Option<Holder> = serde_json::from_slice(bytes).ok();
                    if let Some(h) = &held {
                        let age = now_ms().saturating_sub(h.renewed_unix_ms);
                        if h.id != id && age < h.ttl_ms {
                            return Err(Error::Leased {
                                url: remote.url().to_string(),
                                holder: format!("{} pid {} (data dir {})", h.host, h.pid, h.data_dir),
                                renewed_ms_ago: age,
                                ttl_ms: h.ttl_ms,
                            });
                        }
                    }
                    PutMode::Update(UpdateVersion {
                        e_tag: tag.clone(),
                        version: None,
                    })
                }
            };
            me.renewed_unix_ms = now_ms();
            match remote.put(LEASE_NAME, encode(&me), mode) {
                Ok(tag) => {
                    return Ok(Lease {
                        remote,
                        me: Mutex::new((me, tag)),
                    });
                }
                // Someone wrote it between our read and write: look again.
                Err(PutError::Exists | PutError::Changed) => continue,
                Err(PutError::Failed(e)) => return Err(e),
            }
        }
        Err(Error::Storage {
            what: format!("lease {}", remote.describe(LEASE_NAME)),
            detail: "it keeps changing under us: another writer is starting on this prefix".into(),
        })
    }

    /// Renews the lease. An error says it could not; `Lost` that another
    /// writer has it now.
    pub fn renew(&self) -> std::result::Result<(), RenewError> {
        let mut me = self.me.lock();
        me.0.renewed_unix_ms = now_ms();
        let mode = PutMode::Update(UpdateVersion {
            e_tag: me.1.clone(),
            version: None,
        });
        match self.remote.put(LEASE_NAME, encode(&me.0), mode) {
            Ok(tag) => {
                me.1 = tag;
                Ok(())
            }
            Err(PutError::Changed | PutError::Exists) => {
                let holder = self
                    .remote
                    .get(LEASE_NAME)
                    .ok()
                    .flatten()
                    .and_then(|(b, _)| serde_json::from_slice::<Holder>(&b).ok())
                    .map(|h| format!("{} pid {} (data dir {})", h.host, h.pid, h.data_dir))
                    .unwrap_or_else(|| "nobody (the lease object is gone)".into());
                Err(RenewError::Lost(holder))
            }
            Err(PutError::Failed(e)) => Err(RenewError::Failed(e)),
        }
    }

    /// Gives the lease up (a clean shutdown), so the next writer need not wait.
    pub fn release(&self) {
        let me = self.me.lock();
        if let Ok(Some((bytes, _))) = self.remote.get(LEASE_NAME)
            && serde_json::from_slice::<Holder>(&bytes).is_ok_and(|h| h.id == me.0.id)
            && let Err(e) = self.remote.delete(LEASE_NAME)
        {
            tracing::warn!("cannot release the lease: {e}");
        }
    }
}

pub(crate) enum RenewError {
    Lost(String),
    Failed(Error),
}

fn encode(h: &Holder) -> Bytes {
    Bytes::from(serde_json::to_vec_pretty(h).unwrap_or_default())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}
