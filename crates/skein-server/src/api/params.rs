//! Query-string parameters: typed parsing with errors that name the
//! parameter, and a final check that names every parameter nobody used.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use skein_engine::{AttrFilter, AttrPredicate, AttrScope, Window};
use skein_model::AnyValue;

use super::ApiError;

pub struct Params {
    pairs: Vec<(String, String)>,
    used: Vec<bool>,
}

pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Parses `500ms`, `2s`, `15m`, `1h`, `1h30m`, `1.5s`, or a bare number of ns.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(ns) = t.parse::<u64>() {
        return Ok(Duration::from_nanos(ns));
    }
    if let Some(num) = t.strip_suffix("ms").or_else(|| t.strip_suffix('s'))
        && let Ok(f) = num.parse::<f64>()
        && f.is_finite()
        && f >= 0.0
    {
        let secs = if t.ends_with("ms") { f / 1000.0 } else { f };
        return Ok(Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(t).map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 2s, 15m, 1h)"))
}

/// Parses a point in time: RFC 3339, a Unix time (s, ms, µs or ns, told
/// apart by magnitude), or a duration meaning "that long ago".
pub fn parse_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(match n {
            n if n >= 100_000_000_000_000_000 => n,
            n if n >= 100_000_000_000_000 => n * 1_000,
            n if n >= 100_000_000_000 => n * 1_000_000,
            n => n * 1_000_000_000,
        });
    }
    if let Ok(ts) = humantime::parse_rfc3339_weak(t) {
        return ts
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .map_err(|_| format!("{s:?} is before 1970"));
    }
    if let Ok(d) = parse_duration(t) {
        return Ok(now_ns().saturating_sub(d.as_nanos() as u64));
    }
    Err(format!(
        "{s:?} is not a time: use RFC 3339 (2026-11-30T10:00:00Z), Unix seconds/ms/ns, or a duration ago (15m)"
    ))
}

/// A query value as the attribute values it may mean: `200` matches the int
/// 200, the double 200.0 and the string "200"; `true` the bool and the
/// string; a quoted value (`"200"`) only the string.
pub fn attr_values(v: &str) -> Vec<AnyValue> {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        return vec![AnyValue::Str(v[1..v.len() - 1].to_string())];
    }
    let mut out = vec![AnyValue::Str(v.to_string())];
    if let Ok(i) = v.parse::<i64>() {
        out.push(AnyValue::Int(i));
        out.push(AnyValue::Double(i as f64));
    } else if let Ok(d) = v.parse::<f64>() {
        out.push(AnyValue::Double(d));
    }
    match v {
        "true" => out.push(AnyValue::Bool(true)),
        "false" => out.push(AnyValue::Bool(false)),
        _ => {}
    }
    out
}

