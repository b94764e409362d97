//! Writes a part from records in time order, streaming: rows are converted
//! to Arrow in chunks and handed to the Parquet writer, which holds at most
//! one row group in memory.
//!
//! Conversion to Arrow and Parquet encoding take about the same time, so
//! they run in a pipeline: a helper thread converts chunk k+1 while the
//! caller's thread encodes chunk k. At most two chunks are in flight.

use std::sync::Arc;

use arrow_array::RecordBatch;

use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use super::calls::CallsWriter;
use super::index::{IndexBuilder, PartIndex};
use super::samples::SamplesWriter;
use super::sink::SinkWriter;
use super::{Columnar, FORMAT_VERSION, META_KEY, Part, PartMeta, index_name, parquet_name, text_name};
use crate::error::{Error, Result};
use crate::record::{RecordKey, Signal};
use crate::storage::PartStore;
use crate::text::PayloadText;
use crate::text_index::PartTextBuilder;
use skein_text::TextError;

/// Tuning of the Parquet layout.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Rows per row group (bounds writer memory).
    pub row_group_rows: usize,
    /// Rows per data page: the unit a point read decodes.
    pub page_rows: usize,
    /// Uncompressed bytes after which a page of a bulky (zstd) column ends
    /// early. A point read decompresses a whole page of every column it
    /// touches, and zstd frames cannot be entered midway: with pages of
    /// `page_rows` rows, the attribute page alone was a third of a trace
    /// lookup, and a page of large payloads (prompts) would cost megabytes.
    pub bulky_page_bytes: usize,
    pub zstd_level: i32,
    /// zstd level of parts written by flushes, which compaction rewrites
    /// soon: fast rather than small.
    pub flush_zstd_level: i32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            row_group_rows: 128 * 1024,
            page_rows: 1024,
            bulky_page_bytes: 32 << 10,
            zstd_level: 3,
            flush_zstd_level: 1,
        }
    }
}

/// Rows converted to Arrow per chunk.
const CHUNK_ROWS: usize = 8192;

fn properties(signal: Signal, schema: &arrow_schema::Schema, opts: &WriterOptions) -> WriterProperties {
    let col = |name: &str| ColumnPath::from(name);
    // zstd only where it pays: the bulky text columns. Parquet builds a
    // codec per column chunk per read (for zstd, two contexts, each set up
    // with a `cpuid` that traps in a VM), so a point read that touches every
    // column must not pay that 19 times. Elsewhere LZ4 (cheap to set up and
    // decode), including the sparse text columns, where zstd's better ratio
    // saves a fraction of a byte per record; random ids not at all.
    let zstd = Compression::ZSTD(ZstdLevel::try_new(opts.zstd_level).unwrap_or_default());
    let bulky: &[&str] = match signal {
        Signal::Spans => &["attributes"],
        Signal::Logs => &["body", "body_json", "attributes"],
        Signal::Metrics => &["attributes", "distribution", "exemplars", "metadata"],
    };
    let text: &[&str] = match signal {
        Signal::Spans => &["attributes", "events", "links", "status_message"],
        Signal::Logs => &["body", "body_json", "attributes"],
        Signal::Metrics => &["attributes", "distribution", "exemplars", "metadata"],
    };
    // A metric's `series_id` repeats once per sample, so it is no random
    // id: a dictionary takes it to about two bytes a row from eight.
    let random: &[&str] = match signal {
        Signal::Spans => &["span_id", "parent_span_id"],
        Signal::Logs => &["span_id"],
        Signal::Metrics => &[],
    };
    let mut b = WriterProperties::builder().set_compression(Compression::LZ4_RAW);
    // Lengths stored apart from the bytes: a point read skipping to its rows
    // sums a run of lengths instead of hopping value to value through the
    // page (PLAIN), and the compressor sees the text without length noise in
    // between.
    for c in text {
        b = b.set_column_encoding(col(c), Encoding::DELTA_LENGTH_BYTE_ARRAY);
    }
    for c in bulky {
        b = b
            .set_column_compression(col(c), zstd)
            .set_column_data_page_size_limit(col(c), opts.bulky_page_bytes);
    }
    for c in random {
        b = b.set_column_compression(col(c), Compression::UNCOMPRESSED);
    }
    let mut b = b
        .set_max_row_group_row_count(Some(opts.row_group_rows))
        .set_data_page_row_count_limit(opts.page_rows)
        .set_write_batch_size(opts.page_rows.min(1024))
        .set_dictionary_page_size_limit(256 << 10)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_created_by(format!("skein {}", env!("CARGO_PKG_VERSION")));
    // Dictionaries only for low-cardinality columns. A point read decodes
    // the dictionary page of every column it touches, so a dictionary of
    // ids or attribute JSON would cost more per lookup than it saves on
    // disk (zstd still finds the repeats).
    let no_dict: &[&str] = match signal {
        Signal::Spans => &[
            "trace_id",
            "span_id",
            "parent_span_id",
            "duration_ns",
            "attributes",
            "events",
            "links",
            "status_message",
        ],
        Signal::Logs => &["trace_id", "span_id", "body", "body_json", "attributes"],
        Signal::Metrics => &[
            "value_double",
            "value_int",
            "sum",
            "attributes",
            "exemplars",
            "distribution",
        ],
    };
    for c in no_dict {
        b = b.set_column_dictionary_enabled(col(c), false);
    }
    // Sorted times are small deltas, and so are a log's own times beside
    // its effective time (the sort key). As dictionaries those filled the
    // 256 KiB limit in every row group before falling back to plain pages,
    // and a point read decodes the dictionary of each row group it touches:
    // half a megabyte per row group for two columns, a third of a rare
    // word's search.
    let time_col = match signal {
        Signal::Spans => "start_time_unix_nano",
        Signal::Logs => "timestamp",
        Signal::Metrics => "time_unix_nano",
    };
    let delta: &[&str] = match signal {
        Signal::Logs => &["timestamp", "time_unix_nano", "observed_time_unix_nano"],
        _ => &[time_col],
    };
    for c in delta {
        b = b
            .set_column_dictionary_enabled(col(c), false)
            .set_column_encoding(col(c), Encoding::DELTA_BINARY_PACKED);
    }
    b = b.set_sorting_columns(Some(vec![SortingColumn {
        column_idx: schema.index_of(time_col).unwrap_or(0) as i32,
        descending: false,
        nulls_first: false,
    }]));
    b.build()
}

