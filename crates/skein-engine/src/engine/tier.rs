//! The engine's view of its data at one moment: the active hot tier, frozen
//! tiers being flushed, and the parts of each signal.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;
use skein_model::{LogRecord, MetricPoint, Span};

use crate::hash::FastMap;
use crate::hot::MemTable;
use crate::part::{Columnar, Part};
use crate::payload::{Blob, PayloadRef};
use crate::query::search::Source;
use crate::record::Signal;
use crate::validate::Validate;

/// One generation of hot data: a memtable per signal, and the payloads its
/// records brought that were not stored yet (written as a pack at flush).
pub struct Tier {
    pub spans: Arc<RwLock<MemTable<Span>>>,
    pub logs: Arc<RwLock<MemTable<LogRecord>>>,
    pub metrics: Arc<RwLock<MemTable<MetricPoint>>>,
    pub payloads: RwLock<HotPayloads>,
    pub created: Instant,
}

/// Payloads held by a hot tier.
#[derive(Default)]
pub struct HotPayloads {
    pub blobs: FastMap<PayloadRef, Blob>,
    /// Their compressed bytes (each its share of its frame's), counted in
    /// the tier's size.
    pub bytes: usize,
}

impl HotPayloads {
    pub fn insert(&mut self, blob: Blob) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.blobs.entry(blob.id) {
            self.bytes += blob.stored_bytes() as usize + 64;
            e.insert(blob);
        }
    }

    /// Drops the payloads not in `live`; returns how many.
    pub fn retain_live(&mut self, live: &crate::hash::FastSet<PayloadRef>) -> u64 {
        let before = self.blobs.len();
        let mut freed = 0;
        self.blobs.retain(|id, b| {
            let keep = live.contains(id);
            if !keep {
                freed += b.stored_bytes() as usize + 64;
            }
            keep
        });
        self.bytes -= freed.min(self.bytes);
        (before - self.blobs.len()) as u64
    }
}

impl Default for Tier {
    fn default() -> Self {
        Tier::new()
    }
}

impl Tier {
    pub fn new() -> Tier {
        Tier {
            spans: Default::default(),
            logs: Default::default(),
            metrics: Default::default(),
            payloads: Default::default(),
            created: Instant::now(),
        }
    }

    /// The tier with full-text indexes on its tables (the default) or not.
    pub fn with_text_indexes(self, on: bool) -> Tier {
        fn set<R: crate::record::Record>(t: &RwLock<MemTable<R>>, on: bool) {
            let mut table = t.write();
            *table = std::mem::take(&mut *table).with_text_index(on);
        }
        set(&self.spans, on && Signal::Spans.has_text());
        set(&self.logs, on && Signal::Logs.has_text());
        set(&self.metrics, on && Signal::Metrics.has_text());
        self
    }

    /// An empty tier with room for what `previous` holds.
    pub fn sized_like(previous: &Tier) -> Tier {
        Tier {
            spans: Arc::new(RwLock::new(MemTable::sized_like(&previous.spans.read()))),
            logs: Arc::new(RwLock::new(MemTable::sized_like(&previous.logs.read()))),
            metrics: Arc::new(RwLock::new(MemTable::sized_like(&previous.metrics.read()))),
            payloads: Default::default(),
            created: Instant::now(),
        }
    }

    pub fn bytes(&self) -> usize {
        self.spans.read().bytes() + self.logs.read().bytes() + self.metrics.read().bytes() + self.payloads.read().bytes
    }

    pub fn live_rows(&self) -> usize {
        self.spans.read().live_rows() + self.logs.read().live_rows() + self.metrics.read().live_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.live_rows() == 0
    }
}

/// A tier no longer written to, waiting to become parts. Every record with a
/// sequence number below `boundary` is in it or in an older tier or part.
pub struct Frozen {
    pub tier: Arc<Tier>,
    pub boundary: u64,
}

#[derive(Clone)]
pub struct State {
    pub active: Arc<Tier>,
    /// Oldest first.
    pub frozen: Vec<Arc<Frozen>>,
    /// Per signal, sorted by sequence numbers (oldest first).
    pub parts: [Vec<Arc<Part>>; 3],
}

/// A record type the engine stores: ties it to its memtable and parts.
pub trait Stored: Columnar + Validate + crate::validate::Normalize {
    fn table(t: &Tier) -> &Arc<RwLock<MemTable<Self>>>;
}

impl Stored for Span {
    fn table(t: &Tier) -> &Arc<RwLock<MemTable<Self>>> {
        &t.spans
    }
}
impl Stored for LogRecord {
    fn table(t: &Tier) -> &Arc<RwLock<MemTable<Self>>> {
        &t.logs
    }
}
impl Stored for MetricPoint {
    fn table(t: &Tier) -> &Arc<RwLock<MemTable<Self>>> {
        &t.metrics
    }
}

impl State {
    pub fn parts(&self, s: Signal) -> &Vec<Arc<Part>> {
        &self.parts[s.index()]
    }

    /// The hot tiers, newest first.
    pub fn tiers(&self) -> impl Iterator<Item = &Arc<Tier>> {
        std::iter::once(&self.active).chain(self.frozen.iter().rev().map(|f| &f.tier))
    }

    /// All sources of a signal, newest first.
    pub fn sources<R: Stored>(&self) -> Vec<Source<R>> {
        let mut v = Vec::with_capacity(2 + self.frozen.len() + self.parts(R::SIGNAL).len());
        v.push(Source::Mem(R::table(&self.active).clone()));
        for f in self.frozen.iter().rev() {
            v.push(Source::Mem(R::table(&f.tier).clone()));
        }
        for p in self.parts(R::SIGNAL).iter().rev() {
            v.push(Source::Part(p.clone()));
        }
        v
    }
}
