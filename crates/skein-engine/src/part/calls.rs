//! A span part's calls table: the rows that are GenAI calls or carry a
//! session id (a few percent of a part), with the columns the LLM
//! aggregations read and each row's number in the part.
//!
//! Why a table of its own: in the part those rows are scattered, so an
//! aggregation decoded the null slots of every row of the sparse GenAI
//! columns, then whole pages of the dense columns (time, status, trace id)
//! to pick a few rows out of each; usage over 1M spans spent most of its
//! time there. Here the same values sit densely, in row order.
//!
//! It is a Parquet file beside the part (`spans/<id>.calls`), open data like
//! the part, and derived from it: the writer fills it from the batches it
//! writes and commits it before the part (a crash in between leaves an
//! orphan that recovery removes); missing or unreadable, it is rebuilt from
//! the part when the part opens. A part written before the typed GenAI
//! columns existed has none, and is decoded instead.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::columns::SPAN_LLM_COLUMNS;
use super::sink::SinkWriter;
use crate::error::{Error, Result};
use crate::storage::{ParquetSource, PartStore};

/// The column holding each row's number in its part.
pub const ROW: &str = "row";

/// The part's columns a calls table carries besides the GenAI ones.
const DENSE: &[&str] = &[
    "trace_id",
    "start_time_unix_nano",
    "duration_ns",
    "status_code",
    "service_name",
];

/// How a calls table's string columns are read: Int32 keys into Utf8
/// values.
fn dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// Object name of a span part's calls table.
pub fn calls_name(id: u64) -> String {
    format!("spans/{id:016x}.calls")
}

/// The part columns copied into a calls table, in its order.
fn copied() -> impl Iterator<Item = &'static str> {
    DENSE.iter().chain(SPAN_LLM_COLUMNS).copied()
}

/// Writes a calls table from a part's batches as they are written.
pub struct CallsWriter {
    writer: ArrowWriter<SinkWriter>,
    schema: SchemaRef,
    /// The part row of the next batch's first row.
    next_row: u32,
}

impl CallsWriter {
    /// A writer of part `id`'s calls table, if the part's schema has the
    /// columns (only span parts do).
    pub fn new(store: &Arc<dyn PartStore>, id: u64, part_schema: &Schema) -> Result<Option<CallsWriter>> {
        let mut fields = vec![Field::new(ROW, DataType::UInt32, false)];
        for name in copied() {
            let Ok(f) = part_schema.field_with_name(name) else {
                return Ok(None);
            };
            fields.push(f.clone());
        }
        let schema = Arc::new(Schema::new(fields));
        let props = WriterProperties::builder()
            .set_compression(Compression::LZ4_RAW)
            .set_column_dictionary_enabled(ColumnPath::from("trace_id"), false)
            .set_column_dictionary_enabled(ColumnPath::from(ROW), false)
            .set_created_by(format!("skein {}", env!("CARGO_PKG_VERSION")))
            .build();
        let sink = store.create(&calls_name(id))?;
        let writer = ArrowWriter::try_new(SinkWriter(sink), schema.clone(), Some(props))?;
        Ok(Some(CallsWriter {
            writer,
            schema,
            next_row: 0,
        }))
    }

    /// Copies the calls among the next rows of the part (a batch of the
    /// part's columns, or of those [`source_columns`] names at least).
    pub fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let first = self.next_row;
        self.next_row += batch.num_rows() as u32;
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| Error::Other(format!("calls table: the part's batch has no column {name}")))
        };
        let (kind, session) = (column("llm_kind")?, column("session_id")?);
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|i| Some(kind.is_valid(i) || session.is_valid(i)))
            .collect();
        if keep.true_count() == 0 {
            return Ok(());
        }
        let rows: UInt32Array = (0..batch.num_rows() as u32)
            .filter(|&i| keep.value(i as usize))
            .map(|i| first + i)
            .collect();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(rows)];
        for name in copied() {
            columns.push(arrow_select::filter::filter(column(name)?, &keep)?);
        }
        let out = RecordBatch::try_new(self.schema.clone(), columns)?;
        self.writer.write(&out)?;
        Ok(())
    }

    /// Commits the table (durably, as the store commits any object).
    pub fn finish(self) -> Result<()> {
        let sink = self.writer.into_inner()?;
        sink.0.commit()
    }
}

/// An open calls table: its footer resident, its rows read on demand.
pub struct CallsTable {
    source: ParquetSource,
    meta: ArrowReaderMetadata,
}

impl CallsTable {
    pub fn open(store: &Arc<dyn PartStore>, id: u64) -> Result<CallsTable> {
        let source = ParquetSource(store.open(&calls_name(id))?);
        let plain = ArrowReaderMetadata::load(&source, ArrowReaderOptions::new())?;
        // Strings are read as the dictionaries Parquet holds them in: no
        // copy per row, and a reader can tell equal values by their keys.
        let fields: Vec<Field> = plain
            .schema()
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Utf8 => f.as_ref().clone().with_data_type(dictionary()),
                _ => f.as_ref().clone(),
            })
            .collect();
        let options = ArrowReaderOptions::new().with_schema(Arc::new(Schema::new(fields)));
        let meta = ArrowReaderMetadata::try_new(plain.metadata().clone(), options)?;
        for name in std::iter::once(ROW).chain(copied()) {
            if meta.schema().index_of(name).is_err() {
                return Err(Error::corrupt(
                    format!("calls table {}", store.describe(&calls_name(id))),
                    format!("no column {name}"),
                ));
            }
        }
        Ok(CallsTable { source, meta })
    }

    /// Rows in the table.
    pub fn rows(&self) -> u64 {
        self.meta.metadata().file_metadata().num_rows().max(0) as u64
    }

    /// Every row's `row` and the given columns, in row order; string
    /// columns as dictionaries (Int32 keys).
    pub fn read(&self, columns: &[&str]) -> Result<Vec<RecordBatch>> {
        let mask = ProjectionMask::columns(
            self.meta.parquet_schema(),
            std::iter::once(ROW).chain(columns.iter().copied()),
        );
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(self.source.clone(), self.meta.clone())
            .with_projection(mask)
            .with_batch_size(64 * 1024)
            .build()?;
        reader.map(|b| b.map_err(Error::from)).collect()
    }

    pub fn memory_bytes(&self) -> usize {
        self.meta.metadata().memory_size()
    }
}

/// The columns of a part a calls table is rebuilt from.
pub fn source_columns() -> Vec<&'static str> {
    copied().collect()
}
