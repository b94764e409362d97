//! The binary encoding of a batch of records, used by the WAL.
//!
//! A batch stores each distinct resource, scope and metric description once
//! and refers to them by index, so a 1,000-span batch from one service
//! encodes its resource once. The body is postcard (a stable, compact serde
//! format) compressed with zstd.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skein_model::{MetricDesc, Resource, Scope};

use crate::envelope::zstd_decompress;
use crate::error::{Error, Result};
use crate::record::Record;

#[derive(Serialize)]
struct WireOut<'a, R> {
    resources: Vec<&'a Resource>,
    scopes: Vec<&'a Scope>,
    metrics: Vec<&'a MetricDesc>,
    items: Vec<(u32, u32, u32, &'a R)>,
}

#[derive(Deserialize)]
struct WireIn<R> {
    resources: Vec<Resource>,
    scopes: Vec<Scope>,
    metrics: Vec<MetricDesc>,
    items: Vec<(u32, u32, u32, R)>,
}

/// Interns `Arc`s by pointer, so records sharing one are encoded once.
struct Interner<'a, T> {
    by_ptr: HashMap<*const T, u32>,
    list: Vec<&'a T>,
}

impl<'a, T> Interner<'a, T> {
    fn new() -> Self {
        Interner {
            by_ptr: HashMap::new(),
            list: Vec::new(),
        }
    }
    fn intern(&mut self, a: &'a Arc<T>) -> u32 {
        let ptr = Arc::as_ptr(a);
        let next = self.list.len() as u32;
        *self.by_ptr.entry(ptr).or_insert_with(|| {
            self.list.push(&**a);
            next
        })
    }
}

/// zstd level for WAL batches: the fastest positive level, as the WAL is
/// short-lived. Negative levels save little: on the agent corpus
/// (`examples/codec_levels.rs`), level 1 costs 0.49 µs a span, level -3
/// 0.37 µs for 15% more bytes to write and sync.
const WAL_ZSTD_LEVEL: i32 = 1;

pub fn encode_batch<R: Record>(records: &[R]) -> Result<Vec<u8>> {
    with_encoded_batch(records, |body| Ok(body.to_vec()))
}

/// Encodes `records` and hands the encoded batch to `f`. The bytes live in
/// buffers this thread reuses: a batch is hundreds of KB, and allocating
/// that afresh per batch cost more (page faults, zeroing) than encoding.
pub fn with_encoded_batch<R: Record, T>(records: &[R], f: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
    thread_local! {
        static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::new(Buffers::default());
    }
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        let b = &mut *b;
        let raw = std::mem::take(&mut b.raw);
        b.raw = serialize(records, raw)?;
        b.compressed.clear();
        b.compressed.reserve(zstd::zstd_safe::compress_bound(b.raw.len()));
        let compressor = match b.compressor.as_mut() {
            Some(c) => c,
            None => b
                .compressor
                .insert(zstd::bulk::Compressor::new(WAL_ZSTD_LEVEL).map_err(|e| Error::io("zstd context", e))?),
        };
        compressor
            .compress_to_buffer(&b.raw[..], &mut b.compressed)
            .map_err(|e| Error::io("compress batch", e))?;
        let out = f(&b.compressed);
        // Keep buffers for typical batches; let a rare huge one go.
        for buf in [&mut b.raw, &mut b.compressed] {
            if buf.capacity() > MAX_KEPT_BUFFER {
                *buf = Vec::new();
            }
        }
        out
    })
}

/// Per-thread encoding state (a zstd context is hundreds of KB to set up).
#[derive(Default)]
struct Buffers {
    raw: Vec<u8>,
    compressed: Vec<u8>,
    compressor: Option<zstd::bulk::Compressor<'static>>,
}

const MAX_KEPT_BUFFER: usize = 8 << 20;

/// The postcard bytes of a batch, appended to `buf` after clearing it.
fn serialize<R: Record>(records: &[R], mut buf: Vec<u8>) -> Result<Vec<u8>> {
    let mut resources = Interner::new();
    let mut scopes = Interner::new();
    let mut metrics = Interner::new();
    let items = records
        .iter()
        .map(|r| {
            let m = r.metric_desc().map_or(u32::MAX, |m| metrics.intern(m));
            (resources.intern(r.resource()), scopes.intern(r.scope()), m, r)
        })
        .collect();
    let wire = WireOut {
        resources: resources.list,
        scopes: scopes.list,
        metrics: metrics.list,
        items,
    };
    buf.clear();
    postcard::to_extend(&wire, buf).map_err(|e| Error::Other(format!("encode batch: {e}")))
}

/// The largest decompressed batch accepted, a guard against corrupt sizes.
const MAX_BATCH_BYTES: usize = 1 << 30;

