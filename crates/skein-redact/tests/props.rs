//! Redaction against arbitrary input: a rules file of any bytes is parsed
//! or refused without a panic; the built-in rules never panic, are
//! idempotent (a redacted value redacted again is unchanged, so replays
//! and re-sends agree), and leave no email or card number behind.

use proptest::prelude::*;
use skein_model::{AnyValue, KeyValue};
use skein_redact::{Redactor, parse_rules};

fn redact(r: &Redactor, key: &str, v: &str) -> String {
    let mut kvs = vec![KeyValue::new(key, v)];
    r.attributes(&mut kvs);
    match kvs.into_iter().next().map(|kv| kv.value) {
        Some(AnyValue::Str(s)) => s,
        other => panic!("{other:?}"),
    }
}

/// Text that mixes PII-like pieces with noise.
fn texty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("ana@example.com".to_string()),
        Just("4111 1111 1111 1111".to_string()),
        Just("+44 20 7946 0958".to_string()),
        Just("10.1.2.3".to_string()),
        Just("Bearer abcdefghijk".to_string()),
        Just("DE89 3704 0044 0532 0130 00".to_string()),
        "[ -~]{0,12}",
        "[0-9 .:+@-]{0,12}",
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.join(" "))
}

proptest! {
    #[test]
    fn any_rules_text_parses_or_is_refused(text in "\\PC{0,200}") {
        let _ = parse_rules(&text, "f");
        let _ = parse_rules(&format!("[[rule]]\n{text}"), "f");
    }

    #[test]
    fn checked_rules_of_any_pattern_never_panic(s in "\\PC{0,60}", pat in prop_oneof![Just("a*".to_string()), Just("\\d+".to_string()), Just("[^ ]*".to_string()), Just("é?".to_string())]) {
        let text = format!("[[rule]]\naction = \"mask\"\npattern = '{pat}'\ncheck = \"luhn\"\n");
        let r = Redactor::new(parse_rules(&text, "f").unwrap(), b"k");
        let _ = redact(&r, "k", &s);
    }

    #[test]
    fn the_defaults_are_idempotent_and_leave_no_email_or_card(s in texty(), key in "[a-z.]{1,12}") {
        let r = Redactor::defaults(b"k");
        let once = redact(&r, &key, &s);
        let twice = redact(&r, &key, &once);
        prop_assert_eq!(&once, &twice);
        prop_assert!(!once.contains("ana@example.com"), "{}", once);
        prop_assert!(!once.contains("4111 1111 1111 1111"), "{}", once);
    }
}
