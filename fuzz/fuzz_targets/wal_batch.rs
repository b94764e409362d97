//! WAL batch bodies (zstd-compressed postcard). The first byte picks the
//! signal (low bits) and whether the rest is the compressed body as stored
//! (high bit clear) or the postcard bytes inside it (high bit set, compressed
//! here, so that mutations reach the postcard decoder).
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_engine::Record;
use skein_engine::codec::{decode_batch, encode_batch};
use skein_model::{LogRecord, MetricPoint, Span};

fn run<R: Record>(body: &[u8]) {
    let Ok(records) = decode_batch::<R>(body) else { return };
    // Replay inserts the records into the hot tier, which asks for these.
    let mut terms = Vec::new();
    for r in &records {
        let _ = (r.time(), r.key(), r.trace_id(), r.approx_size(), r.service_name());
        terms.clear();
        r.index_terms(&mut terms);
    }
    let again: Vec<R> = decode_batch(&encode_batch(&records).expect("decoded records encode")).expect("re-decode");
    assert_eq!(
        format!("{again:?}"),
        format!("{records:?}"),
        "batch round trip changed the records"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let compressed;
    let body = if sel & 0x80 != 0 {
        compressed = zstd::bulk::compress(rest, 1).expect("compress");
        &compressed[..]
    } else {
        rest
    };
    match (sel & 0x7f) % 3 {
        0 => run::<Span>(body),
        1 => run::<LogRecord>(body),
        _ => run::<MetricPoint>(body),
    }
});
