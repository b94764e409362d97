//! The simple JSON span API (`POST /api/v1/spans`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use skein_fuzz::{check_outcome, check_records};

fuzz_target!(|data: &[u8]| {
    let Ok(decoded) = skein_server::json_api::parse(data) else {
        return;
    };
    // The body parsed, so it is an array of spans or {"spans": [...]}.
    let submitted = match serde_json::from_slice::<Value>(data) {
        Ok(Value::Array(a)) => a.len(),
        Ok(Value::Object(o)) => match o.get("spans") {
            Some(Value::Array(a)) => a.len(),
            other => panic!("accepted a body whose spans are {other:?}"),
        },
        other => panic!("accepted a body that is {other:?}"),
    };
    check_outcome(&decoded, submitted as u64);
    // Whatever the API accepts is a valid span, and valid OTLP.
    check_records(&decoded.records);
});
