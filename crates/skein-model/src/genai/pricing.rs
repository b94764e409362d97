//! What an LLM call cost: a price table (built in, kept as data in
//! `data/prices.toml`, extended or overridden by `--pricing FILE`), model
//! names matched across their spellings, and the arithmetic that never
//! counts a cached token twice.
//!
//! The file format (docs/llm.md): `[[model]]` tables with `match` (a model
//! name or a glob with `*`), optional `provider`, `input_per_mtok`,
//! `output_per_mtok`, optional `cache_read_per_mtok`, `cache_write_per_mtok`,
//! `reasoning_per_mtok` (defaults to output), `effective_from`
//! (`YYYY-MM-DD`: the price applies from that day, UTC) and `tiers`
//! (long-context prices: `{ above_input_tokens, input_per_mtok, … }`). USD
//! per million tokens.

use serde::{Deserialize, Serialize};

use super::call::{LlmCall, Tokens};

/// Where a call's cost came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The client sent it (`gen_ai.usage.cost`, `llm.cost.total`, …).
    Reported,
    /// Tokens × the price table.
    Derived,
    /// No price applies, or the token figures are not trustworthy.
    Unpriced,
}

impl CostSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CostSource::Reported => "reported",
            CostSource::Derived => "derived",
            CostSource::Unpriced => "unpriced",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub usd: Option<f64>,
    pub source: CostSource,
}

/// Prices per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    pub cache_read_per_mtok: Option<f64>,
    pub cache_write_per_mtok: Option<f64>,
    pub reasoning_per_mtok: Option<f64>,
}

/// Long-context prices: apply when a call's input exceeds the threshold.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub above_input_tokens: i64,
    #[serde(flatten)]
    pub rates: Rates,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(rename = "match")]
    pattern: String,
    provider: Option<String>,
    input_per_mtok: f64,
    output_per_mtok: f64,
    cache_read_per_mtok: Option<f64>,
    cache_write_per_mtok: Option<f64>,
    reasoning_per_mtok: Option<f64>,
    effective_from: Option<String>,
    #[serde(default)]
    tiers: Vec<Tier>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    #[serde(default)]
    model: Vec<Entry>,
}

/// One price of one model from one day on.
#[derive(Debug, Clone, PartialEq)]
struct Price {
    pattern: String,
    provider: Option<String>,
    /// Days since 1970-01-01 from which it applies (`i64::MIN`: always).
    from_day: i64,
    base: Rates,
    /// Sorted by threshold, ascending.
    tiers: Vec<Tier>,
    /// 0 for `--pricing` entries, 1 for the built-in table.
    origin: u8,
}

/// A price table: the built-in one, with a user's entries in front.
#[derive(Debug, Clone)]
pub struct Pricing {
    prices: Vec<Price>,
}

const BUILT_IN: &str = include_str!("../../data/prices.toml");

#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("model `{pattern}`: {problem}")]
    Entry { pattern: String, problem: String },
}

impl Pricing {
    /// The built-in table.
    pub fn built_in() -> Pricing {
        Pricing::parse(BUILT_IN, 1).expect("the built-in price table parses (a unit test checks it)")
    }

    /// The built-in table with `toml`'s entries (a `--pricing` file) in
    /// front: they win over built-in entries that match the same model.
    pub fn with_overrides(toml: &str) -> Result<Pricing, PricingError> {
        let mut user = Pricing::parse(toml, 0)?;
        user.prices.extend(Pricing::built_in().prices);
        Ok(user)
    }

