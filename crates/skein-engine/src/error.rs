//! Engine errors. Every variant names what failed and where, so a message
//! reaching a user or an agent says what to do next.

use std::path::PathBuf;

use skein_model::ModelError;

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
