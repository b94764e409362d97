//! Every GenAI call in a window, as the aggregations see it: from a part's
//! calls table, its typed columns, or its decoded spans, and from the hot
//! tier's spans.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use skein_model::Span;
use skein_model::genai::LlmCall;

use super::batch::LlmBatch;
use super::row::CallRow;
use crate::error::Result;
use crate::hash::FastSet;
use crate::hot::MemTable;
use crate::part::Part;
use crate::part::calls::{self, CallsTable};
use crate::part::columns::SPAN_LLM_COLUMNS;
use crate::query::explain::{Explain, SourceExplain};
use crate::query::search::Source;
use crate::query::shadow::{ShadowCache, shadowed_span_rows};
use crate::query::window::Window;

/// The dense columns a visit needs besides the GenAI ones: reading a
/// part's trace ids and service names costs more than all of its sparse
/// GenAI columns together, so a visit that needs neither leaves them out
/// (its rows then carry trace 0 and an empty service).
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    pub trace: bool,
    pub service: bool,
}

/// Calls `f` with every GenAI span in `w` (the newest copy of each).
pub fn visit_calls(
    sources: &[Source<Span>],
    w: Window,
    needs: Needs,
    cache: &ShadowCache,
    explain: &mut Explain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    let shadowed = shadowed_span_rows(sources, w, cache)?;
    visit_unshadowed_calls(sources, w, needs, &shadowed, explain, f)
}

/// [`visit_calls`], given each source's superseded rows
/// ([`shadowed_span_rows`] for `w`).
pub(super) fn visit_unshadowed_calls(
    sources: &[Source<Span>],
    w: Window,
    needs: Needs,
    shadowed: &[FastSet<u32>],
    explain: &mut Explain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    for (s, shadowed) in sources.iter().zip(shadowed) {
        match s {
            Source::Mem(m) => visit_hot_calls(m, w, shadowed, explain, &mut |sp, call| {
                let r = CallRow::of_span(sp, call);
                if r.counts() {
                    f(&r);
                }
            }),
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                } else {
                    visit_part(p, w, needs, shadowed, &mut ex, f)?;
                }
                explain.add(ex);
            }
        }
    }
    Ok(())
}

/// Calls `f(span, call)` for each live GenAI call of a hot table whose
/// span starts in `w`, but the rows `shadowed` names; the rows examined go
/// to a "hot" entry of `explain`.
pub(super) fn visit_hot_calls(
    m: &parking_lot::RwLock<MemTable<Span>>,
    w: Window,
    shadowed: &FastSet<u32>,
    explain: &mut Explain,
    f: &mut dyn FnMut(&Span, &LlmCall),
) {
    let m = m.read();
    let mut ex = SourceExplain::new("hot", None);
    for (row, call) in m.llm_calls().iter() {
        if !m.is_live(row) || shadowed.contains(&row) {
            continue;
        }
        let sp = m.row(row);
        ex.rows_examined += 1;
        if w.contains(sp.start_time_unix_nano) {
            f(sp, call);
        }
    }
    explain.add(ex);
}

const ROW_COLUMNS: &[&str] = &["start_time_unix_nano", "duration_ns", "status_code"];

pub(super) fn visit_part(
    p: &Part,
    w: Window,
    needs: Needs,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    if let Some(calls) = p.calls() {
        return visit_calls_table(calls, w, needs, shadowed, ex, f);
    }
    let range = p.index.row_range(p.rows(), w);
    // First the two sparse columns that say which rows are GenAI spans (a
    // few percent of rows, mostly nulls: cheap), then every column of just
    // those rows.
    let mut rows = Vec::new();
    let mut next_row = range.start;
    for b in p.read_columns(&["llm_kind", "session_id"], range.clone(), 65536)? {
        let first_row = next_row;
        next_row += b.num_rows() as u32;
        let (Some(kind), Some(session)) = (b.column_by_name("llm_kind"), b.column_by_name("session_id")) else {
            // Written before the typed GenAI columns: decode the spans.
            return visit_part_records(p, w, shadowed, ex, f);
        };
        ex.rows_examined += b.num_rows() as u64;
        for i in 0..b.num_rows() {
            let row = first_row + i as u32;
            if (kind.is_valid(i) || session.is_valid(i)) && !shadowed.contains(&row) {
                rows.push(row);
            }
        }
    }
    let columns = call_columns(needs);
    for chunk in rows.chunks(65536) {
        ex.rows_decoded += chunk.len() as u64;
        for b in p.read_row_columns(&columns, chunk)? {
            let cols = LlmBatch::new(&b).ok_or_else(|| {
                crate::error::Error::corrupt("span part", "a GenAI column is missing or of the wrong type")
            })?;
            for i in 0..b.num_rows() {
                let time = cols.start.value(i).max(0) as u64;
                if w.contains(time) {
                    f(&cols.row(i, time));
                }
            }
        }
    }
    Ok(())
}

/// The columns a visit reads of each call.
fn call_columns(needs: Needs) -> Vec<&'static str> {
    let mut columns: Vec<&str> = ROW_COLUMNS.iter().chain(SPAN_LLM_COLUMNS).copied().collect();
    if needs.trace {
        columns.push("trace_id");
    }
    if needs.service {
        columns.push("service_name");
    }
    columns
}

/// A part's calls from its calls table: every call row, densely.
fn visit_calls_table(
    calls: &CallsTable,
    w: Window,
    needs: Needs,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    ex.read_from = Some("calls table");
    for b in calls.read(&call_columns(needs))? {
        let cols = LlmBatch::new(&b).ok_or_else(|| {
            crate::error::Error::corrupt("calls table", "a GenAI column is missing or of the wrong type")
        })?;
        let rows = b
            .column_by_name(calls::ROW)
            .and_then(|c| c.as_primitive_opt::<UInt32Type>())
            .ok_or_else(|| crate::error::Error::corrupt("calls table", "no row column"))?;
        ex.rows_examined += b.num_rows() as u64;
        ex.rows_decoded += b.num_rows() as u64;
        for i in 0..b.num_rows() {
            let time = cols.start.value(i).max(0) as u64;
            if w.contains(time) && !shadowed.contains(&rows.value(i)) {
                f(&cols.row(i, time));
            }
        }
    }
    Ok(())
}

fn visit_part_records(
    p: &Part,
    w: Window,
    shadowed: &FastSet<u32>,
    ex: &mut SourceExplain,
    f: &mut dyn FnMut(&CallRow<'_>),
) -> Result<()> {
    let mut row = 0u32;
    for batch in p.scan::<Span>(8192)? {
        for sp in batch? {
            let this = row;
            row += 1;
            ex.rows_decoded += 1;
            if shadowed.contains(&this) || !w.contains(sp.start_time_unix_nano) {
                continue;
            }
            if let Some(call) = LlmCall::from_attributes(&sp.attributes) {
                let r = CallRow::of_span(&sp, &call);
                if r.counts() {
                    f(&r);
                }
            }
        }
    }
    Ok(())
}
