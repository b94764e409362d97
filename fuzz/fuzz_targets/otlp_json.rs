//! OTLP/JSON request bodies: each signal's JSON decoder, then validation and
//! conversion to the model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_fuzz::check_json;
use skein_model::{LogRecord, MetricPoint, Span};

fuzz_target!(|data: &[u8]| {
    check_json::<Span>(data);
    check_json::<LogRecord>(data);
    check_json::<MetricPoint>(data);
});
