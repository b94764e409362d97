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

/// Payloads compressed together, as one zstd frame: those a batch brings,
/// in the WAL, the hot tier and then, as they are, in a pack. A batch's
/// payloads share most of their bytes (a few system prompts, tool
/// schemas), and on agent payloads one frame of up to [`FRAME_RAW_BYTES`]
/// compresses about 3.5× faster and decompresses about 4× faster than the
/// same payloads one by one, at a quarter of the bytes (`zstd -b1` on
/// 1 MiB blocks against 9 KB ones). Reading one payload decompresses its
/// whole frame; readers of many (a flush) go through a [`FrameCache`].
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    zstd: Box<[u8]>,
    /// The bytes of its payloads, one after another.
    raw_len: u64,
}

/// A frame is cut before the payload that would take it past this many
/// bytes, so it holds one payload or at most this much. On the agent
/// corpus (`examples/codec_levels.rs` measured it), frames of 128 KiB
/// compress to 1/8.1 of their bytes at 640 MB/s, of 512 KiB to 1/11.1 at
/// 940 MB/s, of 1 MiB to 1/11.6 at 980 MB/s, about what packs compressing
/// each payload against a dictionary kept (1/11.5); decompressing one takes
/// about 0.4 ms, the price of reading one payload.
pub const FRAME_RAW_BYTES: usize = 1 << 20;

/// A payload as stored: its name, its size, and the frame holding its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub id: PayloadRef,
    pub raw_len: u64,
    frame: Arc<Frame>,
    /// Where its bytes start among the frame's.
    offset: u64,
}

/// zstd level of payload frames: the fastest, as frames are compressed on
/// the ingest path; level 3 would make them 4% smaller and 15% slower.
const ARRIVAL_ZSTD_LEVEL: i32 = 1;

/// The largest payload accepted (the WAL frame limit bounds a batch
/// anyway), and the largest frame.
pub const MAX_PAYLOAD_BYTES: u64 = 64 << 20;

/// Compresses `raw` at the arrival level, with one context per thread:
/// setting one up for each payload was a tenth of the compression time of
/// small prompts.
fn compress_arrival(raw: &[u8]) -> Result<Box<[u8]>> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    COMPRESSOR
        .with(|c| {
            let mut c = c.borrow_mut();
            if c.is_none() {
                *c = Some(zstd::bulk::Compressor::new(ARRIVAL_ZSTD_LEVEL)?);
            }
            match c.as_mut() {
                Some(c) => c.compress(raw),
                None => zstd::bulk::compress(raw, ARRIVAL_ZSTD_LEVEL),
            }
        })
        .map(Vec::into_boxed_slice)
        .map_err(|e| Error::io("compress payload", e))
}

/// Packs payloads into frames as they come: each frame is sealed before the
/// payload that would take it past [`FRAME_RAW_BYTES`].
#[derive(Default)]
pub struct FrameBuilder {
    pending: Vec<(PayloadRef, u64)>,
    raw: Vec<u8>,
    sealed: Vec<Blob>,
}

impl FrameBuilder {
    /// Adds payload `bytes`, named `id`.
    pub fn push(&mut self, id: PayloadRef, bytes: &[u8]) -> Result<()> {
        if !self.raw.is_empty() && self.raw.len() + bytes.len() > FRAME_RAW_BYTES {
            self.seal()?;
        }
        self.raw.extend_from_slice(bytes);
        self.pending.push((id, bytes.len() as u64));
        Ok(())
    }

    fn seal(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let frame = Arc::new(Frame {
            zstd: compress_arrival(&self.raw)?,
            raw_len: self.raw.len() as u64,
        });
        self.raw.clear();
        let mut offset = 0;
        for (id, raw_len) in self.pending.drain(..) {
            self.sealed.push(Blob {
                id,
                raw_len,
                frame: frame.clone(),
                offset,
            });
            offset += raw_len;
        }
        Ok(())
    }

    /// The payloads, frame by frame, each frame's in the order pushed.
    pub fn finish(mut self) -> Result<Vec<Blob>> {
        self.seal()?;
        Ok(self.sealed)
    }
}

impl Blob {
    /// A payload in a frame of its own.
    pub fn compress(id: PayloadRef, bytes: &[u8]) -> Result<Blob> {
        Ok(Blob::alone(id, bytes.len() as u64, compress_arrival(bytes)?))
    }

