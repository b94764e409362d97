//! The payload store: big string values (prompts, completions, tool
//! results, stack traces, large log bodies) kept once, content-addressed by
//! the BLAKE3 of their bytes and zstd-compressed, so that records stay small
//! and a point read never pays for them.
//!
//! A record keeps a reference in the value's place: the map
//! `{"$payload": "blake3:<64 hex>", "bytes": N, "preview": "<first 200
//! chars>"}` ([`ref_value`]), which is also how it reads in the Parquet
//! parts (OTLP/JSON `kvlistValue`), so an outside engine sees what it is.
//!
//! Where payload bytes live, and why that is durable:
//! - at ingest, a batch's new payloads go into the WAL as a payload record
//!   framed just before the batch, in the same write and fsync, so they are
//!   durable when the batch is acknowledged; they then sit in the hot tier;
//! - at flush, a frozen tier's payloads are written as one immutable pack
//!   (temp → fsync → rename, through the part store) *before* its parts,
//!   and before its WAL segments are deleted;
//! - a batch that finds a payload already stored (in a pack or a hot tier)
//!   carries only the reference.

pub mod extract;
pub mod pack;
pub mod store;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skein_model::{AnyValue, KeyValue};

use crate::error::{Error, Result};

pub use extract::PayloadPolicy;
pub use store::{GcReport, PayloadStats, PayloadStore};

/// The BLAKE3 hash of a payload's bytes: its name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PayloadRef(pub [u8; 32]);

impl PayloadRef {
    pub fn of(bytes: &[u8]) -> PayloadRef {
        PayloadRef(*blake3::hash(bytes).as_bytes())
    }

    /// Parses `blake3:<64 hex digits>`.
    pub fn parse(s: &str) -> std::result::Result<PayloadRef, String> {
        let hex_part = s
            .strip_prefix("blake3:")
            .ok_or_else(|| format!("payload reference {s:?} does not start with \"blake3:\""))?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out)
            .map_err(|_| format!("payload reference {s:?} needs 64 hex digits after \"blake3:\""))?;
        Ok(PayloadRef(out))
    }
}

impl std::fmt::Display for PayloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "blake3:{}", hex::encode(self.0))
    }
}

impl std::fmt::Debug for PayloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Keys of the reference map, in order.
pub const REF_KEY: &str = "$payload";
const BYTES_KEY: &str = "bytes";
const PREVIEW_KEY: &str = "preview";
/// The fourth key of a reference to a binary value (`"type": "bytes"`): the
/// value comes back as bytes, and it has no preview and no text to search.
pub const TYPE_KEY: &str = "type";
pub const BINARY_TYPE: &str = "bytes";
/// Characters of a payload kept inline in its reference.
pub const PREVIEW_CHARS: usize = 200;

/// The value a record keeps in place of the payload `text`.
pub fn ref_value(id: PayloadRef, text: &str) -> AnyValue {
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    AnyValue::Map(vec![
        KeyValue::new(REF_KEY, id.to_string()),
        KeyValue::new(BYTES_KEY, text.len() as i64),
        KeyValue::new(PREVIEW_KEY, preview),
    ])
}

/// The value a record keeps in place of the binary payload `bytes`.
pub fn binary_ref_value(id: PayloadRef, bytes: &[u8]) -> AnyValue {
    AnyValue::Map(vec![
        KeyValue::new(REF_KEY, id.to_string()),
        KeyValue::new(BYTES_KEY, bytes.len() as i64),
        KeyValue::new(PREVIEW_KEY, ""),
        KeyValue::new(TYPE_KEY, BINARY_TYPE),
    ])
}

/// The reference and size held by `v`, if it is a reference map (exactly
/// the three keys, in order, with a well-formed reference; a binary
/// value's has the fourth, `"type": "bytes"`).
///
/// Inlined: a flush asks this of every attribute value of every row, and
/// nearly none is a map.
#[inline]
pub fn as_ref_value(v: &AnyValue) -> Option<(PayloadRef, u64)> {
    match v {
        AnyValue::Map(m) => map_as_ref(m),
        _ => None,
    }
}

fn map_as_ref(m: &[KeyValue]) -> Option<(PayloadRef, u64)> {
    let (r, b, p) = match m {
        [r, b, p] => (r, b, p),
        [r, b, p, t] if t.key == TYPE_KEY && t.value.as_str() == Some(BINARY_TYPE) => (r, b, p),
        _ => return None,
    };
    if r.key != REF_KEY || b.key != BYTES_KEY || p.key != PREVIEW_KEY || p.value.as_str().is_none() {
        return None;
    }
    let id = PayloadRef::parse(r.value.as_str()?).ok()?;
    let bytes = u64::try_from(b.value.as_i64()?).ok()?;
    Some((id, bytes))
}

