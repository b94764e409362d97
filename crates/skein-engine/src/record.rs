//! What the engine needs to know about each signal's records: identity,
//! time, trace, index terms and size, behind one trait.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use skein_model::{AnyValue, KeyValue, LogRecord, MetricDesc, MetricPoint, Resource, Scope, Span, TraceId};

use crate::hash::HashWriter;
use crate::stats::StatsBuilder;
use crate::terms::{self, AttrScope, IndexTerm};

/// The three telemetry signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Signal {
    Spans,
    Logs,
    Metrics,
}

impl Signal {
    pub const ALL: [Signal; 3] = [Signal::Spans, Signal::Logs, Signal::Metrics];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Spans => "spans",
            Signal::Logs => "logs",
            Signal::Metrics => "metrics",
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<Signal> {
        Signal::ALL.get(c as usize).copied()
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the signal's records hold text that full-text search
    /// reads (`text::TextRecord`): metric points hold none, so their
    /// tiers and parts get no text index.
    pub fn has_text(self) -> bool {
        !matches!(self, Signal::Metrics)
    }
}

/// A record's identity. Spans: (trace_id, span_id). Logs and metric points:
/// a 128-bit hash of their whole content, so an identical record stored
/// twice (a client retry, a WAL replay) is one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RecordKey {
    pub hi: u128,
    pub lo: u64,
}

pub trait Record: Clone + Send + Sync + Serialize + DeserializeOwned + std::fmt::Debug + 'static {
    const SIGNAL: Signal;

    /// The time records are ordered and windowed by, in ns since the epoch.
    fn time(&self) -> u64;
    fn key(&self) -> RecordKey;
    fn trace_id(&self) -> Option<TraceId>;
    fn resource(&self) -> &Arc<Resource>;
    fn scope(&self) -> &Arc<Scope>;
    fn metric_desc(&self) -> Option<&Arc<MetricDesc>> {
        None
    }
    /// Sets the shared parts after decoding a wire batch.
    fn attach(&mut self, resource: Arc<Resource>, scope: Arc<Scope>, metric: Option<Arc<MetricDesc>>);
    fn approx_size(&self) -> usize;
    /// Adds the record to pre-aggregated statistics.
    fn add_stats(&self, stats: &mut StatsBuilder);

    /// Terms of the record itself (not of its shared resource).
    fn own_terms(&self, out: &mut Vec<IndexTerm>);

    /// Calls `f` with each value of the record itself (not of its shared
    /// resource) that may hold a payload, with its attribute key (`None`
    /// for a log body).
    fn payload_slots(&mut self, _f: &mut dyn FnMut(Option<&str>, &mut AnyValue)) {}

    /// Calls `f` with each value [`payload_slots`](Record::payload_slots)
    /// visits, read-only.
    fn payload_values(&self, _f: &mut dyn FnMut(&AnyValue)) {}

    /// Terms for the postings index: the resource's, then the record's.
    fn index_terms(&self, out: &mut Vec<IndexTerm>) {
        resource_terms(self.resource(), out);
        self.own_terms(out);
    }

    fn service_name(&self) -> &str {
        self.resource().service_name()
    }
}

/// Terms that depend only on the resource (the service and resource
/// attributes): shared by every record of a batch, so computed once each
/// through [`TermCache`].
pub fn resource_terms(resource: &Resource, out: &mut Vec<IndexTerm>) {
    terms::plain(terms::service(resource.service_name()), out);
    terms::attr_terms(AttrScope::Resource, &resource.attributes, out);
}

/// Remembers the resource terms of recently seen resources (by `Arc`), so a
/// batch of records from one resource hashes its attributes once.
#[derive(Default)]
pub struct TermCache {
    by_resource: crate::hash::FastMap<usize, (Arc<Resource>, Vec<IndexTerm>)>,
}

impl TermCache {
    /// Appends every index term of `r` to `out`.
    pub fn terms<R: Record>(&mut self, r: &R, out: &mut Vec<IndexTerm>) {
        let res = r.resource();
        let ptr = Arc::as_ptr(res) as usize;
        if let Some((_, cached)) = self.by_resource.get(&ptr) {
            out.extend_from_slice(cached);
        } else {
            if self.by_resource.len() >= 4096 {
                self.by_resource.clear();
            }
            let mut terms = Vec::new();
            resource_terms(res, &mut terms);
            out.extend_from_slice(&terms);
            // Holding the Arc keeps the pointer from being reused.
            self.by_resource.insert(ptr, (res.clone(), terms));
        }
        r.own_terms(out);
    }
}

impl Record for Span {
    const SIGNAL: Signal = Signal::Spans;

