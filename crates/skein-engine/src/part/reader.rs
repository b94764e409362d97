//! An open part: its footer metadata, resident sidecar index, and reads of
//! selected rows or columns straight from the Parquet file.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::{FieldLevels, ProjectionMask, parquet_to_arrow_field_levels};
use parquet::file::metadata::PageIndexPolicy;

use super::calls::{CallsTable, CallsWriter};
use super::columns::SharedParse;
use super::constants::{self, ConstantColumns};
use super::index::{self, IndexBuilder, PartIndex};
use super::page_cache::{self, CachedRowGroups, PageCache};
use super::samples::SampleTable;
use super::series_memo::SeriesMemo;
use super::{Columnar, META_KEY, PartMeta, index_name, parquet_name, text_name};
use crate::error::{Error, Result};
use crate::query::Window;
use crate::record::Signal;
use crate::storage::{ParquetSource, PartStore};
use skein_text::PartTextIndex;

pub struct Part {
    pub meta: PartMeta,
    pub index: PartIndex,
    /// The full-text index, when the part has one (see [`Part::text_index`]).
    /// Set at most once: a part is written without one and indexed later
    /// ([`Part::load_text_index`]), or opened with the one on disk.
    text: std::sync::OnceLock<PartTextIndex>,
    source: ParquetSource,
    /// `source` for point reads (mapped into memory when local).
    point_source: ParquetSource,
    arrow_meta: ArrowReaderMetadata,
    /// The columns records are decoded from (not the ones derived for SQL
    /// engines), and their Arrow decoding for reads through the page cache.
    record_columns: ProjectionMask,
    levels: FieldLevels,
    file_bytes: u64,
    /// The namespace of this part's pages in `page_cache`.
    instance: u64,
    page_cache: Option<Arc<PageCache>>,
    /// Resources and scopes already parsed by this part's point reads.
    parsed: SharedParse,
    /// Per row group, how point reads skip its constant columns.
    constants: Vec<Option<ConstantColumns>>,
    /// A span part's calls table (none for an older part, and for other
    /// signals).
    calls: Option<CallsTable>,
    /// A metric part's sample table (none for an older part, one whose
    /// table is damaged, and other signals).
    samples: Option<SampleTable>,
    /// A metric part's series, as its scans met them.
    series: SeriesMemo,
    /// [`Part::memory_bytes`] but the series memo and the text index, counted once: a part never changes, and
    /// counting walks every posting (`/api/v1/stats` and `/metrics` ask on
    /// every call; a client polling them took a tenth of a busy server).
    memory: std::sync::OnceLock<usize>,
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part").field("meta", &self.meta).finish()
    }
}

/// A part's full-text index, read in place (mapped, when the store can map
/// it). Missing or damaged, the part has none and text queries scan it: the
/// same answers, slower; damage is logged.
fn load_text_index(store: &Arc<dyn PartStore>, name: &str) -> Option<PartTextIndex> {
    let source = match store.open(name) {
        Ok(s) => s,
        // No such file: a part written with full-text indexes off.
        Err(_) => return None,
    };
    let source = match source.for_point_reads() {
        Ok(Some(mapped)) => mapped,
        _ => source,
    };
    let opened = source
        .read_at(0, source.len() as usize)
        .map_err(skein_text::TextError::from)
        .and_then(PartTextIndex::open);
    match opened {
        Ok(ix) => Some(ix),
        Err(e) => {
            tracing::warn!(
                "full-text index {} is not used (text queries scan its part): {e}",
                store.describe(name)
            );
            None
        }
    }
}

/// The source point reads go through: the mapped file when the store can
/// map it, else `source` itself (a failed map only costs speed).
fn point_source(source: &ParquetSource, store: &Arc<dyn PartStore>, name: &str) -> ParquetSource {
    match source.0.for_point_reads() {
        Ok(Some(mapped)) => ParquetSource(mapped),
        Ok(None) => source.clone(),
        Err(e) => {
            tracing::warn!(
                "point reads of {} go through read calls: cannot map it: {e}",
                store.describe(name)
            );
            source.clone()
        }
    }
}

fn load_metadata(
    source: &ParquetSource,
    record_columns: &[&str],
) -> Result<(ArrowReaderMetadata, ProjectionMask, FieldLevels)> {
    // The offset index lets point reads skip to the pages they need; the
    // column index (page min/max) is not used, so it is not kept in memory.
    let opts = ArrowReaderOptions::new()
        .with_offset_index_policy(PageIndexPolicy::Optional)
        .with_column_index_policy(PageIndexPolicy::Skip);
    let meta = ArrowReaderMetadata::load(source, opts)?;
    let mask = ProjectionMask::columns(meta.parquet_schema(), record_columns.iter().copied());
    let levels = parquet_to_arrow_field_levels(meta.parquet_schema(), mask.clone(), Some(meta.schema().fields()))?;
    Ok((meta, mask, levels))
}

