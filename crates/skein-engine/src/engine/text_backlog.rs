//! Full-text indexes built after their parts: a flush writes a part without
//! one, and a thread of its own builds it once flushing has caught up.
//!
//! Why: ingest waits for flush when the hot tier is full, and tokenizing a
//! part's text (its spans' prompts above all) was about a third of the
//! server's CPU on the agent corpus, all of it inside the flush. Built
//! afterwards, at the lowest priority, it costs ingest nothing while the
//! machine is saturated and lags only as long as the saturation lasts.
//! Meanwhile a text query scans a part without an index (the same answers,
//! slower), and a merge of parts one of which has none builds its output's
//! index from the rows it writes ([`Inner::write_rewrite`]).
//!
//! Why a thread of its own, not the compaction thread's: once ingest stops,
//! the merges it left and the backlog both wait, and one after the other
//! they kept one core busy while the other idled. Side by side they take
//! both cores: after the last acks of 3M logs (`skein-bench text --logs
//! 3M`) the engine caught up in 15.6 s, where it took 21.0 s. A build leaves the inputs of a running merge alone and
//! stops when a merge takes its part ([`super::compact::MergingParts`]).
//!
//! Crash safety and removals: an index is stored (temp → fsync → rename)
//! before its part answers from it. A crash before that leaves a part
//! without an index, indexed again after the restart; after it, the file,
//! which the part loads when it is opened. A part a merge, retention or
//! erasure removes meanwhile loses its files after it leaves the part list;
//! the build looks at that list only *after* storing the file, and removes
//! the file itself if the part is gone: either the remover's deletion comes
//! later and takes the file, or it came first and the build's does. A crash
//! between the store and that removal leaves a file without a part, which
//! recovery deletes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use skein_model::{LogRecord, Span};

use super::tier::Stored;
use super::{FaultKind, Inner};
use crate::error::{Error, Result};
use crate::part::{self, Part};
use crate::record::Signal;
use crate::text_index::PartTextBuilder;

/// Rows read from a part and indexed between two looks at the flush.
const CHUNK_ROWS: usize = 8192;
const DECODE_THREAD: &str = "skein-text-decode";
/// How long a build waits for flushing to catch up before it lets go of
/// the build lock ([`Engine::index_text`](super::Engine::index_text) waits
/// for it) and starts again later.
const MAX_PAUSE: Duration = Duration::from_secs(10);
/// How often the thread looks for parts without an index.
const POLL: Duration = Duration::from_millis(250);

/// Ingest this recent goes on: a half-full active tier is frozen soon. (A
/// tier left half full when ingest stops waits for its age limit.)
const INGEST_GOES_ON: Duration = Duration::from_secs(1);

/// Parts whose index cannot be built, and why: not tried again until a
/// restart, and a fault while any of them is still there.
pub(super) type Unindexable = HashMap<(Signal, u64), String>;

/// How a build of a part's index ended.
enum Built {
    Indexed,
    /// It gave way to flushing for too long, or the engine stops: tried
    /// again next round.
    Paused,
    /// The part is gone, or a merge rewrites it: nothing to keep.
    Dropped,
}

