//! The DataFusion table provider over the engine: a scan streams record
//! batches from the hot tier and the parts (`Engine::scan_batches`), with
//! projection, time range, service, trace id, attribute equality and limit
//! pushed into the engine's indexes.
//!
//! Every pushed filter is `Inexact`: the engine's indexes only narrow
//! (time marks cover strides of rows, postings are hashes), and DataFusion
//! re-checks each predicate on the rows that come back.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use skein_engine::{AttrFilter, AttrPredicate, AttrScope, Engine, ScanRequest, Window};
use skein_model::TraceId;

use crate::tables::{Table, values_printing_as};

/// Batches in flight between the engine's scan thread and DataFusion: the
/// scan blocks once this many wait, so a slow consumer holds it back.
const IN_FLIGHT: usize = 2;

/// A table of the engine.
pub struct EngineTable {
    pub(crate) engine: Arc<Engine>,
    pub(crate) table: Arc<Table>,
    pub(crate) batch_rows: usize,
}

impl fmt::Debug for EngineTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EngineTable({})", self.table.name)
    }
}

/// What one filter tells the engine.
enum Narrowing {
    Window(Window),
    Service(String),
    Trace(TraceId),
    Attr(AttrFilter),
    MetricName(String),
}

fn column_name(e: &Expr) -> Option<&str> {
    match e {
        Expr::Column(c) => Some(c.name.as_str()),
        _ => None,
    }
}

fn literal(e: &Expr) -> Option<&ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

fn text(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => Some(s),
        _ => None,
    }
}

/// Nanoseconds since the epoch of a timestamp literal (before the epoch:
/// 0, which narrows nothing away that the epoch would not).
fn nanos(v: &ScalarValue) -> Option<u64> {
    let ns: i128 = match v {
        ScalarValue::TimestampNanosecond(Some(t), _) => *t as i128,
        ScalarValue::TimestampMicrosecond(Some(t), _) => *t as i128 * 1_000,
        ScalarValue::TimestampMillisecond(Some(t), _) => *t as i128 * 1_000_000,
        ScalarValue::TimestampSecond(Some(t), _) => *t as i128 * 1_000_000_000,
        _ => return None,
    };
    Some(ns.clamp(0, u64::MAX as i128) as u64)
}

/// `attributes['k']` (DataFusion's `get_field` on a map column): the
/// scope and the key.
fn attr_access<'a>(e: &'a Expr, table: &Table) -> Option<(AttrScope, &'a str)> {
    let Expr::ScalarFunction(f) = e else { return None };
    if f.func.name() != "get_field" || f.args.len() != 2 {
        return None;
    }
    let scope = match column_name(&f.args[0])? {
        "attributes" => AttrScope::Record,
        "resource_attributes" => AttrScope::Resource,
        _ => return None,
    };
    // Only tables whose attribute maps exist.
    table.column("attributes")?;
    Some((scope, text(literal(&f.args[1])?)?))
}