impl Params {
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        let used = vec![false; pairs.len()];
        Params { pairs, used }
    }

    /// The value of `name` (the last one if repeated).
    pub fn get(&mut self, name: &str) -> Option<String> {
        let mut found = None;
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            if k == name {
                self.used[i] = true;
                found = Some(v.clone());
            }
        }
        found
    }

    /// The value of `name`, taken out: later lookups no longer see it (a
    /// handler that gives a shared parameter its own meaning).
    pub fn take(&mut self, name: &str) -> Option<String> {
        let v = self.get(name);
        let keep: Vec<bool> = self.pairs.iter().map(|(k, _)| k != name).collect();
        let mut it = keep.iter();
        self.pairs.retain(|_| *it.next().unwrap_or(&true));
        let mut it = keep.iter();
        self.used.retain(|_| *it.next().unwrap_or(&true));
        v
    }

    pub fn parse<T>(&mut self, name: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => f(&v).map(Some).map_err(|e| ApiError::bad_param(name, &e)),
        }
    }

    pub fn flag(&mut self, name: &str) -> Result<bool, ApiError> {
        self.flag_or(name, false)
    }

    /// A boolean parameter, `default` when absent.
    pub fn flag_or(&mut self, name: &str, default: bool) -> Result<bool, ApiError> {
        Ok(self
            .parse(name, |v| match v {
                "" | "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err("must be true or false".into()),
            })?
            .unwrap_or(default))
    }

    pub fn limit(&mut self, default: usize, max: usize) -> Result<usize, ApiError> {
        let l = self
            .parse("limit", |v| {
                v.parse::<usize>().map_err(|_| "must be a positive integer".to_string())
            })?
            .unwrap_or(default);
        if l == 0 || l > max {
            return Err(ApiError::bad_param("limit", &format!("must be between 1 and {max}")));
        }
        Ok(l)
    }

    /// `since`/`until`/`last` as a window `[start, end)`, or `None` when
    /// none of them is given.
    pub fn window(&mut self) -> Result<Option<Window>, ApiError> {
        let last = self.parse("last", parse_duration)?;
        let since = self.parse("since", parse_time)?;
        let until = self.parse("until", parse_time)?;
        if let Some(d) = last {
            if since.is_some() {
                return Err(ApiError::bad_request("use either last or since, not both"));
            }
            let end = until.unwrap_or_else(now_ns);
            return Ok(Some(Window::new(end.saturating_sub(d.as_nanos() as u64), end)));
        }
        Ok((since.is_some() || until.is_some()).then(|| Window::from_bounds(since, until)))
    }

    /// Attribute filters: `attr.KEY=V` (record), `resource.KEY=V`,
    /// `event.KEY=V`; a value of `*` means "exists".
    pub fn attributes(&mut self) -> Vec<AttrFilter> {
        let mut out = Vec::new();
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            let (scope, key) = if let Some(key) = k.strip_prefix("attr.") {
                (AttrScope::Record, key)
            } else if let Some(key) = k.strip_prefix("resource.") {
                (AttrScope::Resource, key)
            } else if let Some(key) = k.strip_prefix("event.") {
                (AttrScope::Event, key)
            } else {
                continue;
            };
            self.used[i] = true;
            out.push(AttrFilter {
                scope,
                key: key.to_string(),
                predicate: if v == "*" {
                    AttrPredicate::Exists
                } else {
                    AttrPredicate::AnyOf(attr_values(v))
                },
            });
        }
        out
    }

    /// Fails naming every parameter that was not used.
    pub fn finish(self) -> Result<(), ApiError> {
        let unknown: Vec<&str> = self
            .pairs
            .iter()
            .zip(&self.used)
            .filter(|(_, used)| !**used)
            .map(|((k, _), _)| k.as_str())
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(ApiError::bad_request(&format!(
                "unknown parameter(s): {}",
                unknown.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times_parse() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("250").unwrap(), Duration::from_nanos(250));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_time("1700000000").unwrap(), 1_700_000_000_000_000_000);
        assert_eq!(parse_time("1700000000000").unwrap(), 1_700_000_000_000_000_000);
        assert_eq!(parse_time("2023-11-14T22:13:20Z").unwrap(), 1_700_000_000_000_000_000);
        assert!(parse_time("15m").unwrap() < now_ns());
        assert!(parse_time("yesterday-ish").unwrap_err().contains("RFC 3339"));
    }

    #[test]
    fn unknown_parameters_are_named() {
        let mut p = Params::new(vec![("service".into(), "a".into()), ("bogus".into(), "1".into())]);
        assert_eq!(p.get("service").as_deref(), Some("a"));
        let err = p.finish().unwrap_err();
        assert!(err.message.contains("bogus"), "{}", err.message);
    }

    #[test]
    fn attribute_values_are_typed_loosely() {
        let v = attr_values("200");
        assert!(v.contains(&AnyValue::Int(200)) && v.contains(&AnyValue::Str("200".into())));
        assert_eq!(attr_values("\"200\""), vec![AnyValue::Str("200".into())]);
        assert!(attr_values("true").contains(&AnyValue::Bool(true)));
    }
}
