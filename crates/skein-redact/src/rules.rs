//! The `--redact FILE` format:
//!
//! ```toml
//! [[rule]]
//! name = "customer ids"        # optional, for errors
//! action = "hash"              # drop | mask | hash
//! keys = ["customer.id"]       # attribute key globs; none: every value
//! pattern = 'C-\d{6}'          # mask/hash only the matches (regex)
//! replacement = "[CUSTOMER]"   # mask; default [REDACTED]
//! check = "luhn"               # optional: luhn | iban
//! in = ["attributes", "bodies", "messages"]   # default all three
//! ```

use regex::Regex;
use serde::Deserialize;

use crate::{Action, Check, Rule, Targets};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<FileRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    name: Option<String>,
    action: String,
    #[serde(default)]
    keys: Vec<String>,
    pattern: Option<String>,
    replacement: Option<String>,
    check: Option<String>,
    #[serde(rename = "in")]
    targets: Option<Vec<String>>,
}

fn line_at(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parses a rules file; errors name `what` and the line.
pub fn parse_rules(text: &str, what: &str) -> Result<Vec<Rule>, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_at(text, s.start));
        format!("{what}, line {line}: {}", e.message())
    })?;
    let starts: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[rule]]"))
        .map(|(i, _)| i + 1)
        .collect();
    let mut out = Vec::new();
    for (n, r) in file.rule.into_iter().enumerate() {
        let at = format!("{what}, line {} (rule {})", starts.get(n).copied().unwrap_or(1), n + 1);
        let action = match r.action.as_str() {
            "drop" => Action::Drop,
            "mask" => Action::Mask(r.replacement.clone().unwrap_or_else(|| "[REDACTED]".into())),
            "hash" => Action::Hash,
            other => return Err(format!("{at}: unknown action {other:?}: use drop, mask or hash")),
        };
        if r.replacement.is_some() && !matches!(action, Action::Mask(_)) {
            return Err(format!("{at}: replacement is for mask rules"));
        }
        if action == Action::Drop && (r.keys.is_empty() || r.pattern.is_some()) {
            return Err(format!("{at}: a drop rule names keys, and no pattern"));
        }
        if action != Action::Drop && r.keys.is_empty() && r.pattern.is_none() {
            return Err(format!("{at}: give keys, a pattern, or both"));
        }
        let pattern = match &r.pattern {
            Some(p) => Some(Regex::new(p).map_err(|e| format!("{at}: pattern: {e}"))?),
            None => None,
        };
        let check = match r.check.as_deref() {
            None => None,
            Some("luhn") => Some(Check::Luhn),
            Some("iban") => Some(Check::Iban),
            Some(other) => return Err(format!("{at}: unknown check {other:?}: use luhn or iban")),
        };
        let targets = match &r.targets {
            None => Targets::ALL,
            Some(list) => {
                let mut t = Targets {
                    attributes: false,
                    bodies: false,
                    messages: false,
                };
                for x in list {
                    match x.as_str() {
                        "attributes" => t.attributes = true,
                        "bodies" => t.bodies = true,
                        "messages" => t.messages = true,
                        other => {
                            return Err(format!(
                                "{at}: unknown target {other:?} in `in`: use attributes, bodies or messages"
                            ));
                        }
                    }
                }
                t
            }
        };
        out.push(Rule {
            name: r.name.unwrap_or_else(|| format!("rule {}", n + 1)),
            action,
            keys: r.keys,
            pattern,
            check,
            targets,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Redactor;
    use skein_model::{AnyValue, KeyValue};

    #[test]
    fn rules_drop_mask_and_hash() {
        let rules = parse_rules(
            "[[rule]]\naction = \"drop\"\nkeys = [\"internal.*\"]\n\n[[rule]]\naction = \"hash\"\nkeys = [\"user.id\"]\n\n[[rule]]\naction = \"mask\"\npattern = 'C-\\d{6}'\nreplacement = \"[CUSTOMER]\"\n",
            "r.toml",
        )
        .unwrap();
        let r = Redactor::new(rules, b"key");
        let mut kvs = vec![
            KeyValue::new("internal.note", "x"),
            KeyValue::new("user.id", "u-42"),
            KeyValue::new("msg", "for C-123456 and C-654321"),
        ];
        assert!(r.attributes(&mut kvs));
        assert_eq!(kvs.len(), 2);
        let AnyValue::Str(h) = &kvs[0].value else { panic!() };
        assert!(h.starts_with("hash:") && h.len() == 21, "{h}");
        // Equal values hash equally; another key, differently.
        let mut again = vec![KeyValue::new("user.id", "u-42")];
        r.attributes(&mut again);
        assert_eq!(again[0].value, kvs[0].value);
        let mut other = vec![KeyValue::new("user.id", "u-42")];
        Redactor::new(
            parse_rules("[[rule]]\naction = \"hash\"\nkeys = [\"user.id\"]\n", "r").unwrap(),
            b"other",
        )
        .attributes(&mut other);
        assert_ne!(other[0].value, kvs[0].value);
        assert_eq!(kvs[1].value, AnyValue::Str("for [CUSTOMER] and [CUSTOMER]".into()));
    }

    #[test]
    fn bad_rules_name_the_line() {
        let e = parse_rules(
            "[[rule]]\naction = \"mask\"\nkeys = [\"a\"]\n\n[[rule]]\naction = \"shred\"\nkeys = [\"b\"]\n",
            "r.toml",
        )
        .unwrap_err();
        assert!(e.contains("r.toml, line 5") && e.contains("\"shred\""), "{e}");
        let e = parse_rules("[[rule]]\naction = \"mask\"\npattern = '('\n", "r.toml").unwrap_err();
        assert!(e.contains("line 1") && e.contains("pattern"), "{e}");
        let e = parse_rules("[[rule]]\naction = \"mask\"\nkeys = [\"a\"]\ncolour = 1\n", "r.toml").unwrap_err();
        assert!(e.contains("line 4") && e.contains("colour"), "{e}");
        assert!(
            parse_rules("[[rule]]\naction = \"drop\"\n", "r")
                .unwrap_err()
                .contains("names keys")
        );
    }
}
