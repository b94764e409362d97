//! A streaming scan of a signal's rows as Arrow record batches in the part
//! layout, for SQL engines (`skein-sql`, DataFusion).
//!
//! Every source — the hot tier and each part — is read in turn, a chunk of
//! at most [`ScanRequest::batch_rows`] rows at a time, and each chunk is
//! handed to the caller before the next is read: memory is one batch, never
//! the data. Parts are read column by column straight from their Parquet
//! (only the requested columns); the hot tier's rows are encoded with the
//! same code that writes parts, so both give batches of one schema,
//! [`Columnar::schema`].
//!
//! The request only narrows: the window (by the parts' time marks and the
//! hot tier's row times), the service, trace id and attribute equality (by
//! postings and the trace index) pick candidate rows, and a row outside them
//! is never returned; but a returned row need not satisfy them (a part's
//! time marks cover a stride of rows, a posting is a hash). The caller
//! re-checks every predicate, as DataFusion does with an `Inexact` filter.
//!
//! Spans re-ingested after their first copy was frozen or flushed live in
//! two sources: the older copies are left out (see [`super::shadow`]), so
//! every span is counted once, in its newest version. Logs and metric
//! points are keyed by content and have no versions.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use roaring::RoaringBitmap;
use skein_model::{LogRecord, MetricPoint, Span, TraceId};

use super::filter::{AttrFilter, LogQuery, MetricQuery, RecordQuery, SpanQuery};
use super::search::{Source, candidates};
use super::shadow::{ShadowCache, shadowed_span_rows};
use super::window::Window;
use crate::error::{Error, Result};
use crate::hash::FastSet;
use crate::part::Columnar;
use crate::record::Signal;

/// What to read, and what narrows it. Unset fields do not narrow.
#[derive(Debug, Clone)]
pub struct ScanRequest {
    pub window: Window,
    pub service: Option<String>,
    pub trace_id: Option<TraceId>,
    /// Attribute filters (equality or existence), narrowed by postings.
    pub attributes: Vec<AttrFilter>,
    /// Metric points only: the metric's name.
    pub metric_name: Option<String>,
    /// Columns of the part layout to read, by name; `None`: all.
    pub columns: Option<Vec<String>>,
    /// Rows per batch handed to the caller (at least 1).
    pub batch_rows: usize,
    /// Stop after this many rows. Only meaningful when nothing but the
    /// narrowing itself filters the rows (the caller knows).
    pub limit: Option<u64>,
}

impl Default for ScanRequest {
    fn default() -> Self {
        ScanRequest {
            window: Window::ALL,
            service: None,
            trace_id: None,
            attributes: Vec::new(),
            metric_name: None,
            columns: None,
            batch_rows: 8192,
            limit: None,
        }
    }
}

/// What a scan did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanStats {
    pub sources: u64,
    /// Sources skipped whole by time or index.
    pub sources_pruned: u64,
    /// Rows handed to the caller.
    pub rows: u64,
    /// Whether the caller stopped the scan (or the limit was reached).
    pub stopped: bool,
}

/// The part layout of a signal's rows: the schema of every batch a scan
/// gives when all columns are read.
pub fn schema(signal: Signal) -> SchemaRef {
    match signal {
        Signal::Spans => Span::schema(),
        Signal::Logs => LogRecord::schema(),
        Signal::Metrics => MetricPoint::schema(),
    }
}

