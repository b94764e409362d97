//! Erasure with receipts: removing every record that matches criteria (a
//! trace id, a session id, attribute equalities, a time range; all given
//! must hold) from every file Skein keeps, and a receipt that proves it.
//!
//! # What is erased
//! The records acknowledged before the request was accepted: the request
//! freezes and flushes the hot tier first, so every such record is in a
//! part, and the WAL segments that held them are deleted by that flush
//! (`Wal::remove_before`). Then, under the compaction lock (no merge runs
//! meanwhile), each part holding a match is rewritten without it through
//! compaction's streaming merge (its full-text index rebuilt from the rows
//! kept, so no term of an erased record survives), or marked to be dropped
//! when every row matches; every rewrite and drop then takes effect in one
//! swap of the part lists, so matching records leave every answer at once
//! (a query sees all of them or none), and the old files are removed. Last, payload garbage collection forgets the payloads only
//! erased records held and rewrites every pack that held one, whatever its
//! share of garbage (ordinary GC leaves packs that are mostly live).
//!
//! The request answers once all of that is done: from then on no answer
//! holds a matching record, and no file does. A pending erasure is run
//! again by `Engine::open` before the engine answers anything.
//!
//! # Receipts (`DATA_DIR/erasures/<id>.json`)
//! Written temp → fsync → rename → fsync dir before any work starts
//! (status `pending`), again after each part (progress), and when done
//! (`completed`). Criteria values are kept only as keyed BLAKE3 hashes
//! (`blake3:<hex>` of the value under the receipt's random 32-byte salt),
//! so the receipt does not keep the very values it erased; matching is done
//! on those hashes too, so `verify` can check offline. While pending, the
//! plain criteria are kept as well, to run the erasure after a crash; they
//! are gone once it completes.
//!
//! The digest: BLAKE3 over the canonical JSON (serde_json, keys in the
//! order of [`DigestInput`]) of `{id, criteria (hashed), files:
//! [{removed, written, blake3}] sorted by removed}`, hex. `verify`
//! recomputes it, re-hashes every written file that still exists (a later
//! merge may have replaced one: reported, not a failure), and scans every
//! part and WAL segment for a record matching the criteria.
//!
//! # Crash safety
//! Each step is idempotent: a flush, a part rewrite (durable before the
//! swap, naming its input in `replaces`, so recovery installs it if the
//! swap never came), a drop (the Parquet file's unlink is the commit
//! point; before it, the next open's run finds the part again), GC (in memory, then packs rewritten before
//! the old are deleted). A crash at any point leaves a `pending` receipt;
//! the next open runs the erasure again, finding only what is left. Counts
//! of a part rewritten after the last progress write are lost from the
//! receipt (the records are gone all the same).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use skein_model::{AnyValue, KeyValue, LogRecord, MetricPoint, Span, TraceId};

use super::Inner;
use super::compact::PartSwap;
use super::tier::Stored;
use crate::error::{Error, Result};
use crate::part::{self, Part};
use crate::record::{Record, Signal};
use crate::storage::PartStore;

/// The directory of receipts, under the data directory.
pub const DIR: &str = "erasures";

/// Keys an erasure's `session_id` matches (as the LLM views read sessions).
const SESSION_KEYS: &[&str] = &[
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "traceloop.association.properties.session_id",
];

/// What to erase, as requested.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ErasureCriteria {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Attribute equalities (record, event or resource attributes; the
    /// value's text: `42` matches the int 42 and the string "42").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    /// Records at or after this time (ns since the epoch)…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_unix_nano: Option<u64>,
    /// …and before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_unix_nano: Option<u64>,
}

