//! Self-metrics in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use skein_engine::{EngineStats, FaultKind};

/// Counters keyed by a label set, e.g. `signal="spans",protocol="grpc"`.
#[derive(Default)]
pub struct CounterFamily {
    values: Mutex<BTreeMap<String, u64>>,
}

impl CounterFamily {
    pub fn add(&self, labels: &str, n: u64) {
        *self.values.lock().entry(labels.to_string()).or_default() += n;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (labels, v) in self.values.lock().iter() {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

/// Latency histogram with fixed buckets (seconds).
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
    count: AtomicU64,
}

const LATENCY_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            bounds: LATENCY_BOUNDS,
            counts: LATENCY_BOUNDS.iter().map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, secs: f64) {
        for (i, b) in self.bounds.iter().enumerate() {
            if secs <= *b {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.sum_micros.fetch_add((secs * 1e6) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in self.bounds.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {}",
                self.counts[i].load(Ordering::Relaxed)
            );
        }
        let n = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {n}");
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {n}");
    }
}

#[derive(Default)]
pub struct Metrics {
    pub ingest_records: CounterFamily,
    pub ingest_bytes: CounterFamily,
    pub ingest_requests: CounterFamily,
    pub rejected_records: CounterFamily,
    pub rejected_requests: CounterFamily,
    pub auth_failures: CounterFamily,
    /// Audit log lines that could not be written (see `audit`).
    pub audit_failures: std::sync::atomic::AtomicU64,
    pub ingest_latency: Histogram,
    pub query_latency: Mutex<BTreeMap<String, std::sync::Arc<Histogram>>>,
    pub started: Option<Instant>,
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            started: Some(Instant::now()),
            ..Default::default()
        }
    }

    pub fn auth_failure(&self, r: &crate::auth::Refusal) {
        let reason = match r {
            crate::auth::Refusal::Unauthenticated => "reason=\"unauthenticated\"",
            crate::auth::Refusal::Forbidden(_) | crate::auth::Refusal::OtherTenant { .. } => "reason=\"forbidden\"",
            crate::auth::Refusal::BadTenant(_) => "reason=\"bad_tenant\"",
            crate::auth::Refusal::Throttled => "reason=\"throttled\"",
        };
        self.auth_failures.add(reason, 1);
    }

    pub fn audit_failure(&self) {
        self.audit_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe_query(&self, endpoint: &str, secs: f64) {
        let h = self
            .query_latency
            .lock()
            .entry(endpoint.to_string())
            .or_default()
            .clone();
        h.observe(secs);
    }

    /// The exposition text; `sql_running` is [`skein_sql::Sql::running`].
    pub fn render(
        &self,
        engine: Option<&EngineStats>,
        in_flight: usize,
        in_flight_max: usize,
        sql_running: usize,
    ) -> String {
        let mut out = String::with_capacity(8192);
        self.ingest_records.render(
            &mut out,
            "skein_ingest_records_total",
            "Records accepted, by signal and protocol.",
        );
        self.ingest_bytes.render(
            &mut out,
            "skein_ingest_bytes_total",
            "Request body bytes received for ingest, by signal and protocol.",
        );
        self.ingest_requests.render(
            &mut out,
            "skein_ingest_requests_total",
            "Ingest requests, by signal and protocol.",
        );
        self.rejected_records.render(
            &mut out,
            "skein_rejected_records_total",
            "Records rejected as invalid, by signal and protocol.",
        );
        self.rejected_requests.render(
            &mut out,
            "skein_rejected_requests_total",
            "Requests refused, by reason.",
        );
        self.auth_failures.render(
            &mut out,
            "skein_auth_failures_total",
            "Requests refused by authentication: unknown or missing token, missing scope, or throttled after too many failures.",
        );
        let _ = writeln!(
            out,
            "# HELP skein_audit_log_failures_total Admin actions whose audit log line could not be written.\n# TYPE skein_audit_log_failures_total counter\nskein_audit_log_failures_total {}",
            self.audit_failures.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP skein_ingest_duration_seconds Ingest request latency.\n# TYPE skein_ingest_duration_seconds histogram"
        );
        self.ingest_latency
            .render(&mut out, "skein_ingest_duration_seconds", "");
        let _ = writeln!(
            out,
            "# HELP skein_query_duration_seconds Query latency by endpoint.\n# TYPE skein_query_duration_seconds histogram"
        );
        for (endpoint, h) in self.query_latency.lock().iter() {
            h.render(
                &mut out,
                "skein_query_duration_seconds",
                &format!("endpoint=\"{endpoint}\""),
            );
        }
        let gauge = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        let counter = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        gauge(
            &mut out,
            "skein_ingest_inflight_bytes",
            "Request bytes admitted and being ingested.",
            in_flight as f64,
        );
        gauge(
            &mut out,
            "skein_ingest_inflight_max_bytes",
            "Admission budget.",
            in_flight_max as f64,
        );
        gauge(
            &mut out,
            "skein_sql_queries_running",
            "SQL queries planned or streaming: one counts until its operators have stopped, after its answer ends or its client goes away.",
            sql_running as f64,
        );
        if let Some(s) = engine {
            gauge(&mut out, "skein_spans", "Spans stored.", s.spans as f64);
            gauge(&mut out, "skein_logs", "Log records stored.", s.logs as f64);
            gauge(
                &mut out,
                "skein_metric_points",
                "Metric points stored.",
                s.metric_points as f64,
            );
            gauge(
                &mut out,
                "skein_hot_records",
                "Records in the hot tier.",
                s.hot_records as f64,
            );
            gauge(
                &mut out,
                "skein_hot_bytes",
                "Approximate bytes of the hot tier.",
                s.hot_bytes as f64,
            );
            gauge(&mut out, "skein_parts", "Parts on disk.", s.parts as f64);
            gauge(
                &mut out,
                "skein_part_bytes",
                "Bytes of parts on disk.",
                s.part_bytes as f64,
            );
            gauge(&mut out, "skein_wal_bytes", "Bytes of WAL on disk.", s.wal_bytes as f64);
            gauge(
                &mut out,
                "skein_payloads",
                "Distinct payloads stored (prompts, completions, big values; once each).",
                s.payloads.payloads as f64,
            );
            gauge(
                &mut out,
                "skein_payload_bytes",
                "Compressed bytes of the stored payloads.",
                s.payloads.payload_bytes as f64,
            );
            gauge(
                &mut out,
                "skein_payload_logical_bytes",
                "Bytes of the stored payloads as sent.",
                s.payloads.payload_logical_bytes as f64,
            );
            gauge(
                &mut out,
                "skein_index_memory_bytes",
                "Memory held by indexes: the parts' sidecars, and full-text indexes.",
                s.index_memory_bytes as f64,
            );
            gauge(
                &mut out,
                "skein_text_index_bytes",
                "Bytes of the parts' full-text index files (mapped, read in place).",
                s.text_index_bytes as f64,
            );
            gauge(
                &mut out,
                "skein_text_index_memory_bytes",
                "Heap memory of full-text indexes (the hot tiers', and the parts' row sets and links).",
                s.text_index_memory_bytes as f64,
            );
            gauge(
                &mut out,
                "skein_text_index_backlog_parts",
                "Parts without their full-text index yet (flushed, indexed once flushing has caught up; text queries scan them meanwhile).",
                s.text_index_backlog_parts as f64,
            );
            counter(
                &mut out,
                "skein_text_index_builds_total",
                "Full-text indexes built for parts after they were written.",
                s.text_index_builds as f64,
            );
            counter(
                &mut out,
                "skein_text_index_build_seconds_total",
                "Time spent building those indexes.",
                s.text_index_build_seconds,
            );
            counter(
                &mut out,
                "skein_wal_fsyncs_total",
                "WAL fsyncs (group commits).",
                s.wal_fsyncs as f64,
            );
            counter(
                &mut out,
                "skein_wal_fsync_seconds_total",
                "Time spent in WAL fsync.",
                s.wal_fsync_seconds,
            );
            counter(
                &mut out,
                "skein_wal_appends_total",
                "WAL batch appends.",
                s.wal_appends as f64,
            );
            counter(
                &mut out,
                "skein_flushes_total",
                "Hot-tier flushes to parts.",
                s.flushes as f64,
            );
            counter(
                &mut out,
                "skein_compactions_total",
                "Part merges.",
                s.compactions as f64,
            );
            counter(
                &mut out,
                "skein_compaction_seconds_total",
                "Time spent compacting.",
                s.compaction_seconds,
            );
            gauge(
                &mut out,
                "skein_page_cache_bytes",
                "Decompressed Parquet pages held for point reads.",
                s.page_cache.bytes as f64,
            );
            counter(
                &mut out,
                "skein_page_cache_hits_total",
                "Point-read pages served from the page cache.",
                s.page_cache.hits as f64,
            );
            counter(
                &mut out,
                "skein_page_cache_misses_total",
                "Point-read pages read from disk and decompressed.",
                s.page_cache.misses as f64,
            );
            if let Some(os) = &s.object_storage {
                let g: [(&str, &str, u64); 3] = [
                    (
                        "skein_object_storage_pending_uploads",
                        "Objects staged on local disk that the bucket does not hold yet.",
                        os.pending_uploads,
                    ),
                    (
                        "skein_object_storage_pending_upload_bytes",
                        "Bytes staged on local disk waiting for upload.",
                        os.pending_upload_bytes,
                    ),
                    (
                        "skein_object_storage_cache_bytes",
                        "Bytes in the local cache of the bucket (whole objects and blocks).",
                        os.cache.cache_bytes,
                    ),
                ];
                for (name, help, v) in g {
                    gauge(&mut out, name, help, v as f64);
                }
                let c: [(&str, &str, u64); 8] = [
                    ("skein_object_storage_uploads_total", "Objects uploaded.", os.uploads),
                    (
                        "skein_object_storage_corrupt_reads_total",
                        "Reads refused because the bytes from the bucket failed their checksums.",
                        os.corrupt_reads,
                    ),
                    (
                        "skein_object_storage_upload_failures_total",
                        "Failed uploads and deletions (each retried).",
                        os.upload_failures,
                    ),
                    (
                        "skein_object_storage_get_requests_total",
                        "Range and whole-object reads sent to the bucket.",
                        os.requests.get_requests,
                    ),
                    (
                        "skein_object_storage_fetched_bytes_total",
                        "Bytes read from the bucket.",
                        os.requests.bytes_fetched,
                    ),
                    (
                        "skein_object_storage_uploaded_bytes_total",
                        "Bytes written to the bucket.",
                        os.requests.bytes_uploaded,
                    ),
                    (
                        "skein_object_storage_cache_hits_total",
                        "Block reads served by the local cache.",
                        os.cache.cache_hits,
                    ),
                    (
                        "skein_object_storage_cache_misses_total",
                        "Block reads that went to the bucket.",
                        os.cache.cache_misses,
                    ),
                ];
                for (name, help, v) in c {
                    counter(&mut out, name, help, v as f64);
                }
            }
            let r = &s.retention;
            for (name, help, v) in [
                ("skein_retention_rounds_total", "Retention rounds completed.", r.rounds),
                (
                    "skein_retention_parts_dropped_total",
                    "Parts dropped whole by retention (every record expired).",
                    r.parts_dropped,
                ),
                (
                    "skein_retention_parts_rewritten_total",
                    "Parts that straddled the retention line, rewritten with their live records.",
                    r.parts_rewritten,
                ),
                (
                    "skein_retention_records_expired_total",
                    "Records removed for being past their signal's retention.",
                    r.records_expired,
                ),
                (
                    "skein_retention_bytes_freed_total",
                    "Part bytes freed by retention and eviction (payload packs freed by GC not included).",
                    r.bytes_freed,
                ),
                (
                    "skein_disk_full_evicted_parts_total",
                    "Parts dropped, oldest first, to get back above --min-free-disk (--on-disk-full evict).",
                    r.parts_evicted,
                ),
            ] {
                counter(&mut out, name, help, v as f64);
            }
            gauge(
                &mut out,
                "skein_disk_free_bytes",
                "Free bytes on the data directory's filesystem, when last measured.",
                r.disk_free_bytes as f64,
            );
            gauge(
                &mut out,
                "skein_disk_min_free_bytes",
                "The --min-free-disk floor in bytes: below it, ingest is refused.",
                r.min_free_disk_bytes as f64,
            );
            // Every kind is listed, 0 when healthy, so an alert on `== 1`
            // (or on `increase(...) > 0`) needs no `absent()` companion.
            let _ = writeln!(
                out,
                "# HELP skein_engine_fault Whether a fault that needs an operator is in force, by kind (1: see /readyz).\n# TYPE skein_engine_fault gauge"
            );
            for kind in FaultKind::ALL {
                let on = s.faults.iter().any(|f| f.kind == kind);
                let _ = writeln!(out, "skein_engine_fault{{kind=\"{kind}\"}} {}", u8::from(on));
            }
            let _ = writeln!(
                out,
                "# HELP skein_engine_failures_total Failures by kind: WAL, flushes, compactions, damaged payloads, retention, payload GC, and writes refused for a full disk.\n# TYPE skein_engine_failures_total counter"
            );
            for kind in FaultKind::ALL {
                let n = s.failures.get(kind.as_str()).copied().unwrap_or(0);
                let _ = writeln!(out, "skein_engine_failures_total{{kind=\"{kind}\"}} {n}");
            }
        }
        if let Some(rss) = resident_bytes() {
            gauge(
                &mut out,
                "skein_process_resident_memory_bytes",
                "Resident memory of the process.",
                rss as f64,
            );
        }
        if let Some(t) = self.started {
            gauge(
                &mut out,
                "skein_uptime_seconds",
                "Seconds since start.",
                t.elapsed().as_secs_f64(),
            );
        }
        out
    }
}

