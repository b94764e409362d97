//! Sessions (conversations): the list, most recent first, and one session
//! with its turns.

use std::collections::BTreeSet;

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt32Type};
use serde::Serialize;
use skein_model::Span;
use skein_model::genai::{CallKind, LlmCall, PriceMemo, Pricing};

use super::batch::{BatchKey, Strs, next_batch};
use super::calls::{Needs, visit_hot_calls, visit_part, visit_unshadowed_calls};
use super::names::{KeyMemo, Names};
use super::row::CallRow;
use crate::error::Result;
use crate::hash::{FastMap, FastSet};
use crate::part::calls;
use crate::query::explain::{Explain, SourceExplain};
use crate::query::search::Source;
use crate::query::shadow::{ShadowCache, shadowed_span_rows};
use crate::query::window::Window;

/// One session's summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionSummary {
    pub session_id: String,
    pub traces: u64,
    /// Every span of the session's traces.
    pub spans: u64,
    pub llm_calls: u64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// Failed model and tool calls.
    pub errors: u64,
    pub models: Vec<String>,
    pub agents: Vec<String>,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
}

impl SessionSummary {
    /// A session with nothing counted yet.
    #[cfg(test)]
    fn empty(session_id: String) -> SessionSummary {
        SessionSummary {
            session_id,
            traces: 0,
            spans: 0,
            llm_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            errors: 0,
            models: Vec::new(),
            agents: Vec::new(),
            start_time_unix_nano: u64::MAX,
            end_time_unix_nano: 0,
        }
    }
}

/// A sum of dollar amounts that does not depend on the order they are
/// added in: each is rounded to 10⁻¹⁵ USD and summed exactly, so a session
/// costs the same whichever order its calls were visited in (sources, merges).
#[derive(Default, Clone, Copy)]
struct UsdSum(i128);

impl UsdSum {
    const SCALE: f64 = 1e15;

    fn add(&mut self, usd: f64) {
        self.0 += (usd * Self::SCALE).round() as i128;
    }

    fn usd(self) -> f64 {
        self.0 as f64 / Self::SCALE
    }
}

/// One session's figures, its strings still interned.
struct SessionAgg {
    traces: u64,
    llm_calls: u64,
    input: i64,
    output: i64,
    cost: UsdSum,
    errors: u64,
    models: Vec<u32>,
    agents: Vec<u32>,
    start: u64,
    end: u64,
}

impl Default for SessionAgg {
    fn default() -> Self {
        SessionAgg {
            traces: 0,
            llm_calls: 0,
            input: 0,
            output: 0,
            cost: UsdSum::default(),
            errors: 0,
            models: Vec::new(),
            agents: Vec::new(),
            start: u64::MAX,
            end: 0,
        }
    }
}

/// Folds GenAI spans into sessions: first which session each trace is in
/// ([`SessionAcc::mark`]), then every call of those traces into its
/// session ([`SessionAcc::add`]); calls of other traces are passed over.
struct SessionAcc<'p> {
    memo: PriceMemo<'p>,
    /// Each marked trace's session.
    traces: FastMap<u128, u32>,
    /// Session ids, numbered; `aggs[i]` is session `i`'s figures.
    sessions: Names,
    aggs: Vec<SessionAgg>,
    models: Names,
    agents: Names,
    /// The session last marked or added to: spans of one session come in
    /// runs, so it is compared before any lookup.
    last: Option<u32>,
    /// Whether some trace has spans of two sessions (the first noted then
    /// owns it). If none has, a call that carries a session is in that
    /// session, found by name without looking its trace up.
    ambiguous: bool,
    /// Numbers of the current batch's dictionary values, by column.
    session_keys: KeyMemo,
    model_keys: KeyMemo,
    request_model_keys: KeyMemo,
    agent_keys: KeyMemo,
}