impl ErasureCriteria {
    /// Refuses criteria that match nothing or everything by mistake.
    pub fn check(&mut self) -> Result<()> {
        if let Some(t) = &self.trace_id {
            let id = TraceId::from_hex(t).map_err(|e| Error::Invalid(format!("trace_id {t:?}: {e}")))?;
            self.trace_id = Some(id.to_hex());
        }
        if self.session_id.as_deref() == Some("") {
            return Err(Error::Invalid("session_id is empty".into()));
        }
        if self.attributes.keys().any(|k| k.is_empty()) {
            return Err(Error::Invalid("an attribute key is empty".into()));
        }
        if let (Some(a), Some(b)) = (self.since_unix_nano, self.until_unix_nano)
            && a >= b
        {
            return Err(Error::Invalid(
                "the time range is empty: since must be before until".into(),
            ));
        }
        if self.trace_id.is_none()
            && self.session_id.is_none()
            && self.attributes.is_empty()
            && self.since_unix_nano.is_none()
            && self.until_unix_nano.is_none()
        {
            return Err(Error::Invalid(
                "an erasure needs criteria: trace_id, session_id, attributes and/or a time range".into(),
            ));
        }
        Ok(())
    }
}

/// The criteria as the receipt keeps them: values as keyed hashes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HashedCriteria {
    /// 32 random bytes, hex: the key of every hash below.
    pub salt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_unix_nano: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_unix_nano: Option<u64>,
}

fn value_hash(salt: &[u8; 32], v: &str) -> String {
    format!("blake3:{}", blake3::keyed_hash(salt, v.as_bytes()).to_hex())
}

fn random_salt() -> Result<[u8; 32]> {
    use std::io::Read;
    let mut salt = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .map_err(|e| Error::io("read /dev/urandom", e))?;
    Ok(salt)
}

impl HashedCriteria {
    fn of(c: &ErasureCriteria, salt: [u8; 32]) -> HashedCriteria {
        HashedCriteria {
            salt: hex::encode(salt),
            trace_id: c.trace_id.as_deref().map(|v| value_hash(&salt, v)),
            session_id: c.session_id.as_deref().map(|v| value_hash(&salt, v)),
            attributes: c
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), value_hash(&salt, v)))
                .collect(),
            since_unix_nano: c.since_unix_nano,
            until_unix_nano: c.until_unix_nano,
        }
    }

    /// What `check` refuses: no criteria at all.
    fn is_empty(&self) -> bool {
        self.trace_id.is_none()
            && self.session_id.is_none()
            && self.attributes.is_empty()
            && self.since_unix_nano.is_none()
            && self.until_unix_nano.is_none()
    }

    pub fn matcher(&self) -> Result<Matcher> {
        let bytes = hex::decode(&self.salt).map_err(|_| Error::Invalid("the receipt's salt is not hex".into()))?;
        let salt: [u8; 32] = bytes
            .try_into()
            .map_err(|_| Error::Invalid("the receipt's salt is not 32 bytes".into()))?;
        if self.is_empty() {
            return Err(Error::Invalid("the receipt has no criteria".into()));
        }
        Ok(Matcher { salt, c: self.clone() })
    }
}

/// Tells whether a record matches (hashing its candidate values).
pub struct Matcher {
    salt: [u8; 32],
    c: HashedCriteria,
}

/// A value's text for equality: strings as they are, numbers and booleans
/// as JSON writes them; other kinds never match.
fn value_text(v: &AnyValue) -> Option<String> {
    match v {
        AnyValue::Str(s) => Some(s.clone()),
        AnyValue::Int(i) => Some(i.to_string()),
        AnyValue::Bool(b) => Some(b.to_string()),
        AnyValue::Double(d) => Some(d.to_string()),
        _ => None,
    }
}

impl Matcher {
    fn hash_eq(&self, v: &AnyValue, want: &str) -> bool {
        value_text(v).is_some_and(|t| value_hash(&self.salt, &t) == want)
    }

    fn any_attr(&self, lists: &[&[KeyValue]], key: &str, want: &str) -> bool {
        lists
            .iter()
            .any(|l| l.iter().any(|kv| kv.key == key && self.hash_eq(&kv.value, want)))
    }