/// Scans `signal` over its sources (newest first), calling `f` with each
/// batch; `f` returns `false` to stop.
pub(crate) fn scan(
    signal: Signal,
    state: &crate::engine::tier::State,
    cache: &ShadowCache,
    req: &ScanRequest,
    f: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<ScanStats> {
    match signal {
        Signal::Spans => {
            let q = SpanQuery {
                service: req.service.clone(),
                trace_id: req.trace_id,
                attributes: req.attributes.clone(),
                window: req.window,
                ..Default::default()
            };
            let sources = state.sources::<Span>();
            let shadowed = shadowed_span_rows(&sources, req.window, cache)?;
            scan_sources(&sources, &q, Some(&shadowed), req, f)
        }
        Signal::Logs => {
            let q = LogQuery {
                service: req.service.clone(),
                trace_id: req.trace_id,
                attributes: req.attributes.clone(),
                window: req.window,
                ..Default::default()
            };
            scan_sources(&state.sources::<LogRecord>(), &q, None, req, f)
        }
        Signal::Metrics => {
            let q = MetricQuery {
                name: req.metric_name.clone(),
                service: req.service.clone(),
                attributes: req.attributes.clone(),
                window: req.window,
                ..Default::default()
            };
            scan_sources(&state.sources::<MetricPoint>(), &q, None, req, f)
        }
    }
}

/// Column indexes of `columns` in the part layout of `R`; a name it lacks
/// is an error naming it.
fn projection<R: Columnar>(columns: Option<&[String]>) -> Result<Option<Vec<usize>>> {
    let Some(cols) = columns else { return Ok(None) };
    let schema = R::schema();
    cols.iter()
        .map(|c| {
            schema
                .index_of(c)
                .map_err(|_| Error::Invalid(format!("no column {c:?} in the {} layout", R::SIGNAL.as_str())))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Keeps only the columns `proj` names, in that order.
fn project(batch: RecordBatch, proj: Option<&[usize]>) -> Result<RecordBatch> {
    match proj {
        Some(p) => Ok(batch.project(p)?),
        None => Ok(batch),
    }
}

/// A part's batch with the columns in `names`' order (Parquet gives them
/// in file order), a column the part lacks (written by an older layout)
/// all NULL, as readers of parts treat it.
fn in_order<R: Columnar>(batch: &RecordBatch, names: &[&str]) -> Result<RecordBatch> {
    let schema = R::schema();
    let mut fields = Vec::with_capacity(names.len());
    let mut cols = Vec::with_capacity(names.len());
    for n in names {
        let field = schema.field_with_name(n)?;
        let col = match batch.column_by_name(n) {
            Some(c) => c.clone(),
            None => arrow_array::new_null_array(field.data_type(), batch.num_rows()),
        };
        // A missing column is NULL even where the layout says never.
        fields.push(field.clone().with_nullable(field.is_nullable() || col.null_count() > 0));
        cols.push(col);
    }
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(arrow_schema::Schema::new(fields)),
        cols,
        &opts,
    )?)
}

fn scan_sources<R: Columnar, Q: RecordQuery<R>>(
    sources: &[Source<R>],
    q: &Q,
    shadowed: Option<&[FastSet<u32>]>,
    req: &ScanRequest,
    f: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<ScanStats> {
    let proj = projection::<R>(req.columns.as_deref())?;
    let layout = R::schema();
    let names: Vec<&str> = match &req.columns {
        Some(c) => c.iter().map(String::as_str).collect(),
        None => layout.fields().iter().map(|f| f.name().as_str()).collect(),
    };
    let chunk = req.batch_rows.max(1);
    let window = q.window();
    let groups = q.term_groups();
    let mut stats = ScanStats::default();
    let mut left = req.limit.unwrap_or(u64::MAX);
    if left == 0 {
        stats.stopped = true;
        return Ok(stats);
    }
    // Hands a batch on; false once the caller or the limit says stop.
    let mut emit = |batch: RecordBatch, stats: &mut ScanStats| -> bool {
        let batch = if (batch.num_rows() as u64) > left {
            batch.slice(0, left as usize)
        } else {
            batch
        };
        left -= batch.num_rows() as u64;
        stats.rows += batch.num_rows() as u64;
        if batch.num_rows() > 0 && !f(batch) {
            return false;
        }
        left > 0
    };
    let empty = FastSet::default();
    for (i, s) in sources.iter().enumerate() {
        stats.sources += 1;
        let shadow = shadowed.and_then(|s| s.get(i)).unwrap_or(&empty);
        match s {
            Source::Mem(m) => {
                // The candidates are listed under the read lock (a u32 per
                // row of one hot table at most), and each chunk's records
                // cloned under it again; encoding and the caller's work run
                // unlocked, so a slow reader never holds up ingest.
                let rows: Vec<u32> = {
                    let t = m.read();
                    let mut unused = Vec::new();
                    let cands = candidates(
                        &groups,
                        |term| Some(t.posting(term).map(|r| r.iter().copied().collect()).unwrap_or_default()),
                        |_| false,
                        &mut unused,
                    );
                    let cands = match q.trace() {
                        Some(tr) => {
                            let trace: RoaringBitmap = t.trace_rows(tr.as_u128()).iter().copied().collect();
                            Some(match cands {
                                Some(c) => c & trace,
                                None => trace,
                            })
                        }
                        None => cands,
                    };
                    let keep = |r: &u32| t.is_live(*r) && window.contains(t.time(*r)) && !shadow.contains(r);
                    match cands {
                        Some(b) => b.iter().filter(keep).collect(),
                        None => (0..t.total_rows()).filter(keep).collect(),
                    }
                };
                if rows.is_empty() {
                    stats.sources_pruned += 1;
                    continue;
                }
                for c in rows.chunks(chunk) {
                    let records: Vec<Arc<R>> = {
                        let t = m.read();
                        c.iter().filter(|r| t.is_live(**r)).map(|r| t.row(*r).clone()).collect()
                    };
                    let refs: Vec<&R> = records.iter().map(|r| &**r).collect();
                    let batch = project(R::to_batch(&refs)?, proj.as_deref())?;
                    if !emit(batch, &mut stats) {
                        stats.stopped = true;
                        return Ok(stats);
                    }
                }
            }
            Source::Part(p) => {
                if p.misses(window) {
                    stats.sources_pruned += 1;
                    continue;
                }
                let range = p.index.row_range(p.rows(), window.starting_by(p.meta.min_time));
                let ix = &p.index;
                let mut unused = Vec::new();
                let cands = candidates(
                    &groups,
                    |t| Some(ix.posting(t).cloned().unwrap_or_default()),
                    |k| ix.unindexed_keys.contains(&k),
                    &mut unused,
                );
                let cands = match q.trace() {
                    Some(tr) => {
                        let trace: RoaringBitmap = ix.traces.rows_of(tr.as_u128()).iter().copied().collect();
                        Some(match cands {
                            Some(c) => c & trace,
                            None => trace,
                        })
                    }
                    None => cands,
                };
                let mut rows = match cands {
                    Some(b) => b,
                    None => {
                        let mut all = RoaringBitmap::new();
                        all.insert_range(range.clone());
                        all
                    }
                };
                rows.remove_range(..range.start);
                rows.remove_range(range.end..);
                for r in shadow {
                    rows.remove(*r);
                }
                if rows.is_empty() {
                    stats.sources_pruned += 1;
                    continue;
                }
                for batch in p.stream_row_columns(&names, &rows, chunk)? {
                    if !emit(in_order::<R>(&batch?, &names)?, &mut stats) {
                        stats.stopped = true;
                        return Ok(stats);
                    }
                }
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, EngineOptions};

    fn count(e: &Engine, req: &ScanRequest) -> (usize, usize) {
        let (mut rows, mut biggest) = (0, 0);
        e.scan_batches(Signal::Spans, req, &mut |b| {
            rows += b.num_rows();
            biggest = biggest.max(b.num_rows());
            true
        })
        .unwrap();
        (rows, biggest)
    }

    #[test]
    fn scans_every_row_once_in_bounded_batches_and_stops_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = EngineOptions::new(dir.path());
        o.background = false;
        let e = Engine::open(o).unwrap();
        let spans = crate::testdata::spans(30, 4);
        e.ingest_spans(spans[..60].to_vec()).unwrap();
        e.flush().unwrap();
        e.ingest_spans(spans[60..].to_vec()).unwrap();
        let req = ScanRequest {
            columns: Some(vec!["duration_ns".into(), "span_id".into()]),
            batch_rows: 7,
            ..Default::default()
        };
        assert_eq!(count(&e, &req), (120, 7));
        // Spans re-sent after their first copies reached a part: once each.
        e.ingest_spans(spans[..10].to_vec()).unwrap();
        assert_eq!(count(&e, &req).0, 120);
        // Columns come in the order asked, from parts and hot tier alike.
        e.scan_batches(Signal::Spans, &req, &mut |b| {
            assert_eq!(b.schema().field(0).name(), "duration_ns");
            assert_eq!(b.schema().field(1).name(), "span_id");
            true
        })
        .unwrap();
        let limited = ScanRequest {
            limit: Some(5),
            ..req.clone()
        };
        assert_eq!(count(&e, &limited).0, 5);
        let mut batches = 0;
        let stats = e
            .scan_batches(Signal::Spans, &req, &mut |_| {
                batches += 1;
                false
            })
            .unwrap();
        assert_eq!(batches, 1);
        assert!(stats.stopped);
        let bad = ScanRequest {
            columns: Some(vec!["nope".into()]),
            ..Default::default()
        };
        let err = e.scan_batches(Signal::Spans, &bad, &mut |_| true).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }
}
