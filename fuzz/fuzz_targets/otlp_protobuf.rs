//! OTLP/protobuf request bodies (gRPC and HTTP ingest): `prost` decode of an
//! export request, then validation and conversion to the model. The first
//! byte picks the signal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use skein_fuzz::{OtlpSignal, check_request};
use skein_model::{LogRecord, MetricPoint, Span};

fn run<T: OtlpSignal>(body: &[u8]) {
    if let Ok(req) = T::Request::decode(body) {
        check_request::<T>(req);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&signal, body)) = data.split_first() else {
        return;
    };
    match signal % 3 {
        0 => run::<Span>(body),
        1 => run::<LogRecord>(body),
        _ => run::<MetricPoint>(body),
    }
});