impl Part {
    /// Opens a part from its Parquet file, loading its sidecar index or
    /// rebuilding it (and rewriting it) when missing or damaged.
    pub fn open<R: Columnar>(store: Arc<dyn PartStore>, id: u64) -> Result<Part> {
        let name = parquet_name(R::SIGNAL, id);
        let source = ParquetSource(store.open(&name)?);
        let (arrow_meta, record_columns, levels) = load_metadata(&source, R::record_columns())
            .map_err(|e| Error::corrupt(format!("part {}", store.describe(&name)), e.to_string()))?;
        let meta_json = arrow_meta
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == META_KEY))
            .and_then(|k| k.value.clone())
            .ok_or_else(|| {
                Error::corrupt(
                    format!("part {}", store.describe(&name)),
                    format!("no {META_KEY} metadata"),
                )
            })?;
        let meta: PartMeta = serde_json::from_str(&meta_json)
            .map_err(|e| Error::corrupt(format!("part {}", store.describe(&name)), e.to_string()))?;
        if meta.format_version > super::FORMAT_VERSION {
            return Err(Error::corrupt(
                format!("part {}", store.describe(&name)),
                format!(
                    "format version {} is newer than this skein supports ({})",
                    meta.format_version,
                    super::FORMAT_VERSION
                ),
            ));
        }
        let loaded = (arrow_meta, record_columns, levels);
        let mut part = Part::assemble::<R>(&store, &name, source, loaded, meta, PartIndex::default())
            .map_err(|e| Error::corrupt(format!("part {}", store.describe(&name)), e.to_string()))?;
        let idx_name = index_name(R::SIGNAL, id);
        let loaded = store.get(&idx_name).and_then(|b| index::decode(&b));
        match loaded {
            Ok(ix) => part.index = ix,
            Err(e) => {
                tracing::warn!("rebuilding index of part {}: {e}", store.describe(&name));
                part.index = part.rebuild_index::<R>()?;
                // Kept for the next open; a store that refuses (a reader's
                // bucket, a full disk) only costs the rebuild again then.
                if let Err(e) = store.put(&idx_name, &index::encode(&part.index, index::INDEX_ZSTD_LEVEL)?) {
                    tracing::warn!("the rebuilt index of part {} is not kept: {e}", store.describe(&name));
                }
            }
        }
        if R::SIGNAL == Signal::Spans && part.calls.is_none() {
            // Without it the part's own columns are read: slower, the same
            // answers; so a failure to write it (a full disk) is no reason
            // to refuse the part.
            part.calls = part.rebuild_calls(&store).unwrap_or_else(|e| {
                tracing::warn!("span part {} is read without a calls table: {e}", id);
                None
            });
        }
        Ok(part)
    }

    /// Writes the calls table again from the part's columns, a chunk at a
    /// time; `None` for a part without the typed GenAI columns.
    fn rebuild_calls(&self, store: &Arc<dyn PartStore>) -> Result<Option<CallsTable>> {
        let Some(mut w) = CallsWriter::new(store, self.meta.id, self.arrow_meta.schema())? else {
            return Ok(None);
        };
        tracing::info!(
            "rebuilding the calls table of span part {} (missing or unreadable)",
            self.meta.id
        );
        for b in self.read_columns(&super::calls::source_columns(), 0..self.rows(), 65536)? {
            w.add(&b)?;
        }
        w.finish()?;
        CallsTable::open(store, self.meta.id).map(Some)
    }

    /// The calls table, for a span part that has one.
    pub fn calls(&self) -> Option<&CallsTable> {
        self.calls.as_ref()
    }

    pub(crate) fn open_with_index<R: Columnar>(
        store: Arc<dyn PartStore>,
        meta: PartMeta,
        index: PartIndex,
    ) -> Result<Part> {
        let name = parquet_name(meta.signal, meta.id);
        let source = ParquetSource(store.open(&name)?);
        let loaded = load_metadata(&source, R::record_columns())?;
        Part::assemble::<R>(&store, &name, source, loaded, meta, index)
    }

    /// A part over its opened file, with what point reads derive from the
    /// file's metadata.
    fn assemble<R: Columnar>(
        store: &Arc<dyn PartStore>,
        name: &str,
        source: ParquetSource,
        (arrow_meta, record_columns, levels): (ArrowReaderMetadata, ProjectionMask, FieldLevels),
        meta: PartMeta,
        index: PartIndex,
    ) -> Result<Part> {
        let text = load_text_index(store, &text_name(meta.signal, meta.id))
            .map(std::sync::OnceLock::from)
            .unwrap_or_default();
        // Just written with its part, or (from `open`) loaded or rebuilt
        // after this.
        let calls = if R::SIGNAL == Signal::Spans {
            CallsTable::open(store, meta.id).ok()
        } else {
            None
        };
        let samples = match R::SIGNAL {
            // Without it the part's own columns are read: slower, the same
            // answers.
            Signal::Metrics => SampleTable::open(store, meta.id).unwrap_or_else(|e| {
                tracing::warn!("metric part {} is read without its sample table: {e}", meta.id);
                None
            }),
            _ => None,
        };
        Ok(Part {
            meta,
            index,
            text,
            point_source: point_source(&source, store, name),
            file_bytes: source.0.len(),
            source,
            constants: constants::find(&arrow_meta, R::record_columns())?,
            arrow_meta,
            record_columns,
            levels,
            instance: page_cache::next_instance(),
            page_cache: None,
            parsed: SharedParse::default(),
            calls,
            samples,
            series: SeriesMemo::default(),
            memory: std::sync::OnceLock::new(),
        })
    }

    /// Point reads of this part go through `cache` from now on.
    pub fn with_page_cache(mut self, cache: Option<Arc<PageCache>>) -> Part {
        self.page_cache = cache.filter(|c| c.enabled());
        self
    }

    fn rebuild_index<R: Columnar>(&self) -> Result<PartIndex> {
        let mut b = IndexBuilder::default();
        for chunk in self.scan::<R>(8192)? {
            for r in chunk? {
                b.add(&r);
            }
        }
        Ok(b.finish())
    }

    pub fn rows(&self) -> u32 {
        self.meta.rows as u32
    }

    /// The full-text index; `None` when the part has none (text queries
    /// then scan it).
    pub fn text_index(&self) -> Option<&PartTextIndex> {
        self.text.get()
    }

    /// Gives the part the full-text index the caller just stored beside
    /// it (as [`text_name`]), built from exactly its rows. `false` when it
    /// cannot be opened, or the part has one already (it keeps that one).
    pub fn load_text_index(&self, store: &Arc<dyn PartStore>) -> bool {
        load_text_index(store, &text_name(self.meta.signal, self.meta.id)).is_some_and(|ix| self.text.set(ix).is_ok())
    }

    /// Whether no row of this part can fall in `w` (read off its metadata).
    pub fn misses(&self, w: Window) -> bool {
        self.meta.rows == 0 || w.misses(self.meta.min_time, self.meta.max_time)
    }

    /// Whether every row of this part falls in `w`.
    pub fn within(&self, w: Window) -> bool {
        w.covers(self.meta.min_time, self.meta.max_time)
    }

    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Memory held for this part: sidecar plus Parquet metadata.
    pub fn memory_bytes(&self) -> usize {
        *self.memory.get_or_init(|| {
            self.index.memory_bytes()
                + self.arrow_meta.metadata().memory_size()
                + self.calls.as_ref().map_or(0, CallsTable::memory_bytes)
                + self.samples.as_ref().map_or(0, SampleTable::memory_bytes)
        }) + self.text_index_memory_bytes() as usize
            + self.series.memory_bytes()
    }

    /// A metric part's sample table, when it has one.
    pub fn samples(&self) -> Option<&SampleTable> {
        self.samples.as_ref()
    }

    /// The series a metric part's scans have described (see
    /// [`SeriesMemo`]).
    pub fn series_memo(&self) -> &SeriesMemo {
        &self.series
    }

    /// Bytes of the full-text index's file.
    pub fn text_index_bytes(&self) -> u64 {
        self.text.get().map_or(0, |t| t.size_bytes() as u64)
    }

    /// Heap bytes of the full-text index (its file is mapped, not counted).
    pub fn text_index_memory_bytes(&self) -> u64 {
        self.text.get().map_or(0, |t| t.memory_bytes() as u64)
    }

    fn builder(&self) -> ParquetRecordBatchReaderBuilder<ParquetSource> {
        ParquetRecordBatchReaderBuilder::new_with_metadata(self.source.clone(), self.arrow_meta.clone())
    }

    fn point_builder(&self) -> ParquetRecordBatchReaderBuilder<ParquetSource> {
        ParquetRecordBatchReaderBuilder::new_with_metadata(self.point_source.clone(), self.arrow_meta.clone())
    }

    /// The row groups holding `rows` (ascending), with the selection of
    /// `rows` relative to those row groups only: the reader then never sets
    /// up pages of row groups it would skip entirely.
    fn restrict(&self, rows: &[u32]) -> (Vec<usize>, RowSelection) {
        let meta = self.arrow_meta.metadata();
        let mut groups = Vec::new();
        let mut selectors = Vec::new();
        let mut start = 0u32;
        let mut i = 0;
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let end = start + rg.num_rows() as u32;
            let from = i;
            while i < rows.len() && rows[i] < end {
                i += 1;
            }
            if i > from {
                groups.push(g);
                let mut pos = start;
                let mut k = from;
                while k < i {
                    let run_start = rows[k];
                    let mut run_end = run_start + 1;
                    k += 1;
                    while k < i && rows[k] == run_end {
                        run_end += 1;
                        k += 1;
                    }
                    if run_start > pos {
                        selectors.push(RowSelector::skip((run_start - pos) as usize));
                    }
                    selectors.push(RowSelector::select((run_end - run_start) as usize));
                    pos = run_end;
                }
                if pos < end {
                    selectors.push(RowSelector::skip((end - pos) as usize));
                }
            }
            start = end;
        }
        (groups, RowSelection::from(selectors))
    }

    /// A reader of the `selection` of `groups` for a point read: through the
    /// page cache when there is one (`levels` are `mask`'s), else straight
    /// from the file.
    fn point_reader(
        &self,
        mask: &ProjectionMask,
        levels: &FieldLevels,
        groups: &[usize],
        selection: RowSelection,
        batch_rows: usize,
    ) -> Result<ParquetRecordBatchReader> {
        Ok(match &self.page_cache {
            Some(cache) => {
                let row_groups = CachedRowGroups {
                    cache,
                    instance: self.instance,
                    source: &self.point_source,
                    metadata: self.arrow_meta.metadata(),
                    row_groups: groups,
                };
                ParquetRecordBatchReader::try_new_with_row_groups(levels, &row_groups, batch_rows, Some(selection))?
            }
            None => self
                .point_builder()
                .with_projection(mask.clone())
                .with_row_groups(groups.to_vec())
                .with_row_selection(selection)
                .with_batch_size(batch_rows)
                .build()?,
        })
    }

    /// Decodes the given rows (ascending, unique) into records, in row order.
    pub fn read_rows<R: Columnar>(&self, rows: &[u32]) -> Result<Vec<R>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]));
        let (groups, selection) = self.restrict(rows);
        // A read inside one row group leaves out the columns constant there.
        let constant = match groups[..] {
            [g] => self.constants.get(g).and_then(Option::as_ref),
            _ => None,
        };
        let (mask, levels) = match constant {
            Some(c) => (&c.mask, &c.levels),
            None => (&self.record_columns, &self.levels),
        };
        let reader = self.point_reader(mask, levels, &groups, selection, rows.len())?;
        let mut out = Vec::with_capacity(rows.len());
        for batch in reader {
            let batch = match constant {
                Some(c) => c.complete(batch?)?,
                None => batch?,
            };
            out.extend(R::from_batch(&batch, &self.parsed)?);
        }
        Ok(out)
    }

    /// Reads some columns of the given rows (ascending, unique).
    pub fn read_row_columns(&self, columns: &[&str], rows: &[u32]) -> Result<Vec<RecordBatch>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mask = ProjectionMask::columns(self.arrow_meta.parquet_schema(), columns.iter().copied());
        let (groups, selection) = self.restrict(rows);
        let levels = parquet_to_arrow_field_levels(
            self.arrow_meta.parquet_schema(),
            mask.clone(),
            Some(self.arrow_meta.schema().fields()),
        )?;
        let reader = self.point_reader(&mask, &levels, &groups, selection, rows.len())?;
        reader.map(|b| b.map_err(Error::from)).collect()
    }

    /// Reads some columns of a contiguous row range, as Arrow batches.
    pub fn read_columns(&self, columns: &[&str], rows: Range<u32>, batch_rows: usize) -> Result<Vec<RecordBatch>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mask = ProjectionMask::columns(self.arrow_meta.parquet_schema(), columns.iter().copied());
        let selection = RowSelection::from(vec![
            RowSelector::skip(rows.start as usize),
            RowSelector::select((rows.end - rows.start) as usize),
        ]);
        let reader = self
            .builder()
            .with_projection(mask)
            .with_row_selection(selection)
            .with_batch_size(batch_rows)
            .build()?;
        reader.map(|b| b.map_err(Error::from)).collect()
    }

    /// Streams some columns of the rows in `rows` as Arrow batches of at
    /// most `batch_rows` rows, through one reader: each row group's pages
    /// are decoded once however many batches they make, and only the row
    /// groups holding a row are set up. Memory is one row group's column
    /// chunks and one batch; the selection is one entry per run of rows.
    pub fn stream_row_columns(
        &self,
        columns: &[&str],
        rows: &roaring::RoaringBitmap,
        batch_rows: usize,
    ) -> Result<impl Iterator<Item = Result<RecordBatch>> + use<>> {
        let mask = ProjectionMask::columns(self.arrow_meta.parquet_schema(), columns.iter().copied());
        let (groups, selection) = self.restrict_bitmap(rows);
        let reader = self
            .builder()
            .with_projection(mask)
            .with_row_groups(groups)
            .with_row_selection(selection)
            .with_batch_size(batch_rows.max(1))
            .build()?;
        Ok(reader.map(|b| b.map_err(Error::from)))
    }

    /// The first row of each row group, ascending: where a reader of some
    /// rows may split them so that no row group is decoded twice.
    pub fn row_group_starts(&self) -> Vec<u32> {
        let mut start = 0u32;
        let mut out = Vec::new();
        for rg in self.arrow_meta.metadata().row_groups() {
            out.push(start);
            start = start.saturating_add(rg.num_rows() as u32);
        }
        out
    }

    /// [`Part::restrict`] of a bitmap, walked once without listing it.
    fn restrict_bitmap(&self, rows: &roaring::RoaringBitmap) -> (Vec<usize>, RowSelection) {
        let meta = self.arrow_meta.metadata();
        let mut groups = Vec::new();
        let mut selectors = Vec::new();
        let mut it = rows.iter().peekable();
        let mut start = 0u32;
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let end = start + rg.num_rows() as u32;
            let mut pos = start;
            let mut any = false;
            while let Some(&r) = it.peek() {
                if r >= end {
                    break;
                }
                it.next();
                let mut run_end = r + 1;
                // A run stops at the row group's end: selections are
                // relative to the row groups read.
                while run_end < end && it.peek() == Some(&run_end) {
                    run_end += 1;
                    it.next();
                }
                if !any {
                    groups.push(g);
                    any = true;
                }
                if r > pos {
                    selectors.push(RowSelector::skip((r - pos) as usize));
                }
                selectors.push(RowSelector::select((run_end - r) as usize));
                pos = run_end;
            }
            if any && pos < end {
                selectors.push(RowSelector::skip((end - pos) as usize));
            }
            start = end;
        }
        (groups, RowSelection::from(selectors))
    }

    /// Streams every record in row (time) order, holding only its text
    /// ([`Columnar::text_records`]), `batch_rows` at a time: what a text
    /// index is built from, without decoding the rest of each row.
    pub fn scan_text<R: Columnar>(&self, batch_rows: usize) -> Result<impl Iterator<Item = Result<Vec<R>>> + use<R>> {
        let mask = ProjectionMask::columns(self.arrow_meta.parquet_schema(), R::text_columns().iter().copied());
        let reader = self
            .builder()
            .with_projection(mask)
            .with_batch_size(batch_rows)
            .build()?;
        Ok(reader.map(|b| R::text_records(&b?)))
    }

    /// Streams every record in row (time) order, `batch_rows` at a time.
    pub fn scan<R: Columnar>(&self, batch_rows: usize) -> Result<impl Iterator<Item = Result<Vec<R>>> + use<R>> {
        let reader = self
            .builder()
            .with_projection(self.record_columns.clone())
            .with_batch_size(batch_rows)
            .build()?;
        let shared = SharedParse::default();
        Ok(reader.map(move |b| R::from_batch(&b?, &shared)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skein_model::Span;

    use super::*;
    use crate::part::{PartMeta, PartWriter, WriterOptions};
    use crate::record::{Record, Signal};
    use crate::storage::LocalStore;
    use crate::testdata;

    fn write_spans(dir: &std::path::Path, spans: &[Span]) -> (Arc<dyn PartStore>, Part) {
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir, &["spans"]).unwrap());
        let mut w = PartWriter::<Span>::new(
            store.clone(),
            PartMeta::new(Signal::Spans, 1),
            &WriterOptions::default(),
        )
        .unwrap();
        let mut sorted = spans.to_vec();
        sorted.sort_by_key(|s| (s.time(), s.key()));
        for s in sorted {
            w.push(Arc::new(s)).unwrap();
        }
        (store, w.finish().unwrap())
    }

    #[test]
    fn point_reads_of_a_part_share_parsed_resources() {
        let dir = tempfile::tempdir().unwrap();
        let (_, part) = write_spans(dir.path(), &testdata::spans(20, 5));
        let first: Vec<Span> = part.read_rows(&[0, 1]).unwrap();
        let again: Vec<Span> = part.read_rows(&[0, 50]).unwrap();
        assert_eq!(first[0], again[0]);
        assert!(
            Arc::ptr_eq(&first[0].resource, &again[0].resource),
            "a resource is parsed once per part, not once per read"
        );
        assert!(Arc::ptr_eq(&first[0].scope, &again[0].scope));
        // A part reopened from disk reads the same records.
        let reopened = Part::open::<Span>(Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap()), 1).unwrap();
        let rows: Vec<u32> = (0..100).collect();
        let all: Vec<Span> = part.read_rows(&rows).unwrap();
        assert_eq!(reopened.read_rows::<Span>(&rows).unwrap(), all);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..Default::default() })]

        /// A bitmap's selection is the row list's, and streaming it gives
        /// exactly those rows, in order, in batches no larger than asked.
        #[test]
        fn streamed_rows_are_the_selected_rows(
            picks in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..300),
            batch in 1usize..70,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
            // Row groups of 64 rows: runs must stop at their ends.
            let opts = WriterOptions { row_group_rows: 64, ..WriterOptions::default() };
            let mut w = PartWriter::<Span>::new(store, PartMeta::new(Signal::Spans, 1), &opts).unwrap();
            let mut spans = testdata::spans(60, 5);
            spans.sort_by_key(|s| (s.time(), s.key()));
            for s in &spans {
                w.push(Arc::new(s.clone())).unwrap();
            }
            let part = w.finish().unwrap();
            let rows: Vec<u32> = picks.iter().enumerate().filter(|(_, p)| **p).map(|(i, _)| i as u32).collect();
            let bitmap: roaring::RoaringBitmap = rows.iter().copied().collect();
            proptest::prop_assert_eq!(part.restrict_bitmap(&bitmap), part.restrict(&rows));
            let mut ids = Vec::new();
            for b in part.stream_row_columns(&["span_id"], &bitmap, batch).unwrap() {
                let b = b.unwrap();
                proptest::prop_assert!(b.num_rows() <= batch);
                let col = arrow_array::cast::AsArray::as_fixed_size_binary(b.column(0));
                ids.extend((0..b.num_rows()).map(|i| col.value(i).to_vec()));
            }
            let want: Vec<Vec<u8>> = rows.iter().map(|&r| spans[r as usize].span_id.as_bytes().to_vec()).collect();
            proptest::prop_assert_eq!(ids, want);
        }
    }

    /// Point reads through the page cache decompress zstd pages on their
    /// own (see `zstd_pages`): the rows are those of a plain read, whether
    /// a page is missed, admitted or served from the cache, in pages of
    /// every kind (dictionary, data, nulls only).
    #[test]
    fn cached_point_reads_read_what_plain_reads_do() {
        use skein_model::{AnyValue, LogRecord};
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["logs"]).unwrap());
        // Small pages and row groups: many of each.
        let opts = WriterOptions {
            row_group_rows: 500,
            page_rows: 64,
            bulky_page_bytes: 2 << 10,
            ..WriterOptions::default()
        };
        let mut w = PartWriter::<LogRecord>::new(store.clone(), PartMeta::new(Signal::Logs, 1), &opts).unwrap();
        let mut logs = testdata::logs(1500);
        for (i, l) in logs.iter_mut().enumerate() {
            l.body = match i % 5 {
                0 => AnyValue::Empty,
                1 => AnyValue::Int(i as i64),
                _ => AnyValue::Str(format!("request {i} failed: {}", "pool timeout ".repeat(i % 40))),
            };
        }
        logs.sort_by_key(|l| (l.time(), l.key()));
        for l in &logs {
            w.push(Arc::new(l.clone())).unwrap();
        }
        let plain = w.finish().unwrap();
        let cache = PageCache::new(64 << 20);
        let cached = Part::open::<LogRecord>(store, 1)
            .unwrap()
            .with_page_cache(Some(cache.clone()));
        let rows: Vec<u32> = (0..1500).filter(|r| r % 7 == 0 || r % 11 == 3).collect();
        let want: Vec<LogRecord> = plain.read_rows(&rows).unwrap();
        assert_eq!(want.len(), rows.len());
        for round in 0..3 {
            assert_eq!(cached.read_rows::<LogRecord>(&rows).unwrap(), want, "round {round}");
        }
        let s = cache.stats();
        assert!(s.pages > 0 && s.hits > 0, "{s:?}");
    }

    #[test]
    fn point_reads_keep_working_after_the_file_is_deleted() {
        // Compaction deletes the parts it replaced while readers may still
        // hold them; a mapped file stays readable until it is dropped.
        let dir = tempfile::tempdir().unwrap();
        let spans = testdata::spans(10, 5);
        let (store, part) = write_spans(dir.path(), &spans);
        let want: Vec<Span> = part.read_rows(&[3, 4, 5]).unwrap();
        store.remove(&parquet_name(Signal::Spans, 1)).unwrap();
        assert!(!dir.path().join(parquet_name(Signal::Spans, 1)).exists());
        assert_eq!(part.read_rows::<Span>(&[3, 4, 5]).unwrap(), want);
        assert_eq!(part.read_rows::<Span>(&[40, 41]).unwrap().len(), 2);
    }

    #[test]
    fn only_bulky_text_is_zstd_compressed() {
        use parquet::basic::Compression;
        let dir = tempfile::tempdir().unwrap();
        let mut spans = testdata::spans(10, 5);
        spans[0].status.message = "boom".into();
        let (_, part) = write_spans(dir.path(), &spans);
        let meta = part.arrow_meta.metadata();
        let rg = meta.row_group(0);
        let codec = |name: &str| {
            rg.columns()
                .iter()
                .find(|c| c.column_path().string() == name)
                .map(|c| c.compression())
                .unwrap()
        };
        assert!(matches!(codec("attributes"), Compression::ZSTD(_)));
        // Every zstd column chunk costs a point read two codec contexts.
        for sparse in ["events", "links", "status_message", "name", "resource"] {
            assert_eq!(codec(sparse), Compression::LZ4_RAW, "{sparse}");
        }
    }

    #[test]
    fn a_log_parts_times_are_deltas_not_dictionaries() {
        use parquet::basic::Encoding;
        use skein_model::LogRecord;
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["logs"]).unwrap());
        let mut w =
            PartWriter::<LogRecord>::new(store, PartMeta::new(Signal::Logs, 1), &WriterOptions::default()).unwrap();
        let mut logs = testdata::logs(500);
        logs.sort_by_key(|l| (l.time(), l.key()));
        for l in &logs {
            w.push(Arc::new(l.clone())).unwrap();
        }
        let part = w.finish().unwrap();
        let rg = part.arrow_meta.metadata().row_group(0);
        for name in ["timestamp", "time_unix_nano", "observed_time_unix_nano"] {
            let c = rg.columns().iter().find(|c| c.column_path().string() == name).unwrap();
            assert!(c.dictionary_page_offset().is_none(), "{name}");
            assert!(c.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED), "{name}");
        }
        let rows: Vec<u32> = (0..500).step_by(3).collect();
        let read: Vec<LogRecord> = part.read_rows(&rows).unwrap();
        let want: Vec<LogRecord> = rows.iter().map(|&r| logs[r as usize].clone()).collect();
        assert_eq!(read, want);
    }

    #[test]
    fn a_metric_parts_series_ids_are_a_dictionary() {
        use parquet::basic::Encoding;
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["metrics"]).unwrap());
        let mut w = PartWriter::<skein_model::MetricPoint>::new(
            store,
            PartMeta::new(Signal::Metrics, 1),
            &WriterOptions::default(),
        )
        .unwrap();
        let points = testdata::metric_points(20_000);
        for p in &points {
            w.push(Arc::new(p.clone())).unwrap();
        }
        let part = w.finish().unwrap();
        let meta = part.arrow_meta.metadata();
        let chunk = meta
            .row_group(0)
            .columns()
            .iter()
            .find(|c| c.column_path().string() == "series_id")
            .unwrap();
        assert!(chunk.encodings().any(|e| e == Encoding::RLE_DICTIONARY));
        // 15 series: far below the eight bytes a row of plain ids.
        let per_row = chunk.compressed_size() as f64 / meta.row_group(0).num_rows() as f64;
        assert!(per_row < 1.0, "{per_row} bytes a row");
    }

    #[test]
    fn pages_of_bulky_columns_end_at_their_byte_limit() {
        // 1,000 spans with ~1 KiB of attributes each: one 1,024-row page
        // would make a point read decompress a megabyte for one row.
        let dir = tempfile::tempdir().unwrap();
        let mut spans = testdata::spans(100, 10);
        for (i, s) in spans.iter_mut().enumerate() {
            s.attributes.push(skein_model::KeyValue::new(
                "payload",
                format!("{i:04}-{}", "x".repeat(1000)),
            ));
        }
        let (_, part) = write_spans(dir.path(), &spans);
        let meta = part.arrow_meta.metadata();
        let pages = |name: &str| {
            let column = meta
                .row_group(0)
                .columns()
                .iter()
                .position(|c| c.column_path().string() == name)
                .unwrap();
            meta.offset_index().unwrap()[0][column].page_locations.len()
        };
        // Pages of at most 32 KiB (and a row): ~1 MB of attributes.
        assert!(pages("attributes") >= 1_000_000 / (32 << 10), "{}", pages("attributes"));
        assert_eq!(pages("duration_ns"), 1, "other columns keep whole pages");
        // Reads across the page boundaries still see every row.
        let rows: Vec<u32> = (0..1000).step_by(7).collect();
        let read: Vec<Span> = part.read_rows(&rows).unwrap();
        assert_eq!(read.len(), rows.len());
        assert!(read.iter().all(|s| s.attributes.iter().any(|kv| kv.key == "payload")));
    }

    fn write_small_groups<R: Columnar + Clone>(dir: &std::path::Path, records: &[R]) -> Part {
        let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir, &[R::SIGNAL.as_str()]).unwrap());
        let opts = WriterOptions {
            row_group_rows: 50,
            page_rows: 16,
            ..WriterOptions::default()
        };
        let mut w = PartWriter::<R>::new(store, PartMeta::new(R::SIGNAL, 1), &opts).unwrap();
        for r in records {
            w.push(Arc::new(r.clone())).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn constant_columns_are_filled_from_statistics_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut spans = testdata::spans(40, 5);
        spans.sort_by_key(|s| (s.time(), s.key()));
        // Row groups of 50: group 0 keeps the defaults (no trace state,
        // links or dropped counts; flags constant), group 1 has a flag and a
        // dropped count that vary, group 2 a trace state and a dropped
        // count that are constant but not the default, group 3 one link.
        for (i, s) in spans.iter_mut().enumerate() {
            match i / 50 {
                0 => s.flags = 7,
                1 => {
                    s.flags = (i % 3) as u32;
                    s.dropped_attributes_count = (i % 2) as u32;
                }
                2 => {
                    s.trace_state = "vendor=x".into();
                    s.dropped_events_count = 4;
                }
                _ => {}
            }
        }
        let (trace_id, span_id) = (spans[3].trace_id, spans[3].span_id);
        spans[170].links.push(skein_model::Link {
            trace_id,
            span_id,
            trace_state: String::new(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            flags: 0,
        });
        let part = write_small_groups(dir.path(), &spans);
        assert_eq!(part.arrow_meta.metadata().num_row_groups(), 4);
        let filled = |g: usize| -> Vec<String> {
            part.constants[g]
                .as_ref()
                .map(|c| c.filled().map(str::to_string).collect())
                .unwrap_or_default()
        };
        assert!(filled(0).contains(&"flags".to_string()), "{:?}", filled(0));
        assert!(filled(0).contains(&"dropped_links_count".to_string()));
        assert!(!filled(1).contains(&"flags".to_string()), "varies in group 1");
        assert!(filled(2).contains(&"dropped_events_count".to_string()));
        for g in 0..4 {
            let c = part.constants[g].as_ref().expect("every group has constant columns");
            assert!(c.reads("name") && c.reads("attributes"), "group {g}");
            assert_eq!(c.reads("links"), g == 3, "links are all NULL except in group 3");
            assert!(!c.reads("trace_state"), "group {g}");
        }
        // Every row alone, every group whole, and runs across groups.
        for r in 0..spans.len() as u32 {
            assert_eq!(
                part.read_rows::<Span>(&[r]).unwrap(),
                vec![spans[r as usize].clone()],
                "row {r}"
            );
        }
        for rows in [
            (0..50).collect::<Vec<u32>>(),
            (100..150).collect(),
            (45..60).collect(),
            (0..200).step_by(7).collect(),
        ] {
            let want: Vec<Span> = rows.iter().map(|&r| spans[r as usize].clone()).collect();
            assert_eq!(part.read_rows::<Span>(&rows).unwrap(), want);
        }
    }

    #[test]
    fn equal_float_bounds_do_not_make_a_column_constant() {
        // Parquet leaves NaN out of min/max: a row group of 1.0 and NaN has
        // min == max == 1.0.
        use skein_model::{Number, PointValue};
        let dir = tempfile::tempdir().unwrap();
        let mut points: Vec<_> = testdata::metric_points(100)
            .into_iter()
            .filter(|p| matches!(p.value, PointValue::Number(_)))
            .collect();
        points.sort_by_key(|p| (p.time(), p.key()));
        for (i, p) in points.iter_mut().enumerate() {
            p.value = PointValue::Number(Some(Number::Double(if i % 5 == 0 { f64::NAN } else { 1.0 })));
        }
        let part = write_small_groups(dir.path(), &points);
        let rows: Vec<u32> = (0..points.len() as u32).collect();
        for r in rows {
            let got = part.read_rows::<skein_model::MetricPoint>(&[r]).unwrap();
            let PointValue::Number(Some(Number::Double(v))) = got[0].value else {
                panic!("row {r}: {:?}", got[0].value)
            };
            assert_eq!(v.is_nan(), r % 5 == 0, "row {r}: {v}");
        }
    }
}
