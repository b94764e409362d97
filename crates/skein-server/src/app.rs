//! Shared server state.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use skein_engine::{Engine, Fault};
use tokio::sync::broadcast;

use crate::admission::Admission;
use crate::config::ServerConfig;
use crate::metrics::Metrics;

/// A record that just arrived, for live tails.
#[derive(Clone, Debug)]
pub enum Arrival {
    Span(Arc<skein_model::Span>),
    Log(Arc<skein_model::LogRecord>),
}

pub struct App {
    pub config: ServerConfig,
    engine: OnceLock<Arc<Engine>>,
    /// SQL over the engine, made on first use (its memory pool is shared
    /// by every query).
    pub sql: OnceLock<Arc<skein_sql::Sql>>,
    pub admission: Admission,
    pub metrics: Metrics,
    pub arrivals: broadcast::Sender<Arrival>,
    shutting_down: AtomicBool,
    /// The tokens in force (replaced on SIGHUP).
    tokens: std::sync::RwLock<Option<Arc<crate::auth::TokenSet>>>,
    pub auth_failures: crate::auth::FailureLimiter,
    /// Admin actions (see `audit`).
    pub audit: crate::audit::AuditLog,
    /// Why the engine is not open yet, while `--storage-wait` waits.
    waiting: std::sync::Mutex<Option<String>>,
}

/// Why the server is not ready (what `/readyz` reports).
#[derive(Debug, Clone)]
pub enum NotReady {
    /// No engine yet: recovery is running.
    Starting,
    /// No engine yet: the bucket cannot be reached, and `--storage-wait`
    /// says to wait for it (the reason).
    WaitingForStorage(String),
    ShuttingDown,
    /// The engine answers queries, but something it must do keeps failing
    /// and needs an operator (a WAL that refuses writes, failing flushes or
    /// merges). Never returned by [`App::engine`]: queries still work.
    Faulted(Vec<Fault>),
}

impl NotReady {
    /// The `status` field of `/readyz`.
    pub fn status(&self) -> &'static str {
        match self {
            NotReady::Starting | NotReady::WaitingForStorage(_) => "starting",
            NotReady::ShuttingDown => "shutting_down",
            NotReady::Faulted(_) => "faulted",
        }
    }

    /// One line for people (and log lines, and the `message` of a 503).
    pub fn message(&self) -> Cow<'static, str> {
        match self {
            NotReady::Starting => "skein is starting (recovering data); retry shortly".into(),
            NotReady::WaitingForStorage(reason) => format!(
                "skein is waiting for object storage (--storage-wait): {}",
                reason.split_whitespace().collect::<Vec<_>>().join(" ")
            )
            .into(),
            NotReady::ShuttingDown => "skein is shutting down".into(),
            NotReady::Faulted(faults) => fault_line(faults).into(),
        }
    }
}

/// Every fault in one line, e.g. `faulted: wal (1 failure): write and
/// fsync of …: No space left on device (os error 28)`. Engine messages may
/// carry newlines (a Parquet error's context); a status line must not.
pub(crate) fn fault_line(faults: &[Fault]) -> String {
    let each: Vec<String> = faults
        .iter()
        .map(|f| {
            let plural = if f.failures == 1 { "" } else { "s" };
            let message = f.message.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("{} ({} failure{plural}): {message}", f.kind, f.failures)
        })
        .collect();
    let state = if faults.iter().all(|f| f.kind.degrades_only()) {
        "degraded"
    } else {
        "faulted"
    };
    format!("{state}: {}", each.join("; "))
}

impl App {
    pub fn new(config: ServerConfig) -> Self {
        let admission = Admission::new(config.max_inflight_bytes);
        let tokens = std::sync::RwLock::new(config.tokens.clone());
        let audit_path = config
            .audit_log
            .clone()
            .unwrap_or_else(|| config.data_dir.join("audit.log"));
        App {
            audit: crate::audit::AuditLog::new(audit_path),
            tokens,
            auth_failures: Default::default(),
            config,
            engine: OnceLock::new(),
            sql: OnceLock::new(),
            admission,
            metrics: Metrics::new(),
            arrivals: broadcast::channel(4096).0,
            shutting_down: AtomicBool::new(false),
            waiting: std::sync::Mutex::new(None),
        }
    }

    /// The tokens in force; `None` when the server is open.
    pub fn tokens(&self) -> Option<Arc<crate::auth::TokenSet>> {
        self.tokens.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads the `--auth-tokens` file again; a file that no longer parses
    /// leaves the tokens in force as they were (and says why).
    pub fn reload_tokens(&self) -> Result<usize, String> {
        let Some(path) = &self.config.auth_tokens else {
            return Err("no --auth-tokens file to reload".into());
        };
        let set = crate::auth::TokenSet::load(path)?;
        let n = set.len();
        *self.tokens.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(set));
        Ok(n)
    }

    /// Says why the engine is not open yet (`None`: it is opening).
    pub fn set_waiting(&self, reason: Option<String>) {
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = reason;
    }

    pub fn set_engine(&self, e: Arc<Engine>) {
        let _ = self.engine.set(e);
    }

    /// The engine, unless it is starting or shutting down (a faulted engine
    /// is returned: it still answers queries).
    pub fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(NotReady::ShuttingDown);
        }
        match self.engine.get() {
            Some(e) => Ok(e),
            None => match self.waiting.lock().unwrap_or_else(|e| e.into_inner()).clone() {
                Some(reason) => Err(NotReady::WaitingForStorage(reason)),
                None => Err(NotReady::Starting),
            },
        }
    }

    /// The engine even while shutting down (for the final flush).
    pub fn engine_any(&self) -> Option<&Arc<Engine>> {
        self.engine.get()
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Ready means able to take writes: an engine that is open and has no
    /// fault in force but ones that only degrade it (a damaged payload),
    /// which `Ok` lists.
    pub fn ready(&self) -> Result<Vec<Fault>, NotReady> {
        let faults = self.engine()?.faults();
        if faults.iter().all(|f| f.kind.degrades_only()) {
            Ok(faults)
        } else {
            Err(NotReady::Faulted(faults))
        }
    }
}