    pub fn matches<R: Erasable>(&self, r: &R) -> bool {
        let t = r.time();
        if self.c.since_unix_nano.is_some_and(|s| t < s) || self.c.until_unix_nano.is_some_and(|u| t >= u) {
            return false;
        }
        if let Some(want) = &self.c.trace_id {
            match r.trace_id() {
                Some(id) if value_hash(&self.salt, &id.to_hex()) == *want => {}
                _ => return false,
            }
        }
        let lists = r.attribute_lists();
        if let Some(want) = &self.c.session_id
            && !SESSION_KEYS.iter().any(|k| self.any_attr(&lists, k, want))
        {
            return false;
        }
        self.c.attributes.iter().all(|(k, want)| self.any_attr(&lists, k, want))
    }
}

/// Records whose attributes an erasure reads: the record's own, its
/// events' and its resource's.
pub trait Erasable: Record {
    fn attribute_lists(&self) -> Vec<&[KeyValue]>;
}

impl Erasable for Span {
    fn attribute_lists(&self) -> Vec<&[KeyValue]> {
        let mut v: Vec<&[KeyValue]> = vec![&self.attributes, &self.resource.attributes];
        v.extend(self.events.iter().map(|e| e.attributes.as_slice()));
        v
    }
}

impl Erasable for LogRecord {
    fn attribute_lists(&self) -> Vec<&[KeyValue]> {
        vec![&self.attributes, &self.resource().attributes]
    }
}

impl Erasable for MetricPoint {
    fn attribute_lists(&self) -> Vec<&[KeyValue]> {
        vec![&self.attributes, &self.resource().attributes]
    }
}

/// One part file an erasure removed, and what replaced it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RewrittenFile {
    /// The Parquet file removed (relative to `DATA_DIR/parts`).
    pub removed: String,
    /// Its rewrite without the matching records; none when every record
    /// matched and the part was dropped.
    pub written: Option<String>,
    /// BLAKE3 of `written`, hex.
    pub blake3: Option<String>,
}

/// Records erased, per signal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ErasureCounts {
    pub spans: u64,
    pub logs: u64,
    pub metrics: u64,
}

impl ErasureCounts {
    fn add(&mut self, s: Signal, n: u64) {
        match s {
            Signal::Spans => self.spans += n,
            Signal::Logs => self.logs += n,
            Signal::Metrics => self.metrics += n,
        }
    }
}

/// The receipt of an erasure (`GET /api/v1/erasures/{id}`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErasureReceipt {
    pub id: String,
    /// `pending` (accepted, not finished: run again at the next open) or
    /// `completed`.
    pub status: String,
    pub criteria: HashedCriteria,
    /// The criteria as given, kept only while pending (to finish after a
    /// crash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_criteria: Option<ErasureCriteria>,
    pub counts: ErasureCounts,
    pub files_rewritten: Vec<RewrittenFile>,
    /// Payloads forgotten, and pack files rewritten or deleted, by the
    /// garbage collection that followed.
    pub payloads_removed: u64,
    pub payload_packs_rewritten: u64,
    pub requested_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// See the module docs; set when completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// What the digest covers, in this order.
#[derive(Serialize)]
struct DigestInput<'a> {
    id: &'a str,
    criteria: &'a HashedCriteria,
    files: Vec<&'a RewrittenFile>,
}