impl<'p> SessionAcc<'p> {
    fn new(pricing: &'p Pricing) -> Self {
        SessionAcc {
            memo: PriceMemo::new(pricing),
            traces: FastMap::default(),
            sessions: Names::default(),
            aggs: Vec::new(),
            models: Names::few(),
            agents: Names::few(),
            last: None,
            ambiguous: false,
            session_keys: KeyMemo::default(),
            model_keys: KeyMemo::default(),
            request_model_keys: KeyMemo::default(),
            agent_keys: KeyMemo::default(),
        }
    }

    fn is_empty(&self) -> bool {
        self.traces.is_empty()
    }

    /// Notes that `trace` has a span of `session` (`key` its key in a
    /// batch's dictionary, if read from one): the first noted wins.
    fn mark(&mut self, trace: u128, session: &str, key: Option<BatchKey>) {
        let v = match self.traces.entry(trace) {
            std::collections::hash_map::Entry::Vacant(v) => v,
            std::collections::hash_map::Entry::Occupied(o) => {
                self.ambiguous |= self.sessions.name(*o.get()) != session;
                return;
            }
        };
        let s = match (key, self.last) {
            (Some((batch, key)), _) => self
                .session_keys
                .get(batch, key, || Some(self.sessions.id(session)))
                .unwrap_or_else(|| self.sessions.id(session)),
            (None, Some(s)) if self.sessions.name(s) == session => s,
            (None, _) => self.sessions.id(session),
        };
        self.last = Some(s);
        v.insert(s);
        if s as usize == self.aggs.len() {
            self.aggs.push(SessionAgg::default());
        }
        self.aggs[s as usize].traces += 1;
    }

    fn add(&mut self, r: &CallRow<'_>) {
        if !r.counts() {
            return;
        }
        let Some(s) = self.session_of(r) else {
            return;
        };
        self.last = Some(s);
        let k = r.keys;
        let agent = r.agent.and_then(|name| match k.agent {
            Some(key) => self.agent_keys.get(k.batch, key, || Some(self.agents.id(name))),
            None => Some(self.agents.id(name)),
        });
        let model = if !r.is_llm() {
            None
        } else if let Some(name) = r.model {
            match k.model {
                Some(key) => self.model_keys.get(k.batch, key, || Some(self.models.id(name))),
                None => Some(self.models.id(name)),
            }
        } else if let Some(name) = r.request_model {
            match k.request_model {
                Some(key) => self.request_model_keys.get(k.batch, key, || Some(self.models.id(name))),
                None => Some(self.models.id(name)),
            }
        } else {
            None
        };
        let a = &mut self.aggs[s as usize];
        a.start = a.start.min(r.time);
        a.end = a.end.max(r.time.saturating_add(r.duration_ns));
        a.errors += (r.error && matches!(r.kind, Some(CallKind::Llm | CallKind::Tool))) as u64;
        if let Some(i) = agent
            && !a.agents.contains(&i)
        {
            a.agents.push(i);
        }
        if r.is_llm() {
            a.llm_calls += 1;
            if let Some(i) = model
                && !a.models.contains(&i)
            {
                a.models.push(i);
            }
            if r.counts_tokens() {
                a.input += r.tokens.input.unwrap_or(0);
                a.output += r.tokens.output.unwrap_or(0);
            }
            if let Some(usd) = self.memo.cost_keyed(&r.cost_input(), r.time, r.keys.model_key()).usd {
                a.cost.add(usd);
            }
        }
    }

    /// The session a call counts in, if any.
    fn session_of(&mut self, r: &CallRow<'_>) -> Option<u32> {
        match r.session {
            // Both passes see the same rows (in the window, not
            // superseded), so a call that carries a session was noted
            // under it; by name is a lookup among sessions, far fewer than
            // traces.
            Some(name) if !self.ambiguous => match r.keys.session {
                Some(key) => self.session_keys.get(r.keys.batch, key, || self.sessions.get(name)),
                None => match self.last {
                    Some(s) if self.sessions.name(s) == name => Some(s),
                    _ => self.sessions.get(name),
                },
            },
            _ => self.traces.get(&r.trace_id).copied(),
        }
    }

