//! The engine: ingest through the WAL into the hot tier, flush to parts,
//! compact, and answer queries over all of it.
//!
//! # Ingest and the gate
//! An ingest holds the *gate* (a read lock) from the moment the WAL assigns
//! its sequence numbers until its records are in the active tier. Freezing
//! the tier takes the gate exclusively, so when a tier is frozen every
//! sequence number below its boundary is inside it (or older): that is what
//! lets its parts claim `covers_seq` and lets WAL segments go once flushed.
//!
//! # Crash safety
//! Acknowledged batches are in the WAL (fsynced in the default mode). Parts
//! are written temp → fsync → rename → fsync dir and record which sequence
//! numbers they cover, so recovery replays exactly the WAL records no part
//! holds. Compaction outputs name the parts they replace; recovery deletes
//! replaced parts left by a crash before the output was installed... or
//! after: either way one copy of each record remains.
//!
//! # Locks
//! What each lock of [`Inner`] protects:
//! - `freeze_lock`, `flush_lock`, `compact_lock`, `text_index_lock`: one
//!   freeze, one flush, one compaction and one text-index build at a time.
//!   Held for the whole task; outermost. (A build runs beside a merge: it
//!   leaves the merge's inputs alone, see `compact::MergingParts`.)
//! - `gate` (`RwLock<()>`): the order of WAL sequence numbers and tiers.
//!   Ingest reads it from its WAL append until its records are in the active
//!   tier; a freeze writes it while it rotates the WAL and swaps the tier.
//! - the WAL's own locks (`spare_lock`, then its state, then its counters):
//!   taken inside `Wal` methods only, never held on return.
//! - `state` (`RwLock<State>`): which tiers and parts exist. Held only to
//!   read or swap that list (readers clone it and let go); never across I/O.
//! - each hot table's `RwLock` (in [`tier::Tier`]): its rows and postings.
//!   Written by ingest and replay, read by queries and flush.
//! - `flushed_mx` with `flushed_cv`, `wake` with `wake_cv`: sleeping until a
//!   flush finishes / waking the background threads. `flushed_mx` is held
//!   while `state` is read in `wait_for_room`, never the other way round.
//! - a hot tier's payload map, the pack index, `last_ingest`, the fault
//!   list, the parts that cannot be text-indexed (`unindexable`), the
//!   parts being merged (`merging`), the shadow and page caches: leaves,
//!   taken with nothing else acquired after them (a search may take a
//!   payload map while it holds a hot table, to read a body stored as a
//!   payload).
//!
//! - `payload_gate` (`RwLock<()>`): read by an ingest from deciding which
//!   payloads are stored already to inserting its records; written by
//!   payload garbage collection while it computes what is live.
//!
//! Locks held at the same time are taken in this order, outermost first: a
//! task lock → `payload_gate` → `gate` → WAL → `state` → a hot table. (An ingest holds
//! `gate` across its WAL append and its table insert; a freeze holds its
//! lock and `gate` across the WAL rotation and the `state` swap.) No path
//! takes an earlier lock while holding a later one, so none can deadlock.

mod compact;
pub mod erasure;
mod gc;
mod recovery;
mod refresh;
pub(crate) mod replay_floor;
mod retention;
mod text_backlog;
pub mod tier;
// Time series for the web UI's charts.
mod timeline;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use serde::Serialize;
use skein_model::{LogRecord, MetricPoint, Span, TraceId};

pub use compact::CompactionOptions;
pub use retention::{Clock, MinFreeDisk, OnDiskFull, Retention, RetentionReport, RetentionStats};
use tier::{Frozen, State, Stored, Tier};

use crate::codec;
use crate::error::{Error, Result};
use crate::fsutil::DirLock;
use crate::health::{Fault, FaultKind, Faults};
use crate::part::{PageCache, PageCacheStats, PartMeta, PartWriter, WriterOptions};
use crate::payload::{self, Blob, FrameCache, PayloadPolicy, PayloadRef, PayloadStats, PayloadStore};
use crate::query::Window;
use crate::query::aggregate::{self, OperationSummary, ServiceSummary, Summary};
use crate::query::diagnose::{self, DiagnoseRequest, Diagnosis};
use crate::query::explain::Explain;
use crate::query::filter::{LogQuery, MetricQuery, SpanQuery};
use crate::query::llm;
use crate::query::search::{self, SearchResult};
use crate::record::Signal;
use crate::storage::PartStore;
use crate::text::{Highlight, PayloadText, TextQuery, TextRecord};
use crate::validate::Limits;
use crate::wal::{Durability, RecoveryMode, Wal};

/// How the engine runs; every field has a sensible default.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub data_dir: PathBuf,
    pub durability: Durability,
    /// Freeze the hot tier past this many bytes (approximate). Default
    /// 128 MiB: a flush's fixed costs (a part per signal, a text index, a
    /// later compaction) spread over twice the rows of 64 MiB took 18% less
    /// CPU per ingested span on the agent corpus, for about 50 MiB more
    /// resident memory.
    pub hot_max_bytes: usize,
    /// …or once it is this old and not empty. Default 60 s.
    pub hot_max_age: Duration,
    /// Frozen tiers allowed to wait for flush before ingest waits (bounds memory).
    pub max_frozen: usize,
    pub compaction: CompactionOptions,
    pub writer: WriterOptions,
    pub limits: Limits,
    /// What opening does about damage to acknowledged WAL data.
    pub wal_recovery: RecoveryMode,
    /// Which string values go to the payload store.
    pub payloads: PayloadPolicy,
    /// Run flush and compaction in background threads. Off, they run only
    /// when `flush`/`compact` are called (deterministic tests).
    pub background: bool,
    /// Decompressed Parquet pages kept for point reads (trace lookups,
    /// searches); 0 turns the cache off. Default 128 MiB: a rare word's
    /// hits in a compacted 10M-record part touch ~100 MB of pages (its
    /// text blocks' rows lie scattered), and 32 MiB kept none of them.
    pub page_cache_bytes: u64,
    /// Keep full-text indexes (per part, and of the hot tier). Off, a text
    /// query scans its window: the same answers, slower. Default on.
    pub full_text: bool,
    /// Prices of LLM calls (costs are computed when asked, so a corrected
    /// price applies to data already stored). Default: the built-in table.
    pub pricing: Arc<skein_model::genai::Pricing>,
    /// Keep parts in a bucket (staged and cached on local disk) rather
    /// than only on local disk. The WAL and the hot tier stay local.
    pub object_storage: Option<crate::storage::object::ObjectStorageOptions>,
    /// How long each signal is kept (see `retention`). Default: for ever.
    pub retention: Retention,
    /// How often retention runs in the background. Default 1 min.
    pub retention_interval: Duration,
    /// Below this much free space ingest is refused. Default: 5% of the
    /// filesystem or 1 GiB, whichever is smaller.
    pub min_free_disk: MinFreeDisk,
    /// What else happens below `min_free_disk`. Default: only refuse.
    pub on_disk_full: OnDiskFull,
    /// The wall clock retention measures age by.
    pub clock: Clock,
    /// How often a read-only engine takes the bucket's listing again.
    /// Default 10 s.
    pub refresh_interval: Duration,
}

