//! OTLP/gRPC: the collector's Trace, Logs and Metrics services (tonic), with
//! gzip. Admission control answers RESOURCE_EXHAUSTED; invalid records are
//! reported through partial success, a wholly invalid request is
//! INVALID_ARGUMENT.

use std::sync::Arc;
use std::time::Instant;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use crate::app::App;
use crate::ingest::{self, Logs, Metrics, OtlpSignal, Traces};

#[derive(Clone)]
pub struct Otlp {
    app: Arc<App>,
}

async fn export<S: OtlpSignal>(app: &Arc<App>, req: S::Request) -> Result<S::Response, Status> {
    let started = Instant::now();
    let engine = app.engine().map_err(|nr| Status::unavailable(nr.message()))?.clone();
    let size = req.encoded_len();
    let Some(ticket) = app.admission.try_admit(size) else {
        app.metrics.rejected_requests.add("reason=\"overloaded\"", 1);
        return Err(Status::resource_exhausted(
            "ingest is at capacity (in-flight request bytes); retry with backoff",
        ));
    };
    let app2 = app.clone();
    let stored = tokio::task::spawn_blocking(move || {
        let _ticket = ticket;
        let decoded = S::convert(req);
        ingest::store::<S>(&app2, &engine, decoded, "grpc", size)
    })
    .await
    .map_err(|e| Status::internal(e.to_string()))?
    .map_err(|e| Status::internal(format!("storing failed: {e}")))?;
    app.metrics.ingest_latency.observe(started.elapsed().as_secs_f64());
    if stored.accepted == 0 && stored.rejected > 0 {
        app.metrics.rejected_requests.add("reason=\"invalid_records\"", 1);
        return Err(Status::invalid_argument(stored.message));
    }
    Ok(S::response(stored.rejected, stored.message))
}

#[tonic::async_trait]
impl TraceService for Otlp {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        export::<Traces>(&self.app, request.into_inner())
            .await
            .map(Response::new)
    }
}

#[tonic::async_trait]
impl LogsService for Otlp {
    async fn export(
        &self,
        request: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        export::<Logs>(&self.app, request.into_inner()).await.map(Response::new)
    }
}

#[tonic::async_trait]
impl MetricsService for Otlp {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        export::<Metrics>(&self.app, request.into_inner())
            .await
            .map(Response::new)
    }
}

/// The gRPC router with the three OTLP services.
pub fn router(app: Arc<App>) -> tonic::service::Routes {
    let limit = app.config.max_body_bytes;
    let otlp = Otlp { app };
    let mut routes = tonic::service::RoutesBuilder::default();
    routes
        .add_service(
            TraceServiceServer::new(otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
        )
        .add_service(
            LogsServiceServer::new(otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
        )
        .add_service(
            MetricsServiceServer::new(otlp)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
        );
    routes.routes()
}