impl Inner {
    /// The text-index thread: builds the backlog whenever flushing has
    /// caught up.
    pub(super) fn text_index_loop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(POLL);
            if self
                .tracked(FaultKind::TextIndex, || self.index_text_backlog(true))
                .is_err()
            {
                std::thread::sleep(Duration::from_secs(5));
            }
        }
    }

    /// Builds the full-text index of every part that has none, oldest first,
    /// and returns how many it built. With `yield_to_flush`, it works only
    /// while flushing has caught up ([`flush_is_behind`](Self::flush_is_behind)),
    /// so ingest never waits for it.
    pub(super) fn index_text_backlog(&self, yield_to_flush: bool) -> Result<usize> {
        if !self.opts.full_text {
            return Ok(0);
        }
        let _one_build = self.text_index_lock.lock();
        let mut built = 0;
        for signal in [Signal::Spans, Signal::Logs] {
            let parts = self.state.read().parts(signal).clone();
            for p in parts.iter().filter(|p| p.text_index().is_none()) {
                if self.merging.contains(p) {
                    continue;
                }
                if self.stop.load(Ordering::SeqCst) || (yield_to_flush && self.flush_is_behind()) {
                    return self.backlog_result(built);
                }
                if self.unindexable.lock().contains_key(&(signal, p.meta.id)) {
                    continue;
                }
                let started = Instant::now();
                let outcome = match signal {
                    Signal::Spans => self.index_part_text::<Span>(p, yield_to_flush),
                    Signal::Logs => self.index_part_text::<LogRecord>(p, yield_to_flush),
                    Signal::Metrics => continue,
                };
                match outcome {
                    Ok(Built::Indexed) => {
                        built += 1;
                        self.text_index_builds.fetch_add(1, Ordering::Relaxed);
                        self.text_index_build_nanos
                            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                    Ok(Built::Paused) => return self.backlog_result(built),
                    Ok(Built::Dropped) => {}
                    // A part removed meanwhile may fail to read: no fault.
                    Err(_) if !self.is_live(p) => {}
                    Err(e) => {
                        let why = format!(
                            "the full-text index of {} part {} cannot be built (text queries scan it): {e}",
                            signal.as_str(),
                            p.meta.id
                        );
                        tracing::warn!("{why}");
                        self.unindexable.lock().insert((signal, p.meta.id), why);
                    }
                }
            }
        }
        self.backlog_result(built)
    }

    /// `built`, or the failure of a part that is still there and has no
    /// index: a fault lasts as long as such a part does.
    fn backlog_result(&self, built: usize) -> Result<usize> {
        let st = self.state.read();
        let mut failed = self.unindexable.lock();
        failed.retain(|(signal, id), _| st.parts(*signal).iter().any(|p| p.meta.id == *id));
        match failed.values().next() {
            Some(why) => Err(Error::Other(why.clone())),
            None => Ok(built),
        }
    }

    /// Whether flushing is behind ingest: a frozen tier waits, or ingest
    /// goes on and the active tier is half full (it is frozen soon). An
    /// index build gives way then.
    fn flush_is_behind(&self) -> bool {
        let (frozen, active_bytes) = {
            let st = self.state.read();
            (st.frozen.len(), st.active.bytes())
        };
        frozen > 0
            || (active_bytes >= self.opts.hot_max_bytes / 2 && self.last_ingest.lock().elapsed() < INGEST_GOES_ON)
    }

    /// Builds `p`'s index from its rows and stores it beside it.
    fn index_part_text<R: Stored>(&self, p: &Arc<Part>, yield_to_flush: bool) -> Result<Built> {
        match self.build_part_text::<R>(p, yield_to_flush)? {
            Ok(bundle) => self.store_part_text(p, &bundle),
            Err(stopped) => Ok(stopped),
        }
    }

    /// Builds `p`'s index from its rows: the bundle, or why the build
    /// stopped.
    fn build_part_text<R: Stored>(&self, p: &Arc<Part>, yield_to_flush: bool) -> Result<Result<Vec<u8>, Built>> {
        let text_error = |e: skein_text::TextError| Error::Other(e.to_string());
        // Every payload a part references is in a pack: flush writes the
        // pack before the part.
        let mut builder = PartTextBuilder::new(Some(self.payload_text(Vec::new()))).map_err(text_error)?;
        // The rows are decoded on a thread of their own, a chunk ahead of
        // the tokenizing: decoding was a third of a build, and the backlog
        // is drained when ingest stops, with both cores free.
        let chunks = p.scan_text::<R>(CHUNK_ROWS)?;
        let stopped = std::thread::scope(|s| -> Result<Option<Built>> {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            std::thread::Builder::new()
                .name(DECODE_THREAD.into())
                .spawn_scoped(s, move || {
                    for chunk in chunks {
                        // A closed channel: the build stopped, and says why.
                        if tx.send(chunk).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::io("start the text backlog's decoder", e))?;
            for chunk in rx {
                if self.stop.load(Ordering::SeqCst) || (yield_to_flush && !self.wait_for_flush_to_catch_up()) {
                    return Ok(Some(Built::Paused));
                }
                if self.merging.contains(p) || !self.is_live(p) {
                    return Ok(Some(Built::Dropped));
                }
                for r in chunk? {
                    builder.push(&r).map_err(text_error)?;
                }
            }
            Ok(None)
        })?;
        Ok(match stopped {
            Some(stopped) => Err(stopped),
            None => Ok(builder.finish().map_err(text_error)?),
        })
    }

    /// Stores `bundle` as `p`'s index and lets `p` answer from it, or, if
    /// `p` is gone meanwhile, removes it again.
    fn store_part_text(&self, p: &Arc<Part>, bundle: &[u8]) -> Result<Built> {
        let name = part::text_name(p.meta.signal, p.meta.id);
        self.store.put(&name, bundle)?;
        let loaded = p.load_text_index(&self.store);
        // Only now: see the module's comment on removals.
        if !self.is_live(p) {
            self.store.remove(&name)?;
            return Ok(Built::Dropped);
        }
        if !loaded {
            return Err(Error::Other("the index stored cannot be opened".into()));
        }
        Ok(Built::Indexed)
    }

    /// Whether `p` is still one of the engine's parts.
    fn is_live(&self, p: &Arc<Part>) -> bool {
        self.state.read().parts(p.meta.signal).iter().any(|q| Arc::ptr_eq(q, p))
    }

    /// Waits while flushing is behind, up to [`MAX_PAUSE`]; `false` if it
    /// still is, or the engine stops.
    fn wait_for_flush_to_catch_up(&self) -> bool {
        let since = Instant::now();
        while self.flush_is_behind() {
            if self.stop.load(Ordering::SeqCst) || since.elapsed() >= MAX_PAUSE {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Parts that have no full-text index yet (full text on).
    pub(super) fn text_backlog_parts(&self) -> u64 {
        if !self.opts.full_text {
            return 0;
        }
        let st = self.state.read();
        [Signal::Spans, Signal::Logs]
            .iter()
            .flat_map(|s| st.parts(*s).iter())
            .filter(|p| p.text_index().is_none())
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compact::PartSwap;
    use crate::{Engine, EngineOptions};

    /// An engine (no background threads) holding one flushed log part
    /// without a text index, and that part.
    fn one_unindexed_part(dir: &std::path::Path) -> (Engine, Arc<Part>) {
        let mut o = EngineOptions::new(dir);
        o.background = false;
        o.full_text = true;
        let e = Engine::open(o).unwrap();
        e.ingest_logs(crate::testdata::logs(500)).unwrap();
        e.flush().unwrap();
        let p = e.inner.state.read().parts(Signal::Logs)[0].clone();
        assert!(p.text_index().is_none(), "a flush leaves the index to the backlog");
        (e, p)
    }

    fn text_file_exists(e: &Engine, p: &Part) -> bool {
        let name = part::text_name(Signal::Logs, p.meta.id);
        e.inner.store.list("logs").unwrap().contains(&name)
    }

    fn remove(e: &Engine, p: &Part) {
        // As retention removes a part.
        e.inner
            .swap_parts(vec![PartSwap {
                signal: Signal::Logs,
                inputs: vec![p.meta.id],
                output: None,
            }])
            .unwrap();
    }

    #[test]
    fn a_build_stops_when_its_part_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (e, p) = one_unindexed_part(dir.path());
        remove(&e, &p);
        let built = e.inner.index_part_text::<LogRecord>(&p, false).unwrap();
        assert!(matches!(built, Built::Dropped));
        assert!(!text_file_exists(&e, &p));
    }

    #[test]
    fn an_index_of_a_part_removed_after_its_build_is_removed_too() {
        let dir = tempfile::tempdir().unwrap();
        let (e, p) = one_unindexed_part(dir.path());
        let bundle = e.inner.build_part_text::<LogRecord>(&p, false).unwrap();
        let Ok(bundle) = bundle else {
            panic!("the build stopped")
        };
        // The remover deleted the part's files before the index was stored.
        remove(&e, &p);
        assert!(matches!(e.inner.store_part_text(&p, &bundle).unwrap(), Built::Dropped));
        assert!(!text_file_exists(&e, &p), "no index outlives its part");
    }

    #[test]
    fn the_backlog_leaves_a_merges_inputs_to_the_merge() {
        let dir = tempfile::tempdir().unwrap();
        let (e, p) = one_unindexed_part(dir.path());
        {
            let _merging = e.inner.merging.mark(std::slice::from_ref(&p));
            assert_eq!(e.inner.index_text_backlog(false).unwrap(), 0);
            let built = e.inner.index_part_text::<LogRecord>(&p, false).unwrap();
            assert!(
                matches!(built, Built::Dropped),
                "a build stops when a merge takes its part"
            );
            assert!(p.text_index().is_none() && !text_file_exists(&e, &p));
        }
        assert_eq!(e.inner.index_text_backlog(false).unwrap(), 1);
        assert!(p.text_index().is_some() && text_file_exists(&e, &p));
    }
}