/// Resident set size from /proc (Linux), in bytes.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64)
}

#[cfg(test)]
mod tests {
    use skein_engine::Fault;

    use super::*;

    #[test]
    fn faults_and_failures_are_listed_for_every_kind() {
        let m = Metrics::new();
        let healthy = m.render(Some(&EngineStats::default()), 0, 1, 0);
        for kind in ["wal", "flush", "compaction", "payload"] {
            assert!(
                healthy.contains(&format!("skein_engine_fault{{kind=\"{kind}\"}} 0\n")),
                "{healthy}"
            );
            assert!(
                healthy.contains(&format!("skein_engine_failures_total{{kind=\"{kind}\"}} 0\n")),
                "{healthy}"
            );
        }
        assert!(healthy.contains("# TYPE skein_engine_fault gauge\n"));
        assert!(healthy.contains("# TYPE skein_engine_failures_total counter\n"));

        let stats = EngineStats {
            faults: vec![Fault {
                kind: FaultKind::Flush,
                message: "create x: Not a directory".into(),
                since_unix_nano: 1,
                failures: 3,
            }],
            failures: [("wal", 0), ("flush", 5), ("compaction", 2)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..Default::default()
        };
        let faulted = m.render(Some(&stats), 0, 1, 0);
        assert!(faulted.contains("skein_engine_fault{kind=\"flush\"} 1\n"), "{faulted}");
        assert!(faulted.contains("skein_engine_fault{kind=\"wal\"} 0\n"), "{faulted}");
        assert!(
            faulted.contains("skein_engine_fault{kind=\"compaction\"} 0\n"),
            "{faulted}"
        );
        assert!(
            faulted.contains("skein_engine_failures_total{kind=\"flush\"} 5\n"),
            "{faulted}"
        );
        assert!(
            faulted.contains("skein_engine_failures_total{kind=\"compaction\"} 2\n"),
            "{faulted}"
        );
    }
}