    /// The traces of each of `sessions`, sorted, in their order.
    fn traces_of(&self, sessions: &[u32]) -> Vec<Vec<u128>> {
        let place: FastMap<u32, usize> = sessions.iter().enumerate().map(|(k, &s)| (s, k)).collect();
        let mut out = vec![Vec::new(); sessions.len()];
        for (&t, s) in &self.traces {
            if let Some(&k) = place.get(s) {
                out[k].push(t);
            }
        }
        for v in &mut out {
            v.sort_unstable();
        }
        out
    }

    /// Session `s`'s summary, spelled out; `spans` counts its spans.
    fn summary(&self, s: u32, spans: u64) -> SessionSummary {
        let a = &self.aggs[s as usize];
        SessionSummary {
            session_id: self.sessions.name(s).to_string(),
            traces: a.traces,
            spans,
            llm_calls: a.llm_calls,
            input_tokens: a.input,
            output_tokens: a.output,
            cost_usd: a.cost.usd(),
            errors: a.errors,
            models: self.models.sorted(&a.models),
            agents: self.agents.sorted(&a.agents),
            start_time_unix_nano: a.start,
            end_time_unix_nano: a.end,
        }
    }
}

/// One session: the traces in which a span in `w` carries its id (found
/// from the typed `session_id` column, a few sparse bytes a row), then
/// those traces' spans, whole.
pub fn session(
    sources: &[Source<Span>],
    id: &str,
    w: Window,
    pricing: &Pricing,
    explain: &mut Explain,
) -> Result<Option<SessionDetail>> {
    let traces = session_traces(sources, id, w, explain)?;
    if traces.is_empty() {
        return Ok(None);
    }
    // First which session each trace is in (the first span noted wins,
    // as in the list), then the calls.
    let mut acc = SessionAcc::new(pricing);
    let mut span_counts: FastMap<u128, u64> = FastMap::default();
    let mut calls = Vec::new();
    for t in &traces {
        let spans = crate::query::search::trace_records(sources, *t, explain)?;
        span_counts.insert(*t, spans.len() as u64);
        for span in spans {
            let Some(call) = LlmCall::from_attributes(&span.attributes) else {
                continue;
            };
            if let Some(s) = &call.session_id {
                acc.mark(*t, s, None);
            }
            calls.push((span, call));
        }
    }
    let Some(session) = acc.sessions.get(id) else {
        return Ok(None);
    };
    let mut turns = Vec::new();
    for (span, call) in calls {
        acc.add(&CallRow::of_span(&span, &call));
        // A trace found through a superseded copy of a span (re-sent
        // without the session) is not the session's: its turns go too.
        if matches!(call.kind, Some(CallKind::Llm | CallKind::Tool))
            && acc.traces.get(&span.trace_id.as_u128()) == Some(&session)
        {
            let cost = pricing.cost(&call, span.start_time_unix_nano);
            turns.push(SessionTurn { span, call, cost });
        }
    }
    let traces = acc.traces_of(&[session]).pop().unwrap_or_default();
    let spans = traces.iter().map(|t| span_counts.get(t).copied().unwrap_or(0)).sum();
    let summary = acc.summary(session, spans);
    turns.sort_by_key(|t| (t.span.start_time_unix_nano, t.span.span_id));
    Ok(Some(SessionDetail {
        summary,
        traces: traces.into_iter().map(skein_model::TraceId::from_u128).collect(),
        turns,
    }))
}

/// The traces in which a span in `w` belongs to session `id`.
fn session_traces(sources: &[Source<Span>], id: &str, w: Window, explain: &mut Explain) -> Result<Vec<u128>> {
    let mut traces: BTreeSet<u128> = BTreeSet::new();
    visit_session_marks(sources, w, None, explain, &mut |t, s, _| {
        if s == id {
            traces.insert(t);
        }
    })?;
    Ok(traces.into_iter().collect())
}