impl EngineOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        EngineOptions {
            data_dir: data_dir.into(),
            durability: Durability::Fsync,
            hot_max_bytes: 128 << 20,
            hot_max_age: Duration::from_secs(60),
            max_frozen: 2,
            compaction: CompactionOptions::default(),
            writer: WriterOptions::default(),
            limits: Limits::default(),
            wal_recovery: RecoveryMode::Strict,
            payloads: PayloadPolicy::default(),
            background: true,
            page_cache_bytes: 128 << 20,
            full_text: true,
            pricing: Arc::new(skein_model::genai::Pricing::built_in()),
            object_storage: None,
            retention: Retention::default(),
            retention_interval: Duration::from_secs(60),
            min_free_disk: MinFreeDisk::Auto,
            on_disk_full: OnDiskFull::Refuse,
            clock: Clock::system(),
            refresh_interval: Duration::from_secs(10),
        }
    }

    /// Reads a bucket another skein writes: no ingest, no background
    /// writes, the listing taken again every `refresh_interval`.
    pub fn read_only(&self) -> bool {
        self.object_storage.as_ref().is_some_and(|o| o.read_only)
    }
}

/// The outcome of one ingest call.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct IngestReport {
    pub accepted: u64,
    pub rejected: u64,
    /// Messages of the first rejections.
    pub errors: Vec<String>,
}

/// A trace: its spans in start-time order.
#[derive(Debug)]
pub struct TraceResult {
    pub spans: Vec<Arc<Span>>,
    pub explain: Explain,
}

/// Counters and sizes, for `/api/v1/stats` and `/metrics`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct EngineStats {
    pub spans: u64,
    pub logs: u64,
    pub metric_points: u64,
    pub hot_records: u64,
    pub hot_bytes: u64,
    pub frozen_tiers: u64,
    pub parts: u64,
    pub parts_by_signal: std::collections::BTreeMap<String, u64>,
    pub part_bytes: u64,
    pub wal_bytes: u64,
    pub wal_segments: u64,
    pub wal_fsyncs: u64,
    pub wal_fsync_seconds: f64,
    pub wal_appends: u64,
    /// Resident index memory: the parts' sidecars and the hot tiers' text
    /// indexes (their other postings count in `hot_bytes`).
    pub index_memory_bytes: u64,
    /// Full-text indexes of parts, on disk (mapped, read in place).
    pub text_index_bytes: u64,
    /// Heap memory of full-text indexes: the hot tiers' and the parts'
    /// resident structures (row sets, links), not their mapped files.
    pub text_index_memory_bytes: u64,
    pub page_cache: PageCacheStats,
    /// Payloads stored (in packs and in the hot tier).
    #[serde(flatten)]
    pub payloads: PayloadStats,
    pub flushes: u64,
    pub compactions: u64,
    pub compaction_seconds: f64,
    /// Compactions whose text index was merged from their inputs'.
    pub text_index_merges: u64,
    /// Compactions whose text index was built from their rows (an input
    /// had none).
    pub text_index_rebuilds: u64,
    /// Parts given their full-text index after they were written (a flush
    /// writes none), and the seconds those builds took.
    pub text_index_builds: u64,
    pub text_index_build_seconds: f64,
    /// Parts without a full-text index yet: text queries scan them. Their
    /// indexes are built once flushing has caught up with ingest.
    pub text_index_backlog_parts: u64,
    /// A merge is running now.
    pub compacting: bool,
    pub next_seq: u64,
    pub durability: String,
    /// Serves a bucket another skein writes (`--read-only`).
    pub read_only: bool,
    /// Faults in force (see [`Engine::faults`]); empty when healthy.
    pub faults: Vec<Fault>,
    /// Failures ever, by fault kind (`wal`, `flush`, `compaction`,
    /// `payload`, `retention`, `gc`, `disk`).
    pub failures: std::collections::BTreeMap<String, u64>,
    /// Uploads, requests and cache, when parts live on object storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_storage: Option<crate::storage::object::ObjectStorageStats>,
    /// Retention, eviction and free space.
    pub retention: RetentionStats,
}

pub(crate) struct Inner {
    /// This engine, for tasks that outlive a borrow of it (payload readers).
    me: std::sync::Weak<Inner>,
    opts: EngineOptions,
    store: Arc<dyn PartStore>,
    /// The same store, for holding removals back during a backup.
    holdable: Arc<crate::storage::hold::HoldableStore>,
    payloads: PayloadStore,
    /// Held for reading by ingest from deciding which payloads are known to
    /// inserting its records; for writing by payload garbage collection
    /// (see `gc`).
    payload_gate: RwLock<()>,
    /// What dropped parts held, so their records are never replayed.
    replay_floor: Mutex<replay_floor::ReplayFloor>,
    wal: Arc<Wal>,
    _lock: DirLock,
    gate: RwLock<()>,
    state: RwLock<State>,
    next_part_id: AtomicU64,
    flush_lock: Mutex<()>,
    /// One freeze at a time, so concurrent writers that all find the tier
    /// full do not each build a next tier.
    freeze_lock: Mutex<()>,
    compact_lock: Mutex<()>,
    /// One text-index build at a time (the background thread's, or
    /// [`Engine::index_text`]'s).
    text_index_lock: Mutex<()>,
    /// The parts a merge is rewriting (see [`compact::MergingParts`]).
    merging: compact::MergingParts,
    stop: Arc<AtomicBool>,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    flushed_cv: Condvar,
    flushed_mx: Mutex<()>,
    last_ingest: Mutex<Instant>,
    flushes: AtomicU64,
    compactions: AtomicU64,
    text_index_merges: AtomicU64,
    text_index_rebuilds: AtomicU64,
    text_index_builds: AtomicU64,
    text_index_build_nanos: AtomicU64,
    /// Parts whose full-text index cannot be built, and why.
    unindexable: Mutex<text_backlog::Unindexable>,
    compaction_nanos: AtomicU64,
    faults: Arc<Faults>,
    pub(crate) shadow_cache: crate::query::shadow::ShadowCache,
    page_cache: Arc<PageCache>,
    compacting: AtomicBool,
    retention_counters: retention::RetentionCounters,
    /// Wakes the retention thread early (the disk filled, under `evict`).
    retention_wake: Mutex<bool>,
    retention_cv: Condvar,
    /// Free bytes when a WAL write last ran out of space (0: none since
    /// the last write that fit): the `disk` fault lasts until there is
    /// more than this.
    disk_full_at: AtomicU64,
}

