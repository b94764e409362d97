//! `skein serve`: configuration (flags win over environment, which wins over
//! the TOML file, which wins over defaults) and the process around the
//! server: logging, signals, exit codes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use skein_server::ServerConfig;

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML configuration file (keys as the long flags, with underscores).
    #[arg(long, env = "SKEIN_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory [default: the platform data dir, e.g. ~/.local/share/skein].
    #[arg(long, env = "SKEIN_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Keep parts, their indexes and payload packs in a bucket:
    /// s3://BUCKET/PREFIX (any S3-compatible store). The WAL and the hot
    /// tier stay in --data-dir; credentials, region and endpoint come from
    /// the AWS_* environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP) or the --s3-* flags.
    #[arg(long, env = "SKEIN_STORAGE", value_name = "URL")]
    storage: Option<String>,
    /// Where blocks read from the bucket and uploaded parts are cached
    /// [default: DATA_DIR/cache].
    #[arg(long, env = "SKEIN_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// The local cache's budget, e.g. 10GiB [default: 1GiB].
    #[arg(long, env = "SKEIN_CACHE_SIZE", value_name = "SIZE")]
    cache_size: Option<String>,
    /// At start, wait for a bucket that cannot be reached (down, missing,
    /// refusing the credentials), saying why in /readyz, instead of
    /// refusing to start. A bad --storage URL still refuses.
    #[arg(long, env = "SKEIN_STORAGE_WAIT")]
    storage_wait: bool,
    /// Serve queries from a bucket another skein writes (needs --storage):
    /// no lease, no ingest (403), nothing written to the bucket; new parts
    /// appear every --refresh-interval.
    #[arg(long, env = "SKEIN_READ_ONLY")]
    read_only: bool,
    /// How often --read-only takes the bucket's listing again, e.g. 10s
    /// [default: 10s].
    #[arg(long, env = "SKEIN_REFRESH_INTERVAL", value_name = "DURATION")]
    refresh_interval: Option<String>,
    /// How long an object the writer no longer needs (a part a merge
    /// replaced) stays in the bucket before it is deleted, so --read-only
    /// readers can finish reading it; longer than their --refresh-interval
    /// plus a query (needs --storage) [default: 1m].
    #[arg(long, env = "SKEIN_REMOVAL_GRACE", value_name = "DURATION")]
    removal_grace: Option<String>,
    /// The S3 endpoint (over AWS_ENDPOINT_URL), e.g. http://127.0.0.1:9000.
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// The S3 region (over AWS_REGION).
    #[arg(long, value_name = "REGION")]
    s3_region: Option<String>,
    /// Allow a plain-HTTP endpoint (over AWS_ALLOW_HTTP).
    #[arg(long)]
    s3_allow_http: bool,
    /// The access key id (over AWS_ACCESS_KEY_ID).
    #[arg(long, value_name = "ID")]
    s3_access_key_id: Option<String>,
    /// The secret access key (over AWS_SECRET_ACCESS_KEY).
    #[arg(long, value_name = "SECRET")]
    s3_secret_access_key: Option<String>,
    /// OTLP/gRPC listen address [default: 127.0.0.1:4317].
    #[arg(long, env = "SKEIN_OTLP_GRPC_ADDR", value_name = "ADDR")]
    otlp_grpc_addr: Option<String>,
    /// OTLP/HTTP listen address [default: 127.0.0.1:4318].
    #[arg(long, env = "SKEIN_OTLP_HTTP_ADDR", value_name = "ADDR")]
    otlp_http_addr: Option<String>,
    /// REST API listen address (also serves ingest) [default: 127.0.0.1:7700].
    #[arg(long, env = "SKEIN_API_ADDR", value_name = "ADDR")]
    api_addr: Option<String>,
    /// When an acknowledged write is on disk: `fsync` (before every ack,
    /// group-committed; nothing acknowledged is lost), `interval:<ms>ms`
    /// (fsync every <ms>; an OS crash loses at most that window), or `none`
    /// (the OS decides; survives process crashes only) [default: fsync].
    #[arg(long, env = "SKEIN_DURABILITY", value_name = "MODE")]
    durability: Option<String>,
    /// Largest request body, after gzip decompression, e.g. 64MiB [default: 64MiB].
    #[arg(long, env = "SKEIN_MAX_BODY_BYTES", value_name = "SIZE")]
    max_body_bytes: Option<String>,
    /// Request bytes ingested at once; beyond it requests get 503 /
    /// RESOURCE_EXHAUSTED [default: 64MiB].
    #[arg(long, env = "SKEIN_MAX_INFLIGHT_BYTES", value_name = "SIZE")]
    max_inflight_bytes: Option<String>,
    /// Hot-tier size before it is written to a Parquet part [default: 128MiB].
    #[arg(long, env = "SKEIN_HOT_MAX_BYTES", value_name = "SIZE")]
    hot_max_bytes: Option<String>,
    /// Hot-tier age before it is written to a Parquet part (when it holds
    /// anything), e.g. 60s, 500ms [default: 60s].
    #[arg(long, env = "SKEIN_HOT_MAX_AGE", value_name = "DURATION")]
    hot_max_age: Option<String>,
    /// Decompressed Parquet pages kept in memory for trace lookups and
    /// searches of recent data; 0 turns the cache off [default: 128MiB].
    #[arg(long, env = "SKEIN_PAGE_CACHE_BYTES", value_name = "SIZE")]
    page_cache_bytes: Option<String>,
    /// Strings longer than this (attributes, log bodies) are stored once in
    /// the payload store and referenced from their records; GenAI message
    /// content goes there from 256 bytes on. 0 turns the store off
    /// [default: 4KiB].
    #[arg(long, env = "SKEIN_PAYLOAD_THRESHOLD", value_name = "SIZE")]
    payload_threshold: Option<String>,
    /// A TOML file of LLM prices that extends or overrides the built-in
    /// table (`[[model]]` with `match`, `input_per_mtok`, `output_per_mtok`,
    /// …; docs/llm.md). A file that does not parse refuses to start.
    #[arg(long, env = "SKEIN_PRICING", value_name = "FILE")]
    pricing: Option<PathBuf>,
    /// On a corrupt WAL, cut the log at the damage and start (reporting the
    /// loss) instead of refusing to start.
    #[arg(long, env = "SKEIN_WAL_SALVAGE")]
    wal_salvage: bool,
    /// The byte budget of one MCP tool result at /mcp (e.g. 64KiB)
    /// [default: 16KiB]; a longer result is cut and carries a cursor to
    /// continue.
    #[arg(long, env = "SKEIN_MCP_MAX_BYTES", value_name = "SIZE")]
    mcp_max_bytes: Option<String>,
    /// Memory all running SQL queries (POST /api/v1/sql, `skein sql`) may
    /// hold together for sorts, joins and aggregations; a query needing
    /// more fails with `too_large` [default: 512MiB].
    #[arg(long, env = "SKEIN_SQL_MEMORY", value_name = "SIZE")]
    sql_memory: Option<String>,
    /// Longest a SQL query may run, its answer's streaming included, e.g.
    /// 30s, 2m [default: 30s].
    #[arg(long, env = "SKEIN_SQL_TIMEOUT", value_name = "DURATION")]
    sql_timeout: Option<String>,
    /// Rows of a JSON SQL answer; past them it says `truncated: true`
    /// (NDJSON, CSV and Arrow answers stream every row) [default: 10000].
    #[arg(long, env = "SKEIN_SQL_MAX_ROWS", value_name = "N")]
    sql_max_rows: Option<usize>,
    /// Bearer tokens and their scopes, a TOML file (`[[token]]` with `name`,
    /// `secret` or `sha256`, `scopes` of ingest, read, admin, optional
    /// `tenant`; docs/security.md), read again on SIGHUP. For one-liners,
    /// SKEIN_AUTH_TOKENS="read:SECRET,ingest:SECRET" instead.
    #[arg(long, env = "SKEIN_AUTH_TOKENS_FILE", value_name = "FILE")]
    auth_tokens: Option<PathBuf>,
    /// PII redaction rules (TOML, `[[rule]]` with `action` drop, mask or
    /// hash, `keys`, `pattern`, …; docs/security.md), applied to every
    /// record before it is stored. A file that does not parse refuses to
    /// start.
    #[arg(long, env = "SKEIN_REDACT", value_name = "FILE")]
    redact: Option<PathBuf>,
    /// The built-in redaction rules: emails, card numbers, IBANs, phone
    /// numbers, IP addresses, bearer tokens, API keys, JWTs, and the values
    /// of secret-looking keys (before any --redact rules).
    #[arg(long, env = "SKEIN_REDACT_DEFAULTS")]
    redact_defaults: bool,
    /// Serve /metrics without a token (Prometheus scrapers without one).
    #[arg(long, env = "SKEIN_METRICS_PUBLIC")]
    metrics_public: bool,
    /// Serve addresses other than loopback without tokens (anyone who can
    /// reach the port can then read and write everything).
    #[arg(long, env = "SKEIN_ALLOW_UNAUTHENTICATED")]
    allow_unauthenticated: bool,
    /// A header naming each request's tenant (e.g. X-Scope-OrgID), set by
    /// a trusted gateway in front. A token bound to a tenant may only
    /// repeat its own there; with other tokens (or none) the header
    /// chooses, so enable it only behind a gateway that sets it.
    #[arg(long, env = "SKEIN_TENANT_HEADER", value_name = "NAME")]
    tenant_header: Option<String>,
    /// How long one tenant's records are kept, `TENANT:POLICY` with POLICY
    /// as --retention (`acme:spans=7d,logs=3d`); repeat for more tenants.
    /// Other tenants keep --retention.
    #[arg(long, value_name = "TENANT:POLICY")]
    tenant_retention: Vec<String>,
    /// How long records are kept, by their time (span start, log time,
    /// metric point time) against the wall clock: `spans=7d,logs=3d,
    /// metrics=30d`; a bare duration (`30d`, or `all=30d`) sets the
    /// signals not named; `forever` keeps one. Older records are never
    /// answered and their parts, payloads and full-text entries are
    /// deleted in the background [default: forever].
    #[arg(long, env = "SKEIN_RETENTION", value_name = "POLICY")]
    retention: Option<String>,
    /// How often retention runs, e.g. 1m, 30s [default: 1m].
    #[arg(long, env = "SKEIN_RETENTION_INTERVAL", value_name = "DURATION")]
    retention_interval: Option<String>,
    /// Below this much free space on the data directory's filesystem,
    /// ingest answers 503 with Retry-After (gRPC RESOURCE_EXHAUSTED)
    /// before anything is written; queries go on. A size (1GiB, 512MiB) or
    /// a share (5%); 0 turns it off [default: 5% or 1GiB, whichever is
    /// smaller].
    #[arg(long, env = "SKEIN_MIN_FREE_DISK", value_name = "SIZE|PCT")]
    min_free_disk: Option<String>,
    /// What else happens below --min-free-disk: `refuse` (only refuse
    /// ingest) or `evict` (also drop the oldest parts until the floor is
    /// met) [default: refuse].
    #[arg(long, env = "SKEIN_ON_DISK_FULL", value_name = "POLICY")]
    on_disk_full: Option<String>,
    /// TLS on every port (API, OTLP/HTTP, OTLP/gRPC): the certificate
    /// chain, PEM. Needs --tls-key; a file that cannot be read or parsed
    /// refuses to start.
    #[arg(long, env = "SKEIN_TLS_CERT", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM (PKCS#8, RSA or EC).
    #[arg(long, env = "SKEIN_TLS_KEY", value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Where admin actions (erasures, token reloads, anything needing the
    /// admin scope) are appended as JSON lines [default: DATA_DIR/audit.log].
    #[arg(long, env = "SKEIN_AUDIT_LOG", value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Seconds shutdown waits for in-flight requests [default: 30].
    #[arg(long, env = "SKEIN_SHUTDOWN_TIMEOUT", value_name = "SECS")]
    shutdown_timeout: Option<u64>,
    /// Log filter, e.g. `info`, `debug`, `skein_engine=debug` [default: info].
    #[arg(long, env = "SKEIN_LOG", value_name = "FILTER")]
    log: Option<String>,
}

