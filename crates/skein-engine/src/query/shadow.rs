//! Superseded span rows: a span re-ingested after its first copy was frozen
//! or flushed lives in two sources, and only the newest copy may be counted
//! by aggregations (search and trace lookup already return only it).
//!
//! Only traces present in both an older and a newer source can hold such
//! copies. Between parts — immutable — the traces held by more than one are
//! found by one pass over all their sorted trace lists
//! ([`shared_traces_and_filter`]), cached for the set of parts, and each
//! pair of parts sharing a trace is compared once, cached by part ids: never
//! every pair of parts, which at two thousand parts is millions of pairs.
//! Against a hot tier, which changes, it is recomputed per query: only the
//! hot tier's traces that the filter of every part's traces lets through
//! are looked for in the parts.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use parking_lot::Mutex;
use skein_model::Span;

use super::search::Source;
use super::window::Window;
use crate::error::Result;
use crate::hash::{FastMap, FastSet};
use crate::hot::MemTable;
use crate::part::Part;
use crate::part::shared_traces::shared_traces_and_filter;
use crate::part::trace_filter::TraceFilter;

/// Rows of an older part superseded by a newer one.
type PairRows = Arc<Vec<u32>>;

/// What is known of span parts that share traces.
#[derive(Default)]
pub struct ShadowCache {
    /// Superseded rows of older parts, by (older part id, newer part id).
    pairs: Mutex<FastMap<(u64, u64), PairRows>>,
    /// Traces shared between parts, for the last set of parts asked about.
    shared: Mutex<Option<Arc<SharedTraces>>>,
}

/// The pairs of parts of one set that hold a common trace.
struct SharedTraces {
    /// Ids of the set's parts, ascending.
    parts: Vec<u64>,
    /// The traces common to each pair (lower part id first).
    pairs: FastMap<(u64, u64), Vec<u128>>,
    /// Every trace of the set's parts.
    filter: TraceFilter,
}

impl SharedTraces {
    fn of(parts: &[&Arc<Part>], ids: Vec<u64>) -> SharedTraces {
        let lists: Vec<&[u128]> = parts.iter().map(|p| p.index.traces.ids()).collect();
        let mut pairs: FastMap<(u64, u64), Vec<u128>> = FastMap::default();
        let (shared, filter) = shared_traces_and_filter(&lists);
        for (trace, holders) in shared {
            for (k, &a) in holders.iter().enumerate() {
                for &b in &holders[k + 1..] {
                    let (a, b) = (parts[a].meta.id, parts[b].meta.id);
                    pairs.entry((a.min(b), a.max(b))).or_default().push(trace);
                }
            }
        }
        SharedTraces {
            parts: ids,
            pairs,
            filter,
        }
    }
}

impl ShadowCache {
    /// Drops entries of parts that no longer exist.
    pub fn retain_parts(&self, live: &FastSet<u64>) {
        self.pairs
            .lock()
            .retain(|(a, b), _| live.contains(a) && live.contains(b));
        let mut shared = self.shared.lock();
        if shared
            .as_ref()
            .is_some_and(|s| s.parts.iter().any(|id| !live.contains(id)))
        {
            *shared = None;
        }
    }

    /// The traces shared between `parts`, merged anew only when the set of
    /// parts changed. Held locked while merging so that concurrent queries
    /// wait for one merge rather than each making its own.
    fn shared(&self, parts: &[&Arc<Part>]) -> Arc<SharedTraces> {
        let mut ids: Vec<u64> = parts.iter().map(|p| p.meta.id).collect();
        ids.sort_unstable();
        let mut cached = self.shared.lock();
        match cached.as_ref() {
            Some(s) if s.parts == ids => s.clone(),
            _ => {
                let s = Arc::new(SharedTraces::of(parts, ids));
                *cached = Some(s.clone());
                s
            }
        }
    }
}

/// (span id, row) of `traces` in a part, one read of its span_id column.
fn part_spans(p: &Part, traces: &[u128]) -> Result<FastMap<u128, Vec<(u64, u32)>>> {
    let mut rows: Vec<(u32, u128)> = traces
        .iter()
        .flat_map(|&t| p.index.traces.rows_of(t).iter().map(move |&r| (r, t)))
        .collect();
    rows.sort_unstable();
    let ids: Vec<u32> = rows.iter().map(|(r, _)| *r).collect();
    let mut out: FastMap<u128, Vec<(u64, u32)>> = FastMap::default();
    let mut next = rows.iter();
    for b in p.read_row_columns(&["span_id"], &ids)? {
        let Some(col) = b.column_by_name("span_id").and_then(|c| c.as_fixed_size_binary_opt()) else {
            continue;
        };
        for i in 0..col.len() {
            let Some(&(row, t)) = next.next() else { break };
            let span = u64::from_be_bytes(col.value(i).try_into().unwrap_or_default());
            out.entry(t).or_default().push((span, row));
        }
    }
    Ok(out)
}