/// Builds one part. Records must arrive in `(time, key)` order.
pub struct PartWriter<R: Columnar> {
    store: Arc<dyn PartStore>,
    meta: PartMeta,
    writer: ArrowWriter<SinkWriter>,
    chunk: Vec<Arc<R>>,
    converter: Converter<R>,
    index: IndexBuilder,
    /// The index of the rows to come, built by the caller; `index` then
    /// stays empty.
    given_index: Option<PartIndex>,
    /// The payloads the rows refer to, when the index is given (a built
    /// one collects them itself).
    given_refs: crate::hash::FastSet<crate::payload::PayloadRef>,
    rows: u32,
    last: Option<(u64, RecordKey)>,
    /// For the sidecar index too.
    zstd_level: i32,
    /// The full-text index being built (on its own thread), when the part
    /// gets one.
    text: Option<TextThread<R>>,
    /// The full-text index made by the caller (a compaction merges its
    /// inputs' indexes), as the bytes of its file.
    given_text: Option<Vec<u8>>,
    /// Why the full-text index was given up (the part is written without
    /// one: text queries then scan it).
    text_failed: Option<String>,
    /// A span part's calls table, filled as batches are written.
    calls: Option<CallsWriter>,
    /// A metric part's sample table, filled as batches are written.
    samples: Option<SamplesWriter>,
}

impl<R: Columnar> PartWriter<R> {
    /// `meta` gives id, sequence range, lineage; rows and times are filled in.
    pub fn new(store: Arc<dyn PartStore>, meta: PartMeta, opts: &WriterOptions) -> Result<Self> {
        let sink = store.create(&parquet_name(R::SIGNAL, meta.id))?;
        let calls = CallsWriter::new(&store, meta.id, &R::schema())?;
        let samples = match R::SIGNAL {
            Signal::Metrics => Some(SamplesWriter::new(&store, meta.id)?),
            _ => None,
        };
        let writer = ArrowWriter::try_new(
            SinkWriter(sink),
            R::schema(),
            Some(properties(R::SIGNAL, &R::schema(), opts)),
        )?;
        Ok(PartWriter {
            store,
            meta: PartMeta {
                format_version: FORMAT_VERSION,
                signal: R::SIGNAL,
                rows: 0,
                min_time: u64::MAX,
                max_time: 0,
                ..meta
            },
            writer,
            chunk: Vec::with_capacity(CHUNK_ROWS),
            converter: Converter::start()?,
            index: IndexBuilder::default(),
            given_index: None,
            given_refs: Default::default(),
            rows: 0,
            last: None,
            zstd_level: opts.zstd_level,
            text: None,
            given_text: None,
            text_failed: None,
            calls,
            samples,
        })
    }

    /// Builds the part's full-text index too, reading payload text through
    /// `read`. Call before the first `push`.
    pub fn with_text_index(self, read: Option<PayloadText>) -> Self {
        self.with_text_builder(PartTextBuilder::new(read))
    }

    fn with_text_builder(mut self, builder: std::result::Result<PartTextBuilder, TextError>) -> Self {
        match builder.map_err(|e| e.to_string()).and_then(TextThread::start) {
            Ok(t) => self.text = Some(t),
            Err(e) => self.text_failed = Some(e),
        }
        self
    }

