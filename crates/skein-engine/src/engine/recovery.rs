//! Opening a data directory: lock it, load parts (healing what a crash left
//! half-done), and replay the WAL records no part holds.
//!
//! Crash points and how each heals:
//! - a part or sidecar `.tmp` file: never visible; deleted here.
//! - a part without its sidecar: the sidecar is rebuilt from the Parquet.
//! - a sidecar without its part: deleted.
//! - a compaction output whose inputs still exist: the inputs (named in the
//!   output's `replaces`) are deleted here; their records are in the output.
//! - a flush that wrote some signals' parts but not others: each signal
//!   replays from its own parts' `covers_seq`, so nothing is lost or doubled.
//! - a torn WAL tail: truncated (it was never acknowledged).
//! - a log segment still holding records of a part since dropped: skipped
//!   by the replay floor (`replay_floor`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use parking_lot::{Condvar, Mutex, RwLock};
use skein_model::{LogRecord, MetricPoint, Span};

use super::replay_floor::ReplayFloor;
use super::tier::{State, Stored, Tier};
use super::{EngineOptions, Inner};
use crate::codec;
use crate::error::Result;
use crate::fsutil::{self, DirLock};
use crate::health::Faults;
use crate::part::{self, PageCache, Part};
use crate::payload::{self, PayloadStore};
use crate::record::Signal;
use crate::storage::hold::HoldableStore;
use crate::storage::object::BucketStore;
use crate::storage::{LocalStore, PartStore};
use crate::wal::{RecordKind, Wal, WalRecord};

pub(super) fn open(opts: EngineOptions) -> Result<Inner> {
    let started = Instant::now();
    fsutil::create_dir_all(&opts.data_dir)?;
    let lock = DirLock::acquire(&opts.data_dir)?;
    let faults = Arc::new(Faults::default());
    let prefixes = ["spans", "logs", "metrics", PayloadStore::PREFIX];
    let raw_store: Arc<dyn PartStore> = match &opts.object_storage {
        None => Arc::new(LocalStore::open(&opts.data_dir.join("parts"), &prefixes)?),
        Some(os) => Arc::new(BucketStore::open(
            &opts.data_dir.join("parts"),
            &prefixes,
            os,
            &fsutil::instance_id(&opts.data_dir)?,
            faults.clone(),
            part::is_text_index,
        )?),
    };
    // Every removal goes through the hold, so a backup can keep what it
    // copies (storage::hold).
    let grace = opts
        .object_storage
        .as_ref()
        .map_or(std::time::Duration::ZERO, |o| o.removal_grace);
    let holdable = HoldableStore::new(raw_store, grace);
    let store: Arc<dyn PartStore> = holdable.clone();
    let payloads = PayloadStore::open(store.clone())?;
    let page_cache = PageCache::new(opts.page_cache_bytes);
    let mut parts: [Vec<Arc<Part>>; 3] = Default::default();
    let mut max_id = 0u64;
    let ro = opts.read_only();
    parts[0] = load_parts::<Span>(&store, &page_cache, &mut max_id, ro)?;
    parts[1] = load_parts::<LogRecord>(&store, &page_cache, &mut max_id, ro)?;
    parts[2] = load_parts::<MetricPoint>(&store, &page_cache, &mut max_id, ro)?;
    // What dropped parts held counts as held (see `replay_floor`).
    let floor = ReplayFloor::load(&opts.data_dir)?;
    let covers: Vec<u64> = parts
        .iter()
        .zip(floor.covers)
        .map(|(ps, dropped)| ps.iter().map(|p| p.meta.covers_seq).max().unwrap_or(0).max(dropped))
        .collect();
    let max_seq = parts
        .iter()
        .flat_map(|ps| ps.iter().map(|p| p.meta.max_seq.max(p.meta.covers_seq)))
        .max()
        .unwrap_or(0)
        .max(floor.max_seq);
    let active = Tier::new().with_text_indexes(opts.full_text);
    // Expired records are not replayed: one may still be in the log after
    // retention dropped its part (see `retention`).
    let now = opts.clock.now_unix_nano();
    let expired_before = Signal::ALL.map(|s| {
        opts.retention
            .of(s)
            .map_or(0, |d| now.saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64))
    });
    let mut replayed = 0u64;
    let (wal, report) = Wal::open(
        &opts.data_dir.join("wal"),
        opts.durability,
        max_seq + 1,
        opts.wal_recovery,
        |rec: WalRecord| {
            let signal = match rec.kind {
                RecordKind::Batch(signal) => signal,
                RecordKind::Payloads | RecordKind::LegacyPayloads => {
                    // Kept whether or not its batch replays: a payload no
                    // record refers to costs a little space, never data.
                    let blobs = match rec.kind {
                        RecordKind::LegacyPayloads => payload::decode_legacy_blobs(&rec.body)?,
                        _ => payload::decode_frames(&rec.body)?,
                    };
                    let mut hot = active.payloads.write();
                    for blob in blobs {
                        if !payloads.contains(&blob.id) {
                            hot.insert(blob);
                        }
                    }
                    return Ok(());
                }
            };
            let floor = covers[signal.index()];
            let expired = expired_before[signal.index()];
            replayed += match signal {
                Signal::Spans => replay::<Span>(&active, &rec, floor, expired)?,
                Signal::Logs => replay::<LogRecord>(&active, &rec, floor, expired)?,
                Signal::Metrics => replay::<MetricPoint>(&active, &rec, floor, expired)?,
            };
            Ok(())
        },
    )?;
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(
        "opened {} in {:?}: {} parts, {} WAL records replayed ({} records), next seq {}",
        opts.data_dir.display(),
        started.elapsed(),
        parts.iter().map(Vec::len).sum::<usize>(),
        report.records,
        replayed,
        report.next_seq
    );
    Ok(Inner {
        me: std::sync::Weak::new(),
        store,
        holdable,
        payloads,
        payload_gate: RwLock::new(()),
        replay_floor: Mutex::new(floor),
        wal: Arc::new(wal),
        _lock: lock,
        gate: RwLock::new(()),
        state: RwLock::new(State {
            active: Arc::new(active),
            frozen: Vec::new(),
            parts,
        }),
        next_part_id: AtomicU64::new(max_id + 1),
        flush_lock: Mutex::new(()),
        freeze_lock: Mutex::new(()),
        compact_lock: Mutex::new(()),
        text_index_lock: Mutex::new(()),
        merging: Default::default(),
        stop: Arc::new(AtomicBool::new(false)),
        wake: Mutex::new(false),
        wake_cv: Condvar::new(),
        flushed_cv: Condvar::new(),
        flushed_mx: Mutex::new(()),
        last_ingest: Mutex::new(Instant::now()),
        flushes: AtomicU64::new(0),
        compactions: AtomicU64::new(0),
        text_index_merges: AtomicU64::new(0),
        text_index_rebuilds: AtomicU64::new(0),
        text_index_builds: AtomicU64::new(0),
        text_index_build_nanos: AtomicU64::new(0),
        unindexable: Mutex::new(Default::default()),
        compaction_nanos: AtomicU64::new(0),
        faults,
        shadow_cache: Default::default(),
        page_cache,
        compacting: AtomicBool::new(false),
        retention_counters: Default::default(),
        // A first round soon after opening: data may have expired while
        // the server was down.
        retention_wake: Mutex::new(true),
        retention_cv: Condvar::new(),
        disk_full_at: AtomicU64::new(0),
        opts,
    })
}