impl ErasureReceipt {
    /// The digest of the receipt's id, criteria and files (hex BLAKE3).
    pub fn compute_digest(&self) -> String {
        let mut files: Vec<&RewrittenFile> = self.files_rewritten.iter().collect();
        files.sort_by(|a, b| a.removed.cmp(&b.removed));
        let input = DigestInput {
            id: &self.id,
            criteria: &self.criteria,
            files,
        };
        let bytes = serde_json::to_vec(&input).unwrap_or_default();
        blake3::hash(&bytes).to_hex().to_string()
    }
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn receipt_name(id: &str) -> String {
    format!("{id}.json")
}

/// A receipt id is ours: `e` and 16 hex digits (it names a file).
pub fn valid_id(id: &str) -> bool {
    id.len() == 17 && id.starts_with('e') && id[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

fn persist(dir: &Path, r: &ErasureReceipt) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(r).map_err(|e| Error::Other(e.to_string()))?;
    crate::fsutil::write_atomic(dir, &receipt_name(&r.id), &bytes)
}

/// Reads a receipt from `DATA_DIR/erasures`; `None` if there is none.
pub fn read_receipt(data_dir: &Path, id: &str) -> Result<Option<ErasureReceipt>> {
    if !valid_id(id) {
        return Err(Error::Invalid(format!(
            "{id:?} is not an erasure id (e and 16 hex digits)"
        )));
    }
    let path = data_dir.join(DIR).join(receipt_name(id));
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| Error::corrupt(path.display().to_string(), e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
    }
}

/// The ids of every receipt in `DATA_DIR/erasures`, in order.
fn receipt_ids(data_dir: &Path) -> Result<Vec<String>> {
    let dir = data_dir.join(DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("list {}", dir.display()), e)),
    };
    let mut ids: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_string)
        })
        .filter(|id| valid_id(id))
        .collect();
    ids.sort();
    Ok(ids)
}

/// Every receipt still pending, oldest id first.
fn pending(data_dir: &Path) -> Result<Vec<ErasureReceipt>> {
    let mut out = Vec::new();
    for id in receipt_ids(data_dir)? {
        if let Some(r) = read_receipt(data_dir, &id)?
            && r.status == "pending"
        {
            out.push(r);
        }
    }
    Ok(out)
}

/// Carries the erasures of data directory `from` into `into`, a restore of
/// an older backup of it, so that nothing they erased comes back: each
/// receipt `into` lacks is written there as pending, and the next open
/// runs it before answering anything. A completed receipt runs again from
/// its hashed criteria (matching needs no plain value); its counts, files
/// and digest are those of the new run. Returns the ids carried.
///
/// Crash safety: each receipt is written whole (temp → fsync → rename); a
/// crash leaves some carried, and running this again carries the rest.
pub fn carry_erasures(from: &Path, into: &Path) -> Result<Vec<String>> {
    let dir = into.join(DIR);
    let mut carried = Vec::new();
    for id in receipt_ids(from)? {
        if read_receipt(into, &id)?.is_some() {
            continue;
        }
        let Some(mut r) = read_receipt(from, &id)? else {
            continue;
        };
        r.status = "pending".into();
        r.counts = ErasureCounts::default();
        r.files_rewritten.clear();
        r.payloads_removed = 0;
        r.payload_packs_rewritten = 0;
        r.started_at = None;
        r.completed_at = None;
        r.digest = None;
        crate::fsutil::create_dir_all(&dir)?;
        persist(&dir, &r)?;
        carried.push(id);
    }
    Ok(carried)
}

/// For crash tests: abort the process after this many parts of an
/// erasure (`SKEIN_TEST_ERASURE_ABORT_AFTER_PARTS`), as a SIGKILL would.
fn abort_after_parts() -> Option<usize> {
    std::env::var("SKEIN_TEST_ERASURE_ABORT_AFTER_PARTS").ok()?.parse().ok()
}

impl Inner {
    fn erasure_dir(&self) -> PathBuf {
        self.opts.data_dir.join(DIR)
    }

