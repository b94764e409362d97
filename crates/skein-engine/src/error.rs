//! Engine errors. Every variant names what failed and where, so a message
//! reaching a user or an agent says what to do next.

use std::path::PathBuf;

use skein_model::ModelError;

use crate::health::FaultKind;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("data directory {dir} is in use by another skein process (pid {pid}); stop it or pick another --data-dir")]
    Locked { dir: PathBuf, pid: String },
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("the engine is shutting down")]
    Closed,
    /// The WAL failed a write or fsync and refuses every write since: the
    /// kernel may have dropped the data, so a retry could acknowledge what
    /// is not on disk. Needs an operator and a restart.
    #[error("the write-ahead log refuses writes since an I/O failure ({reason}); fix the disk and restart skein")]
    WalFailed { reason: String },
    /// The disk is (nearly) full: free space is below `--min-free-disk`,
    /// or the WAL write ran out of space (and was undone). Nothing of the
    /// request was stored; it succeeds once space returns, without a
    /// restart.
    #[error("the disk is full ({reason}); nothing was stored: retry later")]
    DiskFull { reason: String },
    /// A background task keeps failing and ingest cannot go on without it
    /// (flushes failing while the frozen tiers they would free fill memory).
    #[error("background {kind} is failing ({reason}); ingest resumes once it succeeds")]
    Background { kind: FaultKind, reason: String },
    /// This engine reads a bucket another skein writes (`--read-only`).
    #[error(
        "this skein is read-only (--read-only): it serves queries from the bucket; send telemetry to the skein that writes it"
    )]
    ReadOnly,
    /// Object storage refused or failed a request (unreachable, missing
    /// bucket, bad credentials, an object that is not what it should be).
    #[error("object storage: {what}: {detail}")]
    Storage { what: String, detail: String },
    /// Another process writes this bucket prefix.
    #[error(
        "{url} is written by another skein ({holder}), whose lease was renewed {renewed_ms_ago} ms ago; stop it, use another prefix, or wait {ttl_ms} ms after it stops"
    )]
    Leased {
        url: String,
        holder: String,
        renewed_ms_ago: u64,
        ttl_ms: u64,
    },
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }

    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Error::Invalid(_))
    }

    /// The engine cannot take this request now, through no fault of the
    /// request: a client should retry later (HTTP 503, gRPC UNAVAILABLE).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::WalFailed { .. } | Error::Background { .. } | Error::Closed | Error::DiskFull { .. }
        )
    }

    /// The disk is full: a client should back off and retry (HTTP 503 with
    /// `Retry-After`, gRPC RESOURCE_EXHAUSTED).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::DiskFull { .. })
    }

    /// A write to a read-only engine: never to be retried here (HTTP 403,
    /// gRPC PERMISSION_DENIED).
    pub fn is_read_only(&self) -> bool {
        matches!(self, Error::ReadOnly)
    }
}

impl From<ModelError> for Error {
    fn from(e: ModelError) -> Self {
        Error::Invalid(e.to_string())
    }
}

/// Attaches a context string to I/O results.
pub(crate) trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::io(context(), e))
    }
}