    /// The payload `id` of `raw_len` bytes, whose zstd frame is `zstd`.
    fn alone(id: PayloadRef, raw_len: u64, zstd: Box<[u8]>) -> Blob {
        Blob {
            id,
            raw_len,
            frame: Arc::new(Frame { zstd, raw_len }),
            offset: 0,
        }
    }

    /// Its share of its frame's compressed bytes (what holding it costs).
    pub fn stored_bytes(&self) -> u64 {
        let (z, raw) = (self.frame.zstd.len() as u128, self.frame.raw_len.max(1) as u128);
        (z * self.raw_len as u128 / raw) as u64
    }

    /// The payload's bytes, checked against its name: a payload whose
    /// bytes do not hash to it is an error naming it and `place`, never
    /// returned as valid.
    pub fn decompress(&self, place: &str) -> Result<Vec<u8>> {
        let raw = self
            .frame_bytes()
            .and_then(|frame| self.slice_of(&frame).map(<[u8]>::to_vec));
        self.check(raw, place)
    }

    /// The payload's bytes, trusted to be those its name is the hash of:
    /// for a blob of a hot tier, which this process compressed from bytes
    /// it hashed, or read back from a WAL frame whose checksum held. A
    /// flush reads every hot payload twice (for its pack and for the text
    /// index), and hashing both was 2% of agent ingest. Payloads read from
    /// packs, and those a client asks for, are always checked.
    pub fn decompress_trusted(&self, place: &str) -> Result<Vec<u8>> {
        let frame = self.frame_bytes().map_err(|e| self.damaged(place, e.to_string()))?;
        self.trusted_slice(&frame, place).map(<[u8]>::to_vec)
    }

