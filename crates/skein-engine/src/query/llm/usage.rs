//! Usage and cost by a dimension, and tool calls by tool.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;
use skein_model::Span;
use skein_model::genai::{CallKind, CostSource, PriceMemo, Pricing, pricing::date_of};

use super::calls::{Needs, visit_calls};
use super::row::CallRow;
use crate::error::Result;
use crate::hash::FastMap;
use crate::query::explain::Explain;
use crate::query::search::Source;
use crate::query::shadow::ShadowCache;
use crate::query::sketch::{BatchedSketch, Sketch};
use crate::query::window::Window;

/// What usage is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageGroupBy {
    Model,
    Provider,
    Service,
    Session,
    Agent,
    User,
    Day,
}

impl UsageGroupBy {
    pub const NAMES: &'static str = "model, provider, service, session, agent, user or day";

    pub fn parse(s: &str) -> Option<UsageGroupBy> {
        Some(match s {
            "model" => UsageGroupBy::Model,
            "provider" => UsageGroupBy::Provider,
            "service" => UsageGroupBy::Service,
            "session" => UsageGroupBy::Session,
            "agent" => UsageGroupBy::Agent,
            "user" => UsageGroupBy::User,
            "day" => UsageGroupBy::Day,
            _ => return None,
        })
    }

    fn key<'a>(self, r: &CallRow<'a>) -> Option<Cow<'a, str>> {
        match self {
            UsageGroupBy::Model => r.model.or(r.request_model).map(Cow::Borrowed),
            UsageGroupBy::Provider => r.provider.map(Cow::Borrowed),
            UsageGroupBy::Service => Some(Cow::Borrowed(r.service)),
            UsageGroupBy::Session => r.session.map(Cow::Borrowed),
            UsageGroupBy::Agent => r.agent.map(Cow::Borrowed),
            UsageGroupBy::User => r.user.map(Cow::Borrowed),
            UsageGroupBy::Day => Some(Cow::Owned(date_of(r.time))),
        }
    }
}

/// Usage by group key, found without allocating a key per call.
#[derive(Default)]
struct Groups {
    named: FastMap<String, UsageAcc>,
    /// Calls without the key (no session, say).
    none: Option<UsageAcc>,
}

impl Groups {
    fn get(&mut self, key: Option<&str>) -> &mut UsageAcc {
        let Some(k) = key else {
            return self.none.get_or_insert_with(UsageAcc::default);
        };
        if !self.named.contains_key(k) {
            self.named.insert(k.to_string(), UsageAcc::default());
        }
        self.named.get_mut(k).expect("inserted above")
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut UsageAcc> {
        self.named.values_mut().chain(self.none.as_mut())
    }

    /// Every group, keyless first, unordered.
    fn into_vec(self) -> Vec<(Option<String>, UsageAcc)> {
        let mut out: Vec<(Option<String>, UsageAcc)> = self.none.map(|a| (None, a)).into_iter().collect();
        out.extend(self.named.into_iter().map(|(k, a)| (Some(k), a)));
        out
    }
}

/// Usage of one group.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageGroup {
    /// The group's value; `null` for calls that lack it (no session, say).
    pub key: Option<String>,
    #[serde(flatten)]
    pub usage: UsageFigures,
}

/// Usage of some calls. Token sums leave out calls whose figures
/// contradict each other (they count as unpriced).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageFigures {
    pub calls: u64,
    pub errors: u64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
    pub cost_usd: f64,
    pub unpriced_calls: u64,
    pub latency_p50_ns: u64,
    pub latency_p95_ns: u64,
    pub ttft_p50_ns: Option<u64>,
    /// With `include=scores`: per score name, the mean of the numeric
    /// scores (true = 1, false = 0) of the traces whose calls these are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<BTreeMap<String, ScoreMean>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ScoreMean {
    pub mean: f64,
    pub count: u64,
}

#[derive(Default)]
struct UsageAcc {
    calls: u64,
    errors: u64,
    tokens: [i64; 5],
    cost_usd: f64,
    unpriced: u64,
    latency: BatchedSketch,
    ttft: BatchedSketch,
    /// Per score name: sum and count.
    scores: Option<BTreeMap<String, (f64, u64)>>,
}

impl UsageAcc {
    fn add_score(&mut self, name: &str, value: f64) {
        let e = self
            .scores
            .get_or_insert_with(BTreeMap::new)
            .entry(name.to_string())
            .or_default();
        e.0 += value;
        e.1 += 1;
    }

    fn add(&mut self, r: &CallRow<'_>, cost: Option<f64>) {
        self.calls += 1;
        self.errors += r.error as u64;
        if r.counts_tokens() {
            let t = r.tokens;
            for (sum, v) in self
                .tokens
                .iter_mut()
                .zip([t.input, t.output, t.cache_read, t.cache_write, t.reasoning])
            {
                *sum += v.unwrap_or(0);
            }
        }
        match cost {
            Some(usd) => self.cost_usd += usd,
            None => self.unpriced += 1,
        }
        self.latency.add(r.duration_ns);
        if let Some(t) = r.ttft_ns {
            self.ttft.add(t);
        }
    }