/// Inserts the records of `rec` newer than `floor` (a sequence number)
/// and not expired (time at or past `expired_before`) into the active tier.
fn replay<R: Stored>(active: &Tier, rec: &WalRecord, floor: u64, expired_before: u64) -> Result<u64> {
    if rec.seq_base + rec.count as u64 <= floor + 1 && rec.seq_base <= floor {
        return Ok(0);
    }
    let records: Vec<R> = codec::decode_batch(&rec.body)?;
    let mut table = R::table(active).write();
    let mut n = 0;
    for (i, r) in records.into_iter().enumerate() {
        let seq = rec.seq_base + i as u64;
        if seq > floor && crate::record::Record::time(&r) >= expired_before {
            table.insert(vec![r], seq);
            n += 1;
        }
    }
    Ok(n)
}

/// Opens every part of a signal, deleting what compaction replaced and
/// orphaned sidecars (a reader of someone else's bucket only leaves them
/// out); returns them sorted by sequence numbers.
fn load_parts<R: Stored>(
    store: &Arc<dyn PartStore>,
    page_cache: &Arc<PageCache>,
    max_id: &mut u64,
    read_only: bool,
) -> Result<Vec<Arc<Part>>> {
    let mut files: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
    for name in store.list(R::SIGNAL.as_str())? {
        if let Some((_, id, is_parquet)) = part::parse_name(&name) {
            let e = files.entry(id).or_default();
            if is_parquet {
                e.0 = true;
            } else {
                e.1 = true;
            }
        }
    }
    let mut parts = Vec::new();
    for (&id, &(has_parquet, _)) in &files {
        *max_id = (*max_id).max(id);
        if !has_parquet {
            // A reader may list a part's sidecars before the part itself
            // is up: never its to remove.
            for name in part::sidecar_names(R::SIGNAL, id).iter().filter(|_| !read_only) {
                store.remove(name)?;
            }
            continue;
        }
        parts.push(Part::open::<R>(store.clone(), id)?.with_page_cache(Some(page_cache.clone())));
    }
    let replaced: HashSet<u64> = parts.iter().flat_map(|p| p.meta.replaces.iter().copied()).collect();
    let mut kept = Vec::with_capacity(parts.len());
    for p in parts {
        if replaced.contains(&p.meta.id) && read_only {
            continue;
        }
        if replaced.contains(&p.meta.id) {
            tracing::info!("removing part {} replaced by a compaction before a crash", p.meta.id);
            store.remove(&part::parquet_name(R::SIGNAL, p.meta.id))?;
            for name in part::sidecar_names(R::SIGNAL, p.meta.id) {
                store.remove(&name)?;
            }
        } else {
            kept.push(Arc::new(p));
        }
    }
    kept.sort_by_key(|p| (p.meta.min_seq, p.meta.id));
    Ok(kept)
}