pub fn decode_batch<R: Record>(bytes: &[u8]) -> Result<Vec<R>> {
    let raw = zstd_decompress(bytes, MAX_BATCH_BYTES).map_err(|e| Error::corrupt("batch", format!("zstd: {e}")))?;
    let wire: WireIn<R> = postcard::from_bytes(&raw).map_err(|e| Error::corrupt("batch", format!("decode: {e}")))?;
    let resources: Vec<Arc<Resource>> = wire.resources.into_iter().map(Arc::new).collect();
    let scopes: Vec<Arc<Scope>> = wire.scopes.into_iter().map(Arc::new).collect();
    let metrics: Vec<Arc<MetricDesc>> = wire.metrics.into_iter().map(Arc::new).collect();
    wire.items
        .into_iter()
        .map(|(ri, si, mi, mut r)| {
            let res = resources.get(ri as usize).cloned();
            let scope = scopes.get(si as usize).cloned();
            let (Some(res), Some(scope)) = (res, scope) else {
                return Err(Error::corrupt("batch", "record refers to a missing resource or scope"));
            };
            let metric = if mi == u32::MAX {
                None
            } else {
                Some(
                    metrics
                        .get(mi as usize)
                        .cloned()
                        .ok_or_else(|| Error::corrupt("batch", "point refers to a missing metric"))?,
                )
            };
            r.attach(res, scope, metric);
            Ok(r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn batches_round_trip_and_share_resources() {
        let spans = testdata::spans(3, 4);
        let bytes = encode_batch(&spans).unwrap();
        let back: Vec<skein_model::Span> = decode_batch(&bytes).unwrap();
        assert_eq!(back, spans);
        assert!(Arc::ptr_eq(&back[0].resource, &back[1].resource) || back[0].resource != back[1].resource);
        let logs = testdata::logs(10);
        assert_eq!(
            decode_batch::<skein_model::LogRecord>(&encode_batch(&logs).unwrap()).unwrap(),
            logs
        );
        let points = testdata::metric_points(10);
        assert_eq!(
            decode_batch::<skein_model::MetricPoint>(&encode_batch(&points).unwrap()).unwrap(),
            points
        );
    }

    /// The thread's buffers carry nothing from one batch into the next,
    /// whether it is smaller or larger.
    #[test]
    fn reused_buffers_never_leak_into_the_next_batch() {
        let big = testdata::spans(50, 10);
        let small = testdata::spans(2, 3);
        let huge: Vec<_> = (0..3)
            .map(|i| {
                let mut s = small[0].clone();
                s.name = format!("{i}").repeat(4 << 20);
                s
            })
            .collect();
        for batch in [&big, &small, &huge, &small, &big] {
            let bytes = encode_batch(batch).unwrap();
            let back: Vec<skein_model::Span> = decode_batch(&bytes).unwrap();
            assert_eq!(&back, batch);
        }
    }

    #[test]
    fn garbage_is_reported_as_corrupt() {
        let err = decode_batch::<skein_model::Span>(b"not zstd").unwrap_err();
        assert!(err.to_string().starts_with("corrupt batch"), "{err}");
    }

    // ----------------------------------------------- damaged WAL batches

    use proptest::prelude::*;
    use proptest::sample::Index;

    /// Decodes `bytes` as a batch of `R`; whatever decodes must be usable by
    /// replay and re-encode to the same records.
    fn decode_checked<R: Record>(bytes: &[u8]) {
        let Ok(records) = decode_batch::<R>(bytes) else { return };
        let mut terms = Vec::new();
        for r in &records {
            let _ = (r.time(), r.key(), r.trace_id(), r.approx_size());
            r.index_terms(&mut terms);
        }
        let again: Vec<R> = decode_batch(&encode_batch(&records).unwrap()).unwrap();
        assert_eq!(format!("{again:?}"), format!("{records:?}"));
    }

    fn decode_as_every_signal(bytes: &[u8]) {
        decode_checked::<skein_model::Span>(bytes);
        decode_checked::<skein_model::LogRecord>(bytes);
        decode_checked::<skein_model::MetricPoint>(bytes);
    }

    /// XORs bytes at the given positions, then maybe truncates.
    fn mutate(mut bytes: Vec<u8>, edits: &[(Index, u8)], cut: Option<Index>) -> Vec<u8> {
        if !bytes.is_empty() {
            for (at, x) in edits {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        bytes
    }

    fn valid_batch(which: usize) -> Vec<u8> {
        match which {
            0 => encode_batch(&testdata::spans(2, 3)).unwrap(),
            1 => encode_batch(&testdata::logs(4)).unwrap(),
            _ => encode_batch(&testdata::metric_points(6)).unwrap(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
            decode_as_every_signal(&data);
            // The same bytes as the postcard body inside the zstd frame.
            decode_as_every_signal(&zstd::bulk::compress(&data, 1).unwrap());
        }

        #[test]
        fn damaged_batches_never_panic(
            which in 0..3usize,
            inside in any::<bool>(),
            edits in prop::collection::vec((any::<Index>(), 1..=255u8), 1..4),
            cut in prop::option::of(any::<Index>()),
        ) {
            let batch = valid_batch(which);
            let damaged = if inside {
                // Damage the postcard body, in a well-formed zstd frame.
                let raw = zstd::bulk::decompress(&batch, 1 << 20).unwrap();
                zstd::bulk::compress(&mutate(raw, &edits, cut), 1).unwrap()
            } else {
                mutate(batch, &edits, cut)
            };
            decode_as_every_signal(&damaged);
        }
    }
}
