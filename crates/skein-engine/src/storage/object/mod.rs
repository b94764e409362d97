//! Parts on object storage: [`BucketStore`] keeps every object in a bucket
//! (S3 or compatible), staged on local disk until uploaded and cached on
//! local disk after, within a byte budget.
//!
//! # Life of an object
//! 1. Written and committed in the staging directory exactly as
//!    [`LocalStore`] does (temp → fsync → rename). From here on it is
//!    durable: the WAL records it holds may go. Reads are local.
//! 2. Queued for upload. The upload is one conditional PUT (`If-None-Match:
//!    *`) or, for big objects, a multipart upload completed after its last
//!    part: the bucket shows the whole object or nothing, never a torn one.
//!    A failed upload is retried with backoff and the object stays staged,
//!    ahead of everything queued after it (a merge's deletion of its inputs
//!    never reaches the bucket before its output),
//!    so an outage of the bucket loses nothing; it shows as an `upload`
//!    fault (degraded, writes go on).
//! 3. Uploaded: the staged file is renamed into the cache (readers that have
//!    it open keep reading it) and counts against `--cache-size` from then
//!    on. Full-text indexes stay staged: they are mapped and read in place.
//! 4. Evicted from the cache when it is full, least recently used first;
//!    reads then fetch 1 MiB blocks with range requests and cache those.
//!
//! # Crash safety
//! Which objects are uploaded is never written down: opening lists the
//! bucket and compares it with the staging directory. A staged object the
//! bucket holds at the same size was uploaded (a crash came before its move
//! into the cache): it moves now. One it does not hold is queued again. A
//! deletion the bucket had not done yet leaves an object that recovery
//! deletes like any other a crash left behind (a replaced part, an orphan
//! sidecar).
//!
//! A removed object leaves the bucket once no reader has it open (a query
//! that took the list of parts before a merge replaced them still reads
//! them, as it could a deleted local file it has open).
//!
//! # One writer
//! A lease object in the bucket ([`lease`]) refuses a second process that
//! would write the same prefix.

mod cache;
mod lease;
mod remote;
mod sums;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::{Condvar, Mutex};
use serde::Serialize;

pub use cache::CacheStats;
use remote::Listed;
pub(crate) use remote::{PutError, Remote};
pub use remote::{RemoteConfig, RemoteRequestStats};

use self::cache::{BLOCK, Cache, Resident, block_len};
use self::lease::{LEASE_NAME, Lease, RENEW_EVERY, RenewError};
use self::sums::Sums;
use super::{LocalStore, ObjectSink, ObjectSource, PartStore};
use crate::error::{Error, Result};
use crate::health::{FaultKind, Faults};

/// How to keep parts in a bucket.
#[derive(Debug, Clone)]
pub struct ObjectStorageOptions {
    pub remote: RemoteConfig,
    /// Where fetched blocks and uploaded objects are cached.
    pub cache_dir: PathBuf,
    /// The cache's budget in bytes (whole objects and blocks together).
    pub cache_bytes: u64,
    /// Read the bucket only: no lease, no uploads or deletions; the
    /// listing is taken again on [`PartStore::refresh`].
    pub read_only: bool,
    /// How long an object no longer needed (a part a merge replaced, a
    /// dropped part, a rewritten pack) stays in the bucket before it is
    /// deleted, so a `read_only` reader that still lists it can finish
    /// reading it.
    pub removal_grace: std::time::Duration,
}

/// What `/api/v1/stats` shows of object storage.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct ObjectStorageStats {
    pub url: String,
    /// Objects staged locally that the bucket does not hold yet.
    pub pending_uploads: u64,
    pub pending_upload_bytes: u64,
    pub uploads: u64,
    pub upload_failures: u64,
    /// Objects in the bucket and their bytes.
    pub remote_objects: u64,
    pub remote_bytes: u64,
    /// Reads refused because the bytes from the bucket failed their
    /// checksums (each also a `corrupt` fault).
    pub corrupt_reads: u64,
    #[serde(flatten)]
    pub requests: RemoteRequestStats,
    #[serde(flatten)]
    pub cache: CacheStats,
}

#[derive(Debug, Clone, PartialEq)]
enum Task {
    Upload { name: String, len: u64 },
    Delete { name: String },
}

impl Task {
    fn name(&self) -> &str {
        match self {
            Task::Upload { name, .. } | Task::Delete { name } => name,
        }
    }
}

