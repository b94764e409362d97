//! PII redaction at ingest: records are rewritten by rules before anything
//! stores them (the server applies a [`Redactor`] ahead of the WAL), so a
//! redacted value is in no file Skein writes.
//!
//! A rule names what it applies to (attribute keys by glob; attribute
//! values, log bodies and span status messages) and what it does:
//!
//! - `drop`: remove the attribute;
//! - `mask`: replace each match of `pattern` (or the whole value) by
//!   `replacement`;
//! - `hash`: replace each match (or the whole value) by a keyed hash
//!   (`hash:<16 hex>`, BLAKE3 in keyed mode: a MAC, so equal values still
//!   group and nobody without the key can test a guess).
//!
//! Rules run in order; string values nested in arrays and maps are reached
//! too. The built-in set ([`defaults`]) masks emails, card numbers (Luhn
//! checked), IBANs (mod-97 checked), phone numbers, IP addresses, bearer
//! tokens, API keys of common providers and JWTs, and masks the values of
//! secret-looking keys (`password`, `api_key`, `authorization`, `cookie`, …).

mod defaults;
mod rules;

use std::collections::HashMap;
use std::sync::Arc;

use regex::Regex;
use skein_model::{AnyValue, KeyValue, LogRecord, MetricPoint, Resource, Span};

pub use rules::parse_rules;

/// What a rule does to what it matches.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Drop,
    Mask(String),
    Hash,
}

/// A check a pattern's match must also pass (cuts false positives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Luhn,
    Iban,
}

/// Where a rule looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Targets {
    pub attributes: bool,
    pub bodies: bool,
    pub messages: bool,
}

impl Targets {
    pub const ALL: Targets = Targets {
        attributes: true,
        bodies: true,
        messages: true,
    };
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub action: Action,
    /// Attribute keys (globs, `*` any run, case-insensitive); empty: any
    /// key, and bodies and messages too.
    pub keys: Vec<String>,
    pub pattern: Option<Regex>,
    pub check: Option<Check>,
    pub targets: Targets,
}

impl Rule {
    fn key_matches(&self, key: &str) -> bool {
        self.keys.is_empty() || self.keys.iter().any(|g| glob(g, key))
    }
}

/// Case-insensitive glob with `*` only.
fn glob(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.to_ascii_lowercase(), s.to_ascii_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == s;
    }
    let mut rest = s.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

fn luhn(digits: &str) -> bool {
    let ds: Vec<u32> = digits.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&ds.len()) {
        return false;
    }
    let sum: u32 = ds
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Each match of `p` in `s` that passes `check` (or whose longest passing
/// run of groups does), replaced; `None` when nothing passed. A match that
/// fails does not hide what overlaps it: the search goes on from its next
/// group, so a card number after a longer run of digits is still found.
fn replace_checked(p: &Regex, check: Check, s: &str, replace: impl Fn(&str) -> String) -> Option<String> {
    let mut out = String::new();
    let (mut pos, mut copied) = (0, 0);
    let mut hit = false;
    while pos < s.len() {
        let Some(m) = p.find_at(s, pos) else { break };
        match passing_span(m.as_str(), check) {
            Some((a, b)) => {
                let (a, b) = (m.start() + a, m.start() + b);
                out.push_str(&s[copied..a]);
                out.push_str(&replace(&s[a..b]));
                copied = b;
                pos = b;
                hit = true;
            }
            None => {
                // The next group of the failed match, else past it (and
                // past an empty match: one character on).
                let text = m.as_str();
                let first = text.chars().next().map_or(1, char::len_utf8);
                pos = text
                    .get(first..)
                    .and_then(|rest| rest.find([' ', '-']))
                    .map_or(m.end(), |i| m.start() + first + i + 1)
                    .max(m.start() + first);
                while pos < s.len() && !s.is_char_boundary(pos) {
                    pos += 1;
                }
            }
        }
    }
    out.push_str(&s[copied..]);
    hit.then_some(out)
}

/// The longest run of `m`'s groups (split at spaces and dashes) that
/// passes `check`, as a byte span of `m`.
fn passing_span(m: &str, check: Check) -> Option<(usize, usize)> {
    let mut groups = Vec::new();
    let mut start = None;
    for (i, c) in m.char_indices() {
        if c == ' ' || c == '-' {
            if let Some(s) = start.take() {
                groups.push((s, i));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        groups.push((s, m.len()));
    }
    let n = groups.len();
    for len in (1..=n).rev() {
        for first in 0..=n - len {
            let (a, b) = (groups[first].0, groups[first + len - 1].1);
            let ok = match check {
                Check::Luhn => luhn(&m[a..b]),
                Check::Iban => iban(&m[a..b]),
            };
            if ok {
                return Some((a, b));
            }
        }
    }
    None
}

fn iban(s: &str) -> bool {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&s.len()) {
        return false;
    }
    let (head, tail) = s.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c.to_digit(36) {
            Some(v) => v,
            None => return false,
        };
        for d in v.to_string().chars() {
            rem = (rem * 10 + d.to_digit(10).unwrap_or(0)) % 97;
        }
    }
    rem == 1
}

/// Applies rules to records.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<Rule>,
    key: [u8; 32],
}

/// Where a string sits, for the rules' targets and keys.
#[derive(Clone, Copy)]
enum Place<'a> {
    Attribute(&'a str),
    Body,
    Message,
}

