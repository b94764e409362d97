//! The SQL runtime: queries plan and execute on threads of their own, at a
//! lower CPU priority than the rest of the process, and hand their batches
//! to the caller through a channel.
//!
//! Why: DataFusion operators are CPU work that returns to the scheduler only
//! between batches. On the server's I/O runtime a heavy query held every
//! worker, so `/metrics`, health checks and ingest waited for it. Here it
//! holds only these threads, and the kernel prefers the others (nice 10).
//!
//! Stopping: the forwarding task drops the query's stream (and with it every
//! operator task DataFusion spawned) as soon as the caller's end of the
//! channel is gone, checked between batches. A batch already being computed
//! finishes first; nothing can interrupt a computation in the middle.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};

use crate::Answer;

/// Nice value of the SQL threads (0 is the default, 19 the lowest).
const NICE: i32 = 10;

/// Batches waiting between a query and its caller.
const IN_FLIGHT: usize = 2;

pub struct Executor {
    /// `None` only while dropping (a runtime must be shut down without
    /// blocking, since the last owner may be an async task).
    runtime: Option<tokio::runtime::Runtime>,
    running: Arc<AtomicUsize>,
}

/// Counts a query as running for as long as it lives.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn new(count: &Arc<AtomicUsize>) -> Running {
        count.fetch_add(1, Ordering::SeqCst);
        Running(count.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Executor {
    pub fn new() -> std::io::Result<Executor> {
        // Twice the cores: a query runs on as many partitions as there are
        // cores, so a runaway one (a step that cannot be interrupted) holds
        // only half the workers, and the next query still finds some.
        let threads = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("skein-sql")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        Ok(Executor {
            runtime: Some(runtime),
            running: Arc::new(AtomicUsize::new(0)),
        })
    }

    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Runs `plan` on the SQL runtime, then streams what it returns. Gives
    /// up (and stops the query) if the caller stops waiting for the plan.
    pub async fn start<P>(&self, plan: P) -> Result<Answer, DataFusionError>
    where
        P: Future<Output = Result<(SchemaRef, SendableRecordBatchStream), DataFusionError>> + Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(DataFusionError::Execution("the SQL runtime is shut down".into()));
        };
        let running = Running::new(&self.running);
        let (planned_tx, planned_rx) = oneshot::channel::<Result<SchemaRef, DataFusionError>>();
        let (tx, rx) = mpsc::channel::<Result<RecordBatch, DataFusionError>>(IN_FLIGHT);
        runtime.spawn(async move {
            let _running = running;
            let mut planned_tx = planned_tx;
            let planned = tokio::select! {
                p = plan => p,
                _ = planned_tx.closed() => return,
            };
            let mut stream = match planned {
                Ok((schema, stream)) => {
                    if planned_tx.send(Ok(schema)).is_err() {
                        return;
                    }
                    stream
                }
                Err(e) => {
                    let _ = planned_tx.send(Err(e));
                    return;
                }
            };
            forward(&mut stream, &tx).await;
            // Dropped here, on this runtime: the operators' tasks with it.
            drop(stream);
        });
        let schema = planned_rx
            .await
            .map_err(|_| DataFusionError::Execution("the query stopped before it was planned".into()))??;
        let batches = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Answer {
            schema: schema.clone(),
            stream: Box::pin(RecordBatchStreamAdapter::new(schema, batches)),
        })
    }
}

/// Sends the stream's batches to `tx` until it ends or the receiver is
/// gone, whichever comes first.
async fn forward(stream: &mut SendableRecordBatchStream, tx: &mpsc::Sender<Result<RecordBatch, DataFusionError>>) {
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = tx.closed() => return,
        };
        let Some(item) = next else { return };
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            return;
        }
    }
}

fn lower_priority() {
    // On Linux the "process" of setpriority is the calling thread.
    // SAFETY: setpriority only reads its arguments.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, NICE);
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