/// The TOML file: every key optional.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    storage: Option<String>,
    cache_dir: Option<PathBuf>,
    cache_size: Option<toml::Value>,
    storage_wait: Option<bool>,
    read_only: Option<bool>,
    refresh_interval: Option<String>,
    removal_grace: Option<String>,
    s3_endpoint: Option<String>,
    s3_region: Option<String>,
    s3_allow_http: Option<bool>,
    otlp_grpc_addr: Option<String>,
    otlp_http_addr: Option<String>,
    api_addr: Option<String>,
    durability: Option<String>,
    max_body_bytes: Option<toml::Value>,
    max_inflight_bytes: Option<toml::Value>,
    hot_max_bytes: Option<toml::Value>,
    hot_max_age: Option<String>,
    page_cache_bytes: Option<toml::Value>,
    payload_threshold: Option<toml::Value>,
    pricing: Option<PathBuf>,
    wal_salvage: Option<bool>,
    mcp_max_bytes: Option<toml::Value>,
    sql_memory: Option<toml::Value>,
    sql_timeout: Option<String>,
    sql_max_rows: Option<usize>,
    auth_tokens: Option<PathBuf>,
    redact: Option<PathBuf>,
    redact_defaults: Option<bool>,
    metrics_public: Option<bool>,
    allow_unauthenticated: Option<bool>,
    tenant_header: Option<String>,
    /// Tenant name → retention policy.
    tenant_retention: Option<std::collections::BTreeMap<String, String>>,
    shutdown_timeout: Option<u64>,
    retention: Option<String>,
    retention_interval: Option<String>,
    min_free_disk: Option<String>,
    on_disk_full: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    log: Option<String>,
}