    /// Accepts an erasure (durably) and runs it; returns its receipt.
    pub(super) fn request_erasure(&self, mut criteria: ErasureCriteria) -> Result<ErasureReceipt> {
        criteria.check()?;
        let salt = random_salt()?;
        let id = format!("e{}", &blake3::hash(&salt).to_hex()[..16]);
        let receipt = ErasureReceipt {
            id,
            status: "pending".into(),
            criteria: HashedCriteria::of(&criteria, salt),
            pending_criteria: Some(criteria),
            counts: ErasureCounts::default(),
            files_rewritten: Vec::new(),
            payloads_removed: 0,
            payload_packs_rewritten: 0,
            requested_at: now_rfc3339(),
            started_at: None,
            completed_at: None,
            digest: None,
        };
        let dir = self.erasure_dir();
        crate::fsutil::create_dir_all(&dir)?;
        // The commit point of the request: from here on it is finished,
        // now or after a crash.
        persist(&dir, &receipt)?;
        self.run_erasure(receipt)
    }

    /// Runs the erasures a crash left pending (at open, before anything
    /// is answered).
    pub(super) fn finish_pending_erasures(&self) -> Result<usize> {
        let pending = pending(&self.opts.data_dir)?;
        let n = pending.len();
        for r in pending {
            let id = r.id.clone();
            tracing::info!("erasure {id}: pending since {}, finishing it", r.requested_at);
            self.run_erasure(r)
                .map_err(|e| Error::Other(format!("erasure {id} (pending, run again at start): {e}")))?;
        }
        Ok(n)
    }

    fn run_erasure(&self, mut r: ErasureReceipt) -> Result<ErasureReceipt> {
        let dir = self.erasure_dir();
        let m = r.criteria.matcher()?;
        r.started_at.get_or_insert_with(now_rfc3339);
        // Every acknowledged record into a part; the WAL segments that
        // held them go with the flush.
        self.tracked(crate::health::FaultKind::Flush, || {
            self.freeze(true)?;
            self.flush_frozen()
        })?;
        self.retire_flushed_wal()?;
        {
            let _no_merges = self.compact_lock.lock();
            let mut parts_done = 0usize;
            let abort_after = abort_after_parts();
            // Every replacement is written first and answered from in one
            // swap: matching records leave every answer at once, never
            // some parts before others.
            let mut swaps = Vec::new();
            self.erase_parts::<Span>(&m, &mut r, &dir, &mut parts_done, abort_after, &mut swaps)?;
            self.erase_parts::<LogRecord>(&m, &mut r, &dir, &mut parts_done, abort_after, &mut swaps)?;
            self.erase_parts::<MetricPoint>(&m, &mut r, &dir, &mut parts_done, abort_after, &mut swaps)?;
            self.swap_parts(swaps)?;
        }
        let gc = self.tracked(crate::health::FaultKind::Gc, || self.collect_payload_garbage_forced())?;
        r.payloads_removed += gc.removed;
        r.payload_packs_rewritten += gc.packs_rewritten + gc.packs_deleted;
        // What the erasure replaced leaves the bucket now, not after
        // `--removal-grace` (a reader mid-query on one of those parts gets
        // an error naming it, and its next query the new listing).
        self.holdable.remove_graced_now();
        r.status = "completed".into();
        r.pending_criteria = None;
        r.completed_at = Some(now_rfc3339());
        r.digest = Some(r.compute_digest());
        persist(&dir, &r)?;
        tracing::info!(
            "erasure {}: erased {} spans, {} logs, {} metric points; {} parts rewritten or dropped, {} payloads",
            r.id,
            r.counts.spans,
            r.counts.logs,
            r.counts.metrics,
            r.files_rewritten.len(),
            r.payloads_removed
        );
        Ok(r)
    }

