//! Everything `skein serve` can be told; the binary fills it from flags,
//! environment and a TOML file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skein_engine::Durability;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerConfig {
    pub data_dir: PathBuf,
    /// Parts in a bucket (`--storage s3://…`) instead of only on local disk.
    #[serde(skip)]
    pub object_storage: Option<skein_engine::ObjectStorageOptions>,
    pub otlp_grpc_addr: SocketAddr,
    pub otlp_http_addr: SocketAddr,
    pub api_addr: SocketAddr,
    #[serde(with = "durability_serde")]
    pub durability: Durability,
    /// Largest request body (after gzip decompression).
    pub max_body_bytes: usize,
    /// Request bytes being ingested at once; past it, requests get 503.
    pub max_inflight_bytes: usize,
    /// Hot-tier size before it is written to a part.
    pub hot_max_bytes: usize,
    /// Hot-tier age before it is written to a part (when not empty).
    #[serde(with = "millis")]
    pub hot_max_age: Duration,
    /// Strings longer than this go to the payload store; 0 turns it off.
    pub payload_threshold: usize,
    /// Decompressed Parquet pages cached for point reads (0: off).
    pub page_cache_bytes: usize,
    pub wal_salvage: bool,
    /// How long shutdown waits for in-flight requests.
    #[serde(with = "secs")]
    pub shutdown_timeout: Duration,
    /// LLM prices: the built-in table with a `--pricing` file's entries in
    /// front (none: the built-in table alone).
    #[serde(skip)]
    pub pricing: Option<std::sync::Arc<skein_model::genai::Pricing>>,
    /// The byte budget of one MCP tool result (`/mcp`).
    pub mcp_max_bytes: usize,
    /// The agent skill text, offered by `/mcp` as a prompt (the binary
    /// holds it; none: no prompt).
    #[serde(skip)]
    pub skill: Option<&'static str>,
    /// Bearer tokens and their scopes (none: open, on loopback only unless
    /// `allow_unauthenticated`).
    #[serde(skip)]
    pub tokens: Option<std::sync::Arc<crate::auth::TokenSet>>,
    /// The `--auth-tokens` file, read again on SIGHUP.
    pub auth_tokens: Option<PathBuf>,
    /// `/metrics` without a token.
    pub metrics_public: bool,
    /// Serve addresses beyond loopback without tokens.
    pub allow_unauthenticated: bool,
    /// PII redaction rules applied to every record before it is stored.
    #[serde(skip)]
    pub redactor: Option<std::sync::Arc<skein_redact::Redactor>>,
    /// How long each signal is kept (none: for ever).
    #[serde(skip)]
    pub retention: skein_engine::Retention,
    /// How often retention runs.
    #[serde(with = "millis")]
    pub retention_interval: Duration,
    /// Below this much free space, ingest is refused.
    #[serde(skip)]
    pub min_free_disk: skein_engine::MinFreeDisk,
    /// Also drop the oldest parts below it.
    #[serde(skip)]
    pub on_disk_full: skein_engine::OnDiskFull,
    /// TLS on every port (`--tls-cert`, `--tls-key`); none: plain TCP.
    #[serde(skip)]
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// Where admin actions are appended (`--audit-log`; none:
    /// `DATA_DIR/audit.log`).
    pub audit_log: Option<PathBuf>,
    /// Settings for backups to `s3://…` (the `--s3-*` flags, over the
    /// `AWS_*` environment), whether or not parts live in a bucket.
    #[serde(skip)]
    pub backup_bucket_options: Vec<(String, String)>,
    /// Wait for an unreachable bucket at start (saying so in /readyz)
    /// rather than refusing to start.
    pub storage_wait: bool,
    /// How often a `--read-only` server takes the bucket's listing again.
    #[serde(with = "millis")]
    pub refresh_interval: Duration,
    /// Limits of `POST /api/v1/sql` (memory, timeout, JSON row cap).
    #[serde(skip)]
    pub sql: skein_sql::SqlOptions,
    /// A header a trusted gateway sets to the tenant of each request
    /// (`--tenant-header`; none: tenants come from tokens only).
    pub tenant_header: Option<String>,
    /// Retention of particular tenants (`--tenant-retention`); the others
    /// keep `retention`.
    #[serde(skip)]
    pub tenant_retention: std::collections::BTreeMap<crate::tenancy::TenantId, skein_engine::Retention>,
}

pub const DEFAULT_OTLP_GRPC: &str = "127.0.0.1:4317";
pub const DEFAULT_OTLP_HTTP: &str = "127.0.0.1:4318";
pub const DEFAULT_API: &str = "127.0.0.1:7700";

impl ServerConfig {
    pub fn new(data_dir: PathBuf) -> Self {
        ServerConfig {
            data_dir,
            object_storage: None,
            otlp_grpc_addr: DEFAULT_OTLP_GRPC.parse().expect("valid default"),
            otlp_http_addr: DEFAULT_OTLP_HTTP.parse().expect("valid default"),
            api_addr: DEFAULT_API.parse().expect("valid default"),
            durability: Durability::Fsync,
            max_body_bytes: 64 << 20,
            max_inflight_bytes: 64 << 20,
            hot_max_bytes: 128 << 20,
            hot_max_age: Duration::from_secs(60),
            payload_threshold: 4096,
            page_cache_bytes: 128 << 20,
            wal_salvage: false,
            shutdown_timeout: Duration::from_secs(30),
            pricing: None,
            mcp_max_bytes: crate::mcp::DEFAULT_MAX_BYTES,
            skill: None,
            tokens: None,
            auth_tokens: None,
            metrics_public: false,
            allow_unauthenticated: false,
            redactor: None,
            retention: skein_engine::Retention::default(),
            retention_interval: Duration::from_secs(60),
            min_free_disk: skein_engine::MinFreeDisk::Auto,
            on_disk_full: skein_engine::OnDiskFull::Refuse,
            tls: None,
            audit_log: None,
            backup_bucket_options: Vec::new(),
            storage_wait: false,
            refresh_interval: Duration::from_secs(10),
            sql: skein_sql::SqlOptions::default(),
            tenant_header: None,
            tenant_retention: Default::default(),
        }
    }
}

mod durability_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use skein_engine::Durability;

    pub fn serialize<S: Serializer>(d: &Durability, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.to_string())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Durability, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_secs(u64::deserialize(d)?))
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
