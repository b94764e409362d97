//! Full-text indexes built after their parts: a flush writes a part without
//! one, and the compaction thread builds it once flushing has caught up.
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
//! Crash safety: an index is stored (temp → fsync → rename) before its part
//! answers from it. A crash before that leaves a part without an index,
//! indexed again after the restart; after it, the file, which the part
//! loads when it is opened. A part is indexed under the compaction lock,
//! so no merge, retention or erasure removes it meanwhile: its index file
//! never outlives it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use skein_model::{LogRecord, Span};

use super::Inner;
use super::tier::Stored;
use crate::error::{Error, Result};
use crate::part::{self, Part};
use crate::record::Signal;
use crate::text_index::PartTextBuilder;

/// Rows read from a part and indexed between two looks at the flush.
const CHUNK_ROWS: usize = 8192;
const DECODE_THREAD: &str = "skein-text-decode";
/// How long a build waits for flushing to catch up before it lets go of
/// the compaction lock (retention and erasure wait for it) and starts
/// again later.
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// Ingest this recent goes on: a half-full active tier is frozen soon. (A
/// tier left half full when ingest stops waits for its age limit.)
const INGEST_GOES_ON: Duration = Duration::from_secs(1);

/// Parts whose index cannot be built, and why: not tried again until a
/// restart, and a fault while any of them is still there.
pub(super) type Unindexable = HashMap<(Signal, u64), String>;

/// How a build of a part's index ended.
enum Built {
    Indexed,
    /// It gave way to flushing for too long: tried again next round.
    Paused,
}

impl Inner {
    /// Builds the full-text index of every part that has none, oldest first,
    /// and returns how many it built. With `yield_to_flush`, it works only
    /// while flushing has caught up ([`flush_is_behind`](Self::flush_is_behind)),
    /// so ingest never waits for it.
    pub(super) fn index_text_backlog(&self, yield_to_flush: bool) -> Result<usize> {
        if !self.opts.full_text {
            return Ok(0);
        }
        let _no_merges = self.compact_lock.lock();
        let mut built = 0;
        for signal in [Signal::Spans, Signal::Logs] {
            let parts = self.state.read().parts(signal).clone();
            for p in parts.iter().filter(|p| p.text_index().is_none()) {
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
        let text_error = |e: skein_text::TextError| Error::Other(e.to_string());
        // Every payload a part references is in a pack: flush writes the
        // pack before the part.
        let mut builder = PartTextBuilder::new(Some(self.payload_text(Vec::new()))).map_err(text_error)?;
        // The rows are decoded on a thread of their own, a chunk ahead of
        // the tokenizing: decoding was a third of a build, and the backlog
        // is drained when ingest stops, with both cores free.
        let chunks = p.scan::<R>(CHUNK_ROWS)?;
        let indexed = std::thread::scope(|s| -> Result<bool> {
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
                if yield_to_flush && !self.wait_for_flush_to_catch_up() {
                    return Ok(false);
                }
                for r in chunk? {
                    builder.push(&r).map_err(text_error)?;
                }
            }
            Ok(true)
        })?;
        if !indexed {
            return Ok(Built::Paused);
        }
        let bytes = builder.finish().map_err(text_error)?;
        self.store.put(&part::text_name(R::SIGNAL, p.meta.id), &bytes)?;
        if !p.load_text_index(&self.store) {
            return Err(Error::Other("the index stored cannot be opened".into()));
        }
        Ok(Built::Indexed)
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