impl EngineTable {
    /// What `e` tells the engine, if anything.
    fn narrowing(&self, e: &Expr) -> Option<Narrowing> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
            return None;
        };
        // Literal on the left: flip the comparison.
        let (col, op, lit) = match (literal(left), literal(right)) {
            (None, Some(l)) => (&**left, *op, l),
            (Some(l), None) => (&**right, op.swap()?, l),
            _ => return None,
        };
        if let Some((scope, key)) = attr_access(col, &self.table) {
            if op != Operator::Eq {
                return None;
            }
            let values = values_printing_as(text(lit)?)?;
            return Some(Narrowing::Attr(AttrFilter {
                scope,
                key: key.to_string(),
                predicate: AttrPredicate::AnyOf(values),
            }));
        }
        let name = column_name(col)?;
        if name == self.table.time_column {
            let t = nanos(lit)?;
            let w = match op {
                Operator::Eq => Window::new(t, t.saturating_add(1)),
                Operator::Gt => Window::new(t.saturating_add(1), u64::MAX),
                Operator::GtEq => Window::new(t, u64::MAX),
                Operator::Lt => Window::new(0, t),
                Operator::LtEq => Window::new(0, t.saturating_add(1)),
                _ => return None,
            };
            return Some(Narrowing::Window(w));
        }
        if op != Operator::Eq {
            return None;
        }
        let s = text(lit)?;
        match name {
            "service_name" => Some(Narrowing::Service(s.to_string())),
            "metric_name" if self.table.signal == skein_engine::Signal::Metrics => {
                Some(Narrowing::MetricName(s.to_string()))
            }
            // Logs without a trace have no trace id, and `= 'x'` is never
            // true of NULL, so narrowing by the trace index is sound there
            // too.
            "trace_id" => parse_trace(s).map(Narrowing::Trace),
            _ => None,
        }
    }

    fn request(&self, filters: &[Expr], columns: Vec<String>, limit: Option<usize>) -> ScanRequest {
        let mut req = ScanRequest {
            columns: Some(columns),
            batch_rows: self.batch_rows,
            ..Default::default()
        };
        for f in filters {
            match self.narrowing(f) {
                Some(Narrowing::Window(w)) => {
                    req.window = Window::new(req.window.start.max(w.start), req.window.end.min(w.end));
                }
                Some(Narrowing::Service(s)) => req.service = Some(s),
                Some(Narrowing::Trace(t)) => req.trace_id = Some(t),
                Some(Narrowing::Attr(a)) => req.attributes.push(a),
                Some(Narrowing::MetricName(n)) => req.metric_name = Some(n),
                None => {}
            }
        }
        if req.window.start > req.window.end {
            req.window = Window::new(req.window.end, req.window.end);
        }
        // A limit is only the engine's to apply when no filter is (rows it
        // returns may fail an Inexact one): DataFusion pushes one down only
        // then, but the check costs nothing.
        if filters.is_empty() {
            req.limit = limit.map(|l| l as u64);
        }
        req
    }
}

/// A trace id as the column prints it: 32 lowercase hex digits (other
/// text can never equal the column, and narrows nothing).
fn parse_trace(s: &str) -> Option<TraceId> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    TraceId::from_hex(s).ok()
}

#[async_trait]
impl TableProvider for EngineTable {
    fn schema(&self) -> SchemaRef {
        self.table.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match self.narrowing(f) {
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.table.columns.len()).collect(),
        };
        let schema = Arc::new(self.table.schema.project(&projection)?);
        let req = self.request(filters, self.table.sources(&projection), limit);
        let stream = EngineStream {
            engine: self.engine.clone(),
            table: self.table.clone(),
            projection,
            schema: schema.clone(),
            req,
        };
        Ok(Arc::new(StreamingTableExec::try_new(
            schema,
            vec![Arc::new(stream)],
            None,
            Vec::new(),
            false,
            limit,
        )?))
    }
}

/// One scan of the engine, as a DataFusion partition.
struct EngineStream {
    engine: Arc<Engine>,
    table: Arc<Table>,
    projection: Vec<usize>,
    schema: SchemaRef,
    req: ScanRequest,
}

impl fmt::Debug for EngineStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.req;
        write!(
            f,
            "EngineScan({}, window=[{}, {}), service={:?}, trace={:?}, attributes={}, limit={:?})",
            self.table.name,
            r.window.start,
            r.window.end,
            r.service,
            r.trace_id.map(|t| t.to_hex()),
            r.attributes.len(),
            r.limit
        )
    }
}

impl PartitionStream for EngineStream {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(IN_FLIGHT);
        let engine = self.engine.clone();
        let table = self.table.clone();
        let projection = self.projection.clone();
        let schema = self.schema.clone();
        let signal = table.signal;
        let req = self.req.clone();
        // The scan is synchronous (engine reads block on disk): it runs on
        // a blocking thread and hands batches over a bounded channel. When
        // DataFusion drops the stream (the query ended early, failed, timed
        // out, or its client went away) the send fails and the scan stops.
        tokio::task::spawn_blocking(move || {
            let mut failed: Option<DataFusionError> = None;
            let r = engine.scan_batches(
                signal,
                &req,
                &mut |batch| match table.convert(&batch, &projection, &schema) {
                    Ok(b) => tx.blocking_send(Ok(b)).is_ok(),
                    Err(e) => {
                        failed = Some(e);
                        false
                    }
                },
            );
            let err = match (r, failed) {
                (_, Some(e)) => Some(e),
                (Err(e), None) => Some(DataFusionError::External(Box::new(e))),
                (Ok(_), None) => None,
            };
            if let Some(e) = err {
                let _ = tx.blocking_send(Err(e));
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
    }
}