/// Calls `f(trace, session, key)` for every span in `w` that carries a
/// session id, but the rows `shadowed` names (a set per source, when
/// given); `key` is (batch, key) when the id was read from a dictionary
/// (see [`NameKeys`](super::row::NameKeys)). Parts answer from three
/// columns of their calls tables.
fn visit_session_marks(
    sources: &[Source<Span>],
    w: Window,
    shadowed: Option<&[FastSet<u32>]>,
    explain: &mut Explain,
    f: &mut dyn FnMut(u128, &str, Option<BatchKey>),
) -> Result<()> {
    let none = FastSet::default();
    for (k, s) in sources.iter().enumerate() {
        let shadowed = shadowed.and_then(|v| v.get(k)).unwrap_or(&none);
        match s {
            Source::Mem(m) => visit_hot_calls(m, w, shadowed, explain, &mut |sp, call| {
                if let Some(session) = &call.session_id {
                    f(sp.trace_id.as_u128(), session, None);
                }
            }),
            Source::Part(p) => {
                let mut ex = SourceExplain::new("part", Some(p.meta.id));
                if p.misses(w) {
                    ex.pruned = Some("time range".into());
                } else if let Some(calls) = p.calls() {
                    ex.read_from = Some("calls table");
                    for b in calls.read(&["session_id", "trace_id", "start_time_unix_nano"])? {
                        let (Some(rows), Some(session), Some(tid), Some(start)) = (
                            b.column_by_name(calls::ROW)
                                .and_then(|c| c.as_primitive_opt::<UInt32Type>()),
                            b.column_by_name("session_id").and_then(Strs::of),
                            b.column_by_name("trace_id").and_then(|c| c.as_fixed_size_binary_opt()),
                            b.column_by_name("start_time_unix_nano")
                                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>()),
                        ) else {
                            return Err(crate::error::Error::corrupt(
                                "calls table",
                                "a session column is missing",
                            ));
                        };
                        ex.rows_examined += b.num_rows() as u64;
                        let batch = next_batch();
                        for i in 0..b.num_rows() {
                            if let Some(name) = session.get(i)
                                && w.contains(start.value(i).max(0) as u64)
                                && !shadowed.contains(&rows.value(i))
                            {
                                let t = u128::from_be_bytes(tid.value(i).try_into().unwrap_or_default());
                                f(t, name, session.key(i).map(|k| (batch, k)));
                            }
                        }
                    }
                } else {
                    let needs = Needs {
                        trace: true,
                        service: false,
                    };
                    visit_part(p, w, needs, shadowed, &mut ex, &mut |r| {
                        if let Some(s) = r.session {
                            f(r.trace_id, s, None);
                        }
                    })?;
                }
                explain.add(ex);
            }
        }
    }
    Ok(())
}

/// How many spans each of `traces` has across sources, the newest copy of
/// each. A trace held by one source (almost every trace) is counted from
/// its index alone; one held by several is read, to count a span re-sent
/// into a newer source once. This is the page's traces only: the shadowed
/// rows of every source ([`shadowed_span_rows`]) over all time cost more
/// than the whole page.
fn trace_span_counts(sources: &[Source<Span>], traces: &[u128]) -> Result<FastMap<u128, u64>> {
    // Reading a shared trace is a detail of counting, not a source the
    // query scanned: its explain is dropped.
    let mut scratch = Explain::new(crate::record::Signal::Spans);
    let mut out = FastMap::default();
    for &t in traces {
        let mut holders = 0;
        let mut n = 0u64;
        for s in sources {
            match s {
                Source::Mem(m) => {
                    let m = m.read();
                    let rows = m.trace_rows(t);
                    holders += !rows.is_empty() as u32;
                    n += rows.iter().filter(|r| m.is_live(**r)).count() as u64;
                }
                Source::Part(p) => {
                    let rows = p.index.traces.rows_of(t).len() as u64;
                    holders += (rows > 0) as u32;
                    n += rows;
                }
            }
        }
        if holders > 1 {
            n = crate::query::search::trace_records(sources, t, &mut scratch)?.len() as u64;
        }
        out.insert(t, n);
    }
    Ok(out)
}

/// One model or tool call of a session, with its span (whose attributes
/// hold the messages, tool arguments and results).
#[derive(Debug, Clone)]
pub struct SessionTurn {
    pub span: std::sync::Arc<Span>,
    pub call: LlmCall,
    pub cost: skein_model::genai::Cost,
}