    /// Uses `bundle` as the part's full-text index, or writes the part
    /// without one when it could not be made (`Err`, why: text queries then
    /// scan the part). The caller vouches that it indexes exactly the rows
    /// pushed; it is written, like a built one, before the part is
    /// committed.
    pub fn set_text_bundle(&mut self, bundle: std::result::Result<Vec<u8>, String>) {
        self.text = None;
        match bundle {
            Ok(bytes) => self.given_text = Some(bytes),
            Err(why) => self.text_failed = Some(why),
        }
    }

    pub fn push(&mut self, r: Arc<R>) -> Result<()> {
        let key = r.key();
        self.push_keyed(r, key)
    }

    /// [`push`](Self::push) of a record whose key the caller has at hand
    /// (a flush's hot tier keeps each row's, a merge orders by them):
    /// hashing a log record or a metric point again is not free.
    pub fn push_keyed(&mut self, r: Arc<R>, key: RecordKey) -> Result<()> {
        debug_assert!(key == r.key(), "a record pushed with another's key");
        let sort_key = (r.time(), key);
        if let Some(prev) = self.last
            && sort_key < prev
        {
            return Err(Error::Other(format!(
                "part writer: records out of order ({} after {})",
                sort_key.0, prev.0
            )));
        }
        self.last = Some(sort_key);
        self.meta.min_time = self.meta.min_time.min(sort_key.0);
        self.meta.max_time = self.meta.max_time.max(sort_key.0);
        if self.given_index.is_none() {
            self.index.add(&*r);
        } else {
            crate::payload::refs_of(&*r, &mut self.given_refs);
        }
        self.rows += 1;
        self.chunk.push(r);
        if self.chunk.len() >= CHUNK_ROWS {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Hands the chunk to the converter, and encodes the chunk before it
    /// meanwhile.
    fn flush_chunk(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_ROWS));
        if let Some(text) = &self.text
            && !text.send(chunk.clone())
        {
            // The thread gave up (its error comes with `finish`).
            if let Some(t) = self.text.take() {
                self.text_failed = Some(
                    t.finish()
                        .err()
                        .unwrap_or_else(|| "the text index thread stopped".into()),
                );
            }
        }
        self.converter.send(chunk)?;
        if self.converter.in_flight > 1 {
            self.write_converted()?;
        }
        Ok(())
    }