#[derive(Default)]
struct Objects {
    /// What the bucket holds (name → size): its listing at open, then our
    /// own uploads and deletions.
    remote: HashMap<String, u64>,
    /// Objects in the staging directory (name → size): not uploaded yet,
    /// or kept local after their upload (full-text indexes).
    staged: HashMap<String, u64>,
    queue: VecDeque<Task>,
    /// Removed while an upload of theirs may be running.
    removed: HashSet<String>,
    /// Open sources per object. A removed object is deleted from the bucket
    /// only once none is left: a query that took its list of parts before a
    /// merge replaced them still reads them, as it could a deleted local
    /// file it has open.
    open: HashMap<String, usize>,
    /// Removed objects waiting for their last reader to let go.
    delete_when_closed: HashSet<String>,
    /// Set when another process took the lease: uploads stop.
    lease_lost: Option<String>,
    /// Objects the bucket holds checksums of (`sums`), and those loaded:
    /// about 8 bytes per 64 KiB of the objects read.
    summed: HashSet<String>,
    sums: HashMap<String, Arc<Sums>>,
    /// Reads refused because their bytes failed the checksums.
    corrupt_reads: u64,
    stop: bool,
    uploads: u64,
    failures: u64,
}

impl Objects {
    fn pending(&self) -> (u64, u64) {
        self.queue.iter().fold((0, 0), |(n, b), t| match t {
            Task::Upload { len, .. } => (n + 1, b + len),
            Task::Delete { .. } => (n, b),
        })
    }
}

struct Shared {
    staging: LocalStore,
    staging_root: PathBuf,
    remote: Arc<Remote>,
    cache: Cache,
    /// `None` when read-only.
    lease: Option<Lease>,
    read_only: bool,
    faults: Arc<Faults>,
    objects: Mutex<Objects>,
    wake: Condvar,
    /// Seconds since open, for [`BucketObject::touch`].
    clock: Instant,
    stays_staged: StaysStaged,
}

/// Parts, their sidecars and payload packs in a bucket; see the module docs.
pub struct BucketStore {
    shared: Arc<Shared>,
    /// The upload thread and the lease thread.
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// Which objects stay in the staging directory after their upload (the
/// engine's full-text indexes: mapped and read in place for as long as
/// their part is open, so caching them would only count bytes that cannot
/// be freed).
pub(crate) type StaysStaged = fn(&str) -> bool;

impl BucketStore {
    /// Connects to the bucket, takes its lease, and reconciles it with the
    /// staging directory `staging_root` (see the module docs).
    pub(crate) fn open(
        staging_root: &Path,
        prefixes: &[&str],
        opts: &ObjectStorageOptions,
        holder_id: &str,
        faults: Arc<Faults>,
        stays_staged: StaysStaged,
    ) -> Result<BucketStore> {
        let remote = Remote::connect(&opts.remote)?;
        BucketStore::open_on(remote, staging_root, prefixes, opts, holder_id, faults, stays_staged)
    }

    fn open_on(
        remote: Remote,
        staging_root: &Path,
        prefixes: &[&str],
        opts: &ObjectStorageOptions,
        holder_id: &str,
        faults: Arc<Faults>,
        stays_staged: StaysStaged,
    ) -> Result<BucketStore> {
        let remote = Arc::new(remote);
        // The first request: a missing bucket, bad credentials or an
        // unreachable endpoint stop the start here, with the reason.
        let listed = remote.list()?;
        // A reader takes no lease: it never writes, so any number of them
        // may read a prefix beside its one writer.
        let lease = if opts.read_only {
            None
        } else {
            Some(Lease::acquire(
                remote.clone(),
                holder_id,
                &staging_root.display().to_string(),
            )?)
        };
        let (remote_objects, summed, orphan_sums) = split_listing(listed);
        let mut objects = Objects {
            remote: remote_objects,
            summed,
            ..Default::default()
        };
        let staging = LocalStore::open(staging_root, prefixes)?;
        let cache = Cache::open(&opts.cache_dir, opts.cache_bytes, &objects.remote)?;
        // A reader stages nothing (it never writes).
        for p in prefixes.iter().filter(|_| !opts.read_only) {
            for name in staging.list(p)? {
                let path = staging_root.join(&name);
                let len = fs::metadata(&path)
                    .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
                    .len();
                match objects.remote.get(&name) {
                    Some(&size) if size == len => {
                        if stays_staged(&name) {
                            objects.staged.insert(name, len);
                        } else if !cache.adopt(&name, &path, len) {
                            remove_staged(&path);
                        }
                    }
                    _ => {
                        objects.staged.insert(name.clone(), len);
                        objects.queue.push_back(Task::Upload { name, len });
                    }
                }
            }
        }
        // Sums whose object never arrived (a crash between the two puts)
        // or already went (between the two deletions), unless the object
        // is staged to go up again (its upload rewrites them).
        for object in orphan_sums.into_iter().filter(|_| !opts.read_only) {
            if !objects.staged.contains_key(&object) {
                objects.queue.push_back(Task::Delete { name: object });
            }
        }
        let shared = Arc::new(Shared {
            staging,
            staging_root: staging_root.to_path_buf(),
            remote,
            cache,
            lease,
            read_only: opts.read_only,
            faults,
            objects: Mutex::new(objects),
            wake: Condvar::new(),
            clock: Instant::now(),
            stays_staged,
        });
        let mut workers = Vec::new();
        if !opts.read_only {
            let up = shared.clone();
            workers.push(
                std::thread::Builder::new()
                    .name("skein-upload".into())
                    .spawn(move || up.work())
                    .map_err(|e| Error::io("spawn the upload thread", e))?,
            );
            // Renewed from a thread of its own: an upload can take longer
            // than the lease lives (a multipart upload of a big merge).
            let keep = shared.clone();
            workers.push(
                std::thread::Builder::new()
                    .name("skein-lease".into())
                    .spawn(move || keep.keep_lease())
                    .map_err(|e| Error::io("spawn the lease thread", e))?,
            );
        }
        Ok(BucketStore {
            shared,
            workers: Mutex::new(workers),
        })
    }