    fn time(&self) -> u64 {
        self.start_time_unix_nano
    }
    fn key(&self) -> RecordKey {
        RecordKey {
            hi: self.trace_id.as_u128(),
            lo: self.span_id.as_u64(),
        }
    }
    fn trace_id(&self) -> Option<TraceId> {
        Some(self.trace_id)
    }
    fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }
    fn scope(&self) -> &Arc<Scope> {
        &self.scope
    }
    fn attach(&mut self, resource: Arc<Resource>, scope: Arc<Scope>, _: Option<Arc<MetricDesc>>) {
        self.resource = resource;
        self.scope = scope;
    }
    fn approx_size(&self) -> usize {
        Span::approx_size(self)
    }
    fn add_stats(&self, stats: &mut StatsBuilder) {
        stats.span_stats(self);
    }
    fn own_terms(&self, out: &mut Vec<IndexTerm>) {
        terms::plain(terms::name(&self.name), out);
        terms::plain(terms::kind(self.kind as u8), out);
        terms::plain(terms::status(self.status.code as u8), out);
        terms::attr_terms(AttrScope::Record, &self.attributes, out);
        for e in &self.events {
            terms::attr_terms(AttrScope::Event, &e.attributes, out);
        }
    }
    fn payload_slots(&mut self, f: &mut dyn FnMut(Option<&str>, &mut AnyValue)) {
        attr_slots(&mut self.attributes, f);
        for e in &mut self.events {
            attr_slots(&mut e.attributes, f);
        }
    }
    fn payload_values(&self, f: &mut dyn FnMut(&AnyValue)) {
        self.attributes.iter().for_each(|kv| f(&kv.value));
        for e in &self.events {
            e.attributes.iter().for_each(|kv| f(&kv.value));
        }
    }
}

fn attr_slots(attrs: &mut [KeyValue], f: &mut dyn FnMut(Option<&str>, &mut AnyValue)) {
    for kv in attrs {
        f(Some(&kv.key), &mut kv.value);
    }
}

/// Hashes the serialized content of a record with its shared parts.
fn content_key<R: Serialize>(r: &R, parts: &[&dyn erased::Ser]) -> RecordKey {
    let mut w = HashWriter::default();
    // postcard into a hashing writer cannot fail except on I/O, which this
    // writer never reports.
    let _ = postcard::to_io(r, &mut w);
    for p in parts {
        p.hash_into(&mut w);
    }
    let h = w.digest128();
    RecordKey { hi: h, lo: 0 }
}

mod erased {
    pub trait Ser {
        fn hash_into(&self, w: &mut crate::hash::HashWriter);
    }
    impl<T: serde::Serialize> Ser for T {
        fn hash_into(&self, w: &mut crate::hash::HashWriter) {
            let _ = postcard::to_io(self, w);
        }
    }
}

impl Record for LogRecord {
    const SIGNAL: Signal = Signal::Logs;

    fn time(&self) -> u64 {
        self.effective_time()
    }
    fn key(&self) -> RecordKey {
        content_key(self, &[&*self.resource, &*self.scope])
    }
    fn trace_id(&self) -> Option<TraceId> {
        self.trace_id
    }
    fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }
    fn scope(&self) -> &Arc<Scope> {
        &self.scope
    }
    fn attach(&mut self, resource: Arc<Resource>, scope: Arc<Scope>, _: Option<Arc<MetricDesc>>) {
        self.resource = resource;
        self.scope = scope;
    }
    fn approx_size(&self) -> usize {
        LogRecord::approx_size(self)
    }
    fn add_stats(&self, stats: &mut StatsBuilder) {
        stats.log_stats(self);
    }
    fn own_terms(&self, out: &mut Vec<IndexTerm>) {
        terms::plain(terms::severity(self.severity_number), out);
        if !self.event_name.is_empty() {
            terms::plain(terms::name(&self.event_name), out);
        }
        terms::attr_terms(AttrScope::Record, &self.attributes, out);
    }
    fn payload_slots(&mut self, f: &mut dyn FnMut(Option<&str>, &mut AnyValue)) {
        f(None, &mut self.body);
        attr_slots(&mut self.attributes, f);
    }
    fn payload_values(&self, f: &mut dyn FnMut(&AnyValue)) {
        f(&self.body);
        self.attributes.iter().for_each(|kv| f(&kv.value));
    }
}

impl Record for MetricPoint {
    const SIGNAL: Signal = Signal::Metrics;

    fn time(&self) -> u64 {
        self.time_unix_nano
    }
    fn key(&self) -> RecordKey {
        content_key(self, &[&*self.metric, &*self.resource, &*self.scope])
    }
    fn trace_id(&self) -> Option<TraceId> {
        None
    }
    fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }
    fn scope(&self) -> &Arc<Scope> {
        &self.scope
    }
    fn metric_desc(&self) -> Option<&Arc<MetricDesc>> {
        Some(&self.metric)
    }
    fn attach(&mut self, resource: Arc<Resource>, scope: Arc<Scope>, metric: Option<Arc<MetricDesc>>) {
        self.resource = resource;
        self.scope = scope;
        if let Some(m) = metric {
            self.metric = m;
        }
    }
    fn approx_size(&self) -> usize {
        MetricPoint::approx_size(self)
    }
    fn add_stats(&self, stats: &mut StatsBuilder) {
        stats.metric_stats(self);
    }
    fn own_terms(&self, out: &mut Vec<IndexTerm>) {
        terms::plain(terms::name(&self.metric.name), out);
        terms::attr_terms(AttrScope::Record, &self.attributes, out);
    }
}