    /// Deletes every closed WAL segment whose records are all in parts. A
    /// flush does that for the segments before its tier, but segments can
    /// outlive their records' flush (a crash between the part and the
    /// deletion, replayed segments kept until the next flush); an erasure
    /// must not leave one behind. The line is the lowest sequence number a
    /// hot tier holds (or the next to be assigned), read with the gate held
    /// so no batch is between its WAL append and its tier.
    fn retire_flushed_wal(&self) -> Result<()> {
        let line = {
            let _no_ingest = self.gate.write();
            let mut line = self.wal.next_seq();
            let st = self.state.read();
            for t in st.tiers() {
                line = line.min(tier_min_seq::<Span>(t));
                line = line.min(tier_min_seq::<LogRecord>(t));
                line = line.min(tier_min_seq::<MetricPoint>(t));
            }
            line
        };
        self.wal.remove_before(line)?;
        Ok(())
    }

    /// Writes what replaces each part of `R` holding a match (nothing, when
    /// every row matches) and notes the swap, to be made with the others.
    fn erase_parts<R: Stored + Erasable>(
        &self,
        m: &Matcher,
        r: &mut ErasureReceipt,
        dir: &Path,
        parts_done: &mut usize,
        abort_after: Option<usize>,
        swaps: &mut Vec<PartSwap>,
    ) -> Result<()> {
        let parts = self.state.read().parts(R::SIGNAL).clone();
        for p in parts {
            let matches = count_matches::<R>(&p, m)?;
            if matches == 0 {
                continue;
            }
            let removed = part::parquet_name(R::SIGNAL, p.meta.id);
            let entry = if matches >= p.meta.rows {
                // Before the part goes, so its records never come back from
                // a log segment that still holds them.
                self.replay_floor
                    .lock()
                    .raise(&self.opts.data_dir, R::SIGNAL, p.meta.covers_seq, p.meta.max_seq)?;
                swaps.push(PartSwap {
                    signal: R::SIGNAL,
                    inputs: vec![p.meta.id],
                    output: None,
                });
                RewrittenFile {
                    removed,
                    written: None,
                    blake3: None,
                }
            } else {
                let erase: &dyn Fn(&R) -> bool = &|rec: &R| m.matches(rec);
                let out = self.write_rewrite::<R>(std::slice::from_ref(&p), 0, p.meta.level, Some(erase))?;
                let written = part::parquet_name(R::SIGNAL, out.meta.id);
                let bytes = self.store.get(&written)?;
                swaps.push(PartSwap {
                    signal: R::SIGNAL,
                    inputs: vec![p.meta.id],
                    output: Some(out),
                });
                RewrittenFile {
                    removed,
                    written: Some(written),
                    blake3: Some(blake3::hash(&bytes).to_hex().to_string()),
                }
            };
            r.counts.add(R::SIGNAL, matches);
            r.files_rewritten.push(entry);
            persist(dir, r)?;
            *parts_done += 1;
            if abort_after.is_some_and(|n| *parts_done >= n) {
                tracing::warn!("SKEIN_TEST_ERASURE_ABORT_AFTER_PARTS: aborting mid-erasure");
                std::process::abort();
            }
            if self.stop.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
        }
        Ok(())
    }
}

fn tier_min_seq<R: Stored>(t: &Arc<super::tier::Tier>) -> u64 {
    let table = R::table(t).read();
    if table.total_rows() == 0 {
        u64::MAX
    } else {
        table.min_seq()
    }
}

fn count_matches<R: Stored + Erasable>(p: &Arc<Part>, m: &Matcher) -> Result<u64> {
    let mut n = 0;
    for batch in p.scan::<R>(2048)? {
        n += batch?.iter().filter(|r| m.matches(*r)).count() as u64;
    }
    Ok(n)
}

/// What `skein verify --erasure` found.
#[derive(Debug, Clone, Serialize)]
pub struct ErasureVerification {
    pub id: String,
    pub status: String,
    /// The receipt's digest matches its contents.
    pub digest_ok: bool,
    /// Written files whose BLAKE3 matches the receipt.
    pub files_checked: usize,
    /// Written files gone since (merged or dropped later): not a failure.
    pub files_replaced_since: Vec<String>,
    /// Written files whose bytes differ from the receipt.
    pub files_mismatched: Vec<String>,
    /// Part files and WAL segments scanned for matching records.
    pub parts_scanned: usize,
    pub wal_segments_scanned: usize,
    /// Records still matching the criteria (file: count).
    pub matching_records: BTreeMap<String, u64>,
    /// Everything checks out.
    pub ok: bool,
}

