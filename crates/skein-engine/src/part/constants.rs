//! Columns that hold one value (or only NULLs) throughout a row group, known
//! from the row group's statistics, so point reads need not decode them.
//!
//! A trace lookup decodes a page of every record column; in typical data a
//! third of those columns never vary within a row group (trace state, links,
//! dropped counts, flags, the scope). Their statistics already say so:
//!
//! - all NULL: `null_count == num_rows`. The column is left out of the read;
//!   readers treat a missing column as NULL (the contract that lets later
//!   format versions add columns).
//! - one value: no NULLs, exact min equal to exact max (raw statistics
//!   bytes, so physical equality). The column is left out of the read and
//!   filled with that value, converted to Arrow by Parquet's own statistics
//!   converter.
//!
//! Floating-point columns are never treated as constant: Parquet leaves NaN
//! out of min/max, so equal bounds do not prove equal values. A column
//! without statistics, or with inexact (truncated) bounds, is read as usual.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array, new_null_array};
use arrow_schema::{Field, Schema};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::{FieldLevels, ProjectionMask, parquet_to_arrow_field_levels};
use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::RowGroupMetaData;

use crate::error::Result;

/// How to read one row group without its constant columns.
pub(crate) struct ConstantColumns {
    /// The record columns that vary.
    pub mask: ProjectionMask,
    pub levels: FieldLevels,
    /// Names of the columns read.
    #[cfg(test)]
    read: Vec<String>,
    /// Constant columns and their value (a one-row array); all-NULL columns
    /// are simply absent.
    fill: Vec<(Arc<Field>, ArrayRef)>,
}

impl ConstantColumns {
    /// Names of the columns filled with their constant value.
    #[cfg(test)]
    pub fn filled(&self) -> impl Iterator<Item = &str> {
        self.fill.iter().map(|(f, _)| f.name().as_str())
    }

    /// Whether the column `name` is read from the file.
    #[cfg(test)]
    pub fn reads(&self, name: &str) -> bool {
        self.read.iter().any(|c| c == name)
    }

    /// `batch` (read through `mask`) with the constant columns added back.
    pub fn complete(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if self.fill.is_empty() {
            return Ok(batch);
        }
        let n = batch.num_rows();
        let repeat = UInt32Array::from(vec![0u32; n]);
        let mut fields: Vec<Arc<Field>> = batch.schema().fields().iter().cloned().collect();
        let mut columns = batch.columns().to_vec();
        for (field, value) in &self.fill {
            fields.push(field.clone());
            columns.push(if n == 0 {
                new_null_array(field.data_type(), 0)
            } else {
                arrow_select::take::take(value, &repeat, None)?
            });
        }
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
    }
}

/// For each row group, how to read it without its constant record columns;
/// `None` for a row group where every record column varies.
pub(crate) fn find(meta: &ArrowReaderMetadata, record_columns: &[&str]) -> Result<Vec<Option<ConstantColumns>>> {
    let parquet = meta.metadata();
    let schema = parquet.file_metadata().schema_descr();
    let arrow = meta.schema();
    let groups = parquet.row_groups();
    // Per record column present in the file: its leaf and, per row group,
    // what the statistics prove.
    let mut columns: Vec<(usize, Vec<Kind>)> = Vec::new();
    for name in record_columns {
        let Some(leaf) = (0..schema.num_columns()).find(|&i| schema.column(i).path().string() == *name) else {
            continue;
        };
        let descr = schema.column(leaf);
        let floating = matches!(descr.physical_type(), PhysicalType::FLOAT | PhysicalType::DOUBLE)
            || descr
                .logical_type_ref()
                .is_some_and(|t| matches!(t, parquet::basic::LogicalType::Float16));
        let required = descr.max_def_level() == 0;
        let mut kinds: Vec<Kind> = groups.iter().map(|rg| kind(rg, leaf, required, floating)).collect();
        if kinds.iter().any(|k| matches!(k, Kind::Constant)) {
            // Typed values of every row group's min, from Parquet's own
            // conversion (units, signedness, logical types); a column it
            // cannot convert is read as usual.
            let mins = match StatisticsConverter::try_new(name, arrow, schema) {
                Ok(c) => Some(c.row_group_mins(groups.iter())?),
                Err(_) => None,
            };
            for (g, k) in kinds.iter_mut().enumerate() {
                if matches!(k, Kind::Constant) {
                    *k = match mins.as_ref().map(|m| m.slice(g, 1)) {
                        Some(v) if !v.is_null(0) => Kind::Value(v),
                        _ => Kind::Varies,
                    };
                }
            }
        }
        columns.push((leaf, kinds));
    }
    let mut out = Vec::with_capacity(groups.len());
    for g in 0..groups.len() {
        if columns
            .iter()
            .all(|(_, kinds)| matches!(kinds[g], Kind::Varies | Kind::Constant))
        {
            out.push(None);
            continue;
        }
        let mut leaves = Vec::new();
        let mut fill = Vec::new();
        for (leaf, kinds) in &columns {
            match &kinds[g] {
                Kind::Varies | Kind::Constant => leaves.push(*leaf),
                Kind::AllNull => {}
                Kind::Value(v) => {
                    let field = arrow.field_with_name(&schema.column(*leaf).path().string())?;
                    fill.push((Arc::new(field.clone()), v.clone()));
                }
            }
        }
        let mask = ProjectionMask::leaves(schema, leaves.iter().copied());
        let levels = parquet_to_arrow_field_levels(schema, mask.clone(), Some(arrow.fields()))?;
        out.push(Some(ConstantColumns {
            #[cfg(test)]
            read: leaves.iter().map(|&l| schema.column(l).path().string()).collect(),
            mask,
            levels,
            fill,
        }));
    }
    Ok(out)
}

enum Kind {
    Varies,
    AllNull,
    /// One value, not yet converted to Arrow.
    Constant,
    /// One value: a one-row array.
    Value(ArrayRef),
}

fn kind(rg: &RowGroupMetaData, leaf: usize, required: bool, floating: bool) -> Kind {
    let Some(stats) = rg.column(leaf).statistics() else {
        return Kind::Varies;
    };
    let rows = rg.num_rows() as u64;
    let nulls = stats.null_count_opt();
    if !required && rows > 0 && nulls == Some(rows) {
        return Kind::AllNull;
    }
    let no_nulls = required || nulls == Some(0);
    let equal_bounds = stats.min_is_exact()
        && stats.max_is_exact()
        && matches!((stats.min_bytes_opt(), stats.max_bytes_opt()), (Some(a), Some(b)) if a == b);
    if no_nulls && equal_bounds && !floating && rows > 0 {
        Kind::Constant
    } else {
        Kind::Varies
    }
}