    fn parse(text: &str, origin: u8) -> Result<Pricing, PricingError> {
        let file: PriceFile = toml::from_str(text)?;
        let mut prices = Vec::with_capacity(file.model.len());
        for e in file.model {
            let bad = |problem: String| PricingError::Entry {
                pattern: e.pattern.clone(),
                problem,
            };
            let from_day = match &e.effective_from {
                None => i64::MIN,
                Some(d) => parse_day(d).ok_or_else(|| bad(format!("effective_from `{d}` is not a YYYY-MM-DD date")))?,
            };
            let base = Rates {
                input_per_mtok: e.input_per_mtok,
                output_per_mtok: e.output_per_mtok,
                cache_read_per_mtok: e.cache_read_per_mtok,
                cache_write_per_mtok: e.cache_write_per_mtok,
                reasoning_per_mtok: e.reasoning_per_mtok,
            };
            let mut all = vec![base];
            all.extend(e.tiers.iter().map(|t| t.rates));
            for r in &all {
                let rates = [
                    Some(r.input_per_mtok),
                    Some(r.output_per_mtok),
                    r.cache_read_per_mtok,
                    r.cache_write_per_mtok,
                    r.reasoning_per_mtok,
                ];
                if rates.into_iter().flatten().any(|p| !p.is_finite() || p < 0.0) {
                    return Err(bad("a price is negative or not a number".into()));
                }
            }
            if e.pattern.trim().is_empty() {
                return Err(bad("`match` is empty".into()));
            }
            let mut tiers = e.tiers.clone();
            tiers.sort_by_key(|t| t.above_input_tokens);
            prices.push(Price {
                pattern: e.pattern.to_ascii_lowercase(),
                provider: e.provider.as_deref().map(str::to_ascii_lowercase),
                from_day,
                base,
                tiers,
                origin,
            });
        }
        Ok(Pricing { prices })
    }

    /// The rates that apply to `model` (of `provider`, if known) on the
    /// day of `time_unix_nano`, for a call with `input_tokens` of input
    /// (which picks a long-context tier).
    pub fn rates(&self, provider: Option<&str>, model: &str, time_unix_nano: u64, input_tokens: i64) -> Option<Rates> {
        let p = &self.prices[self.resolve(provider, model, day_of(time_unix_nano))?];
        Some(p.rates_for(input_tokens))
    }

