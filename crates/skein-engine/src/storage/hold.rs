//! A store whose removals can be held back. While a [`RemovalHold`] is in
//! force, `remove` only notes the name; the last hold to go performs the
//! removals it kept. A backup holds removals for as long as it copies, so
//! every object it listed stays readable until it is copied, whatever
//! merges, retention or payload collection decide meanwhile.
//!
//! With a grace (object storage: `--removal-grace`), every removal also
//! waits that long first ([`HoldableStore::remove_due`] performs those
//! due): a `--read-only` reader keeps reading the parts it listed until its
//! next listing shows what replaced them, and a query it started on one
//! must not find the object gone.
//!
//! Crash safety: a removal held back is one that has not happened yet, and
//! every caller already survives that state, since a crash can come between
//! any commit and the removal after it. A part a merge or a retention
//! rewrite replaced is named in its successor's `replaces` and removed by
//! recovery; a sidecar without its part is removed at open; a payload pack
//! no longer needed holds only payloads nothing refers to, which the next
//! collection forgets. So a crash during a hold loses nothing and leaves
//! nothing that recovery does not clear.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{ObjectSink, ObjectSource, PartStore};
use crate::error::Result;

pub struct HoldableStore {
    inner: Arc<dyn PartStore>,
    held: Mutex<Held>,
    grace: Duration,
}

#[derive(Default)]
struct Held {
    holds: usize,
    /// Removals asked for during holds, in the order asked.
    pending: Vec<String>,
    /// Removals waiting out the grace, with when each is due (in order).
    graced: VecDeque<(Instant, String)>,
}

impl HoldableStore {
    /// A store whose removals wait `grace` (zero: none) and any hold.
    pub fn new(inner: Arc<dyn PartStore>, grace: Duration) -> Arc<HoldableStore> {
        Arc::new(HoldableStore {
            inner,
            held: Mutex::new(Held::default()),
            grace,
        })
    }

    /// Performs the removals whose grace is over (those due during a hold
    /// wait for it to end); returns how many it performed.
    pub fn remove_due(&self) -> usize {
        let now = Instant::now();
        self.remove_graced(|at| at <= now, "after its grace")
    }

    /// Performs every removal waiting out its grace now, as if it were due
    /// (those during a hold wait for it to end): an erasure's replaced
    /// files must leave the bucket at once, not after the grace.
    pub fn remove_graced_now(&self) -> usize {
        self.remove_graced(|_| true, "ahead of its grace")
    }

    /// Performs the graced removals, in order, while `due` says so.
    fn remove_graced(&self, due: impl Fn(Instant) -> bool, when: &str) -> usize {
        let names: Vec<String> = {
            let mut h = self.held.lock();
            let mut names = Vec::new();
            while h.graced.front().is_some_and(|(at, _)| due(*at)) {
                if let Some((_, name)) = h.graced.pop_front() {
                    names.push(name);
                }
            }
            if h.holds > 0 {
                h.pending.extend(names);
                return 0;
            }
            names
        };
        for name in &names {
            // As after a hold: a failed removal leaves what recovery clears.
            if let Err(e) = self.inner.remove(name) {
                tracing::warn!("removing {} {when}: {e}", self.inner.describe(name));
            }
        }
        names.len()
    }

    /// Removals waiting out their grace.
    pub fn graced_removals(&self) -> usize {
        self.held.lock().graced.len()
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
        // A new object under a name whose removal waits (a sidecar
        // rebuilt) is not the one that removal was for.
        {
            let mut h = self.held.lock();
            h.pending.retain(|n| n != name);
            h.graced.retain(|(_, n)| n != name);
        }
        self.inner.create(name)
    }
    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>> {
        self.inner.open(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        {
            let mut h = self.held.lock();
            if !self.grace.is_zero() {
                if !h.graced.iter().any(|(_, n)| n == name) {
                    let due = Instant::now() + self.grace;
                    h.graced.push_back((due, name.to_string()));
                }
                return Ok(());
            }
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
        let store = HoldableStore::new(local, Duration::ZERO);
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

    #[test]
    fn removals_wait_out_the_grace_and_any_hold() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
        let store = HoldableStore::new(local, Duration::from_millis(200));
        store.put("spans/a", b"a").unwrap();
        store.put("spans/b", b"b").unwrap();
        store.remove("spans/a").unwrap();
        assert_eq!(store.remove_due(), 0, "not due yet");
        assert_eq!(
            store.get("spans/a").unwrap().as_ref(),
            b"a",
            "still readable in its grace"
        );
        std::thread::sleep(Duration::from_millis(250));
        store.remove("spans/b").unwrap();
        let hold = store.hold();
        assert_eq!(store.remove_due(), 0, "due, but a hold is in force");
        assert!(store.open("spans/a").is_ok());
        drop(hold);
        assert!(store.open("spans/a").is_err(), "removed when the hold ended");
        assert!(store.open("spans/b").is_ok(), "b's grace is not over");
        assert_eq!(store.graced_removals(), 1);
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(store.remove_due(), 1);
        assert!(store.open("spans/b").is_err());
        // Written again during its grace: the new object stays.
        store.put("spans/c", b"old").unwrap();
        store.remove("spans/c").unwrap();
        store.put("spans/c", b"new").unwrap();
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(store.remove_due(), 0);
        assert_eq!(store.get("spans/c").unwrap().as_ref(), b"new");
    }

    #[test]
    fn graced_removals_can_be_done_at_once_but_not_through_a_hold() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
        let store = HoldableStore::new(local, Duration::from_secs(3600));
        store.put("spans/a", b"a").unwrap();
        store.put("spans/b", b"b").unwrap();
        store.remove("spans/a").unwrap();
        let hold = store.hold();
        assert_eq!(store.remove_graced_now(), 0, "a hold is in force");
        assert!(store.open("spans/a").is_ok());
        drop(hold);
        assert!(
            store.open("spans/a").is_err(),
            "removed when the hold ended, long before its grace"
        );
        store.remove("spans/b").unwrap();
        assert_eq!(store.remove_graced_now(), 1);
        assert!(store.open("spans/b").is_err());
        assert_eq!(store.graced_removals(), 0);
    }
}
