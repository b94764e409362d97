//! Superseded span rows: a span re-ingested after its first copy was frozen
//! or flushed lives in two sources, and only the newest copy may be counted
//! by aggregations (search and trace lookup already return only it).
//!
//! Only traces present in both an older and a newer source can hold such
//! copies. Between two parts — immutable — the answer is computed once by a
//! merge of their sorted trace lists and cached by part ids. Against a hot
//! tier, which changes, it is recomputed per query, probing only the hot
//! tier's traces (bounded by its size) in the older source.

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

/// Rows of an older part superseded by a newer one.
type PairRows = Arc<Vec<u32>>;

/// Superseded rows of older parts, by (older part id, newer part id).
#[derive(Default)]
pub struct ShadowCache {
    pairs: Mutex<FastMap<(u64, u64), PairRows>>,
}

impl ShadowCache {
    /// Drops entries of parts that no longer exist.
    pub fn retain_parts(&self, live: &FastSet<u64>) {
        self.pairs
            .lock()
            .retain(|(a, b), _| live.contains(a) && live.contains(b));
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

/// Rows of `older` whose span `newer` also holds.
fn part_pair(older: &Part, newer: &Part) -> Result<Vec<u32>> {
    let (a, b) = (older.index.traces.ids(), newer.index.traces.ids());
    let (mut i, mut j) = (0, 0);
    let mut shared = Vec::new();
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    if shared.is_empty() {
        return Ok(Vec::new());
    }
    let old = part_spans(older, &shared)?;
    let new = part_spans(newer, &shared)?;
    let mut rows = Vec::new();
    for (t, spans) in &old {
        let Some(newer_spans) = new.get(t) else { continue };
        let ids: FastSet<u64> = newer_spans.iter().map(|(s, _)| *s).collect();
        rows.extend(spans.iter().filter(|(s, _)| ids.contains(s)).map(|(_, r)| *r));
    }
    rows.sort_unstable();
    Ok(rows)
}

/// Rows of `older` holding a span of the hot tier `newer`.
fn against_hot(older: &Source<Span>, newer: &MemTable<Span>) -> Result<Vec<u32>> {
    let older_mem = match older {
        Source::Mem(m) => Some(m.read()),
        Source::Part(_) => None,
    };
    let in_older = |t: u128| match (&older_mem, older) {
        (Some(m), _) => !m.trace_rows(t).is_empty(),
        (None, Source::Part(p)) => p.index.traces.contains(t),
        (None, Source::Mem(_)) => false,
    };
    // Usually none: a trace's spans mostly arrive together, in one tier.
    let shared: Vec<u128> = newer.traces().map(|(t, _)| *t).filter(|t| in_older(*t)).collect();
    if shared.is_empty() {
        return Ok(Vec::new());
    }
    let hot_spans = |t: u128| -> FastSet<u64> {
        newer
            .trace_rows(t)
            .iter()
            .filter(|&&r| newer.is_live(r))
            .map(|&r| newer.row(r).span_id.as_u64())
            .collect()
    };
    let mut rows = Vec::new();
    match (&older_mem, older) {
        (Some(m), _) => {
            for &t in &shared {
                let spans = hot_spans(t);
                for &r in m.trace_rows(t) {
                    if m.is_live(r) && spans.contains(&m.row(r).span_id.as_u64()) {
                        rows.push(r);
                    }
                }
            }
        }
        (None, Source::Part(p)) => {
            for (t, spans) in part_spans(p, &shared)? {
                let newer_spans = hot_spans(t);
                rows.extend(spans.iter().filter(|(s, _)| newer_spans.contains(s)).map(|(_, r)| *r));
            }
        }
        (None, Source::Mem(_)) => {}
    }
    Ok(rows)
}

/// For each source (newest first), its rows superseded by a newer source.
pub fn shadowed_span_rows(sources: &[Source<Span>], w: Window, cache: &ShadowCache) -> Result<Vec<FastSet<u32>>> {
    let mut shadowed = vec![FastSet::default(); sources.len()];
    for i in 1..sources.len() {
        if let Source::Part(p) = &sources[i]
            && p.misses(w)
        {
            continue;
        }
        for j in 0..i {
            let rows: Arc<Vec<u32>> = match (&sources[i], &sources[j]) {
                (Source::Part(older), Source::Part(newer)) => {
                    let key = (older.meta.id, newer.meta.id);
                    let cached = cache.pairs.lock().get(&key).cloned();
                    match cached {
                        Some(r) => r,
                        None => {
                            let r = Arc::new(part_pair(older, newer)?);
                            cache.pairs.lock().insert(key, r.clone());
                            r
                        }
                    }
                }
                (older, Source::Mem(newer)) => Arc::new(against_hot(older, &newer.read())?),
                // Sources are newest first and hot tiers are newer than parts.
                (Source::Mem(_), Source::Part(_)) => continue,
            };
            shadowed[i].extend(rows.iter().copied());
        }
    }
    Ok(shadowed)
}