/// Checks an erasure offline against a data directory (see the module
/// docs), and against the bucket its parts live in when it has one
/// (`bucket`: the server's `--storage`; read only, its objects fetched
/// through a scratch cache that is removed after). Reads only: safe beside
/// a running server, though a merge running meanwhile can make a file
/// vanish under it (run it again).
pub fn verify_erasure(
    data_dir: &Path,
    id: &str,
    bucket: Option<&crate::storage::object::ObjectStorageOptions>,
) -> Result<ErasureVerification> {
    let r = read_receipt(data_dir, id)?.ok_or_else(|| {
        Error::Invalid(format!(
            "no erasure {id} in {} (no {}/{id}.json)",
            data_dir.display(),
            DIR
        ))
    })?;
    let m = r.criteria.matcher()?;
    let digest_ok = r.status == "completed" && r.digest.as_deref() == Some(r.compute_digest().as_str());
    let parts_dir = data_dir.join("parts");
    let mut v = ErasureVerification {
        id: r.id.clone(),
        status: r.status.clone(),
        digest_ok,
        files_checked: 0,
        files_replaced_since: Vec::new(),
        files_mismatched: Vec::new(),
        parts_scanned: 0,
        wal_segments_scanned: 0,
        matching_records: BTreeMap::new(),
        ok: false,
    };
    let scratch = bucket.map(|_| ScratchCache::new());
    let store: Option<Arc<dyn PartStore>> = match (bucket, &scratch) {
        (Some(os), Some(cache)) => {
            let mut os = os.clone();
            os.read_only = true;
            os.cache_dir = cache.0.clone();
            os.cache_bytes = 256 << 20;
            Some(Arc::new(crate::storage::object::BucketStore::open(
                &parts_dir,
                &["spans", "logs", "metrics", crate::payload::PayloadStore::PREFIX],
                &os,
                "skein-verify",
                Arc::new(crate::health::Faults::default()),
                part::is_text_index,
            )?))
        }
        _ => parts_dir
            .is_dir()
            .then(|| Arc::new(crate::storage::LocalStore::read_only(&parts_dir)) as Arc<dyn PartStore>),
    };
    if let Some(store) = &store {
        let mut listed = std::collections::BTreeSet::new();
        for prefix in ["spans", "logs", "metrics", crate::payload::PayloadStore::PREFIX] {
            listed.extend(store.list(prefix)?);
        }
        for f in &r.files_rewritten {
            let (Some(name), Some(want)) = (&f.written, &f.blake3) else {
                continue;
            };
            if !listed.contains(name) {
                v.files_replaced_since.push(name.clone());
                continue;
            }
            let src = store.open(name)?;
            let bytes = src
                .read_at(0, src.len() as usize)
                .map_err(|e| Error::io(format!("read {}", store.describe(name)), e))?;
            if blake3::hash(&bytes).to_hex().as_str() == want {
                v.files_checked += 1;
            } else {
                v.files_mismatched.push(name.clone());
            }
        }
        scan_parts::<Span>(store, &m, &mut v)?;
        scan_parts::<LogRecord>(store, &m, &mut v)?;
        scan_parts::<MetricPoint>(store, &m, &mut v)?;
    } else {
        v.files_replaced_since
            .extend(r.files_rewritten.iter().filter_map(|f| f.written.clone()));
    }
    scan_wal(&data_dir.join("wal"), &m, &mut v)?;
    v.ok = v.digest_ok && v.files_mismatched.is_empty() && v.matching_records.is_empty();
    Ok(v)
}

/// A cache directory for one verify's bucket reads, removed after.
struct ScratchCache(PathBuf);