/// An open Skein data directory.
pub struct Engine {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Opens (or creates) a data directory and recovers it to exactly the
    /// acknowledged state.
    pub fn open(opts: EngineOptions) -> Result<Engine> {
        let inner = recovery::open(opts)?;
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            ..inner
        });
        let engine = Engine {
            inner,
            threads: Mutex::new(Vec::new()),
        };
        // A pending erasure (a crash cut it short) is finished before the
        // engine answers anything: no query may see what it erases. A
        // read-only reader leaves that to the writer, which owns the files.
        if !engine.inner.opts.read_only() {
            engine.inner.finish_pending_erasures()?;
        }
        if engine.inner.opts.background {
            engine.spawn_background()?;
        }
        Ok(engine)
    }

    pub fn data_dir(&self) -> &Path {
        &self.inner.opts.data_dir
    }

    pub fn options(&self) -> &EngineOptions {
        &self.inner.opts
    }

    fn spawn_background(&self) -> Result<()> {
        let mut threads = self.threads.lock();
        if self.inner.opts.read_only() {
            // Nothing to flush, merge or expire: the writer does that.
            let inner = self.inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("skein-refresh".into())
                    .spawn(move || inner.refresh_loop())
                    .map_err(|e| Error::io("spawn refresh thread", e))?,
            );
            return Ok(());
        }
        if let Some(t) = self.inner.wal.spawn_ticker(self.inner.stop.clone()) {
            threads.push(t);
        }
        // Each in the idle scheduling class (see `lower_thread_priority`).
        let background = |name: &str, run: fn(&Inner)| -> Result<JoinHandle<()>> {
            let inner = self.inner.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    lower_thread_priority();
                    run(&inner)
                })
                .map_err(|e| Error::io(format!("spawn thread {name}"), e))
        };
        threads.push(background("skein-flush", Inner::flush_loop)?);
        threads.push(background("skein-compact", Inner::compact_loop)?);
        if self.inner.opts.full_text {
            threads.push(background("skein-text-index", Inner::text_index_loop)?);
        }
        if !self.inner.opts.retention.is_forever() || self.inner.opts.on_disk_full == OnDiskFull::Evict {
            threads.push(background("skein-retention", Inner::retention_loop)?);
        }
        Ok(())
    }

    /// Spans; their `gen_ai.evaluation.result` events are also stored as
    /// scores (log records), acknowledged with the spans.
    pub fn ingest_spans(&self, spans: Vec<Span>) -> Result<IngestReport> {
        let scores = skein_model::genai::score::Score::records_of_span_events(&spans);
        let report = self.inner.ingest(spans)?;
        if !scores.is_empty() {
            self.inner.ingest(scores)?;
        }
        Ok(report)
    }

    pub fn ingest_logs(&self, logs: Vec<LogRecord>) -> Result<IngestReport> {
        self.inner.ingest(logs)
    }

    pub fn ingest_metrics(&self, points: Vec<MetricPoint>) -> Result<IngestReport> {
        self.inner.ingest(points)
    }

    fn state(&self) -> State {
        self.inner.state.read().clone()
    }

    /// `w` narrowed to the records of `s` that are not expired: every
    /// query the engine answers goes through here (or, taking no window,
    /// filters by [`floor`](Inner::floor)), and every query path re-checks
    /// each record against its window, so an expired record is never
    /// answered, whether or not a retention round removed it yet.
    fn live(&self, s: Signal, w: Window) -> Window {
        // A window wholly past the line is empty, never reversed.
        w.starting_by(self.inner.floor(s).min(w.end))
    }

    /// Every span of a trace, across the hot tier and parts.
    pub fn get_trace(&self, trace_id: TraceId) -> Result<TraceResult> {
        let sources = self.state().sources::<Span>();
        let mut explain = Explain::new(Signal::Spans);
        let mut spans = search::trace_records(&sources, trace_id.as_u128(), &mut explain)?;
        let floor = self.inner.floor(Signal::Spans);
        spans.retain(|s| s.start_time_unix_nano >= floor);
        spans.sort_by_key(|s| (s.start_time_unix_nano, s.span_id));
        Ok(TraceResult { spans, explain })
    }

    /// An upper bound on the spans [`get_trace`](Engine::get_trace) would
    /// decode, read off the trace indexes in microseconds: a caller can
    /// tell a small lookup, fine to run on an I/O thread, from a big one.
    pub fn trace_rows_upper_bound(&self, trace_id: TraceId) -> usize {
        search::trace_rows(&self.state().sources::<Span>(), trace_id.as_u128())
    }

    /// Log records of a trace, oldest first.
    pub fn trace_logs(&self, trace_id: TraceId) -> Result<Vec<Arc<LogRecord>>> {
        let sources = self.state().sources::<LogRecord>();
        let mut explain = Explain::new(Signal::Logs);
        let mut logs = search::trace_records(&sources, trace_id.as_u128(), &mut explain)?;
        let floor = self.inner.floor(Signal::Logs);
        logs.retain(|l| crate::record::Record::time(&**l) >= floor);
        logs.sort_by_key(|l| l.effective_time());
        Ok(logs)
    }

    /// A payload's bytes, checked against its reference; `None` if no
    /// payload has that reference.
    pub fn payload(&self, id: &PayloadRef) -> Result<Option<Vec<u8>>> {
        self.inner.payload(id)
    }

    /// `record` with its payload references replaced by the payloads.
    pub fn inline_payloads<R: crate::record::Record>(&self, record: &R) -> Result<R> {
        let mut r = record.clone();
        payload::extract::inline(&mut r, &|id| self.payload(id))?;
        Ok(r)
    }

    pub fn search_spans(&self, q: &SpanQuery) -> Result<SearchResult<Span>> {
        let state = self.state();
        let window = self.live(Signal::Spans, q.window);
        let payload_text = match (&q.text, &q.payload_text) {
            (Some(_), None) => Some(self.payload_reader(&state)),
            _ => None,
        };
        let q = SpanQuery {
            window,
            payload_text: payload_text.or_else(|| q.payload_text.clone()),
            ..q.clone()
        };
        search::search(&state.sources::<Span>(), &q)
    }

    pub fn search_logs(&self, q: &LogQuery) -> Result<SearchResult<LogRecord>> {
        let state = self.state();
        let q = self.prepared_log_query(&state, q);
        search::search(&state.sources::<LogRecord>(), &q)
    }

    /// Calls `f` with every log matching `q` (its limit and cursor aside),
    /// in no particular order (see [`search::visit_matches`]).
    pub fn visit_logs(&self, q: &LogQuery, f: &mut dyn FnMut(&LogRecord)) -> Result<Explain> {
        let state = self.state();
        let q = self.prepared_log_query(&state, q);
        search::visit_matches(&state.sources::<LogRecord>(), &q, f)
    }

    /// `q` as the engine runs it: within retention's line, and with a
    /// payload reader when it has text predicates (a value stored as a
    /// payload is searched in its own text).
    fn prepared_log_query(&self, state: &State, q: &LogQuery) -> LogQuery {
        let window = self.live(Signal::Logs, q.window);
        let wants_text = q.body_contains.is_some() || q.text.is_some();
        let payload_text = match (wants_text, &q.payload_text) {
            (true, None) => Some(self.payload_reader(state)),
            _ => None,
        };
        LogQuery {
            window,
            payload_text: payload_text.or_else(|| q.payload_text.clone()),
            ..q.clone()
        }
    }

    /// The fragments of `record` that match `query`, with the matched
    /// terms marked (payloads read in full).
    pub fn text_highlights<R: TextRecord>(&self, query: &TextQuery, record: &R) -> Vec<Highlight> {
        let read = self.payload_reader(&self.state());
        query.highlights(&crate::text::borrowed(&record.text_doc(Some(&read))))
    }

    /// Reads payloads for a query's predicates. It is called with a hot
    /// table's lock held, so it must not take `state` (see the lock order
    /// above): it holds the tiers of `state` and takes only their payload
    /// locks and the pack index.
    fn payload_reader(&self, state: &State) -> PayloadText {
        self.inner.payload_text(state.tiers().cloned().collect())
    }

    pub fn search_metrics(&self, q: &MetricQuery) -> Result<SearchResult<MetricPoint>> {
        let q = MetricQuery {
            window: self.live(Signal::Metrics, q.window),
            ..q.clone()
        };
        search::search(&self.state().sources::<MetricPoint>(), &q)
    }

    pub fn services(&self, w: Window) -> Result<(Vec<ServiceSummary>, Explain)> {
        let w = self.live(Signal::Spans, w);
        let mut ex = Explain::new(Signal::Spans);
        let r = aggregate::services(&self.state().sources::<Span>(), w, &self.inner.shadow_cache, &mut ex)?;
        Ok((r, ex))
    }

    pub fn operations(&self, service: Option<&str>, w: Window) -> Result<(Vec<OperationSummary>, Explain)> {
        let w = self.live(Signal::Spans, w);
        let mut ex = Explain::new(Signal::Spans);
        let r = aggregate::operations(
            &self.state().sources::<Span>(),
            w,
            service,
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        Ok((r, ex))
    }

    pub fn summary(&self, w: Window, service: Option<&str>) -> Result<(Summary, Explain)> {
        let st = self.state();
        let mut ex = Explain::new(Signal::Spans);
        let r = aggregate::summary(
            &st.sources::<Span>(),
            &st.sources::<LogRecord>(),
            &st.sources::<MetricPoint>(),
            w,
            Signal::ALL.map(|s| self.inner.floor(s)),
            service,
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        Ok((r, ex))
    }

    /// Change detection, cause and evidence over a look-back (see
    /// [`diagnose`]).
    pub fn diagnose(&self, req: &DiagnoseRequest) -> Result<(Diagnosis, Explain)> {
        let st = self.state();
        let mut ex = Explain::new(Signal::Spans);
        // One window for spans and logs: from the later of their floors,
        // rounded up to a whole minute, since the change search counts
        // whole minutes (per-minute statistics).
        let floor = self.inner.floor(Signal::Spans).max(self.inner.floor(Signal::Logs));
        let minute = 60_000_000_000;
        let floor = floor.div_ceil(minute).saturating_mul(minute);
        let req = DiagnoseRequest {
            window: req.window.starting_by(floor.min(req.window.end)),
            ..req.clone()
        };
        let r = diagnose::diagnose(
            &st.sources::<Span>(),
            &st.sources::<LogRecord>(),
            &req,
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        Ok((r, ex))
    }

    /// LLM calls in `w`: tokens, cost and latency by `group_by`.
    /// With `include_scores`, each group carries the mean of its traces'
    /// numeric scores per score name.
    pub fn llm_usage(
        &self,
        w: Window,
        group_by: llm::UsageGroupBy,
        include_scores: bool,
    ) -> Result<(llm::Usage, Explain)> {
        let scores = if include_scores {
            Some(self.scores(None, None, None, Window::ALL, usize::MAX)?)
        } else {
            None
        };
        let w = self.live(Signal::Spans, w);
        let mut ex = Explain::new(Signal::Spans);
        let r = llm::usage(
            &self.state().sources::<Span>(),
            w,
            group_by,
            &self.inner.opts.pricing,
            scores.as_deref(),
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        Ok((r, ex))
    }

    /// Tool executions in `w` by tool.
    pub fn llm_tools(&self, w: Window) -> Result<(Vec<llm::ToolSummary>, Explain)> {
        let w = self.live(Signal::Spans, w);
        let mut ex = Explain::new(Signal::Spans);
        let r = llm::tools(&self.state().sources::<Span>(), w, &self.inner.shadow_cache, &mut ex)?;
        Ok((r, ex))
    }

    /// Sessions active in `w`, most recent first.
    pub fn sessions(&self, w: Window, limit: usize, cursor: Option<&str>) -> Result<(llm::SessionPage, Explain)> {
        let after = match cursor {
            Some(c) => Some(
                llm::decode_cursor(c).ok_or_else(|| Error::Invalid(format!("cursor {c:?} is not a session cursor")))?,
            ),
            None => None,
        };
        let w = self.live(Signal::Spans, w);
        let mut ex = Explain::new(Signal::Spans);
        let r = llm::sessions(
            &self.state().sources::<Span>(),
            w,
            limit,
            after,
            &self.inner.opts.pricing,
            &self.inner.shadow_cache,
            &mut ex,
        )?;
        Ok((r, ex))
    }

    /// One session: its summary, traces, and each model and tool call in
    /// time order; `None` if no span in `w` carries the id.
    pub fn session(&self, id: &str, w: Window) -> Result<Option<llm::SessionDetail>> {
        let w = self.live(Signal::Spans, w);
        let mut ex = Explain::new(Signal::Spans);
        llm::session(
            &self.state().sources::<Span>(),
            id,
            w,
            &self.inner.opts.pricing,
            &mut ex,
        )
    }

    /// Scores (`gen_ai.evaluation.result` events: posted, sent as log
    /// events, or inside spans, stored as records at ingest), oldest first,
    /// at most `limit`.
    pub fn scores(
        &self,
        trace_id: Option<TraceId>,
        session_id: Option<&str>,
        name: Option<&str>,
        window: Window,
        limit: usize,
    ) -> Result<Vec<skein_model::genai::score::Score>> {
        use skein_model::genai::score::{NAME_KEY, SESSION_KEY, Score};
        let mut attributes = vec![crate::query::AttrFilter {
            scope: crate::AttrScope::Record,
            key: NAME_KEY.into(),
            predicate: crate::query::AttrPredicate::Exists,
        }];
        if let Some(n) = name {
            attributes.push(crate::query::AttrFilter::eq(crate::AttrScope::Record, NAME_KEY, n));
        }
        if let Some(s) = session_id {
            attributes.push(crate::query::AttrFilter::eq(crate::AttrScope::Record, SESSION_KEY, s));
        }
        let mut q = LogQuery {
            trace_id,
            attributes,
            window,
            limit: limit.clamp(1, 1000),
            ..Default::default()
        };
        let mut out = Vec::new();
        'pages: loop {
            let r = self.search_logs(&q)?;
            for l in &r.records {
                if let Some(s) = Score::from_log(l) {
                    out.push(s);
                    if out.len() >= limit {
                        break 'pages;
                    }
                }
            }
            match r.next_cursor {
                Some(c) => q.cursor = Some(c),
                None => break,
            }
        }
        out.sort_by_key(|s| s.time_unix_nano);
        Ok(out)
    }

    /// The price table costs are computed with.
    pub fn pricing(&self) -> &skein_model::genai::Pricing {
        &self.inner.opts.pricing
    }

    /// Freezes the hot tier and writes it to parts, synchronously. A
    /// failure is a flush fault until a flush succeeds.
    pub fn flush(&self) -> Result<()> {
        self.inner.tracked(FaultKind::Flush, || {
            self.inner.freeze(true)?;
            self.inner.flush_frozen()
        })
    }

    /// Forgets payloads no record refers to and rewrites packs that are
    /// mostly garbage, synchronously (the compaction thread does this
    /// after merges). A failure is a compaction fault.
    pub fn collect_payload_garbage(&self) -> Result<payload::GcReport> {
        self.inner
            .tracked(FaultKind::Gc, || self.inner.collect_payload_garbage())
    }

    /// Runs a retention round now, synchronously (the retention thread
    /// runs one every `retention_interval`): drops and rewrites expired
    /// parts, kills expired hot rows, evicts under `OnDiskFull::Evict`,
    /// and collects the payloads left unreferenced. A failure is a
    /// retention fault until a round succeeds.
    pub fn enforce_retention(&self) -> Result<RetentionReport> {
        self.inner
            .tracked(FaultKind::Retention, || self.inner.enforce_retention())
    }

    /// Erases every record matching `criteria` from every file (see
    /// [`erasure`]): accepted durably first, then run; returns the
    /// completed receipt.
    pub fn erase(&self, criteria: erasure::ErasureCriteria) -> Result<erasure::ErasureReceipt> {
        if self.inner.opts.read_only() {
            return Err(Error::ReadOnly);
        }
        self.inner.request_erasure(criteria)
    }

    /// The receipt of erasure `id`, if there is one.
    pub fn erasure(&self, id: &str) -> Result<Option<erasure::ErasureReceipt>> {
        erasure::read_receipt(&self.inner.opts.data_dir, id)
    }

    /// Merges parts until no more merges apply, synchronously. A failure is
    /// a compaction fault until a compaction succeeds.
    pub fn compact(&self) -> Result<usize> {
        self.inner.tracked(FaultKind::Compaction, || self.inner.compact(true))
    }

    /// Builds the full-text index of every part that has none yet (a
    /// flush writes its part without one), synchronously, whatever ingest
    /// is doing; a background thread does this once flushing has caught
    /// up. Returns how many it built.
    pub fn index_text(&self) -> Result<usize> {
        self.inner
            .tracked(FaultKind::TextIndex, || self.inner.index_text_backlog(false))
    }

    pub fn stats(&self) -> EngineStats {
        self.inner.stats()
    }

    /// Backs the data up to an empty directory or bucket prefix while
    /// ingest goes on: every record acknowledged before the call is in it
    /// (see the `backup` module for the format and its consistency).
    ///
    /// Removals are held back first, so nothing listed below can go before
    /// it is copied; then the hot tier is flushed, so the parts cover every
    /// sequence number assigned before the call (a freeze waits for every
    /// ingest that holds one); then the parts and packs are listed and
    /// copied, the manifest last.
    pub fn backup(&self, to: &crate::backup::Location) -> Result<crate::backup::BackupReport> {
        self.backup_with(to, || {})
    }

    /// [`Engine::backup`], running `listed` between listing the files and
    /// copying them (tests merge there, to prove the hold keeps the files).
    #[doc(hidden)]
    pub fn backup_with(
        &self,
        to: &crate::backup::Location,
        listed: impl FnOnce(),
    ) -> Result<crate::backup::BackupReport> {
        let created_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let _hold = self.inner.holdable.hold();
        let covers_seq = self.inner.wal.next_seq();
        self.flush()?;
        let mut names = Vec::new();
        for prefix in ["spans", "logs", "metrics", crate::payload::PayloadStore::PREFIX] {
            names.extend(self.inner.store.list(prefix)?);
        }
        listed();
        crate::backup::write(
            &*self.inner.store,
            &names,
            to,
            self.data_dir(),
            covers_seq,
            created_unix_ms,
        )
    }

    /// Takes the bucket's listing again now (a read-only engine does every
    /// `refresh_interval`): opens new parts and packs, lets go of those
    /// the writer removed. A no-op on a store this engine writes.
    pub fn refresh(&self) -> Result<refresh::RefreshReport> {
        if !self.inner.opts.read_only() {
            return Ok(refresh::RefreshReport::default());
        }
        self.inner.refresh()
    }

    /// Waits until every part written is in its final place (on object
    /// storage: uploaded), or `timeout` passes; true when it is.
    pub fn wait_uploaded(&self, timeout: Duration) -> bool {
        self.inner.store.wait_uploaded(timeout)
    }

    /// The faults in force: what needs an operator (a WAL that refuses
    /// writes, flushes or merges that keep failing). Empty when healthy.
    pub fn faults(&self) -> Vec<Fault> {
        self.inner.faults()
    }

    /// Stops background work, flushes the hot tier to parts and syncs.
    /// Later ingests fail with `Error::Closed`. Idempotent.
    pub fn close(&self) -> Result<()> {
        self.shutdown(true)
    }

    fn shutdown(&self, flush: bool) -> Result<()> {
        if self.inner.stop.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        {
            let mut w = self.inner.wake.lock();
            *w = true;
            self.inner.wake_cv.notify_all();
        }
        // The retention thread sleeps for a whole interval otherwise.
        self.inner.wake_retention();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        self.inner.wal.sync()?;
        if flush {
            self.inner.freeze(true)?;
            self.inner.flush_frozen()?;
        }
        Ok(())
    }
}

/// Decompressed payload frames one reader of payload text keeps. An index
/// builder reads payloads in the order of their places, a frame at a time,
/// and needs one; a query reads its candidates' payloads in row order, and
/// past this much decompresses some frames again, which is slower, not
/// wrong.
const PAYLOAD_TEXT_FRAME_CACHE_BYTES: usize = 64 << 20;

/// How much nicer than the process background threads are where the idle
/// scheduling class is unavailable (flush, compaction, and the part
/// conversion threads they start, which inherit it).
const BACKGROUND_NICE: i32 = 5;

/// Moves the calling thread to Linux's idle scheduling class (`SCHED_IDLE`),
/// falling back to a higher nice value. Threads it starts inherit it.
///
/// A request thread that wakes then takes the CPU from a flush or a merge at
/// once. At nice 5 a background thread kept its CPU until the next
/// scheduler tick (4 ms here), which showed as 4 ms steps in the phases of
/// slow requests. Over five interleaved pairs of e2e runs, the median
/// half-rate request p99 fell from 19.2 ms to 15.8 ms.
///
/// Background work still gets every idle cycle, and ingest cannot outrun it
/// for long: it waits once `max_frozen` tiers are pending, which leaves the
/// CPU to the flush. A background thread holding a lock a request needs
/// (the gate during a freeze, the state for a moment) is not starved by
/// that request, which sleeps on the lock. On a machine kept busy by other
/// programs, Skein's flushes and merges yield to them.
fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: changes the scheduling of this thread only (Linux threads
    // have their own policy and nice value); `param` outlives the call.
    unsafe {
        let tid = libc::gettid();
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) != 0 {
            let id = tid as libc::id_t;
            let nice = libc::getpriority(libc::PRIO_PROCESS, id);
            libc::setpriority(libc::PRIO_PROCESS, id, (nice + BACKGROUND_NICE).min(19));
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown(false) {
            tracing::error!("engine shutdown: {e}");
        }
    }
}

/// A flush's payload pack, written on its own thread: [`wait`](Self::wait)
/// returns once it is durable (the first call joins the thread; later
/// calls repeat its outcome).
struct PackWritten<'scope> {
    outcome: Mutex<PackOutcome<'scope>>,
}

enum PackOutcome<'scope> {
    Writing(std::thread::ScopedJoinHandle<'scope, Result<usize>>),
    Written,
    Failed(String),
}

impl<'scope> PackWritten<'scope> {
    fn new(writing: std::thread::ScopedJoinHandle<'scope, Result<usize>>) -> Self {
        PackWritten {
            outcome: Mutex::new(PackOutcome::Writing(writing)),
        }
    }

    fn wait(&self) -> Result<()> {
        let mut outcome = self.outcome.lock();
        if let PackOutcome::Writing(_) = &*outcome
            && let PackOutcome::Writing(writing) = std::mem::replace(&mut *outcome, PackOutcome::Written)
        {
            match writing.join() {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    *outcome = PackOutcome::Failed(e.to_string());
                    return Err(e);
                }
                Err(_) => *outcome = PackOutcome::Failed("the payload pack writer panicked".into()),
            }
        }
        match &*outcome {
            PackOutcome::Failed(why) => Err(Error::Other(why.clone())),
            _ => Ok(()),
        }
    }
}