    /// The payload within `frame`, its frame's bytes, length-checked.
    fn trusted_slice<'f>(&self, frame: &'f [u8], place: &str) -> Result<&'f [u8]> {
        self.slice_of(frame).map_err(|e| self.damaged(place, e.to_string()))
    }

    fn slice_of<'f>(&self, frame: &'f [u8]) -> std::io::Result<&'f [u8]> {
        let end = self
            .offset
            .checked_add(self.raw_len)
            .filter(|&e| e <= frame.len() as u64);
        match end {
            Some(end) => Ok(&frame[self.offset as usize..end as usize]),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "its frame holds {} bytes, not {} at offset {}",
                    frame.len(),
                    self.raw_len,
                    self.offset
                ),
            )),
        }
    }

    /// Decompresses the blob's frame, into at most its declared length.
    fn frame_bytes(&self) -> std::io::Result<Vec<u8>> {
        checked_len(self.frame.raw_len).and_then(|len| decompress_exact(&self.frame.zstd, len))
    }

    /// The address of its frame, the same for every payload it holds.
    fn frame_key(&self) -> usize {
        Arc::as_ptr(&self.frame) as usize
    }

    /// Its frame and where in it it starts: reading blobs in this order
    /// reads each frame once.
    pub fn place(&self) -> (u64, u64) {
        (self.frame_key() as u64, self.offset)
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

/// Sorts `blobs` so that those of one frame come together, in frame order:
/// read in that order through a [`FrameCache`], each frame is decompressed
/// once.
pub fn sort_by_frame(blobs: &mut [&Blob]) {
    blobs.sort_unstable_by_key(|b| (b.frame_key(), b.offset));
}

/// Frames decompressed already, so that reading many payloads of a frame
/// (a flush reads all of a tier's, in no particular order) decompresses it
/// once. Holds at most `cap` bytes of frames besides the last one read;
/// past that it starts over. Shared by threads; decompression happens
/// outside its lock.
pub struct FrameCache {
    cap: usize,
    inner: parking_lot::Mutex<CachedFrames>,
}

#[derive(Default)]
struct CachedFrames {
    /// By frame address, with the frame itself, which keeps the address
    /// from being reused while it is here.
    frames: crate::hash::FastMap<usize, (Arc<Frame>, Arc<[u8]>)>,
    bytes: usize,
}

impl FrameCache {
    pub fn new(cap: usize) -> FrameCache {
        FrameCache {
            cap,
            inner: Default::default(),
        }
    }

    /// [`Blob::decompress_trusted`], decompressing its frame only if this
    /// cache does not hold it.
    pub fn read_trusted(&self, b: &Blob, place: &str) -> Result<Vec<u8>> {
        let key = b.frame_key();
        let cached = self.inner.lock().frames.get(&key).map(|(_, raw)| raw.clone());
        let frame = match cached {
            Some(raw) => raw,
            None => {
                let raw: Arc<[u8]> = b.frame_bytes().map_err(|e| b.damaged(place, e.to_string()))?.into();
                let mut inner = self.inner.lock();
                if inner.bytes + raw.len() > self.cap {
                    inner.frames.clear();
                    inner.bytes = 0;
                }
                inner.bytes += raw.len();
                inner.frames.insert(key, (b.frame.clone(), raw.clone()));
                raw
            }
        };
        b.trusted_slice(&frame, place).map(<[u8]>::to_vec)
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

/// A WAL payload record's body (record kind 4): frames one after another,
/// each `[n u32][n × (id 32, raw_len u64)][zlen u32][zstd bytes]`, all
/// little-endian; the frame holds its `n` payloads' bytes in that order.
/// Encoded and decoded here, side by side.
///
/// `blobs` must come frame by frame, each frame's payloads in their order
/// in it and all of them, as [`FrameBuilder::finish`] gives them.
pub fn encode_frames(blobs: &[Blob]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for run in blobs.chunk_by(|a, b| Arc::ptr_eq(&a.frame, &b.frame)) {
        let frame = &run[0].frame;
        let mut offset = 0;
        for b in run {
            if b.offset != offset {
                return Err(Error::Other(format!("payload {} is out of its frame's order", b.id)));
            }
            offset += b.raw_len;
        }
        if offset != frame.raw_len {
            return Err(Error::Other(format!(
                "payloads of {offset} bytes do not fill their frame of {}",
                frame.raw_len
            )));
        }
        out.extend_from_slice(&(run.len() as u32).to_le_bytes());
        for b in run {
            out.extend_from_slice(&b.id.0);
            out.extend_from_slice(&b.raw_len.to_le_bytes());
        }
        out.extend_from_slice(&(frame.zstd.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame.zstd);
    }
    Ok(out)
}

pub fn decode_frames(mut bytes: &[u8]) -> Result<Vec<Blob>> {
    let bad = |d: &str| Error::corrupt("WAL payload record", d.to_string());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let n = take_u32(&mut bytes).ok_or_else(|| bad("a frame header is cut short"))? as usize;
        if n == 0 || n > bytes.len() / 40 {
            return Err(bad("a frame declares more payloads than it holds"));
        }
        let mut payloads = Vec::with_capacity(n);
        let mut raw_total = 0u64;
        for _ in 0..n {
            let (Some(id), Some(raw_len)) = (take::<32>(&mut bytes), take::<8>(&mut bytes).map(u64::from_le_bytes))
            else {
                return Err(bad("a payload header is cut short"));
            };
            raw_total = raw_total.saturating_add(raw_len);
            payloads.push((PayloadRef(id), raw_len));
        }
        if raw_total > MAX_PAYLOAD_BYTES {
            return Err(bad("a frame is larger than the maximum"));
        }
        let zlen = take_u32(&mut bytes).ok_or_else(|| bad("a frame header is cut short"))? as usize;
        if zlen > bytes.len() {
            return Err(bad("a frame is cut short"));
        }
        let (zstd, rest) = bytes.split_at(zlen);
        bytes = rest;
        let frame = Arc::new(Frame {
            zstd: zstd.into(),
            raw_len: raw_total,
        });
        let mut offset = 0;
        for (id, raw_len) in payloads {
            out.push(Blob {
                id,
                raw_len,
                frame: frame.clone(),
                offset,
            });
            offset += raw_len;
        }
    }
    Ok(out)
}

/// A WAL payload record of kind 3, which this build no longer writes: the
/// blobs one after another, each `[id 32][raw_len u64 LE][zlen u32 LE][zstd
/// bytes]`, compressed one by one.
pub fn decode_legacy_blobs(mut bytes: &[u8]) -> Result<Vec<Blob>> {
    let bad = |d: &str| Error::corrupt("WAL payload record", d.to_string());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (Some(id), Some(raw_len), Some(zlen)) = (
            take::<32>(&mut bytes),
            take::<8>(&mut bytes).map(u64::from_le_bytes),
            take_u32(&mut bytes),
        ) else {
            return Err(bad("a payload header is cut short"));
        };
        let zlen = zlen as usize;
        if zlen > bytes.len() {
            return Err(bad("a payload is cut short"));
        }
        if raw_len > MAX_PAYLOAD_BYTES {
            return Err(bad("a payload is larger than the maximum"));
        }
        let (zstd, rest) = bytes.split_at(zlen);
        out.push(Blob::alone(PayloadRef(id), raw_len, zstd.into()));
        bytes = rest;
    }
    Ok(out)
}

/// The next `N` bytes of `bytes`, consumed.
fn take<const N: usize>(bytes: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = bytes.split_first_chunk::<N>()?;
    *bytes = rest;
    Some(*head)
}

fn take_u32(bytes: &mut &[u8]) -> Option<u32> {
    take::<4>(bytes).map(u32::from_le_bytes)
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
    fn frames_round_trip_and_damage_is_named() {
        let big = vec![7u8; 10_000];
        let huge: Vec<u8> = (0..FRAME_RAW_BYTES as u32 + 10).map(|i| (i % 251) as u8).collect();
        let mut fb = FrameBuilder::default();
        let payloads: [&[u8]; 5] = [b"", b"one", &big, &huge, b"after"];
        for p in payloads {
            fb.push(PayloadRef::of(p), p).unwrap();
        }
        let blobs = fb.finish().unwrap();
        // "huge" cannot join the first frame: it would take it past the cap.
        assert!(Arc::ptr_eq(&blobs[0].frame, &blobs[2].frame));
        assert!(!Arc::ptr_eq(&blobs[2].frame, &blobs[3].frame));
        assert!(
            !Arc::ptr_eq(&blobs[3].frame, &blobs[4].frame),
            "nor can anything join huge"
        );
        let bytes = encode_frames(&blobs).unwrap();
        let back = decode_frames(&bytes).unwrap();
        assert_eq!(back, blobs);
        for (b, p) in back.iter().zip(payloads) {
            assert_eq!(b.decompress("test").unwrap(), p);
            assert_eq!(b.decompress_trusted("test").unwrap(), p);
        }
        let cache = FrameCache::new(0);
        for (b, p) in back.iter().zip(payloads).rev() {
            assert_eq!(cache.read_trusted(b, "test").unwrap(), p);
        }
        for cut in [1, 20, 45, bytes.len() - 1] {
            assert!(decode_frames(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // Out of its frame's order, a payload list does not encode.
        let swapped = [blobs[1].clone(), blobs[0].clone()];
        assert!(encode_frames(&swapped).is_err());
        // A blob whose bytes do not hash to its name is refused.
        let mut liar = blobs[1].clone();
        liar.id = PayloadRef::of(b"two");
        let err = liar.decompress("pack 7").unwrap_err().to_string();
        assert!(err.contains(&liar.id.to_string()) && err.contains("pack 7"), "{err}");
        // Trusted, it is not hashed, but where it lies is still checked.
        assert_eq!(liar.decompress_trusted("the hot tier").unwrap(), b"one");
        let mut long = blobs[4].clone();
        long.raw_len = 1 << 20;
        let err = long.decompress_trusted("the hot tier").unwrap_err().to_string();
        assert!(
            err.contains(&long.id.to_string()) && err.contains("not 1048576"),
            "{err}"
        );
    }

    #[test]
    fn legacy_payload_records_still_decode() {
        let encode = |p: &[u8]| {
            let z = zstd::bulk::compress(p, 1).unwrap();
            let mut out = PayloadRef::of(p).0.to_vec();
            out.extend_from_slice(&(p.len() as u64).to_le_bytes());
            out.extend_from_slice(&(z.len() as u32).to_le_bytes());
            out.extend_from_slice(&z);
            out
        };
        let body = [encode(b"first payload"), encode(&[9u8; 5000])].concat();
        let blobs = decode_legacy_blobs(&body).unwrap();
        assert_eq!(blobs[0].decompress("wal").unwrap(), b"first payload");
        assert_eq!(blobs[1].decompress("wal").unwrap(), vec![9u8; 5000]);
        assert!(blobs.iter().all(|b| b.offset == 0 && b.raw_len == b.frame.raw_len));
        assert!(decode_legacy_blobs(&body[..body.len() - 1]).is_err());
    }
}
