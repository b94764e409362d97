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

use super::index::{self, IndexBuilder, PartIndex};
use super::page_cache::{self, CachedRowGroups, PageCache};
use super::{Columnar, META_KEY, PartMeta, index_name, parquet_name};
use crate::error::{Error, Result};
use crate::storage::{ParquetSource, PartStore};

pub struct Part {
    pub meta: PartMeta,
    pub index: PartIndex,
    source: ParquetSource,
    arrow_meta: ArrowReaderMetadata,
    /// The columns records are decoded from (not the ones derived for SQL
    /// engines), and their Arrow decoding for reads through the page cache.
    record_columns: ProjectionMask,
    levels: FieldLevels,
    file_bytes: u64,
    /// The namespace of this part's pages in `page_cache`.
    instance: u64,
    page_cache: Option<Arc<PageCache>>,
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part").field("meta", &self.meta).finish()
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
        let file_bytes = source.0.len();
        let mut part = Part {
            meta,
            index: PartIndex::default(),
            source,
            arrow_meta,
            record_columns,
            levels,
            file_bytes,
            instance: page_cache::next_instance(),
            page_cache: None,
        };
        let idx_name = index_name(R::SIGNAL, id);
        let loaded = store.get(&idx_name).and_then(|b| index::decode(&b));
        match loaded {
            Ok(ix) => part.index = ix,
            Err(e) => {
                tracing::warn!("rebuilding index of part {}: {e}", store.describe(&name));
                part.index = part.rebuild_index::<R>()?;
                store.put(&idx_name, &index::encode(&part.index)?)?;
            }
        }
        Ok(part)
    }

    pub(crate) fn open_with_index<R: Columnar>(
        store: Arc<dyn PartStore>,
        meta: PartMeta,
        index: PartIndex,
    ) -> Result<Part> {
        let name = parquet_name(meta.signal, meta.id);
        let source = ParquetSource(store.open(&name)?);
        let (arrow_meta, record_columns, levels) = load_metadata(&source, R::record_columns())?;
        let file_bytes = source.0.len();
        Ok(Part {
            meta,
            index,
            source,
            arrow_meta,
            record_columns,
            levels,
            file_bytes,
            instance: page_cache::next_instance(),
            page_cache: None,
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

    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Memory held for this part: sidecar plus Parquet metadata.
    pub fn memory_bytes(&self) -> usize {
        self.index.memory_bytes() + self.arrow_meta.metadata().memory_size()
    }

    fn builder(&self) -> ParquetRecordBatchReaderBuilder<ParquetSource> {
        ParquetRecordBatchReaderBuilder::new_with_metadata(self.source.clone(), self.arrow_meta.clone())
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

    /// Decodes the given rows (ascending, unique) into records, in row order.
    pub fn read_rows<R: Columnar>(&self, rows: &[u32]) -> Result<Vec<R>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]));
        let (groups, selection) = self.restrict(rows);
        let reader = match &self.page_cache {
            Some(cache) => {
                let row_groups = CachedRowGroups {
                    cache,
                    instance: self.instance,
                    source: &self.source,
                    metadata: self.arrow_meta.metadata(),
                    row_groups: &groups,
                };
                ParquetRecordBatchReader::try_new_with_row_groups(
                    &self.levels,
                    &row_groups,
                    rows.len(),
                    Some(selection),
                )?
            }
            None => self
                .builder()
                .with_projection(self.record_columns.clone())
                .with_row_groups(groups)
                .with_row_selection(selection)
                .with_batch_size(rows.len())
                .build()?,
        };
        let mut out = Vec::with_capacity(rows.len());
        for batch in reader {
            out.extend(R::from_batch(&batch?)?);
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
        let reader = self
            .builder()
            .with_projection(mask)
            .with_row_groups(groups)
            .with_row_selection(selection)
            .with_batch_size(rows.len())
            .build()?;
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

    /// Streams every record in row (time) order, `batch_rows` at a time.
    pub fn scan<R: Columnar>(&self, batch_rows: usize) -> Result<impl Iterator<Item = Result<Vec<R>>> + use<R>> {
        let reader = self
            .builder()
            .with_projection(self.record_columns.clone())
            .with_batch_size(batch_rows)
            .build()?;
        Ok(reader.map(|b| R::from_batch(&b?)))
    }
}