/// A header name for --tenant-header: an HTTP token, and not one that
/// carries something else already.
fn parse_tenant_header(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "{name:?} is not a header name (use letters, digits, '-' and '_')"
        ));
    }
    let lower = name.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "authorization" | "host" | "content-type" | "content-length" | "content-encoding"
    ) {
        return Err(format!(
            "{name} carries something else; pick a header of its own, e.g. X-Scope-OrgID"
        ));
    }
    Ok(lower)
}

/// Parses `65536`, `64KiB`, `64MiB`, `1GiB`, `10MB`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}: use e.g. 65536, 64KiB, 64MiB, 1GiB"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "invalid size unit in {s:?}: use B, KiB, MiB, GiB, KB, MB or GB"
            ));
        }
    };
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

/// Parses a duration with its unit: `500ms`, `60s`, `5m`. Zero is refused:
/// a hot tier that is always due would be written to a part at every
/// wake-up of the flush thread.
pub fn parse_age(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?} ({e}): use e.g. 500ms, 60s, 5m"))?;
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be more than 0"));
    }
    Ok(d)
}

fn toml_size(v: &toml::Value) -> Result<usize, String> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as usize),
        toml::Value::String(s) => parse_size(s),
        other => Err(format!("invalid size {other}")),
    }
}

/// The redaction rules asked for, if any. Hash rules are keyed by
/// SKEIN_REDACT_KEY, else by a key made once and kept in the data
/// directory (`redact.key`), so equal values group across restarts.
fn redactor(
    file: Option<PathBuf>,
    defaults: bool,
    data_dir: &std::path::Path,
) -> Result<Option<skein_redact::Redactor>, String> {
    let rules = match &file {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read --redact {}: {e}", path.display()))?;
            skein_redact::parse_rules(&text, &path.display().to_string())?
        }
        None if defaults => Vec::new(),
        None => return Ok(None),
    };
    let hashes = rules.iter().any(|r| r.action == skein_redact::Action::Hash);
    let key = match std::env::var("SKEIN_REDACT_KEY") {
        Ok(k) if !k.is_empty() => k.into_bytes(),
        _ if hashes => redact_key(data_dir)?,
        _ => Vec::new(),
    };
    let base = if defaults {
        skein_redact::Redactor::defaults(&key)
    } else {
        skein_redact::Redactor::new(Vec::new(), &key)
    };
    Ok(Some(base.then(rules)))
}