#[derive(Debug, Clone)]
pub struct SessionDetail {
    pub summary: SessionSummary,
    pub traces: Vec<skein_model::TraceId>,
    pub turns: Vec<SessionTurn>,
}

/// A page of sessions, most recent (latest activity) first.
#[derive(Debug, Clone, Serialize)]
pub struct SessionPage {
    pub sessions: Vec<SessionSummary>,
    pub next_cursor: Option<String>,
}

/// Where a page of sessions starts: after this (end time, id).
fn encode_cursor(s: &SessionSummary) -> String {
    format!("{}.{}", s.end_time_unix_nano, hex::encode(s.session_id.as_bytes()))
}

pub fn decode_cursor(c: &str) -> Option<(u64, String)> {
    let (end, id) = c.split_once('.')?;
    Some((end.parse().ok()?, String::from_utf8(hex::decode(id).ok()?).ok()?))
}

/// Sessions with activity in `w`, most recent first, `limit` a page.
pub fn sessions(
    sources: &[Source<Span>],
    w: Window,
    limit: usize,
    after: Option<(u64, String)>,
    pricing: &Pricing,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<SessionPage> {
    // Two passes: which traces are sessions' (three columns of each calls
    // table), then those traces' calls alone (most calls are not in a
    // session).
    let mut acc = SessionAcc::new(pricing);
    let shadowed = shadowed_span_rows(sources, w, cache)?;
    visit_session_marks(sources, w, Some(&shadowed), explain, &mut |t, s, key| {
        acc.mark(t, s, key)
    })?;
    if acc.is_empty() {
        return Ok(SessionPage {
            sessions: Vec::new(),
            next_cursor: None,
        });
    }
    let needs = Needs {
        trace: true,
        service: false,
    };
    visit_unshadowed_calls(sources, w, needs, &shadowed, explain, &mut |r| acc.add(r))?;
    // Most recent first; ties by id.
    let order = |s: u32| (std::cmp::Reverse(acc.aggs[s as usize].end), acc.sessions.name(s));
    let cmp = |a: &u32, b: &u32| order(*a).cmp(&order(*b));
    let mut page: Vec<u32> = (0..acc.aggs.len() as u32).collect();
    if let Some((end, id)) = &after {
        let cut = (std::cmp::Reverse(*end), id.as_str());
        page.retain(|&s| order(s) > cut);
    }
    let more = page.len() > limit;
    // The page only: a partial sort, then summaries (and span counts, a
    // lookup per trace) for it alone.
    if more && limit > 0 {
        page.select_nth_unstable_by(limit - 1, cmp);
    }
    page.truncate(limit);
    page.sort_by(cmp);
    let traces = acc.traces_of(&page);
    let all: Vec<u128> = traces.iter().flatten().copied().collect();
    let spans = trace_span_counts(sources, &all)?;
    let sessions: Vec<SessionSummary> = page
        .iter()
        .zip(&traces)
        .map(|(&s, ts)| acc.summary(s, ts.iter().map(|t| spans.get(t).copied().unwrap_or(0)).sum()))
        .collect();
    let next_cursor = if more { sessions.last().map(encode_cursor) } else { None };
    Ok(SessionPage { sessions, next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_sums_do_not_depend_on_order() {
        let xs = [0.1, 1e-9, 3.3, 2.5e-7, 0.2, 7.0];
        let (mut fwd, mut back) = (UsdSum::default(), UsdSum::default());
        xs.iter().for_each(|&x| fwd.add(x));
        xs.iter().rev().for_each(|&x| back.add(x));
        assert_eq!(fwd.0, back.0);
        assert!((fwd.usd() - xs.iter().sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn cursors_round_trip() {
        let s = SessionSummary {
            end_time_unix_nano: 42,
            ..SessionSummary::empty("a.b/c".into())
        };
        assert_eq!(decode_cursor(&encode_cursor(&s)), Some((42, "a.b/c".into())));
        assert_eq!(decode_cursor("zz"), None);
    }
}
