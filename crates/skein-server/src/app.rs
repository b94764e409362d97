//! Shared server state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use skein_engine::Engine;
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
    pub admission: Admission,
    pub metrics: Metrics,
    pub arrivals: broadcast::Sender<Arrival>,
    shutting_down: AtomicBool,
}

/// Why the engine cannot serve right now.
#[derive(Debug, Clone, Copy)]
pub enum NotReady {
    Starting,
    ShuttingDown,
}

impl NotReady {
    pub fn message(self) -> &'static str {
        match self {
            NotReady::Starting => "skein is starting (recovering data); retry shortly",
            NotReady::ShuttingDown => "skein is shutting down",
        }
    }
}

impl App {
    pub fn new(config: ServerConfig) -> Self {
        let admission = Admission::new(config.max_inflight_bytes);
        App {
            config,
            engine: OnceLock::new(),
            admission,
            metrics: Metrics::new(),
            arrivals: broadcast::channel(4096).0,
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn set_engine(&self, e: Arc<Engine>) {
        let _ = self.engine.set(e);
    }

    pub fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(NotReady::ShuttingDown);
        }
        self.engine.get().ok_or(NotReady::Starting)
    }

    /// The engine even while shutting down (for the final flush).
    pub fn engine_any(&self) -> Option<&Arc<Engine>> {
        self.engine.get()
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    pub fn ready(&self) -> Result<(), NotReady> {
        self.engine().map(|_| ())
    }
}
