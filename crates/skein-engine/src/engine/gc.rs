//! Payload garbage collection: forgetting payloads no record refers to any
//! more (a span re-ingested with other content, whose old version a merge
//! dropped; later, retention and erasure), and rewriting packs that are
//! mostly garbage.
//!
//! Safety against concurrent ingest: an ingest decides which payloads it
//! need not store again (they are known) and puts its records where the
//! live set below is read from (a hot tier) while it holds `payload_gate`
//! for reading. The live set is computed, and the garbage forgotten, with
//! it held for writing: so no batch can refer to a payload that is being
//! forgotten, and one arriving afterwards finds it unknown and stores it
//! anew.
//!
//! Crash safety: forgetting is in memory only (a crash forgets nothing, and
//! the next run finds the same garbage); a rewritten pack is committed
//! before the old one is deleted.
//!
//! Memory: the live set is one entry per distinct payload referred to,
//! read off the parts' sidecar indexes and the hot tiers' rows.

use std::sync::Arc;

use skein_model::{LogRecord, MetricPoint, Span};

use super::Inner;
use super::tier::{Stored, Tier};
use crate::error::Result;
use crate::hash::FastSet;
use crate::payload::{self, GcReport, PayloadRef};

impl Inner {
    pub(super) fn collect_payload_garbage(&self) -> Result<GcReport> {
        self.collect_payload_garbage_with(false)
    }

    /// [`collect_payload_garbage`](Inner::collect_payload_garbage) that
    /// rewrites every pack holding a forgotten payload, however little of
    /// it is garbage: after an erasure, no byte of an erased payload may
    /// stay in a pack.
    pub(super) fn collect_payload_garbage_forced(&self) -> Result<GcReport> {
        self.collect_payload_garbage_with(true)
    }

    fn collect_payload_garbage_with(&self, force: bool) -> Result<GcReport> {
        let mut report = GcReport::default();
        let packs = {
            let _no_ingest = self.payload_gate.write();
            let state = self.state.read().clone();
            let mut live: FastSet<PayloadRef> = FastSet::default();
            for parts in &state.parts {
                for p in parts {
                    live.extend(p.index.payload_refs.iter().copied());
                }
            }
            for tier in state.tiers() {
                hot_refs::<Span>(tier, &mut live);
                hot_refs::<LogRecord>(tier, &mut live);
                hot_refs::<MetricPoint>(tier, &mut live);
            }
            // Payloads a hot tier holds are not in packs yet: the ones no
            // live row refers to any more (their records expired) are
            // dropped here, so its flush does not write them to a pack.
            // Every batch that brought one is in its tier by now (ingest
            // holds `payload_gate` until it is).
            for tier in state.tiers() {
                report.removed += tier.payloads.write().retain_live(&live);
            }
            self.payloads.forget_all_but(&live, &mut report)
        };
        for pack in packs {
            self.payloads.compact_pack(pack, force, &mut report)?;
        }
        if report.removed > 0 {
            tracing::info!(
                "payload gc: forgot {} payloads, rewrote {} packs, deleted {}, freed {} bytes",
                report.removed,
                report.packs_rewritten,
                report.packs_deleted,
                report.bytes_freed
            );
        }
        Ok(report)
    }
}

fn hot_refs<R: Stored>(tier: &Arc<Tier>, live: &mut FastSet<PayloadRef>) {
    let table = R::table(tier).read();
    for row in 0..table.total_rows() {
        if table.is_live(row) {
            payload::refs_of(&**table.row(row), live);
        }
    }
}