    /// The index of the price that applies to `model` on `day`.
    fn resolve(&self, provider: Option<&str>, model: &str, day: i64) -> Option<usize> {
        let raw = model.trim().to_ascii_lowercase();
        let canonical = canonical_model(&raw);
        let provider = provider.map(str::to_ascii_lowercase);
        // The most specific pattern wins: a user's entry over a built-in one,
        // then an exact name over a glob (the raw spelling, with its date,
        // over the canonical one), then the longer glob; a provider-specific
        // entry over a generic one. Among that pattern's dated prices, the
        // latest one in effect.
        let mut best: Option<((u8, u8, usize, u8), usize)> = None;
        for (i, p) in self.prices.iter().enumerate() {
            if p.from_day > day {
                continue;
            }
            let provider_rank = match (&p.provider, &provider) {
                (None, _) => 1,
                (Some(want), Some(got)) if provider_matches(want, got) => 0,
                _ => continue,
            };
            let Some(specificity) = match_rank(&p.pattern, &raw, &canonical) else {
                continue;
            };
            let rank = (p.origin, specificity.0, usize::MAX - specificity.1, provider_rank);
            let better = match &best {
                None => true,
                Some((r, q)) => rank < *r || (rank == *r && p.from_day > self.prices[*q].from_day),
            };
            if better {
                best = Some((rank, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// The cost of one call made at `time_unix_nano`.
    pub fn cost(&self, call: &LlmCall, time_unix_nano: u64) -> Cost {
        PriceMemo::new(self).cost(&CostInput::of(call), time_unix_nano)
    }
}

impl Price {
    fn rates_for(&self, input_tokens: i64) -> Rates {
        self.tiers
            .iter()
            .rev()
            .find(|t| input_tokens > t.above_input_tokens)
            .map(|t| t.rates)
            .unwrap_or(self.base)
    }
}

fn day_of(time_unix_nano: u64) -> i64 {
    (time_unix_nano / 86_400_000_000_000) as i64
}

/// What pricing needs of a call, borrowed: from an [`LlmCall`] or from a
/// part's typed columns.
#[derive(Debug, Clone, Copy)]
pub struct CostInput<'a> {
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    pub request_model: Option<&'a str>,
    pub tokens: Tokens,
    pub reported_usd: Option<f64>,
    /// A model call whose figures can be trusted ([`LlmCall::priceable`]).
    pub priceable: bool,
}

impl<'a> CostInput<'a> {
    pub fn of(c: &'a LlmCall) -> CostInput<'a> {
        CostInput {
            provider: c.provider.as_deref(),
            model: c.model.as_deref(),
            request_model: c.request_model.as_deref(),
            tokens: c.tokens(),
            reported_usd: c.reported_cost_usd,
            priceable: c.is_llm() && c.priceable(),
        }
    }
}

/// A caller's name for a call's (provider, model, request model), cheaper
/// to compare than the strings: their keys in one batch's dictionaries,
/// say (`u32::MAX` for an absent one). Equal names must stand for equal
/// strings; `scope` tells apart the callers' numberings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelKey {
    pub scope: u64,
    pub provider: u32,
    pub model: u32,
    pub request_model: u32,
}

impl ModelKey {
    fn hash(&self, day: i64) -> u64 {
        let mix = |h: u64, v: u64| (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        [
            self.provider as u64,
            self.model as u64,
            self.request_model as u64,
            day as u64,
        ]
        .into_iter()
        .fold(self.scope, mix)
    }
}

/// A price table with its lookups remembered: an aggregation over many
/// calls of a few models resolves each (provider, model, day) once.
pub struct PriceMemo<'p> {
    pricing: &'p Pricing,
    /// By the hash of (provider, model, day), so a lookup allocates nothing.
    memo: std::collections::HashMap<u64, Remembered, std::hash::BuildHasherDefault<Prehashed>>,
    /// The price found for a call, by the hash of its [`ModelKey`] and day.
    keyed: std::collections::HashMap<u64, (ModelKey, i64, Option<usize>), std::hash::BuildHasherDefault<Prehashed>>,
}

/// A hasher of keys that are hashes already: a lookup is an index, not a
/// second hash of the first.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A remembered lookup: its key, to compare, and the price found.
struct Remembered {
    provider: Box<str>,
    model: Box<str>,
    day: i64,
    found: Option<usize>,
}

impl<'p> PriceMemo<'p> {
    pub fn new(pricing: &'p Pricing) -> PriceMemo<'p> {
        PriceMemo {
            pricing,
            memo: Default::default(),
            keyed: Default::default(),
        }
    }

    fn resolve(&mut self, provider: Option<&str>, model: &str, day: i64) -> Option<usize> {
        let p = provider.unwrap_or("");
        // One-shot hashes of short strings: a streaming hasher's set-up
        // cost more than the hashing, once per call aggregated.
        let hash = xxhash_rust::xxh3::xxh3_64_with_seed(
            model.as_bytes(),
            xxhash_rust::xxh3::xxh3_64_with_seed(p.as_bytes(), day as u64),
        );
        match self.memo.get(&hash) {
            Some(r) if *r.provider == *p && *r.model == *model && r.day == day => return r.found,
            // Another key with the same hash: answer without remembering.
            Some(_) => return self.pricing.resolve(provider, model, day),
            None => {}
        }
        let found = self.pricing.resolve(provider, model, day);
        if self.memo.len() > 4096 {
            self.memo.clear();
        }
        self.memo.insert(
            hash,
            Remembered {
                provider: p.into(),
                model: model.into(),
                day,
                found,
            },
        );
        found
    }

    /// The cost of one call made at `time_unix_nano`: reported if the
    /// client sent one, else derived from its tokens, else unpriced.
    pub fn cost(&mut self, c: &CostInput<'_>, time_unix_nano: u64) -> Cost {
        self.cost_keyed(c, time_unix_nano, None)
    }

    /// [`PriceMemo::cost`], the price found remembered under `key` too, so
    /// the next call with that key is priced without reading its names.
    pub fn cost_keyed(&mut self, c: &CostInput<'_>, time_unix_nano: u64, key: Option<ModelKey>) -> Cost {
        if let Some(usd) = c.reported_usd {
            return Cost {
                usd: Some(usd),
                source: CostSource::Reported,
            };
        }
        let unpriced = Cost {
            usd: None,
            source: CostSource::Unpriced,
        };
        if !c.priceable {
            return unpriced;
        }
        let day = day_of(time_unix_nano);
        let found = match key {
            None => self.find(c, day),
            Some(k) => {
                let hash = k.hash(day);
                match self.keyed.get(&hash) {
                    Some(&(k2, d2, found)) if k2 == k && d2 == day => found,
                    // Another key with the same hash: answer without remembering.
                    Some(_) => self.find(c, day),
                    None => {
                        let found = self.find(c, day);
                        if self.keyed.len() > 4096 {
                            self.keyed.clear();
                        }
                        self.keyed.insert(hash, (k, day, found));
                        found
                    }
                }
            }
        };
        let Some(i) = found else {
            return unpriced;
        };
        let rates = self.pricing.prices[i].rates_for(c.tokens.input.unwrap_or(0));
        Cost {
            usd: Some(price(&rates, &c.tokens)),
            source: CostSource::Derived,
        }
    }

    /// The price of a call's model on `day`: of its response model, else of
    /// the model asked for (a response model the table lacks, such as a new
    /// dated snapshot, may still be priced by the model that was asked for).
    fn find(&mut self, c: &CostInput<'_>, day: i64) -> Option<usize> {
        [c.model, c.request_model]
            .into_iter()
            .flatten()
            .find_map(|m| self.resolve(c.provider, m, day))
    }
}

/// Σ tokens of each kind × its price. Input and output figures include
/// their cached and reasoning parts ([`LlmCall`]), which are taken out and
/// priced at their own rates.
fn price(r: &Rates, t: &Tokens) -> f64 {
    let cache_read = t.cache_read.unwrap_or(0);
    let cache_write = t.cache_write.unwrap_or(0);
    let reasoning = t.reasoning.unwrap_or(0);
    let uncached = (t.input.unwrap_or(0) - cache_read - cache_write).max(0);
    let visible_output = (t.output.unwrap_or(0) - reasoning).max(0);
    let usd_per_mtok = uncached as f64 * r.input_per_mtok
        + cache_read as f64 * r.cache_read_per_mtok.unwrap_or(r.input_per_mtok)
        + cache_write as f64 * r.cache_write_per_mtok.unwrap_or(r.input_per_mtok)
        + visible_output as f64 * r.output_per_mtok
        + reasoning as f64 * r.reasoning_per_mtok.unwrap_or(r.output_per_mtok);
    usd_per_mtok / 1e6
}

/// Provider names as the conventions spell them, compared loosely:
/// `azure.ai.openai` is `azure`, `aws.bedrock` is `bedrock`.
fn provider_matches(want: &str, got: &str) -> bool {
    let norm = |p: &str| -> String {
        match p {
            "aws.bedrock" | "aws_bedrock" | "amazon_bedrock" => "bedrock".into(),
            "azure.ai.openai" | "azure.ai.inference" | "az.ai.openai" | "azure_openai" => "azure".into(),
            "gcp.vertex_ai" | "vertex_ai" | "vertexai" => "vertex_ai".into(),
            "gcp.gemini" | "gemini" | "google" => "google".into(),
            "x_ai" | "xai" => "xai".into(),
            "mistral_ai" | "mistralai" => "mistral".into(),
            other => other.into(),
        }
    };
    norm(want) == norm(got)
}

/// How `pattern` matches a model: `(0, _)` the raw name exactly, `(1, _)`
/// the canonical name exactly, `(2, literal length)` a glob.
fn match_rank(pattern: &str, raw: &str, canonical: &str) -> Option<(u8, usize)> {
    if !pattern.contains('*') {
        return if pattern == raw {
            Some((0, pattern.len()))
        } else if pattern == canonical {
            Some((1, pattern.len()))
        } else {
            None
        };
    }
    let literal = pattern.chars().filter(|c| *c != '*').count();
    (glob(pattern, raw) || glob(pattern, canonical)).then_some((2, literal))
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A model name without what varies between spellings of one model: a
/// provider or host prefix (`openai/`, `models/`, Bedrock's `us.anthropic.`),
/// a date or version suffix (`-2024-08-06`, `-20241022`, `@20240620`,
/// `-v2:0`, `-001`, `-latest`).
pub fn canonical_model(name: &str) -> String {
    let mut s = name.trim().to_ascii_lowercase();
    if let Some(at) = s.rfind('/') {
        s = s[at + 1..].to_string();
    }
    for region in ["us.", "eu.", "apac.", "global.", "us-gov."] {
        if let Some(rest) = s.strip_prefix(region) {
            s = rest.to_string();
        }
    }
    for vendor in [
        "anthropic.",
        "meta.",
        "mistral.",
        "amazon.",
        "cohere.",
        "ai21.",
        "deepseek.",
        "openai.",
        "qwen.",
    ] {
        if let Some(rest) = s.strip_prefix(vendor) {
            s = rest.to_string();
        }
    }
    // Bedrock's `-v1:0`, `:0`.
    if let Some(at) = s.rfind(':')
        && s[at + 1..].bytes().all(|b| b.is_ascii_digit())
    {
        s.truncate(at);
    }
    strip_suffix_where(&mut s, '-', |v| {
        v.len() >= 2 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit())
    });
    for _ in 0..2 {
        if let Some(rest) = s.strip_suffix("-latest") {
            s = rest.to_string();
        }
        // -2024-08-06
        if s.len() > 11 {
            let (head, tail) = s.split_at(s.len() - 11);
            let t = tail.as_bytes();
            if t[0] == b'-'
                && t[5] == b'-'
                && t[8] == b'-'
                && [1, 2, 3, 4, 6, 7, 9, 10].iter().all(|i| t[*i].is_ascii_digit())
            {
                s = head.to_string();
            }
        }
        // -20241022, @20240620, -0613, -001 (not a size such as -8b, nor
        // a version such as -4 or -3.5).
        for sep in ['-', '@'] {
            strip_suffix_where(&mut s, sep, |v| {
                matches!(v.len(), 3 | 4 | 8) && v.bytes().all(|b| b.is_ascii_digit())
            });
        }
    }
    s
}

fn strip_suffix_where(s: &mut String, sep: char, pred: impl Fn(&str) -> bool) {
    if let Some(at) = s.rfind(sep)
        && at > 0
        && pred(&s[at + 1..])
    {
        s.truncate(at);
    }
}

/// The UTC date (`YYYY-MM-DD`) of a time.
pub fn date_of(time_unix_nano: u64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = day_of(time_unix_nano) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date.
fn parse_day(s: &str) -> Option<i64> {
    let mut it = s.trim().splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::KeyValue;

    const DAY: u64 = 86_400_000_000_000;

    fn at(date: &str) -> u64 {
        parse_day(date).unwrap() as u64 * DAY + DAY / 2
    }

    fn call(attrs: &[(&str, i64)], model: &str, provider: &str) -> LlmCall {
        let mut kvs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.model", model),
            KeyValue::new("gen_ai.provider.name", provider),
        ];
        kvs.extend(attrs.iter().map(|(k, v)| KeyValue::new(*k, *v)));
        LlmCall::from_attributes(&kvs).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn the_built_in_table_parses_and_covers_the_providers() {
        let p = Pricing::built_in();
        let t = at("2026-01-01");
        for (provider, model) in [
            ("openai", "gpt-4o-2024-08-06"),
            ("openai", "gpt-4o-mini"),
            ("openai", "o3-mini"),
            ("openai", "gpt-5"),
            ("anthropic", "claude-3-5-sonnet-20241022"),
            ("anthropic", "claude-sonnet-4-5"),
            ("aws.bedrock", "us.anthropic.claude-3-5-sonnet-20241022-v2:0"),
            ("azure.ai.openai", "gpt-35-turbo"),
            ("gcp.gemini", "gemini-2.5-pro"),
            ("gcp.vertex_ai", "models/gemini-2.0-flash-001"),
            ("mistral_ai", "mistral-large-latest"),
            ("deepseek", "deepseek-chat"),
            ("x_ai", "grok-4"),
            ("groq", "llama-3.3-70b-versatile"),
        ] {
            assert!(p.rates(Some(provider), model, t, 1000).is_some(), "{provider} {model}");
        }
        assert!(p.rates(Some("openai"), "my-own-finetune", t, 1000).is_none());
    }

    #[test]
    fn canonical_names() {
        for (raw, want) in [
            ("gpt-4o-2024-08-06", "gpt-4o"),
            ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
            ("us.anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
            ("anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku"),
            ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
            ("models/gemini-2.0-flash-001", "gemini-2.0-flash"),
            ("openai/GPT-4o", "gpt-4o"),
            ("gpt-4-0613", "gpt-4"),
            ("mistral-large-latest", "mistral-large"),
            ("mistral-large-2411", "mistral-large"),
            ("llama-3.1-8b", "llama-3.1-8b"),
            ("gpt-3.5-turbo", "gpt-3.5-turbo"),
            ("meta.llama3-1-70b-instruct-v1:0", "llama3-1-70b-instruct"),
        ] {
            assert_eq!(canonical_model(raw), want, "{raw}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob("gpt-4o*", "gpt-4o-mini"));
        assert!(glob("*sonnet*", "claude-3-5-sonnet"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(!glob("gpt-4o*", "gpt-4"));
        assert!(glob("*", ""));
    }

    #[test]
    fn cached_tokens_are_never_counted_twice() {
        let p = Pricing::with_overrides(
            r#"
            [[model]]
            match = "m"
            input_per_mtok = 2.0
            output_per_mtok = 8.0
            cache_read_per_mtok = 0.5
            cache_write_per_mtok = 2.5
            reasoning_per_mtok = 10.0
            "#,
        )
        .unwrap();
        let t = at("2026-01-01");
        // OTel: input 1200 includes 1000 cached; output 300 includes 120 reasoning.
        let otel = call(
            &[
                ("gen_ai.usage.input_tokens", 1200),
                ("gen_ai.usage.output_tokens", 300),
                ("gen_ai.usage.cache_read.input_tokens", 1000),
                ("gen_ai.usage.reasoning.output_tokens", 120),
            ],
            "m",
            "x",
        );
        let want = (200.0 * 2.0 + 1000.0 * 0.5 + 180.0 * 8.0 + 120.0 * 10.0) / 1e6;
        let c = p.cost(&otel, t);
        assert_eq!(c.source, CostSource::Derived);
        assert!(close(c.usd.unwrap(), want), "{c:?} {want}");
        // OpenInference spells the same figures differently: the same cost.
        let oi = LlmCall::from_attributes(&[
            KeyValue::new("openinference.span.kind", "LLM"),
            KeyValue::new("llm.model_name", "m"),
            KeyValue::new("llm.token_count.prompt", 1200i64),
            KeyValue::new("llm.token_count.completion", 300i64),
            KeyValue::new("llm.token_count.prompt_details.cache_read", 1000i64),
            KeyValue::new("llm.token_count.completion_details.reasoning", 120i64),
        ])
        .unwrap();
        assert!(close(p.cost(&oi, t).usd.unwrap(), want));
        // OpenLLMetry's underscore cache fields, with a cache write.
        let ll = call(
            &[
                ("gen_ai.usage.prompt_tokens", 1200),
                ("gen_ai.usage.completion_tokens", 300),
                ("gen_ai.usage.cache_read_input_tokens", 800),
                ("gen_ai.usage.cache_creation_input_tokens", 200),
            ],
            "m",
            "x",
        );
        let want = (200.0 * 2.0 + 800.0 * 0.5 + 200.0 * 2.5 + 300.0 * 8.0) / 1e6;
        assert!(close(p.cost(&ll, t).usd.unwrap(), want));
    }

    #[test]
    fn reasoning_defaults_to_the_output_price() {
        let p = Pricing::with_overrides("[[model]]\nmatch = \"m\"\ninput_per_mtok = 1\noutput_per_mtok = 4\n").unwrap();
        let c = call(
            &[
                ("gen_ai.usage.output_tokens", 1000),
                ("gen_ai.usage.reasoning.output_tokens", 600),
            ],
            "m",
            "x",
        );
        assert!(close(p.cost(&c, at("2026-01-01")).usd.unwrap(), 1000.0 * 4.0 / 1e6));
    }

    /// Model `m` at 10/40 per million tokens, then at 2/8 from 2025-06-10.
    const DATED_M: &str = r#"
            [[model]]
            match = "m"
            input_per_mtok = 10
            output_per_mtok = 40
            [[model]]
            match = "m"
            input_per_mtok = 2
            output_per_mtok = 8
            effective_from = "2025-06-10"
            "#;

    #[test]
    fn dated_prices_change_on_their_day() {
        let p = Pricing::with_overrides(DATED_M).unwrap();
        let c = call(&[("gen_ai.usage.input_tokens", 1_000_000)], "m", "x");
        assert!(close(p.cost(&c, at("2025-06-09")).usd.unwrap(), 10.0));
        assert!(close(p.cost(&c, at("2025-06-10")).usd.unwrap(), 2.0));
        assert!(close(p.cost(&c, at("2026-01-01")).usd.unwrap(), 2.0));
    }

    #[test]
    fn keyed_lookups_are_remembered_per_key_and_day() {
        let n = r#"
            [[model]]
            match = "n"
            input_per_mtok = 1
            output_per_mtok = 1
            "#;
        let p = Pricing::with_overrides(&format!("{DATED_M}{n}")).unwrap();
        let m = call(&[("gen_ai.usage.input_tokens", 1_000_000)], "m", "x");
        let n = call(&[("gen_ai.usage.input_tokens", 1_000_000)], "n", "x");
        let key = |model| ModelKey {
            scope: 1,
            provider: 0,
            model,
            request_model: u32::MAX,
        };
        let mut memo = PriceMemo::new(&p);
        let usd =
            |memo: &mut PriceMemo, c: &LlmCall, day, k| memo.cost_keyed(&CostInput::of(c), at(day), k).usd.unwrap();
        assert!(close(usd(&mut memo, &m, "2025-06-09", Some(key(0))), 10.0));
        assert!(close(usd(&mut memo, &n, "2025-06-09", Some(key(1))), 1.0));
        // A key stands for its names: the price found for it is reused
        // (the caller promised equal keys mean equal names)…
        assert!(close(usd(&mut memo, &n, "2025-06-09", Some(key(0))), 10.0));
        // …but not across days, whose prices may differ.
        assert!(close(usd(&mut memo, &m, "2025-06-10", Some(key(0))), 2.0));
        assert!(close(usd(&mut memo, &m, "2025-06-10", None), 2.0));
    }

    #[test]
    fn long_context_tiers() {
        let p = Pricing::with_overrides(
            r#"
            [[model]]
            match = "m"
            input_per_mtok = 1
            output_per_mtok = 2
            tiers = [{ above_input_tokens = 200000, input_per_mtok = 3, output_per_mtok = 4 }]
            "#,
        )
        .unwrap();
        let small = call(&[("gen_ai.usage.input_tokens", 200_000)], "m", "x");
        let big = call(&[("gen_ai.usage.input_tokens", 200_001)], "m", "x");
        let t = at("2026-01-01");
        assert!(close(p.cost(&small, t).usd.unwrap(), 0.2));
        assert!(close(p.cost(&big, t).usd.unwrap(), 200_001.0 * 3.0 / 1e6));
    }

    #[test]
    fn reported_cost_wins_and_unknown_models_are_unpriced() {
        let p = Pricing::built_in();
        let t = at("2026-01-01");
        let mut c = call(&[("gen_ai.usage.input_tokens", 100)], "gpt-4o", "openai");
        c.reported_cost_usd = Some(0.42);
        assert_eq!(
            p.cost(&c, t),
            Cost {
                usd: Some(0.42),
                source: CostSource::Reported
            }
        );
        let c = call(&[("gen_ai.usage.input_tokens", 100)], "no-such-model", "openai");
        assert_eq!(p.cost(&c, t).source, CostSource::Unpriced);
        let c = call(
            &[
                ("gen_ai.usage.input_tokens", 10),
                ("gen_ai.usage.cache_read.input_tokens", 50),
            ],
            "gpt-4o",
            "openai",
        );
        assert_eq!(
            p.cost(&c, t).source,
            CostSource::Unpriced,
            "inconsistent figures are not priced"
        );
    }

    #[test]
    fn user_entries_override_and_specific_beats_glob() {
        let p = Pricing::with_overrides(
            "[[model]]\nmatch = \"gpt-4o*\"\ninput_per_mtok = 100\noutput_per_mtok = 100\n\
             [[model]]\nmatch = \"gpt-4o-mini\"\ninput_per_mtok = 1\noutput_per_mtok = 1\n",
        )
        .unwrap();
        let t = at("2026-01-01");
        assert_eq!(
            p.rates(None, "gpt-4o-mini-2024-07-18", t, 0).unwrap().input_per_mtok,
            1.0
        );
        assert_eq!(p.rates(None, "gpt-4o", t, 0).unwrap().input_per_mtok, 100.0);
        let provider_specific = Pricing::with_overrides(
            "[[model]]\nmatch = \"x\"\ninput_per_mtok = 1\noutput_per_mtok = 1\n\
             [[model]]\nmatch = \"x\"\nprovider = \"groq\"\ninput_per_mtok = 2\noutput_per_mtok = 2\n",
        )
        .unwrap();
        assert_eq!(
            provider_specific.rates(Some("groq"), "x", t, 0).unwrap().input_per_mtok,
            2.0
        );
        assert_eq!(
            provider_specific
                .rates(Some("other"), "x", t, 0)
                .unwrap()
                .input_per_mtok,
            1.0
        );
    }

    #[test]
    fn bad_files_name_the_line_and_field() {
        let e =
            Pricing::with_overrides("[[model]]\nmatch = \"m\"\ninput_per_mtok = 1\noutput_per_mtok = 1\nbogus = 2\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("line 5") && e.contains("bogus"), "{e}");
        let e = Pricing::with_overrides("[[model]]\nmatch = \"m\"\ninput_per_mtok = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("output_per_mtok"), "{e}");
        let e = Pricing::with_overrides(
            "[[model]]\nmatch = \"m\"\ninput_per_mtok = 1\noutput_per_mtok = 1\neffective_from = \"June\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("effective_from"), "{e}");
    }

    #[test]
    fn days() {
        assert_eq!(parse_day("1970-01-01"), Some(0));
        assert_eq!(parse_day("2000-03-01"), Some(11_017));
        assert_eq!(parse_day("2024-02-29"), Some(19_782));
        assert_eq!(parse_day("2024-13-01"), None);
        for date in ["1970-01-01", "2000-02-29", "2024-12-31", "2026-03-01"] {
            assert_eq!(date_of(at(date)), date);
        }
    }
}