/// Whether `v` is a reference to a binary payload.
pub fn is_binary_ref(v: &AnyValue) -> bool {
    matches!(v, AnyValue::Map(m) if m.len() == 4) && as_ref_value(v).is_some()
}

/// Adds every payload `r` refers to (its own values and its resource's)
/// to `out`.
pub fn refs_of<R: crate::record::Record>(r: &R, out: &mut crate::hash::FastSet<PayloadRef>) {
    let mut add = |v: &AnyValue| {
        if let Some((id, _)) = as_ref_value(v) {
            out.insert(id);
        }
    };
    r.resource().attributes.iter().for_each(|kv| add(&kv.value));
    r.payload_values(&mut add);
}

/// A payload as stored: its name, its size, its zstd-compressed bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub id: PayloadRef,
    pub raw_len: u64,
    pub zstd: Arc<[u8]>,
}

/// zstd level of a payload as it arrives (in the WAL and the hot tier):
/// the fastest, since a pack compresses it again at flush, against the
/// pack's dictionary when it has one.
const ARRIVAL_ZSTD_LEVEL: i32 = 1;

/// The largest payload accepted (the WAL frame limit bounds a batch anyway).
pub const MAX_PAYLOAD_BYTES: u64 = 64 << 20;

impl Blob {
    pub fn compress(id: PayloadRef, bytes: &[u8]) -> Result<Blob> {
        // One compression context per thread: setting one up for each
        // payload was a tenth of the compression time of small prompts.
        thread_local! {
            static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
                const { std::cell::RefCell::new(None) };
        }
        let zstd = COMPRESSOR
            .with(|c| {
                let mut c = c.borrow_mut();
                if c.is_none() {
                    *c = Some(zstd::bulk::Compressor::new(ARRIVAL_ZSTD_LEVEL)?);
                }
                match c.as_mut() {
                    Some(c) => c.compress(bytes),
                    None => zstd::bulk::compress(bytes, ARRIVAL_ZSTD_LEVEL),
                }
            })
            .map_err(|e| Error::io("compress payload", e))?;
        Ok(Blob {
            id,
            raw_len: bytes.len() as u64,
            zstd: zstd.into(),
        })
    }

    /// The payload's bytes, checked against its name: a payload whose
    /// bytes do not hash to it is an error naming it and `place`, never
    /// returned as valid.
    pub fn decompress(&self, place: &str) -> Result<Vec<u8>> {
        self.check(self.raw(), place)
    }

    /// The payload's bytes, trusted to be those its name is the hash of:
    /// for a blob of a hot tier, which this process compressed from bytes
    /// it hashed, or read back from a WAL frame whose checksum held. A
    /// flush reads every hot payload twice (for its pack and for the text
    /// index), and hashing both was 2% of agent ingest. Payloads read from
    /// packs, and those a client asks for, are always checked.
    pub fn decompress_trusted(&self, place: &str) -> Result<Vec<u8>> {
        let raw = self.raw().map_err(|e| self.damaged(place, e.to_string()))?;
        if raw.len() as u64 != self.raw_len {
            return Err(self.damaged(place, format!("it holds {} bytes, not {}", raw.len(), self.raw_len)));
        }
        Ok(raw)
    }

    /// Decompresses the blob alone, into at most its declared length.
    fn raw(&self) -> std::io::Result<Vec<u8>> {
        checked_len(self.raw_len).and_then(|len| decompress_exact(&self.zstd, len))
    }

    /// `raw`, the outcome of decompressing this blob, if it is the
    /// payload's bytes; otherwise an error naming the payload and `place`.
    fn check(&self, raw: std::io::Result<Vec<u8>>, place: &str) -> Result<Vec<u8>> {
        let raw = raw.map_err(|e| self.damaged(place, e.to_string()))?;
        if raw.len() as u64 != self.raw_len || PayloadRef::of(&raw) != self.id {
            return Err(self.damaged(place, "its bytes do not hash to its name".into()));
        }
        Ok(raw)
    }

    /// The error for this payload, found damaged in `place`.
    fn damaged(&self, place: &str, detail: String) -> Error {
        Error::corrupt(format!("payload {} in {place}", self.id), detail)
    }
}

/// A payload's declared size, if a payload may be that big (it bounds the
/// allocation of decompressing it).
fn checked_len(len: u64) -> std::io::Result<usize> {
    if len > MAX_PAYLOAD_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("declares {len} bytes, more than a payload may hold"),
        ));
    }
    Ok(len as usize)
}

/// Decompresses a payload of exactly `len` bytes with one context per
/// thread.
fn decompress_exact(bytes: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    DECOMPRESSOR.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = Some(zstd::bulk::Decompressor::new()?);
        }
        match d.as_mut() {
            // Fails on a frame that holds more than `len` bytes.
            Some(d) => d.decompress(bytes, len),
            None => crate::envelope::zstd_decompress(bytes, len),
        }
    })
}

