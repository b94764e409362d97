//! What the in-process modes (`engine`, `text`, `llm`) share: the ingest
//! flags, an engine that merges only when told, and the timed ingest of a
//! chunk of batches from writer threads.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use skein_engine::{Engine, EngineOptions, IngestReport};

#[derive(clap::Args, Debug, Clone)]
pub struct InProcArgs {
    /// Records per ingest call.
    #[arg(long, default_value_t = 1000)]
    pub batch: u64,
    /// Concurrent writer threads (they share fsyncs through group commit).
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    #[arg(long, default_value = "fsync")]
    pub durability: String,
    /// Where the data directories go (default: a temp dir, deleted
    /// afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

/// Options of an engine in `dir` that never merges or flushes on its own
/// for being idle: when two engines are compared, the one not being timed
/// must stay quiet.
pub fn quiet_options(dir: &Path, durability: &str) -> Result<EngineOptions, String> {
    let mut o = EngineOptions::new(dir);
    o.durability = durability.parse()?;
    o.compaction.idle_after = Duration::from_secs(86_400);
    o.hot_max_age = Duration::from_secs(86_400);
    Ok(o)
}

/// Waits until nothing is frozen, no merge runs and every part has its
/// full-text index (built after its flush) for 700 ms (longer than the
/// compaction and text-index threads' polls); returns when that quiet began.
pub fn quiet_since(engine: &Engine) -> Instant {
    let mut since: Option<Instant> = None;
    loop {
        let st = engine.stats();
        let busy = st.frozen_tiers > 0 || st.compacting || st.text_index_backlog_parts > 0;
        match (busy, since) {
            (true, _) => since = None,
            (false, None) => since = Some(Instant::now()),
            (false, Some(s)) if s.elapsed() >= Duration::from_millis(700) => return s,
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What one timed ingest cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timed {
    /// From the first batch to the first quiet moment after the last ack.
    pub seconds: f64,
    /// Of those, the seconds after the last ack: the engine catching up
    /// (flush, merges, text indexes) with no ingest to compete with.
    pub after_ack_seconds: f64,
    /// Process CPU seconds, all threads.
    pub cpu_seconds: f64,
}

impl std::ops::AddAssign for Timed {
    fn add_assign(&mut self, t: Timed) {
        self.seconds += t.seconds;
        self.after_ack_seconds += t.after_ack_seconds;
        self.cpu_seconds += t.cpu_seconds;
    }
}

/// Ingests `batches` from `writers` threads with `put` (then flushes, if
/// `last`), timed to the first quiet moment after.
pub fn ingest<R: Send>(
    engine: &Engine,
    writers: usize,
    batches: Vec<Vec<R>>,
    last: bool,
    put: impl Fn(&Engine, Vec<R>) -> skein_engine::Result<IngestReport> + Sync,
) -> Result<Timed, String> {
    let slots: Vec<Mutex<Option<Vec<R>>>> = batches.into_iter().map(|b| Mutex::new(Some(b))).collect();
    let next = AtomicU64::new(0);
    let cpu = crate::server::process_cpu_seconds();
    let started = Instant::now();
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..writers)
            .map(|_| {
                s.spawn(|| -> Result<(), String> {
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(slot) = slots.get(b) else { return Ok(()) };
                        let records = slot.lock().map_err(|e| e.to_string())?.take().unwrap_or_default();
                        let r = put(engine, records).map_err(|e| e.to_string())?;
                        if r.rejected > 0 {
                            return Err(format!("rejected: {:?}", r.errors));
                        }
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|t| t.join().map_err(|_| "writer panicked".to_string())?)
    })?;
    let acked = Instant::now();
    if last {
        engine.flush().map_err(|e| e.to_string())?;
    }
    let quiet = quiet_since(engine);
    Ok(Timed {
        seconds: quiet.duration_since(started).as_secs_f64(),
        after_ack_seconds: quiet.saturating_duration_since(acked).as_secs_f64(),
        cpu_seconds: crate::server::process_cpu_seconds() - cpu,
    })
}
