//! A read-only engine (`--read-only` on a bucket another skein writes)
//! takes the bucket's listing again every `refresh_interval`: parts and
//! payload packs that appeared are opened, those the writer removed are let
//! go, and parts a merge replaced are dropped as soon as its output is
//! listed, so every record is answered once.
//!
//! What a reader sees lags its writer: records reach the bucket when the
//! writer flushes its hot tier (`--hot-max-age`) and uploads the part; a
//! reader's own hot tier stays empty. Queries running while the writer
//! deletes a part they read may fail (the object is gone); the next try,
//! after a refresh, reads its replacement.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use skein_model::{LogRecord, MetricPoint, Span};

use super::Inner;
use super::tier::Stored;
use crate::error::Result;
use crate::health::FaultKind;
use crate::part::{self, Part};

/// What one refresh changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RefreshReport {
    pub parts_added: u64,
    pub parts_dropped: u64,
}

impl Inner {
    pub(super) fn refresh(&self) -> Result<RefreshReport> {
        let mut report = RefreshReport::default();
        self.store.refresh()?;
        // Packs before parts: a new part's payloads are in a pack the
        // writer uploaded before it.
        self.payloads.refresh()?;
        self.refresh_parts::<Span>(&mut report)?;
        self.refresh_parts::<LogRecord>(&mut report)?;
        self.refresh_parts::<MetricPoint>(&mut report)?;
        if report != RefreshReport::default() {
            tracing::info!(
                "refresh: {} parts added, {} dropped",
                report.parts_added,
                report.parts_dropped
            );
        }
        Ok(report)
    }

    fn refresh_parts<R: Stored>(&self, report: &mut RefreshReport) -> Result<()> {
        let listed: HashSet<u64> = self
            .store
            .list(R::SIGNAL.as_str())?
            .iter()
            .filter_map(|n| part::parse_name(n))
            .filter(|(_, _, is_parquet)| *is_parquet)
            .map(|(_, id, _)| id)
            .collect();
        let current = self.state.read().parts(R::SIGNAL).clone();
        let known: HashSet<u64> = current.iter().map(|p| p.meta.id).collect();
        let mut parts: Vec<Arc<Part>> = current
            .iter()
            .filter(|p| listed.contains(&p.meta.id))
            .cloned()
            .collect();
        for &id in listed.difference(&known) {
            match Part::open::<R>(self.store.clone(), id) {
                Ok(p) => parts.push(Arc::new(p.with_page_cache(Some(self.page_cache.clone())))),
                // Deleted by the writer between the listing and now: the
                // next refresh lists its replacement.
                Err(e) => tracing::warn!("refresh: cannot open {} part {id} yet: {e}", R::SIGNAL.as_str()),
            }
        }
        let replaced: HashSet<u64> = parts.iter().flat_map(|p| p.meta.replaces.iter().copied()).collect();
        parts.retain(|p| !replaced.contains(&p.meta.id));
        parts.sort_by_key(|p| (p.meta.min_seq, p.meta.id));
        let before: HashSet<u64> = known;
        let after: HashSet<u64> = parts.iter().map(|p| p.meta.id).collect();
        report.parts_added += after.difference(&before).count() as u64;
        report.parts_dropped += before.difference(&after).count() as u64;
        if before != after {
            self.state.write().parts[R::SIGNAL.index()] = parts;
        }
        Ok(())
    }

    pub(super) fn refresh_loop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            {
                let mut w = self.wake.lock();
                if !*w {
                    self.wake_cv.wait_for(&mut w, self.opts.refresh_interval);
                }
                *w = false;
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            // A failing refresh (the bucket unreachable) keeps answering
            // from what was listed last, and says so.
            let _ = self.tracked(FaultKind::Upload, || self.refresh());
        }
    }
}
