//! A store whose removals can be held back. While a [`RemovalHold`] is in
//! force, `remove` only notes the name; the last hold to go performs the
//! removals it kept. A backup holds removals for as long as it copies, so
//! every object it listed stays readable until it is copied, whatever
//! merges, retention or payload collection decide meanwhile.
//!
//! Crash safety: a removal held back is one that has not happened yet, and
//! every caller already survives that state, since a crash can come between
//! any commit and the removal after it. A part a merge or a retention
//! rewrite replaced is named in its successor's `replaces` and removed by
//! recovery; a sidecar without its part is removed at open; a payload pack
//! no longer needed holds only payloads nothing refers to, which the next
//! collection forgets. So a crash during a hold loses nothing and leaves
//! nothing that recovery does not clear.

use std::sync::Arc;

use parking_lot::Mutex;

use super::{ObjectSink, ObjectSource, PartStore};
use crate::error::Result;

pub struct HoldableStore {
    inner: Arc<dyn PartStore>,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    holds: usize,
    /// Removals asked for during holds, in the order asked.
    pending: Vec<String>,
}

impl HoldableStore {
    pub fn new(inner: Arc<dyn PartStore>) -> Arc<HoldableStore> {
        Arc::new(HoldableStore {
            inner,
            held: Mutex::new(Held::default()),
        })
    }

    /// Holds removals back until the returned guard is dropped.
    pub fn hold(self: &Arc<Self>) -> RemovalHold {
        self.held.lock().holds += 1;
        RemovalHold { store: self.clone() }
    }

    /// Removals waiting for the holds to end.
    pub fn held_removals(&self) -> usize {
        self.held.lock().pending.len()
    }

    fn release(&self) {
        let pending = {
            let mut h = self.held.lock();
            h.holds -= 1;
            if h.holds > 0 {
                return;
            }
            std::mem::take(&mut h.pending)
        };
        for name in pending {
            // A removal that fails now leaves an object recovery removes
            // (see the module's crash safety), as a crash would have.
            if let Err(e) = self.inner.remove(&name) {
                tracing::warn!("removing {} after a backup: {e}", self.inner.describe(&name));
            }
        }
    }
}

/// Removals are held back while this lives.
pub struct RemovalHold {
    store: Arc<HoldableStore>,
}

impl Drop for RemovalHold {
    fn drop(&mut self) {
        self.store.release();
    }
}

impl PartStore for HoldableStore {
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }
    fn create(&self, name: &str) -> Result<Box<dyn ObjectSink>> {
        self.inner.create(name)
    }
    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>> {
        self.inner.open(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        {
            let mut h = self.held.lock();
            if h.holds > 0 {
                h.pending.push(name.to_string());
                return Ok(());
            }
        }
        self.inner.remove(name)
    }
    fn size(&self, prefix: &str) -> Result<u64> {
        self.inner.size(prefix)
    }
    fn describe(&self, name: &str) -> String {
        self.inner.describe(name)
    }
    fn object_storage_stats(&self) -> Option<super::object::ObjectStorageStats> {
        self.inner.object_storage_stats()
    }
    fn wait_uploaded(&self, timeout: std::time::Duration) -> bool {
        self.inner.wait_uploaded(timeout)
    }
    fn refresh(&self) -> Result<()> {
        self.inner.refresh()
    }
    fn free_local(&self, bytes: u64) -> u64 {
        self.inner.free_local(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStore;

    #[test]
    fn removals_wait_for_the_last_hold() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
        let store = HoldableStore::new(local);
        store.put("spans/a", b"a").unwrap();
        store.put("spans/b", b"b").unwrap();
        let first = store.hold();
        let second = store.hold();
        store.remove("spans/a").unwrap();
        assert_eq!(store.get("spans/a").unwrap().as_ref(), b"a", "held back");
        drop(first);
        assert_eq!(store.held_removals(), 1, "one hold is still in force");
        assert!(store.open("spans/a").is_ok());
        drop(second);
        assert_eq!(store.held_removals(), 0);
        assert!(store.open("spans/a").is_err(), "removed once the last hold went");
        store.remove("spans/b").unwrap();
        assert!(store.open("spans/b").is_err(), "no hold: removed at once");
    }
}