    /// Writes the oldest converted batch to the part and its calls or
    /// sample table.
    fn write_converted(&mut self) -> Result<()> {
        let batch = self.converter.receive()?;
        self.writer.write(&batch)?;
        if let Some(calls) = &mut self.calls {
            calls.add(&batch)?;
        }
        if let Some(samples) = &mut self.samples {
            samples.add(&batch)?;
        }
        Ok(())
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Uses `index` as the index of the rows to come instead of building it
    /// row by row: the caller vouches that it describes exactly those rows,
    /// in the order they are pushed (a flush hands over the hot tier's own
    /// index, renumbered). Only the row count can be checked here.
    pub fn with_index(mut self, index: PartIndex) -> Self {
        self.given_index = Some(index);
        self
    }

    /// Finishes the Parquet file and its sidecars, durably, and opens the
    /// part. The sidecars are committed first: a part is visible once its
    /// Parquet file is, and by then its sidecars exist (the index is rebuilt
    /// on open when missing; a part without a text index is scanned).
    pub fn finish(self) -> Result<Part> {
        self.finish_after(|| Ok(()))
    }

    /// [`finish`](Self::finish), committing the Parquet file (which makes
    /// the part visible) only once `ready` succeeds: a flush's part waits
    /// for the pack holding the payloads it refers to.
    pub fn finish_after(mut self, ready: impl FnOnce() -> Result<()>) -> Result<Part> {
        self.flush_chunk()?;
        while self.converter.in_flight > 0 {
            self.write_converted()?;
        }
        self.meta.rows = self.rows as u64;
        if self.meta.rows == 0 {
            self.meta.min_time = 0;
        }
        self.meta.created_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let meta_json = serde_json::to_string(&self.meta).map_err(|e| Error::Other(e.to_string()))?;
        self.writer
            .append_key_value_metadata(KeyValue::new(META_KEY.to_string(), meta_json));
        let index = match self.given_index.take() {
            Some(mut index) => {
                index.set_payload_refs(std::mem::take(&mut self.given_refs));
                let marks = self.rows.div_ceil(super::index::TIME_MARK_STRIDE) as usize;
                if index.time_marks.len() != marks {
                    return Err(Error::Other(format!(
                        "part writer: the given index has {} time marks for {} rows",
                        index.time_marks.len(),
                        self.rows
                    )));
                }
                index
            }
            None => std::mem::take(&mut self.index).finish(),
        };
        let encoded = super::index::encode(&index, self.zstd_level)?;
        self.store.put(&index_name(R::SIGNAL, self.meta.id), &encoded)?;
        let text = match (self.given_text.take(), self.text.take()) {
            (Some(bytes), _) => Some(bytes),
            (None, Some(text)) => text.finish().map_err(|e| self.text_failed = Some(e)).ok(),
            (None, None) => None,
        };
        if let Some(bytes) = text {
            self.store.put(&text_name(R::SIGNAL, self.meta.id), &bytes)?;
        }
        if let Some(why) = &self.text_failed {
            tracing::warn!(
                "part {} of {} is written without a full-text index (text queries scan it): {why}",
                self.meta.id,
                R::SIGNAL.as_str()
            );
        }
        if let Some(calls) = self.calls.take() {
            calls.finish()?;
        }
        if let Some(samples) = self.samples.take() {
            samples.finish()?;
        }
        let sink = self.writer.into_inner()?;
        ready()?;
        sink.0.commit()?;
        Part::open_with_index::<R>(self.store, self.meta, index)
    }
}

/// The helper thread of a [`PartWriter`], converting chunks of records to
/// Arrow batches in order. It ends when the writer (and so `chunks`) is
/// dropped.
struct Converter<R> {
    chunks: std::sync::mpsc::SyncSender<Vec<Arc<R>>>,
    batches: std::sync::mpsc::Receiver<Result<RecordBatch>>,
    /// Chunks sent whose batches were not received yet.
    in_flight: usize,
}

/// A part's full-text index, built on a thread of its own from the same
/// chunks of rows the converter gets: tokenizing is a third of a log
/// part's flush, and the flush is what ingest waits for when the hot tier
/// is full.
struct TextThread<R> {
    chunks: Option<std::sync::mpsc::SyncSender<Vec<Arc<R>>>>,
    done: Option<std::thread::JoinHandle<std::result::Result<Vec<u8>, String>>>,
}

impl<R: Columnar> TextThread<R> {
    fn start(mut builder: PartTextBuilder) -> std::result::Result<Self, String> {
        let (chunks, chunk_rx) = std::sync::mpsc::sync_channel::<Vec<Arc<R>>>(2);
        let done = std::thread::Builder::new()
            .name("skein-part-text".into())
            .spawn(move || {
                for chunk in chunk_rx {
                    for r in &chunk {
                        // On an error the rest is not read: the sender sees
                        // the channel closed and asks `finish` why.
                        builder.push(&**r).map_err(|e| e.to_string())?;
                    }
                }
                builder.finish().map_err(|e| e.to_string())
            })
            .map_err(|e| format!("start the part's text index thread: {e}"))?;
        Ok(TextThread {
            chunks: Some(chunks),
            done: Some(done),
        })
    }

    /// Hands rows to the thread; `false` when it stopped (an error).
    fn send(&self, chunk: Vec<Arc<R>>) -> bool {
        self.chunks.as_ref().is_some_and(|c| c.send(chunk).is_ok())
    }

    /// The index's bytes, once every row sent is indexed.
    fn finish(mut self) -> std::result::Result<Vec<u8>, String> {
        self.chunks = None;
        match self.done.take().map(|h| h.join()) {
            Some(Ok(out)) => out,
            Some(Err(_)) => Err("the text index thread panicked".into()),
            None => Err("the text index thread is gone".into()),
        }
    }
}

impl<R> Drop for TextThread<R> {
    fn drop(&mut self) {
        // A part abandoned midway: let the thread end, and wait for it.
        self.chunks = None;
        if let Some(h) = self.done.take() {
            let _ = h.join();
        }
    }
}

impl<R: Columnar> Converter<R> {
    fn start() -> Result<Self> {
        let (chunks, chunk_rx) = std::sync::mpsc::sync_channel::<Vec<Arc<R>>>(1);
        let (batch_tx, batches) = std::sync::mpsc::sync_channel(2);
        std::thread::Builder::new()
            .name("skein-part-arrow".into())
            .spawn(move || {
                for chunk in chunk_rx {
                    let refs: Vec<&R> = chunk.iter().map(|r| &**r).collect();
                    if batch_tx.send(R::to_batch(&refs)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("start part conversion thread", e))?;
        Ok(Converter {
            chunks,
            batches,
            in_flight: 0,
        })
    }

    fn send(&mut self, chunk: Vec<Arc<R>>) -> Result<()> {
        self.chunks.send(chunk).map_err(|_| Self::gone())?;
        self.in_flight += 1;
        Ok(())
    }

    fn receive(&mut self) -> Result<RecordBatch> {
        let batch = self.batches.recv().map_err(|_| Self::gone())?;
        self.in_flight -= 1;
        batch
    }

    fn gone() -> Error {
        Error::Other("part writer: the conversion thread stopped".into())
    }
}