/// Rows of `older` whose span `newer` also holds, `shared` being the traces
/// both hold.
fn part_pair(older: &Part, newer: &Part, shared: &[u128]) -> Result<Vec<u32>> {
    let old = part_spans(older, shared)?;
    let new = part_spans(newer, shared)?;
    let mut rows = Vec::new();
    for (t, spans) in &old {
        let Some(newer_spans) = new.get(t) else { continue };
        let ids: FastSet<u64> = newer_spans.iter().map(|(s, _)| *s).collect();
        rows.extend(spans.iter().filter(|(s, _)| ids.contains(s)).map(|(_, r)| *r));
    }
    rows.sort_unstable();
    Ok(rows)
}

/// The live span ids of `trace` in the hot tier `hot`.
fn hot_spans(hot: &MemTable<Span>, trace: u128) -> FastSet<u64> {
    hot.trace_rows(trace)
        .iter()
        .filter(|&&r| hot.is_live(r))
        .map(|&r| hot.row(r).span_id.as_u64())
        .collect()
}

/// Rows of the older hot tier `older` holding a span of the hot tier `newer`.
fn mem_against_hot(older: &MemTable<Span>, newer: &MemTable<Span>) -> Vec<u32> {
    let mut rows = Vec::new();
    for (&t, _) in newer.traces() {
        let older_rows = older.trace_rows(t);
        if older_rows.is_empty() {
            continue;
        }
        let spans = hot_spans(newer, t);
        rows.extend(
            older_rows
                .iter()
                .filter(|&&r| older.is_live(r) && spans.contains(&older.row(r).span_id.as_u64())),
        );
    }
    rows
}

/// Rows of `older` holding a span of the hot tier `newer`, `shared` being
/// the traces both hold.
fn part_against_hot(older: &Part, shared: &[u128], newer: &MemTable<Span>) -> Result<Vec<u32>> {
    let mut rows = Vec::new();
    for (t, spans) in part_spans(older, shared)? {
        let newer_spans = hot_spans(newer, t);
        rows.extend(spans.iter().filter(|(s, _)| newer_spans.contains(s)).map(|(_, r)| *r));
    }
    Ok(rows)
}

/// For each source (newest first), its rows superseded by a newer source.
pub fn shadowed_span_rows(sources: &[Source<Span>], w: Window, cache: &ShadowCache) -> Result<Vec<FastSet<u32>>> {
    let mut shadowed = vec![FastSet::default(); sources.len()];
    let in_window = |i: usize| match &sources[i] {
        Source::Part(p) => !p.misses(w),
        Source::Mem(_) => true,
    };
    // Part against part: only the pairs holding a common trace.
    let (mut parts, mut position) = (Vec::new(), FastMap::default());
    for (i, s) in sources.iter().enumerate() {
        if let Source::Part(p) = s {
            parts.push(p);
            position.insert(p.meta.id, i);
        }
    }
    let shared = cache.shared(&parts);
    for (&(a, b), traces) in &shared.pairs {
        let (Some(&i), Some(&j)) = (position.get(&a), position.get(&b)) else {
            continue;
        };
        let (older, newer) = (i.max(j), i.min(j));
        let (Source::Part(o), Source::Part(n)) = (&sources[older], &sources[newer]) else {
            continue;
        };
        if !in_window(older) {
            continue;
        }
        let key = (o.meta.id, n.meta.id);
        let cached = cache.pairs.lock().get(&key).cloned();
        let rows = match cached {
            Some(r) => r,
            None => {
                let r = Arc::new(part_pair(o, n, traces)?);
                cache.pairs.lock().insert(key, r.clone());
                r
            }
        };
        shadowed[older].extend(rows.iter().copied());
    }
    // Anything against a hot tier, which is newer than every part: only
    // its traces the filter of the parts' traces lets through are looked
    // for in each part (usually none: a trace's spans mostly arrive
    // together, in one tier).
    for (j, newer) in sources.iter().enumerate() {
        let Source::Mem(newer) = newer else { continue };
        let newer = newer.read();
        let in_parts: Vec<u128> = newer
            .traces()
            .map(|(t, _)| *t)
            .filter(|t| shared.filter.may_contain(*t))
            .collect();
        for (i, older) in sources.iter().enumerate().skip(j + 1) {
            match older {
                Source::Mem(older) => shadowed[i].extend(mem_against_hot(&older.read(), &newer)),
                Source::Part(p) if !in_parts.is_empty() && in_window(i) => {
                    let held: Vec<u128> = in_parts
                        .iter()
                        .copied()
                        .filter(|&t| p.index.traces.contains(t))
                        .collect();
                    if !held.is_empty() {
                        shadowed[i].extend(part_against_hot(p, &held, &newer)?);
                    }
                }
                Source::Part(_) => {}
            }
        }
    }
    Ok(shadowed)
}
