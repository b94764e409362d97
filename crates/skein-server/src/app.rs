//! Shared server state.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use skein_engine::{Engine, EngineOptions, Fault};

use crate::admission::Admission;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::tenancy::{Space, Spaces, Tenant};

pub use crate::tenancy::Arrival;

pub struct App {
    pub config: ServerConfig,
    /// The home space and the tenants' (see `tenancy`).
    spaces: Spaces,
    pub admission: Admission,
    pub metrics: Metrics,
    shutting_down: AtomicBool,
    /// The tokens in force (replaced on SIGHUP).
    tokens: std::sync::RwLock<Option<Arc<crate::auth::TokenSet>>>,
    pub auth_failures: crate::auth::FailureLimiter,
    /// Admin actions (see `audit`).
    pub audit: crate::audit::AuditLog,
    /// Why the engine is not open yet, while `--storage-wait` waits.
    waiting: std::sync::Mutex<Option<String>>,
}

/// Why a request's space could not be had.
#[derive(Debug, Clone)]
pub enum SpaceError {
    /// The server is starting, waiting for storage or shutting down.
    NotReady(NotReady),
    /// The tenant's engine failed to open (its message).
    Open(String),
}

impl SpaceError {
    pub fn message(&self) -> String {
        match self {
            SpaceError::NotReady(nr) => nr.message().into_owned(),
            SpaceError::Open(m) => m.clone(),
        }
    }
}

/// Why the server is not ready (what `/readyz` reports).
#[derive(Debug, Clone)]
pub enum NotReady {
    /// No home engine yet: recovery is running.
    Starting,
    /// No engine yet: the bucket cannot be reached, and `--storage-wait`
    /// says to wait for it (the reason).
    WaitingForStorage(String),
    ShuttingDown,
    /// The engine answers queries, but something it must do keeps failing
    /// and needs an operator (a WAL that refuses writes, failing flushes or
    /// merges). Never returned by [`App::space`]: queries still work.
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
            spaces: Spaces::new(config.tenant_retention.clone()),
            config,
            admission,
            metrics: Metrics::new(),
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

    /// Sets the home engine, opened with `options` (the template of every
    /// tenant's).
    pub fn set_engine(&self, e: Arc<Engine>, options: EngineOptions) {
        self.spaces.set_home(e, options);
    }

    /// Why no request can be served now, if so.
    fn not_ready(&self) -> Option<NotReady> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Some(NotReady::ShuttingDown);
        }
        if self.spaces.home().is_some() {
            return None;
        }
        Some(match self.waiting.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            Some(reason) => NotReady::WaitingForStorage(reason),
            None => NotReady::Starting,
        })
    }

    /// The space a request for `tenant` reads and writes, opening the
    /// tenant's engine on its first request (a faulted engine is returned:
    /// it still answers queries).
    pub async fn space(&self, tenant: &Tenant) -> Result<Arc<Space>, SpaceError> {
        if let Some(nr) = self.not_ready() {
            return Err(SpaceError::NotReady(nr));
        }
        match self.spaces.get(tenant).await {
            Some(got) => got.map_err(SpaceError::Open),
            None => Err(SpaceError::NotReady(NotReady::Starting)),
        }
    }

    /// Opens the tenants whose data is already on disk (at start, after
    /// the home engine).
    pub async fn open_existing_tenants(&self) {
        for (id, e) in self.spaces.open_existing().await {
            tracing::error!("tenant {id} did not open: {e}");
        }
    }

    /// Every open space, home first, even while shutting down (for the
    /// final flush, health and self-metrics).
    pub fn spaces(&self) -> Vec<Arc<Space>> {
        self.spaces.all()
    }

    /// The home engine, unless it is starting or shutting down.
    pub fn home_engine(&self) -> Result<&Arc<Engine>, NotReady> {
        match self.not_ready() {
            Some(nr) => Err(nr),
            None => self.spaces.home().map(|s| &s.engine).ok_or(NotReady::Starting),
        }
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Ready means able to take writes: a home engine that is open, and
    /// no space with a fault in force but ones that only degrade it (a
    /// damaged payload), which `Ok` lists. A tenant's faults name the
    /// tenant.
    pub fn ready(&self) -> Result<Vec<Fault>, NotReady> {
        self.home_engine()?;
        let mut faults = Vec::new();
        for space in self.spaces() {
            for mut f in space.engine.faults() {
                if let Some(id) = &space.tenant.0 {
                    f.message = format!("tenant {id}: {}", f.message);
                }
                faults.push(f);
            }
        }
        if faults.iter().all(|f| f.kind.degrades_only()) {
            Ok(faults)
        } else {
            Err(NotReady::Faulted(faults))
        }
    }
}