impl ScratchCache {
    fn new() -> ScratchCache {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        ScratchCache(std::env::temp_dir().join(format!("skein-verify-{}-{nanos}", std::process::id())))
    }
}

impl Drop for ScratchCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scan_parts<R: Stored + Erasable>(
    store: &Arc<dyn PartStore>,
    m: &Matcher,
    v: &mut ErasureVerification,
) -> Result<()> {
    for name in store.list(R::SIGNAL.as_str())? {
        let Some((_, id, true)) = part::parse_name(&name) else {
            continue;
        };
        let p = Arc::new(Part::open::<R>(store.clone(), id)?);
        v.parts_scanned += 1;
        let n = count_matches::<R>(&p, m)?;
        if n > 0 {
            v.matching_records.insert(format!("parts/{name}"), n);
        }
    }
    Ok(())
}

fn scan_wal(dir: &Path, m: &Matcher, v: &mut ErasureVerification) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    let mut found = 0u64;
    let segments = crate::wal::for_each_record(dir, |rec| {
        let crate::wal::record::RecordKind::Batch(signal) = rec.kind else {
            return Ok(());
        };
        found += match signal {
            Signal::Spans => matching_in::<Span>(&rec.body, m)?,
            Signal::Logs => matching_in::<LogRecord>(&rec.body, m)?,
            Signal::Metrics => matching_in::<MetricPoint>(&rec.body, m)?,
        };
        Ok(())
    })?;
    v.wal_segments_scanned = segments;
    if found > 0 {
        v.matching_records.insert("wal".into(), found);
    }
    Ok(())
}

fn matching_in<R: Stored + Erasable>(body: &[u8], m: &Matcher) -> Result<u64> {
    let records: Vec<R> = crate::codec::decode_batch(body)?;
    Ok(records.iter().filter(|r| m.matches(*r)).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criteria_are_checked() {
        let mut none = ErasureCriteria::default();
        assert!(none.check().unwrap_err().to_string().contains("needs criteria"));
        let mut bad = ErasureCriteria {
            trace_id: Some("xyz".into()),
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("trace_id"));
        let mut empty_range = ErasureCriteria {
            since_unix_nano: Some(10),
            until_unix_nano: Some(10),
            ..Default::default()
        };
        assert!(empty_range.check().is_err());
        let mut upper = ErasureCriteria {
            trace_id: Some("0AF7651916CD43DD8448EB211C80319C".into()),
            ..Default::default()
        };
        upper.check().unwrap();
        assert_eq!(upper.trace_id.as_deref(), Some("0af7651916cd43dd8448eb211c80319c"));
    }

    #[test]
    fn digest_covers_criteria_and_files_in_any_order() {
        let c = ErasureCriteria {
            attributes: [("user.id".to_string(), "u123".to_string())].into(),
            ..Default::default()
        };
        let hashed = HashedCriteria::of(&c, [7; 32]);
        assert!(!serde_json::to_string(&hashed).unwrap().contains("u123"));
        let f = |n: &str| RewrittenFile {
            removed: n.into(),
            written: None,
            blake3: None,
        };
        let mut r = ErasureReceipt {
            id: "e0123456789abcdef".into(),
            status: "completed".into(),
            criteria: hashed,
            pending_criteria: None,
            counts: ErasureCounts::default(),
            files_rewritten: vec![f("spans/a"), f("logs/b")],
            payloads_removed: 0,
            payload_packs_rewritten: 0,
            requested_at: String::new(),
            started_at: None,
            completed_at: None,
            digest: None,
        };
        let d = r.compute_digest();
        r.files_rewritten.reverse();
        assert_eq!(r.compute_digest(), d);
        r.files_rewritten.pop();
        assert_ne!(r.compute_digest(), d);
        assert!(valid_id(&r.id));
        assert!(!valid_id("../etc/passwd"));
    }
}