    /// Waits until every staged object is uploaded, or `timeout` passes.
    /// True when none is left.
    pub fn wait_uploaded(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut o = self.shared.objects.lock();
        loop {
            if o.queue.is_empty() {
                return true;
            }
            if self.shared.wake.wait_until(&mut o, deadline).timed_out() {
                return o.queue.is_empty();
            }
        }
    }
}

impl Drop for BucketStore {
    fn drop(&mut self) {
        self.shared.objects.lock().stop = true;
        self.shared.wake.notify_all();
        for t in self.workers.lock().drain(..) {
            let _ = t.join();
        }
        if let Some(lease) = &self.shared.lease {
            lease.release();
        }
    }
}

/// A bucket listing split into its objects (name → size), those of them
/// with checksums, and checksums whose object is not listed; the lease is
/// not an object of the store, and neither is anything of a nested data
/// directory's prefix (a tenant's, `tenants/<name>/…`, which its own
/// engine keeps: this one must never adopt or delete those).
fn split_listing(listed: Vec<Listed>) -> (HashMap<String, u64>, HashSet<String>, Vec<String>) {
    let (sum_objects, objects): (Vec<_>, Vec<_>) = listed
        .into_iter()
        .filter(|l| l.name != LEASE_NAME && crate::backup::nested_name(&l.name).is_none())
        .partition(|l| sums::object_of(&l.name).is_some());
    let objects: HashMap<String, u64> = objects.into_iter().map(|l| (l.name, l.size)).collect();
    let (mut summed, mut orphans) = (HashSet::new(), Vec::new());
    for l in sum_objects {
        let object = sums::object_of(&l.name).unwrap_or_default().to_string();
        if objects.contains_key(&object) {
            summed.insert(object);
        } else {
            orphans.push(object);
        }
    }
    (objects, summed, orphans)
}

fn remove_staged(path: &Path) {
    if let Err(e) = fs::remove_file(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove {}: {e}", path.display());
    }
}

impl Shared {
    /// The lease thread: renews it every `RENEW_EVERY` until the store
    /// stops or another process takes it.
    fn keep_lease(&self) {
        let Some(lease) = &self.lease else { return };
        loop {
            let next = Instant::now() + RENEW_EVERY;
            {
                let mut o = self.objects.lock();
                while !o.stop && Instant::now() < next {
                    self.wake.wait_until(&mut o, next);
                }
                if o.stop {
                    return;
                }
            }
            match lease.renew() {
                Ok(()) => {}
                Err(RenewError::Lost(holder)) => {
                    let msg = format!(
                        "the lease on {} was taken by {holder}: another skein writes this prefix; uploads stopped (objects stay on local disk)",
                        self.remote.url()
                    );
                    tracing::error!("{msg}");
                    self.faults.fail(FaultKind::Upload, msg.clone());
                    self.objects.lock().lease_lost = Some(msg);
                    self.wake.notify_all();
                    return;
                }
                Err(RenewError::Failed(e)) => {
                    self.faults
                        .fail(FaultKind::Upload, format!("cannot renew the lease: {e}"));
                }
            }
        }
    }

