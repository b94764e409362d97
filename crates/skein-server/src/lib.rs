//! Skein's network surfaces over the engine: OTLP/gRPC and OTLP/HTTP ingest,
//! the simple JSON span API, the REST query API, the MCP server over it,
//! health and self-metrics, the web UI, with admission control in front of ingest.

mod admission;
pub mod api;
pub mod app;
pub mod audit;
pub mod audit_layer;
pub mod auth;
pub mod body;
pub mod config;
mod gate;
mod health;
mod http_ingest;
mod ingest;
pub mod json_api;
pub mod mcp;
pub mod metrics;
mod otlp_grpc;
pub mod otlp_http;
pub mod prometheus;
pub mod serve;
mod spans_api;
pub mod tenancy;
pub mod tls;
pub mod ui;

pub use config::ServerConfig;
pub use serve::{ServeError, run};
