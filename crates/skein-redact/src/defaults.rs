//! The built-in rules of `--redact-defaults`. Patterns are written to miss
//! rather than to over-match ordinary telemetry (timestamps, versions,
//! durations), and the two with a checksum (cards, IBANs) must pass it.

use regex::Regex;

use crate::{Action, Check, Rule, Targets};

fn pattern(name: &str, re: &str, mask: &str, check: Option<Check>) -> Rule {
    Rule {
        name: name.to_string(),
        action: Action::Mask(mask.to_string()),
        keys: Vec::new(),
        pattern: Some(Regex::new(re).expect("built-in pattern")),
        check,
        targets: Targets::ALL,
    }
}

/// Attribute keys whose whole value is a secret.
pub const SECRET_KEYS: &[&str] = &[
    "*password*",
    "*passwd*",
    "*secret*",
    "*api_key*",
    "*apikey*",
    "*api-key*",
    "*access_token*",
    "*refresh_token*",
    "*auth_token*",
    "*session_token*",
    "*private_key*",
    "*credential*",
    "authorization",
    "*.authorization",
    "*proxy-authorization",
    "cookie",
    "*.cookie",
    "*set-cookie",
    "*x-api-key",
];

pub fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "secret keys".into(),
            action: Action::Mask("[REDACTED]".into()),
            keys: SECRET_KEYS.iter().map(|s| s.to_string()).collect(),
            pattern: None,
            check: None,
            targets: Targets {
                attributes: true,
                bodies: false,
                messages: false,
            },
        },
        // Before the generic patterns: a JWT or key contains runs that
        // would otherwise look like other things.
        pattern(
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
            "[JWT]",
            None,
        ),
        pattern(
            "bearer token",
            r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}",
            "Bearer [TOKEN]",
            None,
        ),
        pattern(
            "api keys",
            r"\b(?:sk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{20,}|sk_(?:live|test)_[0-9A-Za-z]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20})\b",
            "[API_KEY]",
            None,
        ),
        pattern(
            "email",
            r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
            "[EMAIL]",
            None,
        ),
        pattern(
            "iban",
            r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b",
            "[IBAN]",
            Some(Check::Iban),
        ),
        pattern("card", r"\b(?:\d[ -]?){12,18}\d\b", "[CARD]", Some(Check::Luhn)),
        pattern(
            "ipv6",
            r"(?i)\b(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}\b|(?i)\b(?:[0-9a-f]{1,4}:){1,6}:(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){0,5})?\b",
            "[IP]",
            None,
        ),
        pattern(
            "ipv4",
            r"\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b",
            "[IP]",
            None,
        ),
        pattern(
            "phone",
            r"(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){1,4}\b|\(\d{3}\) ?\d{3}[ .-]\d{4}\b|\b\d{3}[.-]\d{3}[.-]\d{4}\b)",
            "[PHONE]",
            None,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use crate::Redactor;
    use skein_model::{AnyValue, KeyValue};

    fn redact(key: &str, v: &str) -> String {
        let r = Redactor::defaults(b"k");
        let mut kvs = vec![KeyValue::new(key, v)];
        r.attributes(&mut kvs);
        match &kvs[0].value {
            AnyValue::Str(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn what_the_defaults_mask() {
        for (input, want) in [
            ("mail ana.lopez+x@example.co.uk now", "mail [EMAIL] now"),
            ("card 4111 1111 1111 1111 ok", "card [CARD] ok"),
            ("card 4111 1111 1111 1111 10 items", "card [CARD] 10 items"),
            ("12 4111-1111-1111-1111", "12 [CARD]"),
            ("iban DE89 3704 0044 0532 0130 00.", "iban [IBAN]."),
            ("call +44 20 7946 0958", "call [PHONE]"),
            ("call (415) 555-0132", "call [PHONE]"),
            ("from 203.0.113.7:443", "from [IP]:443"),
            ("from 2001:db8::8a2e:370:7334", "from [IP]"),
            (
                "Authorization: Bearer abcdef.ghijkl-123",
                "Authorization: Bearer [TOKEN]",
            ),
            ("key sk-proj-abcdefghijklmnopqrstuvwx1234", "key [API_KEY]"),
            ("aws AKIAIOSFODNN7EXAMPLE", "aws [API_KEY]"),
            (
                "t eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "t [JWT]",
            ),
        ] {
            assert_eq!(redact("message", input), want, "{input}");
        }
        assert_eq!(redact("db.password", "hunter2"), "[REDACTED]");
        assert_eq!(redact("http.request.header.authorization", "Basic Zm9v"), "[REDACTED]");
    }

    #[test]
    fn what_the_defaults_leave_alone() {
        for s in [
            "took 1234 ms at 2026-12-01T10:11:12Z",
            "version 1.2.3 build 20261201",
            "card 4111 1111 1111 1112 fails Luhn",
            "order 1234567890123 shipped",
            "12:30:45 tick",
            "gen_ai.usage.input_tokens",
            "trace 4bf92f3577b34da6a3ce929d0e0e4736",
        ] {
            assert_eq!(redact("message", s), s);
        }
        assert_eq!(redact("gen_ai.usage.input_tokens", "120"), "120");
    }
}
