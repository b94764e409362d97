//! `--redact` rules files of any text: parsed or refused without a panic;
//! rules that parse are applied (after the built-in ones) to the input as
//! an attribute value and a log body, and redacting twice changes nothing
//! more than redacting once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_model::{AnyValue, KeyValue};
use skein_redact::{Redactor, parse_rules};

fn value(r: &Redactor, key: &str, v: &str) -> AnyValue {
    let mut kvs = vec![KeyValue::new(key, v)];
    r.attributes(&mut kvs);
    kvs.into_iter().next().map(|kv| kv.value).unwrap_or(AnyValue::Str(String::new()))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The defaults alone: idempotent on any text.
    let defaults = Redactor::defaults(b"fuzz");
    let once = value(&defaults, "message", text);
    if let AnyValue::Str(s) = &once {
        assert_eq!(value(&defaults, "message", s), once, "redacting twice changed {s:?}");
    }
    let Ok(rules) = parse_rules(text, "f") else { return };
    let r = Redactor::defaults(b"fuzz").then(rules);
    let _ = value(&r, "user.email", text);
    let mut logs = vec![skein_model::LogRecord {
        body: AnyValue::Str(text.to_string()),
        ..Default::default()
    }];
    r.logs(&mut logs);
});