impl Inner {
    fn ingest<R: Stored>(&self, mut accepted: Vec<R>) -> Result<IngestReport> {
        if self.opts.read_only() {
            return Err(Error::ReadOnly);
        }
        if self.stop.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        let mut report = IngestReport::default();
        // Expired on arrival: refused, so the log and the hot tier never
        // hold what no query may answer.
        let floor = self.floor(R::SIGNAL);
        // Filtered in place: moving every record into a new vector copied
        // each one once more on the way to the hot tier.
        let mut i = 0;
        accepted.retain_mut(|r| {
            let index = i;
            i += 1;
            crate::validate::Normalize::normalize(r);
            let checked = match r.validate(&self.opts.limits) {
                Err(e) => Err(e.to_string()),
                Ok(()) if r.time() < floor => Err(format!(
                    "its time {} is older than the retention of {} ({})",
                    r.time(),
                    R::SIGNAL.as_str(),
                    self.opts.retention
                )),
                Ok(()) => Ok(()),
            };
            let Err(e) = checked else {
                return true;
            };
            report.rejected += 1;
            if report.errors.len() < skein_model::otlp::MAX_ERROR_MESSAGES {
                report.errors.push(format!(
                    "{} {index}: {e}",
                    &R::SIGNAL.as_str()[..R::SIGNAL.as_str().len() - 1]
                ));
            }
            false
        });
        if accepted.is_empty() {
            return Ok(report);
        }
        // Refused before anything is written when the disk is nearly full.
        self.check_disk()?;
        self.wait_for_room()?;
        let n = accepted.len();
        let _payloads_stay = self.payload_gate.read();
        // Payloads stored already (in a pack or a hot tier) are referenced;
        // the rest travel in the WAL with the batch.
        let blobs = payload::extract::extract(&mut accepted, &self.opts.payloads, &|id| self.payload_known(id))?;
        let blob_body = (!blobs.is_empty())
            .then(|| payload::encode_frames(&blobs))
            .transpose()?;
        {
            // The gate is taken after encoding (which is most of the work)
            // and held until the records are in the tier the WAL
            // segment belongs to.
            let (seq, _gate) = codec::with_encoded_batch(&accepted, |body| {
                let gate = self.gate.read();
                let payloads = blob_body.as_deref().map(|b| (blobs.len() as u32, b));
                Ok((
                    self.wal.append_with_payloads(R::SIGNAL, n as u32, body, payloads)?,
                    gate,
                ))
            })
            .inspect_err(|e| match e {
                Error::WalFailed { reason } => self.faults.fail(FaultKind::Wal, reason.clone()),
                // Undone by the log; over once there is more space, or
                // the next write fits.
                Error::DiskFull { reason } => {
                    let free = retention::disk_space(&self.opts.data_dir).map_or(0, |(free, _)| free);
                    self.disk_full_at.store(free.max(1), Ordering::Relaxed);
                    self.faults.fail(FaultKind::Disk, reason.clone());
                }
                _ => {}
            })?;
            if self.disk_full_at.load(Ordering::Relaxed) != 0 {
                self.disk_full_at.store(0, Ordering::Relaxed);
                self.faults.clear(FaultKind::Disk);
            }
            let active = self.state.read().active.clone();
            if !blobs.is_empty() {
                let mut hot = active.payloads.write();
                blobs.into_iter().for_each(|b| hot.insert(b));
            }
            R::table(&active).write().insert(accepted, seq);
        }
        report.accepted = n as u64;
        *self.last_ingest.lock() = Instant::now();
        if self.state.read().active.bytes() >= self.opts.hot_max_bytes {
            if self.opts.background {
                self.freeze(false)?;
                self.wake();
            } else {
                self.freeze(false)?;
                self.flush_frozen()?;
            }
        }
        Ok(report)
    }

