//! OTLP/gRPC: the collector's Trace, Logs and Metrics services (tonic), with
//! gzip. Admission control answers RESOURCE_EXHAUSTED; an engine that cannot
//! store (a failed WAL, failing flushes, starting or closing) UNAVAILABLE;
//! invalid records are reported through partial success, a wholly invalid
//! request is INVALID_ARGUMENT.

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
use crate::ingest::{self, IngestError, Logs, Metrics, OtlpSignal, Stored, Traces};
use crate::tenancy::Tenant;

#[derive(Clone)]
pub struct Otlp {
    app: Arc<App>,
}

/// Stores one call's request in the space of the tenant the gate's
/// interceptor named (the home space when no interceptor ran).
async fn export<S: OtlpSignal>(app: &Arc<App>, request: Request<S::Request>) -> Result<S::Response, Status> {
    let started = Instant::now();
    let tenant = request.extensions().get::<Tenant>().cloned().unwrap_or_default();
    let outcome = store::<S>(app, &tenant, request.into_inner()).await;
    ingest::account(app, started, &outcome);
    let stored = outcome.map_err(status)?;
    if stored.nothing_valid() {
        return Err(Status::invalid_argument(stored.message));
    }
    Ok(S::response(stored.rejected, stored.message))
}

/// Admits a decoded request (tonic read and decoded it within the size
/// limit) and stores it on a blocking thread.
async fn store<S: OtlpSignal>(app: &Arc<App>, tenant: &Tenant, req: S::Request) -> Result<Stored, IngestError> {
    let space = app.space(tenant).await?;
    let size = req.encoded_len();
    let ticket = app.admission.try_admit(size).ok_or(IngestError::Overloaded)?;
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        let _ticket = ticket;
        let decoded = S::convert(req);
        ingest::store::<S>(&app, &space, decoded, "grpc", size).map_err(IngestError::storing)
    })
    .await
    .map_err(|e| IngestError::Internal(e.to_string()))?
}

/// The gRPC status of a refused request.
fn status(e: IngestError) -> Status {
    match e {
        IngestError::NotReady(nr) => Status::unavailable(nr.message()),
        IngestError::Overloaded => {
            Status::resource_exhausted("ingest is at capacity (in-flight request bytes); retry with backoff")
        }
        // tonic reads and decodes gRPC bodies itself: these come from HTTP
        // only, but a refusal is a refusal.
        IngestError::Body(b) => Status::invalid_argument(b.message()),
        IngestError::Malformed(m) => Status::invalid_argument(m),
        IngestError::Unavailable(m) => Status::unavailable(m),
        IngestError::DiskFull(m) => Status::resource_exhausted(m),
        IngestError::ReadOnly(m) => Status::permission_denied(m),
        IngestError::Internal(m) => Status::internal(m),
    }
}

#[tonic::async_trait]
impl TraceService for Otlp {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        export::<Traces>(&self.app, request).await.map(Response::new)
    }
}

#[tonic::async_trait]
impl LogsService for Otlp {
    async fn export(
        &self,
        request: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        export::<Logs>(&self.app, request).await.map(Response::new)
    }
}

#[tonic::async_trait]
impl MetricsService for Otlp {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        export::<Metrics>(&self.app, request).await.map(Response::new)
    }
}

/// The gRPC router with the three OTLP services.
pub fn router(app: Arc<App>) -> tonic::service::Routes {
    let limit = app.config.max_body_bytes;
    let check = crate::gate::grpc(app.clone());
    let otlp = Otlp { app };
    let mut routes = tonic::service::RoutesBuilder::default();
    use tonic::service::interceptor::InterceptedService;
    routes
        .add_service(InterceptedService::new(
            TraceServiceServer::new(otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
            check.clone(),
        ))
        .add_service(InterceptedService::new(
            LogsServiceServer::new(otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
            check.clone(),
        ))
        .add_service(InterceptedService::new(
            MetricsServiceServer::new(otlp)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limit),
            check,
        ));
    routes.routes()
}

#[cfg(test)]
mod tests {
    use skein_model::corpus::Corpus;
    use skein_model::otlp::spans_to_otlp;

    use super::*;
    use crate::http_ingest::tests::{app_with_engine, rejected};

    #[tokio::test]
    async fn a_store_the_engine_refuses_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let (app, engine) = app_with_engine(dir.path());
        let request = spans_to_otlp(&Corpus::with_shape(1, 2, 1, 1, 1_700_000_000_000_000_000).spans(0..1));
        assert!(export::<Traces>(&app, Request::new(request.clone())).await.is_ok());
        engine.close().unwrap();
        let status = export::<Traces>(&app, Request::new(request)).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "storing failed: the engine is shutting down");
        assert!(rejected(&app, "unavailable"));
    }
}