/// The data directory's redaction key, made on first use (32 random
/// bytes, written temp → fsync → rename, readable by the owner only).
fn redact_key(data_dir: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::{Read, Write};
    let path = data_dir.join("redact.key");
    if let Ok(k) = std::fs::read(&path) {
        return Ok(k);
    }
    let fail = |e: std::io::Error| format!("cannot make the redaction key {}: {e}", path.display());
    std::fs::create_dir_all(data_dir).map_err(fail)?;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(fail)?;
    let tmp = data_dir.join("redact.key.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(&tmp).map_err(fail)?;
    f.write_all(&key).and_then(|_| f.sync_all()).map_err(fail)?;
    std::fs::rename(&tmp, &path).map_err(fail)?;
    Ok(key.to_vec())
}

pub fn default_data_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("skein")
}

fn build_config(args: &ServeArgs) -> Result<(ServerConfig, String), String> {
    let file: FileConfig = match &args.config {
        None => FileConfig::default(),
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| format!("invalid config {}: {e}", path.display()))?
        }
    };
    let data_dir = args
        .data_dir
        .clone()
        .or(file.data_dir.clone())
        .unwrap_or_else(default_data_dir);
    let mut c = ServerConfig::new(data_dir);
    c.object_storage = object_storage(args, &file, &c.data_dir)?;
    c.backup_bucket_options = s3_options(args, &file);
    c.storage_wait = args.storage_wait || file.storage_wait.unwrap_or(false);
    if c.storage_wait && c.object_storage.is_none() {
        return Err("--storage-wait needs --storage s3://BUCKET/PREFIX".into());
    }
    if args.read_only || file.read_only.unwrap_or(false) {
        let Some(os) = c.object_storage.as_mut() else {
            return Err("--read-only needs --storage s3://BUCKET/PREFIX (the bucket another skein writes)".into());
        };
        os.read_only = true;
    }
    if let Some(a) = args.refresh_interval.as_ref().or(file.refresh_interval.as_ref()) {
        c.refresh_interval = parse_age(a).map_err(|e| format!("--refresh-interval: {e}"))?;
    }
    let addr =
        |v: Option<&String>, f: &Option<String>, what: &str, default: std::net::SocketAddr| match v.or(f.as_ref()) {
            None => Ok(default),
            Some(s) => s
                .parse()
                .map_err(|_| format!("invalid {what} {s:?}: use host:port, e.g. 127.0.0.1:4318")),
        };
    c.otlp_grpc_addr = addr(
        args.otlp_grpc_addr.as_ref(),
        &file.otlp_grpc_addr,
        "--otlp-grpc-addr",
        c.otlp_grpc_addr,
    )?;
    c.otlp_http_addr = addr(
        args.otlp_http_addr.as_ref(),
        &file.otlp_http_addr,
        "--otlp-http-addr",
        c.otlp_http_addr,
    )?;
    c.api_addr = addr(args.api_addr.as_ref(), &file.api_addr, "--api-addr", c.api_addr)?;
    if let Some(d) = args.durability.as_ref().or(file.durability.as_ref()) {
        c.durability = d.parse().map_err(|e: String| format!("--durability: {e}"))?;
    }
    let size = |flag: &Option<String>, f: &Option<toml::Value>, name: &str, default: usize| -> Result<usize, String> {
        match (flag, f) {
            (Some(s), _) => parse_size(s).map_err(|e| format!("--{name}: {e}")),
            (None, Some(v)) => toml_size(v).map_err(|e| format!("{name} in config: {e}")),
            (None, None) => Ok(default),
        }
    };
    c.max_body_bytes = size(
        &args.max_body_bytes,
        &file.max_body_bytes,
        "max-body-bytes",
        c.max_body_bytes,
    )?;
    c.max_inflight_bytes = size(
        &args.max_inflight_bytes,
        &file.max_inflight_bytes,
        "max-inflight-bytes",
        c.max_inflight_bytes,
    )?;
    c.hot_max_bytes = size(
        &args.hot_max_bytes,
        &file.hot_max_bytes,
        "hot-max-bytes",
        c.hot_max_bytes,
    )?;
    if let Some(a) = args.hot_max_age.as_ref() {
        c.hot_max_age = parse_age(a).map_err(|e| format!("--hot-max-age: {e}"))?;
    } else if let Some(a) = file.hot_max_age.as_ref() {
        c.hot_max_age = parse_age(a).map_err(|e| format!("hot_max_age in config: {e}"))?;
    }
    c.page_cache_bytes = size(
        &args.page_cache_bytes,
        &file.page_cache_bytes,
        "page-cache-bytes",
        c.page_cache_bytes,
    )?;
    c.payload_threshold = size(
        &args.payload_threshold,
        &file.payload_threshold,
        "payload-threshold",
        c.payload_threshold,
    )?;
    if let Some(path) = args.pricing.as_ref().or(file.pricing.as_ref()) {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--pricing {}: {e}", path.display()))?;
        let pricing = skein_model::genai::Pricing::with_overrides(&text)
            .map_err(|e| format!("--pricing {}: {e}", path.display()))?;
        c.pricing = Some(std::sync::Arc::new(pricing));
    }
    c.mcp_max_bytes = size(
        &args.mcp_max_bytes,
        &file.mcp_max_bytes,
        "mcp-max-bytes",
        c.mcp_max_bytes,
    )?;
    if c.mcp_max_bytes == 0 {
        return Err("--mcp-max-bytes: must be more than 0".into());
    }
    c.sql.memory_bytes = size(&args.sql_memory, &file.sql_memory, "sql-memory", c.sql.memory_bytes)?;
    if c.sql.memory_bytes == 0 {
        return Err("--sql-memory: must be more than 0".into());
    }
    if let Some(a) = args.sql_timeout.as_ref() {
        c.sql.timeout = parse_age(a).map_err(|e| format!("--sql-timeout: {e}"))?;
    } else if let Some(a) = file.sql_timeout.as_ref() {
        c.sql.timeout = parse_age(a).map_err(|e| format!("sql_timeout in config: {e}"))?;
    }
    c.sql.max_json_rows = args.sql_max_rows.or(file.sql_max_rows).unwrap_or(c.sql.max_json_rows);
    if c.sql.max_json_rows == 0 {
        return Err("--sql-max-rows: must be more than 0".into());
    }
    c.skill = Some(crate::cli::skill::SKILL);
    c.wal_salvage = args.wal_salvage || file.wal_salvage.unwrap_or(false);
    c.redactor = redactor(
        args.redact.clone().or(file.redact),
        args.redact_defaults || file.redact_defaults.unwrap_or(false),
        &c.data_dir,
    )?
    .map(std::sync::Arc::new);
    c.metrics_public = args.metrics_public || file.metrics_public.unwrap_or(false);
    c.allow_unauthenticated = args.allow_unauthenticated || file.allow_unauthenticated.unwrap_or(false);
    c.auth_tokens = args.auth_tokens.clone().or(file.auth_tokens);
    let short = std::env::var("SKEIN_AUTH_TOKENS").ok().filter(|s| !s.trim().is_empty());
    c.tokens = match (&c.auth_tokens, short) {
        (Some(_), Some(_)) => {
            return Err("give --auth-tokens FILE or SKEIN_AUTH_TOKENS, not both".into());
        }
        (Some(path), None) => Some(std::sync::Arc::new(skein_server::auth::TokenSet::load(path)?)),
        (None, Some(s)) => Some(std::sync::Arc::new(skein_server::auth::TokenSet::from_short(
            &s,
            "SKEIN_AUTH_TOKENS",
        )?)),
        (None, None) => None,
    };
    if let Some(r) = args.retention.as_ref().or(file.retention.as_ref()) {
        c.retention = r.parse().map_err(|e: String| format!("--retention: {e}"))?;
    }
    if let Some(h) = args.tenant_header.as_ref().or(file.tenant_header.as_ref()) {
        c.tenant_header = Some(parse_tenant_header(h).map_err(|e| format!("--tenant-header: {e}"))?);
    }
    let mut tenant_retention: Vec<(String, String)> =
        file.tenant_retention.clone().unwrap_or_default().into_iter().collect();
    for t in &args.tenant_retention {
        let (tenant, policy) = t
            .split_once(':')
            .ok_or_else(|| format!("--tenant-retention {t:?}: use TENANT:POLICY, e.g. acme:spans=7d"))?;
        tenant_retention.push((tenant.to_string(), policy.to_string()));
    }
    for (tenant, policy) in tenant_retention {
        let id: skein_server::tenancy::TenantId = tenant.parse().map_err(|e| format!("--tenant-retention: {e}"))?;
        let r = policy
            .parse()
            .map_err(|e: String| format!("--tenant-retention {id}: {e}"))?;
        c.tenant_retention.insert(id, r);
    }
    if let Some(a) = args.retention_interval.as_ref().or(file.retention_interval.as_ref()) {
        c.retention_interval = parse_age(a).map_err(|e| format!("--retention-interval: {e}"))?;
    }
    if let Some(m) = args.min_free_disk.as_ref().or(file.min_free_disk.as_ref()) {
        c.min_free_disk = m.parse().map_err(|e: String| format!("--min-free-disk: {e}"))?;
    }
    if let Some(o) = args.on_disk_full.as_ref().or(file.on_disk_full.as_ref()) {
        c.on_disk_full = o.parse()?;
    }
    if let Some(s) = args.shutdown_timeout.or(file.shutdown_timeout) {
        c.shutdown_timeout = Duration::from_secs(s);
    }
    c.tls = match (
        args.tls_cert.clone().or(file.tls_cert),
        args.tls_key.clone().or(file.tls_key),
    ) {
        (Some(cert), Some(key)) => Some(skein_server::tls::load(&cert, &key)?),
        (Some(_), None) => return Err("--tls-cert needs --tls-key (the certificate's private key, PEM)".into()),
        (None, Some(_)) => return Err("--tls-key needs --tls-cert (the certificate chain, PEM)".into()),
        (None, None) => None,
    };
    c.audit_log = args.audit_log.clone().or(file.audit_log);
    let log = args.log.clone().or(file.log).unwrap_or_else(|| "info".into());
    Ok((c, log))
}