    fn payload(&self, id: &PayloadRef) -> Result<Option<Vec<u8>>> {
        let tiers: Vec<Arc<Tier>> = self.state.read().tiers().cloned().collect();
        self.payload_in(&tiers, id, &Blob::decompress)
    }

    /// A payload from `tiers` (a snapshot's hot tiers), read with `hot`,
    /// or from the packs, checked against its reference. Takes only leaf
    /// locks (a tier's payload map, the pack index), never `state`.
    fn payload_in(
        &self,
        tiers: &[Arc<Tier>],
        id: &PayloadRef,
        hot: &dyn Fn(&Blob, &str) -> Result<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let read = match tiers.iter().find_map(|t| t.payloads.read().blobs.get(id).cloned()) {
            Some(blob) => hot(&blob, "the hot tier").map(Some),
            None => self.payloads.read(id),
        };
        self.note_payload_damage(read)
    }

    /// Reads payload text from `tiers` (a snapshot's hot tiers) and the
    /// packs; see [`payload_in`](Self::payload_in) for the locks it takes.
    fn payload_text(&self, tiers: Vec<Arc<Tier>>) -> PayloadText {
        let me = self.me.clone();
        // Reads in the order of the places given below (an index builder
        // does) come a frame at a time; this holds the frames of reads in
        // any other order (a query's, in row order).
        let frames = FrameCache::new(PAYLOAD_TEXT_FRAME_CACHE_BYTES);
        let place_tiers = tiers.clone();
        let place_me = self.me.clone();
        PayloadText::new(move |id| {
            // Payloads still in a hot tier are trusted, as its pack writer
            // trusts them.
            let trusted = |b: &Blob, place: &str| frames.read_trusted(b, place);
            let bytes = me.upgrade()?.payload_in(&tiers, id, &trusted).ok()??;
            // Payloads are nearly always valid UTF-8: taking the buffer as
            // it is costs one validation pass (the lossy conversion walks
            // it character by character, and copies it).
            Some(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        })
        .with_places(move |id| {
            // Hot tiers first, as `payload_in` reads them.
            if let Some((frame, offset)) = place_tiers
                .iter()
                .find_map(|t| t.payloads.read().blobs.get(id).map(Blob::place))
            {
                return (0, frame, offset);
            }
            match place_me.upgrade().and_then(|me| me.payloads.place(id)) {
                Some((pack, offset)) => (1, pack, offset),
                None => (2, 0, 0),
            }
        })
    }

    /// A payload read that failed (damage, never a missing payload) makes
    /// the engine degraded until a restart.
    fn note_payload_damage<T>(&self, read: Result<T>) -> Result<T> {
        if let Err(e) = &read {
            self.faults.fail(FaultKind::Payload, e.to_string());
        }
        read
    }

    /// Whether a payload is stored already, in a pack or a hot tier.
    fn payload_known(&self, id: &PayloadRef) -> bool {
        self.payloads.contains(id)
            || self
                .state
                .read()
                .tiers()
                .any(|t| t.payloads.read().blobs.contains_key(id))
    }

    /// Bounds memory: while too many frozen tiers wait for flush, ingest
    /// waits; if flushes are failing, it refuses rather than wait for one
    /// that may never succeed.
    fn wait_for_room(&self) -> Result<()> {
        if !self.opts.background {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut g = self.flushed_mx.lock();
        while self.state.read().frozen.len() >= self.opts.max_frozen && Instant::now() < deadline {
            if let Some(f) = self.faults.get(FaultKind::Flush) {
                return Err(Error::Background {
                    kind: FaultKind::Flush,
                    reason: f.message,
                });
            }
            self.wake();
            self.flushed_cv.wait_for(&mut g, Duration::from_millis(50));
        }
        Ok(())
    }

    fn wake(&self) {
        let mut w = self.wake.lock();
        *w = true;
        self.wake_cv.notify_all();
    }

    /// Freezes the active tier if it is non-empty and (unless `force`) over
    /// its size or age threshold.
    fn freeze(&self, force: bool) -> Result<bool> {
        let due = |active: &Tier| {
            !active.is_empty()
                && (force
                    || active.bytes() >= self.opts.hot_max_bytes
                    || active.created.elapsed() >= self.opts.hot_max_age)
        };
        // A writer finding a freeze under way leaves the tier to it.
        let _one_at_a_time = if force {
            self.freeze_lock.lock()
        } else {
            let Some(g) = self.freeze_lock.try_lock() else {
                return Ok(false);
            };
            g
        };
        // Ingest waits while the gate is held: prepare the next tier (its
        // tables reserved like this one's, megabytes to fault in) and the
        // next WAL file before taking it.
        let current = self.state.read().active.clone();
        if !due(&current) {
            return Ok(false);
        }
        let next = Arc::new(Tier::sized_like(&current));
        self.wal.prepare_spare()?;
        let _gate = self.gate.write();
        let boundary = self.wal.rotate()?;
        let mut st = self.state.write();
        // Still the active tier: only a freeze replaces it, one at a time.
        st.frozen.push(Arc::new(Frozen {
            tier: current,
            boundary,
        }));
        st.active = next;
        Ok(true)
    }

    /// Writes every frozen tier to parts, oldest first.
    fn flush_frozen(&self) -> Result<()> {
        let _one_at_a_time = self.flush_lock.lock();
        loop {
            let Some(frozen) = self.state.read().frozen.first().cloned() else {
                return Ok(());
            };
            // The tier's payloads are durable in a pack before any part
            // refers to them and before its WAL segments go. The pack is
            // written beside the parts (it was a third of the flush
            // thread's time on the agent corpus), and each part waits for
            // it just before it is committed.
            let parts = std::thread::scope(|s| -> Result<_> {
                let pack = std::thread::Builder::new()
                    .name("skein-pack".into())
                    .spawn_scoped(s, || {
                        self.payloads.write_pack(frozen.tier.payloads.read().blobs.values())
                    })
                    .map_err(|e| Error::io("start the payload pack writer", e))?;
                let pack = PackWritten::new(pack);
                let parts = (|| -> Result<_> {
                    Ok([
                        self.write_tier_part::<Span>(&frozen, &pack)?,
                        self.write_tier_part::<LogRecord>(&frozen, &pack)?,
                        self.write_tier_part::<MetricPoint>(&frozen, &pack)?,
                    ])
                })();
                // Joined whatever the parts did: a scope whose thread
                // panicked unjoined would panic this one too.
                let packed = pack.wait();
                let parts = parts?;
                packed?;
                Ok(parts)
            })?;
            {
                let mut st = self.state.write();
                st.frozen.retain(|f| !Arc::ptr_eq(f, &frozen));
                for (i, p) in parts.into_iter().enumerate() {
                    if let Some(p) = p {
                        st.parts[i].push(Arc::new(p));
                    }
                }
            }
            self.flushes.fetch_add(1, Ordering::Relaxed);
            self.wal.remove_before(frozen.boundary)?;
            let _g = self.flushed_mx.lock();
            self.flushed_cv.notify_all();
        }
    }

    fn write_tier_part<R: Stored>(&self, frozen: &Frozen, pack: &PackWritten) -> Result<Option<crate::part::Part>> {
        let table = R::table(&frozen.tier).read();
        if table.is_empty() {
            return Ok(None);
        }
        // A frozen tier takes no more writes: its index is the part's.
        let (rows, index) = table.sorted_live_keyed();
        let meta = PartMeta {
            min_seq: table.min_seq(),
            max_seq: table.max_seq(),
            covers_seq: frozen.boundary.saturating_sub(1),
            ..PartMeta::new(R::SIGNAL, self.next_part_id.fetch_add(1, Ordering::SeqCst))
        };
        drop(table);
        let mut w = PartWriter::<R>::new(
            self.store.clone(),
            meta,
            &WriterOptions {
                zstd_level: self.opts.writer.flush_zstd_level,
                ..self.opts.writer.clone()
            },
        )?
        .with_index(index);
        // No full-text index: the text-index thread builds it once flushing
        // has caught up (see `text_backlog`).
        for (r, key) in rows {
            w.push_keyed(r, key)?;
        }
        Ok(Some(
            w.finish_after(|| pack.wait())?
                .with_page_cache(Some(self.page_cache.clone())),
        ))
    }

    /// Runs one round of a flush or compaction, keeping its fault up to
    /// date: a failure starts or extends it, a success ends it.
    fn tracked<T>(&self, kind: FaultKind, task: impl FnOnce() -> Result<T>) -> Result<T> {
        let result = task();
        match &result {
            Ok(_) => self.faults.clear(kind),
            Err(e) => {
                tracing::error!("{kind} failed: {e}");
                self.faults.fail(kind, e.to_string());
            }
        }
        result
    }

    fn faults(&self) -> Vec<Fault> {
        // A full disk heals by itself: look again, so the fault ends when
        // space returns even if no write comes to find out.
        if self.faults.get(FaultKind::Disk).is_some() && self.disk_recovered() {
            self.faults.clear(FaultKind::Disk);
        }
        let mut faults = self.faults.current();
        // The WAL can fail outside ingest (the interval-mode ticker, a
        // rotation): ask it too.
        if let Some(reason) = self.wal.failure()
            && !faults.iter().any(|f| f.kind == FaultKind::Wal)
        {
            self.faults.fail(FaultKind::Wal, reason);
            faults = self.faults.current();
        }
        faults
    }

    fn flush_loop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            {
                let mut w = self.wake.lock();
                if !*w {
                    self.wake_cv.wait_for(&mut w, Duration::from_millis(500));
                }
                *w = false;
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let round = self.tracked(FaultKind::Flush, || {
                self.freeze(false)?;
                self.flush_frozen()
            });
            if round.is_err() {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }

    fn compact_loop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(500));
            let idle = self.last_ingest.lock().elapsed() >= self.opts.compaction.idle_after;
            let round = self
                .tracked(FaultKind::Compaction, || self.compact(idle))
                .and_then(|merged| {
                    // Merges leave payloads unreferenced (as retention does);
                    // collect after them.
                    if merged > 0 {
                        self.tracked(FaultKind::Gc, || self.collect_payload_garbage())?;
                    }
                    Ok(())
                });
            // Objects whose removal grace is over (object storage only).
            self.holdable.remove_due();
            if round.is_err() {
                std::thread::sleep(Duration::from_secs(5));
            }
        }
    }