/// A WAL payload record's body: the blobs one after another, each
/// `[id 32][raw_len u64 LE][zlen u32 LE][zstd bytes]`. Encoded and decoded
/// here, side by side.
pub fn encode_blobs(blobs: &[Blob]) -> Vec<u8> {
    let mut out = Vec::with_capacity(blobs.iter().map(|b| 44 + b.zstd.len()).sum());
    for b in blobs {
        out.extend_from_slice(&b.id.0);
        out.extend_from_slice(&b.raw_len.to_le_bytes());
        out.extend_from_slice(&(b.zstd.len() as u32).to_le_bytes());
        out.extend_from_slice(&b.zstd);
    }
    out
}

pub fn decode_blobs(mut bytes: &[u8]) -> Result<Vec<Blob>> {
    let bad = |d: &str| Error::corrupt("WAL payload record", d.to_string());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Some((head, rest)) = bytes.split_first_chunk::<44>() else {
            return Err(bad("a payload header is cut short"));
        };
        let (id, rest_head) = head.split_at(32);
        let (raw_len, zlen) = rest_head.split_at(8);
        let raw_len = u64::from_le_bytes(raw_len.try_into().map_err(|_| bad("short header"))?);
        let zlen = u32::from_le_bytes(zlen.try_into().map_err(|_| bad("short header"))?) as usize;
        if zlen > rest.len() {
            return Err(bad("a payload is cut short"));
        }
        if raw_len > MAX_PAYLOAD_BYTES {
            return Err(bad("a payload is larger than the maximum"));
        }
        let (zstd, rest) = rest.split_at(zlen);
        out.push(Blob {
            id: PayloadRef(id.try_into().map_err(|_| bad("short id"))?),
            raw_len,
            zstd: zstd.into(),
        });
        bytes = rest;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_print_and_parse() {
        let id = PayloadRef::of(b"hello");
        let s = id.to_string();
        assert_eq!(s, format!("blake3:{}", blake3::hash(b"hello").to_hex()));
        assert_eq!(PayloadRef::parse(&s).unwrap(), id);
        assert!(
            PayloadRef::parse("sha256:00")
                .unwrap_err()
                .contains("does not start with")
        );
        assert!(PayloadRef::parse("blake3:abc").unwrap_err().contains("64 hex digits"));
        assert!(PayloadRef::parse(&format!("blake3:{}", "zz".repeat(32))).is_err());
    }

    #[test]
    fn reference_values_are_recognised_exactly() {
        let text = "é".repeat(300);
        let v = ref_value(PayloadRef::of(text.as_bytes()), &text);
        assert_eq!(as_ref_value(&v), Some((PayloadRef::of(text.as_bytes()), 600)));
        let AnyValue::Map(m) = &v else { panic!() };
        assert_eq!(m[2].value.as_str().unwrap().chars().count(), PREVIEW_CHARS);
        // A map a user sent that only looks like one is left alone.
        let mut other = m.clone();
        other.push(KeyValue::new("more", 1));
        assert_eq!(as_ref_value(&AnyValue::Map(other)), None);
        let mut bad_ref = m.clone();
        bad_ref[0].value = AnyValue::Str("blake3:nothex".into());
        assert_eq!(as_ref_value(&AnyValue::Map(bad_ref)), None);
        assert_eq!(as_ref_value(&AnyValue::Str("blake3:00".into())), None);
    }

    #[test]
    fn blobs_round_trip_and_damage_is_named() {
        let blobs: Vec<Blob> = [&b""[..], b"one", &[7u8; 10_000]]
            .iter()
            .map(|b| Blob::compress(PayloadRef::of(b), b).unwrap())
            .collect();
        let bytes = encode_blobs(&blobs);
        let back = decode_blobs(&bytes).unwrap();
        assert_eq!(back, blobs);
        assert_eq!(back[2].decompress("test").unwrap(), vec![7u8; 10_000]);
        assert!(decode_blobs(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_blobs(&bytes[..20]).is_err());
        // A blob whose bytes do not hash to its name is refused.
        let mut liar = blobs[1].clone();
        liar.id = PayloadRef::of(b"two");
        let err = liar.decompress("pack 7").unwrap_err().to_string();
        assert!(err.contains(&liar.id.to_string()) && err.contains("pack 7"), "{err}");
        // Trusted, it is not hashed, but its length is still checked.
        assert_eq!(liar.decompress_trusted("the hot tier").unwrap(), b"one");
        let mut short = blobs[2].clone();
        short.raw_len += 1;
        let err = short.decompress_trusted("the hot tier").unwrap_err().to_string();
        assert!(
            err.contains(&short.id.to_string()) && err.contains("not 10001"),
            "{err}"
        );
    }
}