impl Redactor {
    /// `key` keys the hashes (any bytes; hashed to 32).
    pub fn new(rules: Vec<Rule>, key: &[u8]) -> Redactor {
        Redactor {
            rules,
            key: *blake3::hash(key).as_bytes(),
        }
    }

    /// The built-in rules.
    pub fn defaults(key: &[u8]) -> Redactor {
        Redactor::new(defaults::rules(), key)
    }

    /// These rules after `self`'s.
    pub fn then(mut self, more: Vec<Rule>) -> Redactor {
        self.rules.extend(more);
        self
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    fn hash(&self, s: &str) -> String {
        let h = blake3::keyed_hash(&self.key, s.as_bytes());
        format!("hash:{}", hex::encode(&h.as_bytes()[..8]))
    }

    /// Rewrites one string in place; whether it changed.
    fn string(&self, place: Place<'_>, s: &mut String) -> bool {
        let mut changed = false;
        for r in &self.rules {
            let applies = match place {
                Place::Attribute(k) => r.targets.attributes && r.key_matches(k),
                Place::Body => r.targets.bodies && r.keys.is_empty(),
                Place::Message => r.targets.messages && r.keys.is_empty(),
            };
            if !applies {
                continue;
            }
            let new = match (&r.pattern, &r.action) {
                (_, Action::Drop) => continue,
                (None, Action::Mask(m)) => Some(m.clone()),
                (None, Action::Hash) => Some(self.hash(s)),
                (Some(p), action) => {
                    let replace = |m: &str| match action {
                        Action::Mask(x) => x.clone(),
                        _ => self.hash(m),
                    };
                    match r.check {
                        None => p
                            .is_match(s)
                            .then(|| p.replace_all(s, |c: &regex::Captures<'_>| replace(&c[0])).into_owned()),
                        Some(check) => replace_checked(p, check, s, replace),
                    }
                }
            };
            if let Some(n) = new
                && n != *s
            {
                *s = n;
                changed = true;
            }
        }
        changed
    }

    fn value(&self, place: Place<'_>, v: &mut AnyValue) -> bool {
        match v {
            AnyValue::Str(s) => self.string(place, s),
            AnyValue::Array(items) => items.iter_mut().fold(false, |c, x| self.value(place, x) | c),
            AnyValue::Map(kvs) => match place {
                Place::Attribute(_) => self.attributes(kvs),
                _ => kvs
                    .iter_mut()
                    .fold(false, |c, kv| self.value(Place::Attribute(&kv.key), &mut kv.value) | c),
            },
            _ => false,
        }
    }

    fn dropped(&self, key: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.action == Action::Drop && r.targets.attributes && r.key_matches(key))
    }

    /// Rewrites a list of attributes; whether anything changed.
    pub fn attributes(&self, kvs: &mut Vec<KeyValue>) -> bool {
        let before = kvs.len();
        kvs.retain(|kv| !self.dropped(&kv.key));
        let mut changed = kvs.len() != before;
        for KeyValue { key, value } in kvs.iter_mut() {
            changed |= self.value(Place::Attribute(key), value);
        }
        changed
    }

    fn resource(&self, seen: &mut HashMap<usize, Arc<Resource>>, r: &mut Arc<Resource>) {
        let at = Arc::as_ptr(r) as usize;
        if let Some(done) = seen.get(&at) {
            *r = done.clone();
            return;
        }
        let mut copy = (**r).clone();
        let out = if self.attributes(&mut copy.attributes) {
            Arc::new(copy)
        } else {
            r.clone()
        };
        seen.insert(at, out.clone());
        *r = out;
    }

    pub fn spans(&self, spans: &mut [Span]) {
        let mut seen = HashMap::new();
        for s in spans {
            self.resource(&mut seen, &mut s.resource);
            self.attributes(&mut s.attributes);
            self.string(Place::Message, &mut s.status.message);
            for e in &mut s.events {
                self.attributes(&mut e.attributes);
            }
            for l in &mut s.links {
                self.attributes(&mut l.attributes);
            }
        }
    }

    pub fn logs(&self, logs: &mut [LogRecord]) {
        let mut seen = HashMap::new();
        for l in logs {
            self.resource(&mut seen, &mut l.resource);
            self.attributes(&mut l.attributes);
            self.value(Place::Body, &mut l.body);
        }
    }

    pub fn metrics(&self, points: &mut [MetricPoint]) {
        let mut seen = HashMap::new();
        for p in points {
            self.resource(&mut seen, &mut p.resource);
            self.attributes(&mut p.attributes);
            for e in &mut p.exemplars {
                self.attributes(&mut e.filtered_attributes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("password", "PASSWORD"));
        assert!(glob("*password*", "db.password.old"));
        assert!(glob("http.request.header.*", "http.request.header.cookie"));
        assert!(!glob("http.request.header.*", "http.response.header.cookie"));
        assert!(glob("*.secret", "app.secret"));
        assert!(!glob("*.secret", "app.secrets"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
    }

    #[test]
    fn checks() {
        assert!(luhn("4111 1111 1111 1111"));
        assert!(!luhn("4111 1111 1111 1112"));
        assert!(iban("DE89 3704 0044 0532 0130 00"));
        assert!(!iban("DE89 3704 0044 0532 0130 01"));
    }
}