/// The `--s3-*` settings (and their config file keys), as `object_store`
/// names them; they go over the `AWS_*` environment.
fn s3_options(args: &ServeArgs, file: &FileConfig) -> Vec<(String, String)> {
    let mut options = Vec::new();
    let mut set = |key: &str, v: Option<String>| {
        if let Some(v) = v {
            options.push((key.to_string(), v));
        }
    };
    set(
        "aws_endpoint",
        args.s3_endpoint.clone().or_else(|| file.s3_endpoint.clone()),
    );
    set("aws_region", args.s3_region.clone().or_else(|| file.s3_region.clone()));
    set(
        "aws_allow_http",
        (args.s3_allow_http || file.s3_allow_http.unwrap_or(false)).then(|| "true".to_string()),
    );
    set("aws_access_key_id", args.s3_access_key_id.clone());
    set("aws_secret_access_key", args.s3_secret_access_key.clone());
    options
}

/// `--storage` and its settings, or `None` for local disk only.
fn object_storage(
    args: &ServeArgs,
    file: &FileConfig,
    data_dir: &std::path::Path,
) -> Result<Option<skein_engine::ObjectStorageOptions>, String> {
    let Some(url) = args.storage.clone().or_else(|| file.storage.clone()) else {
        if args.cache_dir.is_some() || args.cache_size.is_some() {
            return Err("--cache-dir and --cache-size need --storage s3://BUCKET/PREFIX".into());
        }
        if args.removal_grace.is_some() || file.removal_grace.is_some() {
            return Err("--removal-grace needs --storage s3://BUCKET/PREFIX".into());
        }
        return Ok(None);
    };
    let removal_grace = match args.removal_grace.as_ref().or(file.removal_grace.as_ref()) {
        // Zero is allowed: delete at once.
        Some(a) => humantime::parse_duration(a.trim())
            .map_err(|e| format!("--removal-grace: invalid duration {a:?} ({e}): use e.g. 0s, 30s, 5m"))?,
        None => std::time::Duration::from_secs(60),
    };
    let cache_bytes = match (&args.cache_size, &file.cache_size) {
        (Some(s), _) => parse_size(s).map_err(|e| format!("--cache-size: {e}"))?,
        (None, Some(v)) => toml_size(v).map_err(|e| format!("cache_size in config: {e}"))?,
        (None, None) => 1 << 30,
    };
    let options = s3_options(args, file);
    Ok(Some(skein_engine::ObjectStorageOptions {
        remote: skein_engine::RemoteConfig { url, options },
        cache_dir: args
            .cache_dir
            .clone()
            .or_else(|| file.cache_dir.clone())
            .unwrap_or_else(|| data_dir.join("cache")),
        cache_bytes: cache_bytes as u64,
        read_only: false,
        removal_grace,
    }))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

pub fn main(args: ServeArgs) -> ExitCode {
    let (config, log) = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skein serve: {e}");
            return ExitCode::from(2);
        }
    };
    let filter =
        tracing_subscriber::EnvFilter::try_new(&log).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skein serve: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(skein_server::run(config, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skein serve: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("65536").unwrap(), 65536);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("10 MB").unwrap(), 10_000_000);
        assert!(parse_size("ten").unwrap_err().contains("invalid size"));
        assert!(parse_size("5 parsecs").unwrap_err().contains("unit"));
    }

    #[test]
    fn payload_threshold_comes_from_the_flag_or_the_file() {
        assert_eq!(build_config(&ServeArgs::default()).unwrap().0.payload_threshold, 4096);
        let mut args = ServeArgs {
            payload_threshold: Some("0".into()),
            ..Default::default()
        };
        assert_eq!(build_config(&args).unwrap().0.payload_threshold, 0);
        args.payload_threshold = Some("lots".into());
        assert!(build_config(&args).unwrap_err().starts_with("--payload-threshold: "));
    }

    #[test]
    fn the_mcp_budget_comes_from_the_flag_and_the_skill_is_passed_on() {
        let c = build_config(&ServeArgs::default()).unwrap().0;
        assert_eq!(c.mcp_max_bytes, 16 * 1024);
        assert!(c.skill.is_some_and(|s| s.contains("skein")));
        let mut args = ServeArgs {
            mcp_max_bytes: Some("64KiB".into()),
            ..Default::default()
        };
        assert_eq!(build_config(&args).unwrap().0.mcp_max_bytes, 64 << 10);
        args.mcp_max_bytes = Some("0".into());
        assert!(build_config(&args).unwrap_err().starts_with("--mcp-max-bytes: "));
    }

    #[test]
    fn hot_max_age_comes_from_the_flag_or_the_file() {
        assert_eq!(parse_age("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_age("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_age("5").unwrap_err().contains("invalid duration"));
        assert!(parse_age("0s").unwrap_err().contains("more than 0"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skein.toml");
        std::fs::write(&path, "hot_max_age = \"2s\"\n").unwrap();
        let mut args = ServeArgs {
            config: Some(path),
            ..Default::default()
        };
        assert_eq!(
            build_config(&ServeArgs::default()).unwrap().0.hot_max_age,
            Duration::from_secs(60)
        );
        assert_eq!(build_config(&args).unwrap().0.hot_max_age, Duration::from_secs(2));
        args.hot_max_age = Some("250ms".into());
        assert_eq!(build_config(&args).unwrap().0.hot_max_age, Duration::from_millis(250));
        args.hot_max_age = Some("soon".into());
        assert!(build_config(&args).unwrap_err().starts_with("--hot-max-age: "));
    }

    #[test]
    fn removal_grace_needs_storage_and_defaults_to_a_minute() {
        let grace = |args: &ServeArgs| build_config(args).map(|c| c.0.object_storage.map(|o| o.removal_grace));
        let mut args = ServeArgs {
            storage: Some("s3://bucket/prefix".into()),
            ..Default::default()
        };
        assert_eq!(grace(&args).unwrap(), Some(Duration::from_secs(60)));
        args.removal_grace = Some("0s".into());
        assert_eq!(grace(&args).unwrap(), Some(Duration::ZERO), "zero deletes at once");
        args.removal_grace = Some("later".into());
        assert!(grace(&args).unwrap_err().starts_with("--removal-grace: "));
        args.storage = None;
        args.removal_grace = Some("5m".into());
        assert!(grace(&args).unwrap_err().contains("needs --storage"));
    }

    #[test]
    fn tenant_flags_parse_or_say_what_is_wrong() {
        let c = build_config(&ServeArgs::default()).unwrap().0;
        assert!(c.tenant_header.is_none() && c.tenant_retention.is_empty());
        let mut args = ServeArgs {
            tenant_header: Some("X-Scope-OrgID".into()),
            tenant_retention: vec!["acme:spans=7d".into(), "beta:30d".into()],
            ..Default::default()
        };
        let c = build_config(&args).unwrap().0;
        assert_eq!(c.tenant_header.as_deref(), Some("x-scope-orgid"));
        let acme: skein_server::tenancy::TenantId = "acme".parse().unwrap();
        assert_eq!(c.tenant_retention[&acme].spans, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(c.tenant_retention.len(), 2);
        args.tenant_retention = vec!["acme".into()];
        assert!(build_config(&args).unwrap_err().contains("use TENANT:POLICY"));
        args.tenant_retention = vec!["a/b:7d".into()];
        assert!(
            build_config(&args)
                .unwrap_err()
                .starts_with("--tenant-retention: tenant \"a/b\"")
        );
        args.tenant_retention = vec!["acme:soon".into()];
        assert!(
            build_config(&args)
                .unwrap_err()
                .starts_with("--tenant-retention acme: ")
        );
        args.tenant_retention = Vec::new();
        args.tenant_header = Some("Authorization".into());
        assert!(build_config(&args).unwrap_err().starts_with("--tenant-header: "));
        args.tenant_header = Some("x tenant".into());
        assert!(build_config(&args).unwrap_err().contains("not a header name"));
        // From the file, too.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skein.toml");
        std::fs::write(
            &path,
            "tenant_header = \"X-Tenant\"\n[tenant_retention]\nacme = \"3d\"\n",
        )
        .unwrap();
        let c = build_config(&ServeArgs {
            config: Some(path),
            ..Default::default()
        })
        .unwrap()
        .0;
        assert_eq!(c.tenant_header.as_deref(), Some("x-tenant"));
        assert_eq!(c.tenant_retention[&acme].logs, Some(Duration::from_secs(3 * 86_400)));
    }

    #[test]
    fn retention_and_disk_flags_parse_or_say_what_is_wrong() {
        let c = build_config(&ServeArgs::default()).unwrap().0;
        assert!(c.retention.is_forever());
        assert_eq!(c.retention_interval, Duration::from_secs(60));
        assert_eq!(c.min_free_disk, skein_engine::MinFreeDisk::Auto);
        assert_eq!(c.on_disk_full, skein_engine::OnDiskFull::Refuse);
        let mut args = ServeArgs {
            retention: Some("spans=7d,logs=3d,metrics=30d".into()),
            retention_interval: Some("30s".into()),
            min_free_disk: Some("2GiB".into()),
            on_disk_full: Some("evict".into()),
            ..Default::default()
        };
        let c = build_config(&args).unwrap().0;
        assert_eq!(c.retention.logs, Some(Duration::from_secs(3 * 86_400)));
        assert_eq!(c.retention_interval, Duration::from_secs(30));
        assert_eq!(c.min_free_disk, skein_engine::MinFreeDisk::Bytes(2 << 30));
        assert_eq!(c.on_disk_full, skein_engine::OnDiskFull::Evict);
        args.retention = Some("spans=soon".into());
        assert!(build_config(&args).unwrap_err().starts_with("--retention: "));
        args.retention = None;
        args.min_free_disk = Some("plenty".into());
        assert!(build_config(&args).unwrap_err().starts_with("--min-free-disk: "));
        args.min_free_disk = None;
        args.on_disk_full = Some("panic".into());
        assert!(build_config(&args).unwrap_err().contains("use refuse or evict"));
        args.on_disk_full = None;
        args.retention_interval = Some("0s".into());
        assert!(build_config(&args).unwrap_err().starts_with("--retention-interval: "));
        // From the file, too.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skein.toml");
        std::fs::write(&path, "retention = \"14d\"\nmin_free_disk = \"10%\"\n").unwrap();
        let c = build_config(&ServeArgs {
            config: Some(path),
            ..Default::default()
        })
        .unwrap()
        .0;
        assert_eq!(c.retention.metrics, Some(Duration::from_secs(14 * 86_400)));
        assert_eq!(c.min_free_disk, skein_engine::MinFreeDisk::Percent(10.0));
    }

    #[test]
    fn flags_win_over_file_and_file_over_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skein.toml");
        std::fs::write(
            &path,
            "data_dir = \"/tmp/from-file\"\napi_addr = \"127.0.0.1:9999\"\nmax_body_bytes = \"1MiB\"\ndurability = \"none\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path.clone()),
            api_addr: Some("127.0.0.1:7777".into()),
            ..Default::default()
        };
        let (c, _) = build_config(&args).unwrap();
        assert_eq!(c.api_addr.to_string(), "127.0.0.1:7777");
        assert_eq!(c.data_dir, PathBuf::from("/tmp/from-file"));
        assert_eq!(c.max_body_bytes, 1 << 20);
        assert_eq!(c.durability, skein_engine::Durability::None);
        assert_eq!(c.otlp_http_addr.to_string(), "127.0.0.1:4318");
        std::fs::write(&path, "no_such_key = 1\n").unwrap();
        let err = build_config(&args).unwrap_err();
        assert!(err.contains("no_such_key"), "{err}");
    }
}