    fn finish(self) -> UsageFigures {
        let [input, output, cache_read, cache_write, reasoning] = self.tokens;
        let (latency, ttft) = (self.latency.finish(), self.ttft.finish());
        UsageFigures {
            calls: self.calls,
            errors: self.errors,
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            reasoning_tokens: reasoning,
            cost_usd: self.cost_usd,
            unpriced_calls: self.unpriced,
            latency_p50_ns: latency.quantile(0.5),
            latency_p95_ns: latency.quantile(0.95),
            ttft_p50_ns: (ttft.count() > 0).then(|| ttft.quantile(0.5)),
            scores: self.scores.as_ref().map(|m| {
                m.iter()
                    .map(|(k, (sum, n))| {
                        (
                            k.clone(),
                            ScoreMean {
                                mean: sum / *n as f64,
                                count: *n,
                            },
                        )
                    })
                    .collect()
            }),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub window: Window,
    pub group_by: UsageGroupBy,
    pub groups: Vec<UsageGroup>,
    pub totals: UsageFigures,
}

/// Model calls in `w`, grouped, most expensive group first (days in order).
/// With `scores`, each group also gets the mean of the numeric scores of
/// the traces its calls belong to (a trace's score counts once per group).
pub fn usage(
    sources: &[Source<Span>],
    w: Window,
    group_by: UsageGroupBy,
    pricing: &Pricing,
    scores: Option<&[skein_model::genai::score::Score]>,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Usage> {
    let mut memo = PriceMemo::new(pricing);
    let mut groups = Groups::default();
    let mut totals = UsageAcc::default();
    // The groups of each trace's calls, when scores are asked for.
    let mut trace_groups: FastMap<u128, Vec<Option<String>>> = FastMap::default();
    let needs = Needs {
        trace: scores.is_some(),
        service: group_by == UsageGroupBy::Service,
    };
    visit_calls(sources, w, needs, cache, explain, &mut |r| {
        if !r.is_llm() {
            return;
        }
        let cost = memo.cost_keyed(&r.cost_input(), r.time, r.keys.model_key());
        let usd = (cost.source != CostSource::Unpriced).then_some(cost.usd).flatten();
        let key = group_by.key(r);
        if scores.is_some() {
            let keys = trace_groups.entry(r.trace_id).or_default();
            if !keys.iter().any(|k| k.as_deref() == key.as_deref()) {
                keys.push(key.as_deref().map(str::to_string));
            }
        }
        groups.get(key.as_deref()).add(r, usd);
        totals.add(r, usd);
    })?;
    if let Some(scores) = scores {
        totals.scores.get_or_insert_with(BTreeMap::new);
        for g in groups.values_mut() {
            g.scores.get_or_insert_with(BTreeMap::new);
        }
        for s in scores {
            let value = match &s.value {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::Bool(b) => Some(*b as u8 as f64),
                _ => None,
            };
            let (Some(value), Some(trace)) = (value, s.trace_id.as_deref()) else {
                continue;
            };
            let Ok(trace) = skein_model::TraceId::from_hex(trace) else {
                continue;
            };
            let Some(keys) = trace_groups.get(&trace.as_u128()) else {
                continue;
            };
            totals.add_score(&s.name, value);
            for k in keys {
                groups.get(k.as_deref()).add_score(&s.name, value);
            }
        }
    }
    let mut out: Vec<UsageGroup> = groups
        .into_vec()
        .into_iter()
        .map(|(key, acc)| UsageGroup {
            key,
            usage: acc.finish(),
        })
        .collect();
    if group_by == UsageGroupBy::Day {
        out.sort_by(|a, b| a.key.cmp(&b.key));
    } else {
        out.sort_by(|a, b| {
            b.usage
                .cost_usd
                .total_cmp(&a.usage.cost_usd)
                .then(b.usage.calls.cmp(&a.usage.calls))
                .then_with(|| a.key.cmp(&b.key))
        });
    }
    Ok(Usage {
        window: w,
        group_by,
        groups: out,
        totals: totals.finish(),
    })
}

// ------------------------------------------------------------------ tools

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolSummary {
    /// `null` for tool spans that do not name their tool.
    pub tool: Option<String>,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
}

/// Tool executions in `w` by tool name, most called first.
pub fn tools(
    sources: &[Source<Span>],
    w: Window,
    cache: &ShadowCache,
    explain: &mut Explain,
) -> Result<Vec<ToolSummary>> {
    let mut by_tool: BTreeMap<Option<String>, (u64, u64, Sketch)> = BTreeMap::new();
    visit_calls(sources, w, Needs::default(), cache, explain, &mut |r| {
        if r.kind != Some(CallKind::Tool) {
            return;
        }
        let e = by_tool.entry(r.tool.map(str::to_string)).or_default();
        e.0 += 1;
        e.1 += r.error as u64;
        e.2.add(r.duration_ns);
    })?;
    let mut out: Vec<ToolSummary> = by_tool
        .into_iter()
        .map(|(tool, (calls, errors, d))| ToolSummary {
            tool,
            calls,
            errors,
            error_rate: if calls == 0 { 0.0 } else { errors as f64 / calls as f64 },
            p50_ns: d.quantile(0.5),
            p95_ns: d.quantile(0.95),
        })
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_keys() {
        assert_eq!(UsageGroupBy::parse("day"), Some(UsageGroupBy::Day));
        assert_eq!(UsageGroupBy::parse("nope"), None);
    }
}