    /// The upload thread: runs the queue front to back.
    fn work(&self) {
        let mut backoff = Duration::from_millis(100);
        let mut retry_at = Instant::now();
        loop {
            let task = {
                let mut o = self.objects.lock();
                if o.stop {
                    return;
                }
                let lost = o.lease_lost.is_some();
                let ready = !lost && !o.queue.is_empty() && Instant::now() >= retry_at;
                if !ready {
                    let until = if o.queue.is_empty() || lost {
                        Instant::now() + RENEW_EVERY
                    } else {
                        retry_at
                    };
                    self.wake.wait_until(&mut o, until);
                    continue;
                }
                o.queue.front().cloned()
            };
            let Some(task) = task else { continue };
            let result = self.run(&task);
            let mut o = self.objects.lock();
            let at_front = o.queue.front() == Some(&task);
            match result {
                Ok(()) => {
                    if at_front {
                        o.queue.pop_front();
                    }
                    if let Task::Delete { name } = &task
                        && !o.queue.iter().any(|t| t.name() == name)
                    {
                        o.removed.remove(name);
                    }
                    o.uploads += matches!(task, Task::Upload { .. }) as u64;
                    backoff = Duration::from_millis(100);
                    if o.lease_lost.is_none() {
                        self.faults.clear(FaultKind::Upload);
                    }
                }
                Err(e) => {
                    o.failures += 1;
                    // The task stays at the front: tasks run in the order
                    // they were queued, so a merge's deletion of its inputs
                    // never reaches the bucket before the upload of its
                    // output. A removed object's upload is dropped (its
                    // deletion is queued behind it).
                    if at_front && matches!(task, Task::Upload { .. }) && o.removed.contains(task.name()) {
                        o.queue.pop_front();
                    }
                    let (n, bytes) = o.pending();
                    let msg = format!("{e}; {n} objects ({bytes} bytes) wait on local disk to be uploaded");
                    tracing::warn!("{msg}");
                    self.faults.fail(FaultKind::Upload, msg);
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
            drop(o);
            self.wake.notify_all();
        }
    }

    fn run(&self, task: &Task) -> Result<()> {
        match task {
            Task::Delete { name } => {
                // The object before its sums: an object never lacks them.
                self.remote.delete(name)?;
                self.remote.delete(&sums::name_of(name))?;
                let mut o = self.objects.lock();
                o.remote.remove(name);
                o.summed.remove(name);
                o.sums.remove(name);
                Ok(())
            }
            Task::Upload { name, len } => {
                let path = self.staging_root.join(name);
                // The sums before their object: an object in the bucket
                // always has them (see `sums`).
                let file = fs::File::open(&path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
                let summed = Sums::of(io::BufReader::new(file), *len)
                    .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
                self.remote
                    .put(
                        &sums::name_of(name),
                        Bytes::from(summed.encode()?),
                        object_store::PutMode::Overwrite,
                    )
                    .map_err(PutError::into_error)?;
                match self.remote.upload_file(name, &path, *len) {
                    Ok(()) => {}
                    // Uploaded before a crash or a timeout that hid the
                    // answer: the same bytes. Anything else there is stale
                    // (a sidecar rebuilt since): ours replaces it.
                    Err(PutError::Exists) => {
                        if self.remote.size(name)? != Some(*len) {
                            let bytes =
                                fs::read(&path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
                            self.remote
                                .put(name, Bytes::from(bytes), object_store::PutMode::Overwrite)
                                .map_err(PutError::into_error)?;
                        }
                    }
                    Err(e) => return Err(e.into_error()),
                }
                let mut o = self.objects.lock();
                if o.removed.contains(name) {
                    return Ok(());
                }
                o.remote.insert(name.clone(), *len);
                o.summed.insert(name.clone());
                o.sums.insert(name.clone(), Arc::new(summed));
                if !(self.stays_staged)(name) {
                    o.staged.remove(name);
                    if !self.cache.adopt(name, &path, *len) {
                        remove_staged(&path);
                    }
                }
                Ok(())
            }
        }
    }
}

impl PartStore for BucketStore {
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let o = self.shared.objects.lock();
        let dir = format!("{prefix}/");
        let mut names: Vec<String> = o
            .remote
            .keys()
            .chain(o.staged.keys())
            .filter(|n| n.starts_with(&dir) && !o.removed.contains(*n))
            .cloned()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        names.sort();
        Ok(names)
    }

    fn create(&self, name: &str) -> Result<Box<dyn ObjectSink>> {
        if self.shared.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(Box::new(StagedSink {
            inner: Some(self.shared.staging.create(name)?),
            name: name.to_string(),
            shared: self.shared.clone(),
        }))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn ObjectSource>> {
        let s = &self.shared;
        let o = s.objects.lock();
        let (len, resident) = if let Some(&len) = o.staged.get(name) {
            let path = s.staging_root.join(name);
            let r = s.cache.resident(name, Some(&path));
            (len, r.map_err(|e| Error::io(format!("open {}", path.display()), e))?)
        } else if let Some(&len) = o.remote.get(name).filter(|_| !o.removed.contains(name)) {
            let r = s.cache.resident(name, None);
            (
                len,
                r.map_err(|e| Error::io(format!("open the cached copy of {}", s.remote.describe(name)), e))?,
            )
        } else {
            return Err(Error::io(
                format!("open {}", s.remote.describe(name)),
                io::Error::new(io::ErrorKind::NotFound, "no such object"),
            ));
        };
        drop(o);
        Ok(Arc::new(BucketObject::new(
            name.to_string(),
            len,
            resident,
            false,
            s.clone(),
        )))
    }

    fn remove(&self, name: &str) -> Result<()> {
        let s = &self.shared;
        if s.read_only {
            // The bucket's writer removes what it replaced; a reader only
            // stops reading it.
            return Ok(());
        }
        let mut o = s.objects.lock();
        if o.staged.remove(name).is_some() {
            s.staging.remove(name)?;
        }
        o.queue
            .retain(|t| !matches!(t, Task::Upload { name: n, .. } if n == name));
        o.removed.insert(name.to_string());
        if o.open.get(name).copied().unwrap_or(0) > 0 {
            o.delete_when_closed.insert(name.to_string());
        } else {
            o.queue.push_back(Task::Delete { name: name.to_string() });
        }
        s.cache.forget(name);
        drop(o);
        s.wake.notify_all();
        Ok(())
    }

    fn size(&self, prefix: &str) -> Result<u64> {
        let o = self.shared.objects.lock();
        let dir = format!("{prefix}/");
        let mut total = 0;
        for (name, len) in o
            .remote
            .iter()
            .chain(o.staged.iter().filter(|(n, _)| !o.remote.contains_key(*n)))
        {
            if name.starts_with(&dir) && !o.removed.contains(name) {
                total += len;
            }
        }
        Ok(total)
    }

    fn describe(&self, name: &str) -> String {
        if self.shared.objects.lock().staged.contains_key(name) {
            self.shared.staging.describe(name)
        } else {
            self.shared.remote.describe(name)
        }
    }

    fn free_local(&self, bytes: u64) -> u64 {
        self.shared.cache.shrink(bytes)
    }

    fn refresh(&self) -> Result<()> {
        let s = &self.shared;
        if !s.read_only {
            return Ok(());
        }
        let (remote, summed, _) = split_listing(s.remote.list()?);
        let mut o = s.objects.lock();
        o.remote = remote;
        o.summed = summed;
        let Objects { remote, sums, .. } = &mut *o;
        sums.retain(|name, _| remote.contains_key(name));
        Ok(())
    }

    fn object_storage_stats(&self) -> Option<ObjectStorageStats> {
        let s = &self.shared;
        let o = s.objects.lock();
        let (pending, pending_bytes) = o.pending();
        Some(ObjectStorageStats {
            url: s.remote.url().to_string(),
            pending_uploads: pending,
            pending_upload_bytes: pending_bytes,
            uploads: o.uploads,
            upload_failures: o.failures,
            remote_objects: o.remote.len() as u64,
            remote_bytes: o.remote.values().sum(),
            corrupt_reads: o.corrupt_reads,
            requests: s.remote.request_stats(),
            cache: s.cache.stats(),
        })
    }

    fn wait_uploaded(&self, timeout: Duration) -> bool {
        BucketStore::wait_uploaded(self, timeout)
    }
}

/// A staged object being written: committed as [`LocalStore`] commits,
/// then queued for upload.
struct StagedSink {
    inner: Option<Box<dyn ObjectSink>>,
    name: String,
    shared: Arc<Shared>,
}

impl Write for StagedSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Some(w) => w.write(buf),
            None => Err(io::Error::other("write after commit")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl ObjectSink for StagedSink {
    fn commit(mut self: Box<Self>) -> Result<()> {
        let Some(inner) = self.inner.take() else {
            return Ok(());
        };
        inner.commit()?;
        let path = self.shared.staging_root.join(&self.name);
        let len = fs::metadata(&path)
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
            .len();
        let mut o = self.shared.objects.lock();
        o.removed.remove(&self.name);
        o.delete_when_closed.remove(&self.name);
        o.staged.insert(self.name.clone(), len);
        // A name written again (a rebuilt sidecar): its older copy in the
        // cache is stale.
        self.shared.cache.forget(&self.name);
        o.queue.push_back(Task::Upload {
            name: self.name.clone(),
            len,
        });
        drop(o);
        self.shared.wake.notify_all();
        Ok(())
    }
}

/// One object of a bucket store, read from its local copy while there is
/// one and from the bucket (through the block cache) after.
struct BucketObject {
    name: String,
    len: u64,
    resident: Option<Arc<Resident>>,
    /// Point reads: the local copy mapped into memory.
    mapped: bool,
    last_touch: std::sync::atomic::AtomicU64,
    shared: Arc<Shared>,
}

impl BucketObject {
    fn new(name: String, len: u64, resident: Option<Arc<Resident>>, mapped: bool, shared: Arc<Shared>) -> Self {
        *shared.objects.lock().open.entry(name.clone()).or_default() += 1;
        BucketObject {
            name,
            len,
            resident,
            mapped,
            last_touch: Default::default(),
            shared,
        }
    }

    /// Marks the cached whole copy used, for the LRU order: at most once a
    /// second, so reads do not queue on the cache's lock.
    fn touch(&self) {
        let now = self.shared.clock.elapsed().as_secs() + 1;
        if self.last_touch.swap(now, std::sync::atomic::Ordering::Relaxed) != now {
            self.shared.cache.touch_whole(&self.name);
        }
    }

    fn block(&self, n: u64, offset: u64, len: usize) -> io::Result<Bytes> {
        let s = &self.shared;
        if let Some(b) = s.cache.read_block(&self.name, n, offset, len) {
            return Ok(b);
        }
        let start = n * BLOCK;
        let block = s
            .remote
            .get_range(&self.name, start..start + block_len(self.len, n))
            .map_err(io::Error::other)?;
        self.check(start, &block)?;
        s.cache.insert_block(&self.name, n, &block);
        Ok(block.slice(offset as usize..offset as usize + len))
    }

    /// The object's checksums, fetched on its first read from the bucket;
    /// `None` for an object written without them.
    fn sums(&self) -> io::Result<Option<Arc<Sums>>> {
        let s = &self.shared;
        {
            let o = s.objects.lock();
            if let Some(sums) = o.sums.get(&self.name) {
                return Ok(Some(sums.clone()));
            }
            if !o.summed.contains(&self.name) {
                return Ok(None);
            }
        }
        let what = s.remote.describe(&self.name);
        let Some((bytes, _)) = s.remote.get(&sums::name_of(&self.name)).map_err(io::Error::other)? else {
            return Err(self.corrupt(format!(
                "object {what}: its checksums ({}) are gone from the bucket",
                sums::SUFFIX
            )));
        };
        let sums = Arc::new(Sums::decode(&bytes, &what).map_err(|e| self.corrupt(e.to_string()))?);
        s.objects.lock().sums.insert(self.name.clone(), sums.clone());
        Ok(Some(sums))
    }

    /// Checks bytes read from the bucket at `offset` (a multiple of the
    /// checksum chunk) against the object's checksums.
    fn check(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let Some(sums) = self.sums()? else {
            return Ok(());
        };
        let what = self.shared.remote.describe(&self.name);
        sums.check_len(self.len)
            .and_then(|()| sums.check(offset, bytes))
            .map_err(|m| self.corrupt(format!("object {what}: {m}; it is not served")))
    }

    /// A read refused as corrupt: counted, a `corrupt` fault, and an error
    /// naming the object.
    fn corrupt(&self, msg: String) -> io::Error {
        tracing::error!("{msg}");
        self.shared.objects.lock().corrupt_reads += 1;
        self.shared.faults.fail(FaultKind::Corrupt, msg.clone());
        io::Error::new(io::ErrorKind::InvalidData, msg)
    }
}

impl Drop for BucketObject {
    fn drop(&mut self) {
        let mut o = self.shared.objects.lock();
        let left = o.open.get_mut(&self.name).map(|n| {
            *n -= 1;
            *n
        });
        if left == Some(0) {
            o.open.remove(&self.name);
            if o.delete_when_closed.remove(&self.name) {
                o.queue.push_back(Task::Delete {
                    name: self.name.clone(),
                });
                drop(o);
                self.shared.wake.notify_all();
            }
        }
    }
}

impl ObjectSource for BucketObject {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        if let Some(src) = self.resident.as_ref().and_then(|r| r.source(self.mapped)) {
            self.touch();
            return src.read_at(offset, len);
        }
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of an object"))?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        if !self.shared.cache.keeps_blocks() {
            // No cache to fill: fetch what was asked, not whole blocks (a
            // point read of a few pages would otherwise cost megabytes),
            // rounded out to whole checksum chunks to be checked.
            if self.sums()?.is_none() {
                return self
                    .shared
                    .remote
                    .get_range(&self.name, offset..end)
                    .map_err(io::Error::other);
            }
            let from = offset - offset % sums::CHUNK;
            let to = end.div_ceil(sums::CHUNK).saturating_mul(sums::CHUNK).min(self.len);
            let bytes = self
                .shared
                .remote
                .get_range(&self.name, from..to)
                .map_err(io::Error::other)?;
            self.check(from, &bytes)?;
            let at = (offset - from) as usize;
            return Ok(bytes.slice(at..at + len));
        }
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        if first == last {
            return self.block(first, offset - first * BLOCK, len);
        }
        let mut out = BytesMut::with_capacity(len);
        for n in first..=last {
            let from = offset.max(n * BLOCK);
            let to = end.min((n + 1) * BLOCK);
            out.extend_from_slice(&self.block(n, from - n * BLOCK, (to - from) as usize)?);
        }
        Ok(out.freeze())
    }

    fn for_point_reads(&self) -> io::Result<Option<Arc<dyn ObjectSource>>> {
        let Some(r) = &self.resident else {
            return Ok(None);
        };
        r.map();
        Ok(Some(Arc::new(BucketObject::new(
            self.name.clone(),
            self.len,
            Some(r.clone()),
            true,
            self.shared.clone(),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_leaves_nested_prefixes_to_their_own_engines() {
        let l = |name: &str| Listed {
            name: name.into(),
            size: 7,
        };
        let (objects, summed, orphans) = split_listing(vec![
            l(LEASE_NAME),
            l("parts/spans/1.parquet"),
            l(&sums::name_of("parts/spans/1.parquet")),
            l("tenants/acme/parts/spans/1.parquet"),
            l(&sums::name_of("tenants/acme/parts/spans/2.parquet")),
            l(&format!("tenants/acme/{LEASE_NAME}")),
        ]);
        assert_eq!(objects.keys().collect::<Vec<_>>(), ["parts/spans/1.parquet"]);
        assert!(summed.contains("parts/spans/1.parquet"));
        assert!(orphans.is_empty(), "a tenant's lone sum is not this engine's to delete");
    }

    fn store(dir: &Path, bucket: Arc<object_store::memory::InMemory>, cache_bytes: u64) -> BucketStore {
        let remote = Remote::over(bucket, "memory://test", "p".into()).unwrap();
        let opts = ObjectStorageOptions {
            remote: RemoteConfig::default(),
            cache_dir: dir.join("cache"),
            cache_bytes,
            read_only: false,
            removal_grace: std::time::Duration::ZERO,
        };
        BucketStore::open_on(
            remote,
            &dir.join("parts"),
            &["spans"],
            &opts,
            "me",
            Arc::new(Faults::default()),
            |n| n.ends_with(".txt"),
        )
        .unwrap()
    }

    fn in_bucket(s: &BucketStore, name: &str) -> bool {
        s.shared.remote.size(name).unwrap().is_some()
    }

    #[test]
    fn a_removed_object_leaves_the_bucket_only_when_its_last_reader_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = Arc::new(object_store::memory::InMemory::new());
        // No cache: once uploaded, reads go to the bucket.
        let s = store(dir.path(), bucket, 0);
        let data: Vec<u8> = (0..3 * BLOCK as usize + 17).map(|i| (i % 251) as u8).collect();
        s.put("spans/a.parquet", &data).unwrap();
        assert!(s.wait_uploaded(Duration::from_secs(10)));
        assert!(in_bucket(&s, "spans/a.parquet"));
        let reader = s.open("spans/a.parquet").unwrap();
        assert_eq!(
            reader.read_at(BLOCK - 3, 10).unwrap(),
            Bytes::copy_from_slice(&data[BLOCK as usize - 3..][..10])
        );

        // A merge replaces it while a query still reads it.
        s.remove("spans/a.parquet").unwrap();
        assert!(s.list("spans").unwrap().is_empty());
        assert!(s.wait_uploaded(Duration::from_secs(10)));
        assert!(in_bucket(&s, "spans/a.parquet"), "deleted under an open reader");
        assert_eq!(&reader.read_at(0, data.len()).unwrap()[..], &data[..]);

        drop(reader);
        assert!(s.wait_uploaded(Duration::from_secs(10)));
        assert!(!in_bucket(&s, "spans/a.parquet"), "deleted once nobody reads it");
    }

    #[test]
    fn staged_objects_the_bucket_lacks_go_up_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = Arc::new(object_store::memory::InMemory::new());
        // A part committed locally by a process that died before uploading it.
        let staging = LocalStore::open(&dir.path().join("parts"), &["spans"]).unwrap();
        staging.put("spans/b.parquet", b"PAR1 whole PAR1").unwrap();
        staging.put("spans/b.txt", b"text index").unwrap();
        drop(staging);
        let s = store(dir.path(), bucket.clone(), 1 << 20);
        assert!(s.wait_uploaded(Duration::from_secs(10)));
        assert_eq!(&s.get("spans/b.parquet").unwrap()[..], b"PAR1 whole PAR1");
        assert!(in_bucket(&s, "spans/b.parquet") && in_bucket(&s, "spans/b.txt"));
        // Uploaded: the part moved into the cache, the text index stays staged.
        assert!(!dir.path().join("parts/spans/b.parquet").exists());
        assert!(dir.path().join("cache/objects/spans/b.parquet").exists());
        assert!(dir.path().join("parts/spans/b.txt").exists());
        drop(s);

        // With no local copies at all, everything is read from the bucket.
        std::fs::remove_dir_all(dir.path().join("parts")).unwrap();
        std::fs::remove_dir_all(dir.path().join("cache")).unwrap();
        let s = store(dir.path(), bucket, 1 << 20);
        assert_eq!(s.list("spans").unwrap(), vec!["spans/b.parquet", "spans/b.txt"]);
        assert_eq!(&s.get("spans/b.txt").unwrap()[..], b"text index");
        let st = s.object_storage_stats().unwrap();
        assert!(st.requests.get_requests > 0 && st.pending_uploads == 0, "{st:?}");
    }

    /// Replaces an object in the bucket behind the store's back.
    fn overwrite(bucket: &object_store::memory::InMemory, name: &str, bytes: Vec<u8>) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(object_store::ObjectStoreExt::put(
            bucket,
            &object_store::path::Path::from(format!("p/{name}")),
            bytes.into(),
        ))
        .unwrap();
    }

    #[test]
    fn bytes_changed_or_cut_in_the_bucket_are_errors_naming_the_object() {
        for cache_bytes in [0, 8 << 20] {
            let dir = tempfile::tempdir().unwrap();
            let bucket = Arc::new(object_store::memory::InMemory::new());
            let data: Vec<u8> = (0..2 * BLOCK as usize + 5000).map(|i| (i % 253) as u8).collect();
            let s = store(dir.path(), bucket.clone(), cache_bytes);
            s.put("spans/c.parquet", &data).unwrap();
            s.put("spans/d.parquet", &data).unwrap();
            assert!(s.wait_uploaded(Duration::from_secs(10)));
            assert!(in_bucket(&s, "spans/c.parquet.sums"), "sums go up with their object");
            assert_eq!(
                s.list("spans").unwrap(),
                vec!["spans/c.parquet", "spans/d.parquet"],
                "sums are not listed"
            );
            drop(s);
            std::fs::remove_dir_all(dir.path().join("cache")).unwrap();

            let mut changed = data.clone();
            changed[BLOCK as usize + 70_000] ^= 1;
            overwrite(&bucket, "spans/c.parquet", changed);
            overwrite(&bucket, "spans/d.parquet", data[..data.len() - 1].to_vec());
            let faults = Arc::new(Faults::default());
            let remote = Remote::over(bucket.clone(), "memory://test", "p".into()).unwrap();
            let opts = ObjectStorageOptions {
                remote: RemoteConfig::default(),
                cache_dir: dir.path().join("cache"),
                cache_bytes,
                read_only: false,
                removal_grace: std::time::Duration::ZERO,
            };
            let s = BucketStore::open_on(
                remote,
                &dir.path().join("parts"),
                &["spans"],
                &opts,
                "me",
                faults.clone(),
                |_| false,
            )
            .unwrap();
            let c = s.open("spans/c.parquet").unwrap();
            assert_eq!(
                &c.read_at(0, 1000).unwrap()[..],
                &data[..1000],
                "intact chunks still read"
            );
            let err = c.read_at(BLOCK + 65_000, 10_000).unwrap_err().to_string();
            assert!(
                err.contains("memory://test/spans/c.parquet") && err.contains("checksum"),
                "{err}"
            );
            let d = s.open("spans/d.parquet").unwrap();
            let err = d.read_at(0, 10).unwrap_err().to_string();
            assert!(err.contains("spans/d.parquet") && err.contains("truncated"), "{err}");
            assert_eq!(s.object_storage_stats().unwrap().corrupt_reads, 2);
            assert!(faults.get(FaultKind::Corrupt).is_some(), "a corrupt fault");
            // Never cached either: a second read is refused again.
            assert!(c.read_at(BLOCK + 70_000, 10).is_err());
        }
    }

    #[test]
    fn sums_without_their_object_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = Arc::new(object_store::memory::InMemory::new());
        overwrite(&bucket, "spans/gone.parquet.sums", b"left by a crash".to_vec());
        let s = store(dir.path(), bucket, 1 << 20);
        assert!(s.wait_uploaded(Duration::from_secs(10)));
        assert!(!in_bucket(&s, "spans/gone.parquet.sums"));
    }
}