    fn stats(&self) -> EngineStats {
        let st = self.state.read().clone();
        let mut s = EngineStats {
            durability: self.wal.durability().to_string(),
            read_only: self.opts.read_only(),
            ..Default::default()
        };
        let hot = |t: &Tier| {
            let (a, b, c) = (
                t.spans.read().live_rows(),
                t.logs.read().live_rows(),
                t.metrics.read().live_rows(),
            );
            (a as u64, b as u64, c as u64, t.bytes() as u64)
        };
        let mut tiers = vec![st.active.clone()];
        tiers.extend(st.frozen.iter().map(|f| f.tier.clone()));
        for t in &tiers {
            let (a, b, c, bytes) = hot(t);
            s.spans += a;
            s.logs += b;
            s.metric_points += c;
            s.hot_records += a + b + c;
            s.hot_bytes += bytes;
            let text = (t.spans.read().text_memory_bytes() + t.logs.read().text_memory_bytes()) as u64;
            s.text_index_memory_bytes += text;
            s.index_memory_bytes += text + t.spans.read().llm_memory_bytes() as u64;
        }
        s.frozen_tiers = st.frozen.len() as u64;
        for sig in Signal::ALL {
            let parts = st.parts(sig);
            let rows: u64 = parts.iter().map(|p| p.meta.rows).sum();
            match sig {
                Signal::Spans => s.spans += rows,
                Signal::Logs => s.logs += rows,
                Signal::Metrics => s.metric_points += rows,
            }
            s.parts += parts.len() as u64;
            s.parts_by_signal.insert(sig.as_str().to_string(), parts.len() as u64);
            s.part_bytes += parts.iter().map(|p| p.file_bytes()).sum::<u64>();
            s.index_memory_bytes += parts.iter().map(|p| p.memory_bytes() as u64).sum::<u64>();
            s.text_index_bytes += parts.iter().map(|p| p.text_index_bytes()).sum::<u64>();
            s.text_index_memory_bytes += parts.iter().map(|p| p.text_index_memory_bytes()).sum::<u64>();
        }
        let w = self.wal.stats();
        s.wal_bytes = self.wal.disk_bytes();
        s.wal_segments = w.segments as u64;
        s.wal_fsyncs = w.fsyncs;
        s.wal_fsync_seconds = w.fsync_nanos as f64 / 1e9;
        s.wal_appends = w.appends;
        s.flushes = self.flushes.load(Ordering::Relaxed);
        s.compactions = self.compactions.load(Ordering::Relaxed);
        s.text_index_merges = self.text_index_merges.load(Ordering::Relaxed);
        s.text_index_rebuilds = self.text_index_rebuilds.load(Ordering::Relaxed);
        s.text_index_builds = self.text_index_builds.load(Ordering::Relaxed);
        s.text_index_build_seconds = self.text_index_build_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        s.text_index_backlog_parts = self.text_backlog_parts();
        s.compaction_seconds = self.compaction_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        s.compacting = self.compacting.load(Ordering::Relaxed);
        s.page_cache = self.page_cache.stats();
        s.next_seq = self.wal.next_seq();
        s.payloads = self.payloads.stats();
        for t in &tiers {
            for b in t.payloads.read().blobs.values() {
                if !self.payloads.contains(&b.id) {
                    s.payloads.payloads += 1;
                    s.payloads.payload_bytes += b.stored_bytes();
                    s.payloads.payload_logical_bytes += b.raw_len;
                }
            }
        }
        s.faults = self.faults();
        s.failures = self.faults.totals();
        s.object_storage = self.store.object_storage_stats();
        s.retention = self.retention_stats();
        s
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn own_policy() -> i32 {
        // SAFETY: reads this thread's scheduling policy.
        unsafe { libc::sched_getscheduler(libc::gettid()) }
    }

    #[test]
    fn background_threads_run_in_the_idle_class_and_pass_it_on() {
        let base = own_policy();
        assert_ne!(base, libc::SCHED_IDLE, "tests start in the normal class");
        let (own, child) = std::thread::spawn(|| {
            lower_thread_priority();
            let child = std::thread::spawn(own_policy).join().unwrap();
            (own_policy(), child)
        })
        .join()
        .unwrap();
        assert_eq!(own, libc::SCHED_IDLE);
        assert_eq!(child, libc::SCHED_IDLE, "threads it starts inherit it");
        assert_eq!(own_policy(), base, "only the calling thread changes");
    }
}
