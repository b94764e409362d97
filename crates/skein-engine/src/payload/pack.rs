//! A pack: an immutable object holding many payloads,
//! `payloads/<id:020>.pack`, written once through the part store (temp →
//! fsync → rename) and never changed:
//!
//! ```text
//! [zstd dictionary, if the pack has one]
//! [zstd bytes of payload 0][zstd bytes of payload 1]…
//! [index: the SKEINPAK envelope around a postcard PackIndex]
//! [index offset: u64 LE]
//! ```
//!
//! Opening a pack reads its last 8 bytes and its index only; a payload is
//! one range read at `offset..offset + zlen`, decompressed (with the
//! pack's dictionary, when it has one) and checked against its hash. An
//! outside reader resolves a reference the same way: find the entry whose
//! `id` is the reference's hash in some pack's index.
//!
//! Why a dictionary: agent payloads share most of their bytes with each
//! other (a handful of system prompts and tool schemas, conversations that
//! repeat their earlier turns), yet each is compressed alone so it can be
//! read alone. A zstd dictionary trained on a sample of the pack's own
//! payloads carries what they share, and each payload is compressed
//! against it: about a third of the bytes of compressing them one by one
//! (`tests::a_dictionary_shrinks_payloads_that_share_text`). It is trained
//! from the pack's payloads only, so a pack rewritten without some
//! payloads (garbage collection, an erasure) trains a new one from those
//! it keeps, and no byte of a dropped payload stays behind in it.

use serde::{Deserialize, Serialize};

use super::{Blob, PayloadRef};
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::storage::ObjectSource;

/// The pack index's envelope. Version 1 had no dictionary: its body was
/// the bare list of entries.
pub const PACK_INDEX: Envelope = Envelope {
    magic: b"SKEINPAK",
    version: 2,
    what: "payload pack index",
    max_body: 1 << 30,
};
const FIRST_VERSION: u32 = 1;

/// Where one payload sits in its pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackEntry {
    pub id: PayloadRef,
    pub offset: u64,
    pub zlen: u32,
    pub raw_len: u64,
}

/// A pack's index: its dictionary, if any, and its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackIndex {
    /// Where the zstd dictionary every payload of the pack was compressed
    /// with lies, as (offset, length); `None`: each was compressed alone.
    pub dictionary: Option<(u64, u32)>,
    pub entries: Vec<PackEntry>,
}

/// Most bytes a pack's dictionary holds.
const DICTIONARY_BYTES: usize = 64 << 10;
/// Most payload bytes a dictionary is trained on (a sample spread over the
/// pack): enough to find what its payloads share, at a tenth of a second.
/// (On the agent corpus, 1 MiB trained no dictionary for some packs.)
const SAMPLE_BYTES: u64 = 2 << 20;
/// A pack gets a dictionary only with at least this many payloads of at
/// least this many bytes in all: below, it could not pay for itself.
const DICTIONARY_MIN_PAYLOADS: usize = 32;
const DICTIONARY_MIN_BYTES: u64 = 512 << 10;
/// zstd level of payloads in packs: they are written once and read rarely.
const PAYLOAD_ZSTD_LEVEL: i32 = 3;

/// The object name of pack `id`.
pub fn pack_name(id: u64) -> String {
    format!("payloads/{id:020}.pack")
}

/// The pack id of an object name, as [`pack_name`] makes it.
pub fn parse_pack_name(name: &str) -> Option<u64> {
    name.strip_prefix("payloads/")?.strip_suffix(".pack")?.parse().ok()
}

/// A payload going into a pack.
pub struct PackInput<'a> {
    pub id: PayloadRef,
    pub raw_len: u64,
    /// Its zstd bytes compressed alone, if at hand (a hot tier's blob).
    pub alone: Option<&'a [u8]>,
}

impl<'a> From<&'a Blob> for PackInput<'a> {
    fn from(b: &'a Blob) -> PackInput<'a> {
        PackInput {
            id: b.id,
            raw_len: b.raw_len,
            alone: Some(&b.zstd),
        }
    }
}

/// The bytes of a pack holding `inputs`, and its index. `raw(i)` is the
/// bytes of `inputs[i]`, asked for at most twice each (a sample to train
/// on, then each to compress), so a pack never holds its payloads
/// uncompressed all at once. The pack gets a dictionary when it is big
/// enough to pay for one and the dictionary saves bytes.
pub fn encode(inputs: &[PackInput], raw: &dyn Fn(usize) -> Result<Vec<u8>>) -> Result<(Vec<u8>, PackIndex)> {
    let total: u64 = inputs.iter().map(|i| i.raw_len).sum();
    if inputs.len() >= DICTIONARY_MIN_PAYLOADS
        && total >= DICTIONARY_MIN_BYTES
        && let Some(dictionary) = train(inputs, total, raw)?
    {
        let with = encode_with(inputs, raw, Some(&dictionary))?;
        // Compressing alone costs nothing to find out when every payload's
        // bytes alone are at hand; otherwise the dictionary is kept (it was
        // trained on these very payloads).
        let alone: Option<u64> = inputs.iter().map(|i| i.alone.map(|a| a.len() as u64)).sum();
        if alone.is_none_or(|alone| (with.0.len() as u64) < alone + 64 * inputs.len() as u64) {
            return Ok(with);
        }
    }
    encode_with(inputs, raw, None)
}

/// A dictionary trained on a sample spread evenly over `inputs`, or
/// `None` when zstd finds none to train (too little, or too alike).
fn train(inputs: &[PackInput], total: u64, raw: &dyn Fn(usize) -> Result<Vec<u8>>) -> Result<Option<Vec<u8>>> {
    let every = total.div_ceil(SAMPLE_BYTES).max(1) as usize;
    let mut samples = Vec::new();
    for i in (0..inputs.len()).step_by(every) {
        samples.push(raw(i)?);
    }
    Ok(zstd::dict::from_samples(&samples, DICTIONARY_BYTES).ok())
}

fn encode_with(
    inputs: &[PackInput],
    raw: &dyn Fn(usize) -> Result<Vec<u8>>,
    dictionary: Option<&[u8]>,
) -> Result<(Vec<u8>, PackIndex)> {
    let compress_err = |e| Error::io("compress payload", e);
    let mut out = Vec::new();
    let mut index = PackIndex::default();
    let mut compressor = match dictionary {
        Some(d) => {
            index.dictionary = Some((0, d.len() as u32));
            out.extend_from_slice(d);
            Some(zstd::bulk::Compressor::with_dictionary(PAYLOAD_ZSTD_LEVEL, d).map_err(compress_err)?)
        }
        None => None,
    };
    for (i, input) in inputs.iter().enumerate() {
        let offset = out.len() as u64;
        match (&mut compressor, input.alone) {
            (Some(c), _) => out.extend_from_slice(&c.compress(&raw(i)?).map_err(compress_err)?),
            (None, Some(alone)) => out.extend_from_slice(alone),
            (None, None) => {
                out.extend_from_slice(&zstd::bulk::compress(&raw(i)?, PAYLOAD_ZSTD_LEVEL).map_err(compress_err)?)
            }
        }
        index.entries.push(PackEntry {
            id: input.id,
            offset,
            zlen: (out.len() as u64 - offset) as u32,
            raw_len: input.raw_len,
        });
    }
    let index_offset = out.len() as u64;
    let body = postcard::to_stdvec(&index).map_err(|e| Error::Other(format!("encode pack index: {e}")))?;
    out.extend_from_slice(&PACK_INDEX.seal(&body, 3)?);
    out.extend_from_slice(&index_offset.to_le_bytes());
    Ok((out, index))
}

/// Reads a pack's index, checking that its dictionary and every entry lie
/// inside the data.
pub fn read_index(src: &dyn ObjectSource, what: &str) -> Result<PackIndex> {
    let bad = |d: String| Error::corrupt(what.to_string(), d);
    let len = src.len();
    if len < 8 {
        return Err(bad(format!("{len} bytes is too short for a pack")));
    }
    let tail = src
        .read_at(len - 8, 8)
        .map_err(|e| Error::io(format!("read {what}"), e))?;
    let index_offset = u64::from_le_bytes(tail[..].try_into().map_err(|_| bad("short tail".into()))?);
    if index_offset > len - 8 {
        return Err(bad(format!(
            "index offset {index_offset} is past the end ({len} bytes)"
        )));
    }
    let index = src
        .read_at(index_offset, (len - 8 - index_offset) as usize)
        .map_err(|e| Error::io(format!("read {what}"), e))?;
    let (version, body) = PACK_INDEX
        .open_since(&index, FIRST_VERSION)
        .map_err(|e| bad(e.to_string()))?;
    let index: PackIndex = if version == FIRST_VERSION {
        PackIndex {
            dictionary: None,
            entries: postcard::from_bytes(&body).map_err(|e| bad(format!("index: {e}")))?,
        }
    } else {
        postcard::from_bytes(&body).map_err(|e| bad(format!("index: {e}")))?
    };
    let inside = |offset: u64, len: u64| offset.checked_add(len).is_some_and(|end| end <= index_offset);
    if let Some((offset, len)) = index.dictionary
        && !inside(offset, len as u64)
    {
        return Err(bad("its dictionary lies outside the pack's data".into()));
    }
    if let Some(e) = index.entries.iter().find(|e| !inside(e.offset, e.zlen as u64)) {
        return Err(bad(format!("payload {} lies outside the pack's data", e.id)));
    }
    Ok(index)
}

/// A pack's dictionary, ready to decompress with.
pub struct Dictionary(zstd::zstd_safe::DDict<'static>);

/// Reads the dictionary at `(offset, len)` of a pack.
pub fn read_dictionary(src: &dyn ObjectSource, (offset, len): (u64, u32), what: &str) -> Result<Dictionary> {
    let bytes = src
        .read_at(offset, len as usize)
        .map_err(|e| Error::io(format!("read the dictionary of {what}"), e))?;
    zstd::zstd_safe::DDict::try_create(&bytes)
        .map(Dictionary)
        .ok_or_else(|| Error::corrupt(format!("the dictionary of {what}"), "zstd refuses it"))
}

/// Reads one payload: its bytes, decompressed with `dictionary` (the
/// pack's, when it has one) and checked against its name.
pub fn read_payload(
    src: &dyn ObjectSource,
    e: &PackEntry,
    dictionary: Option<&Dictionary>,
    what: &str,
) -> Result<Vec<u8>> {
    let zstd = src
        .read_at(e.offset, e.zlen as usize)
        .map_err(|err| Error::io(format!("read payload {} from {what}", e.id), err))?;
    let blob = Blob {
        id: e.id,
        raw_len: e.raw_len,
        zstd: zstd.as_ref().into(),
    };
    let Some(Dictionary(d)) = dictionary else {
        return blob.decompress(what);
    };
    let raw = super::checked_len(e.raw_len).and_then(|len| {
        let zstd_err = |code| std::io::Error::other(zstd::zstd_safe::get_error_name(code));
        let mut dctx = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| zstd_err(0))?;
        // Fails on a frame that holds more than the declared length.
        let mut out = Vec::with_capacity(len);
        dctx.decompress_using_ddict(&mut out, &blob.zstd, d).map_err(zstd_err)?;
        Ok(out)
    });
    blob.check(raw, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LocalStore, PartStore};

    fn inputs(blobs: &[Blob]) -> Vec<PackInput<'_>> {
        blobs.iter().map(PackInput::from).collect()
    }

    /// Writes a pack of `texts` as pack `id` and reads every payload back.
    fn round_trip(store: &LocalStore, id: u64, texts: &[Vec<u8>], alone: bool) -> (Vec<u8>, PackIndex) {
        let blobs: Vec<Blob> = texts
            .iter()
            .map(|t| Blob::compress(PayloadRef::of(t), t).unwrap())
            .collect();
        let mut ins = inputs(&blobs);
        if !alone {
            ins.iter_mut().for_each(|i| i.alone = None);
        }
        let (bytes, index) = encode(&ins, &|i| Ok(texts[i].clone())).unwrap();
        store.put(&pack_name(id), &bytes).unwrap();
        let src = store.open(&pack_name(id)).unwrap();
        let read = read_index(&*src, "the pack").unwrap();
        assert_eq!(read, index);
        let dictionary = read.dictionary.map(|d| read_dictionary(&*src, d, "the pack").unwrap());
        for (e, t) in read.entries.iter().zip(texts) {
            assert_eq!(read_payload(&*src, e, dictionary.as_ref(), "the pack").unwrap(), *t);
        }
        (bytes, index)
    }

    /// Words drawn by a xorshift generator from a vocabulary of 1,000.
    fn words(state: &mut u64, n: usize) -> String {
        (0..n)
            .map(|_| {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                let w = *state % 1000;
                format!("{}{w}", ["re", "con", "pro", "ex", "tool"][(w % 5) as usize])
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Agent-like payloads: one of a few long shared prompts, then a turn
    /// of its own.
    fn prompts(n: usize) -> Vec<Vec<u8>> {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let shared: Vec<String> = (0..3).map(|_| words(&mut state, 600)).collect();
        (0..n)
            .map(|i| format!("{} user turn {i}: {}", shared[i % 3], words(&mut state, 40)).into_bytes())
            .collect()
    }

    #[test]
    fn packs_round_trip_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        let texts: Vec<Vec<u8>> = vec![b"".to_vec(), b"first".to_vec(), vec![3u8; 50_000]];
        let (bytes, index) = round_trip(&store, 1, &texts, true);
        assert_eq!(index.dictionary, None, "three payloads: too few for a dictionary");
        assert_eq!(parse_pack_name(&pack_name(1)), Some(1));
        assert_eq!(parse_pack_name("payloads/x.pack"), None);
        // A damaged index or tail is an error naming the pack.
        for at in [bytes.len() - 1, bytes.len() - 20] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            store.put(&pack_name(2), &damaged).unwrap();
            let err = read_index(&*store.open(&pack_name(2)).unwrap(), "pack 2").unwrap_err();
            assert!(err.to_string().contains("pack 2"), "{err}");
        }
        // Damaged payload bytes read, but fail their hash.
        let mut damaged = bytes.clone();
        damaged[index.entries[2].offset as usize + 5] ^= 0x01;
        store.put(&pack_name(3), &damaged).unwrap();
        let src = store.open(&pack_name(3)).unwrap();
        let e = read_index(&*src, "pack 3").unwrap().entries[2];
        let err = read_payload(&*src, &e, None, "pack 3").unwrap_err().to_string();
        assert!(err.contains("pack 3") && err.contains(&e.id.to_string()), "{err}");
    }

    #[test]
    fn a_dictionary_shrinks_payloads_that_share_text() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        let texts = prompts(300);
        let alone: usize = texts
            .iter()
            .map(|t| Blob::compress(PayloadRef::of(t), t).unwrap().zstd.len())
            .sum();
        for (id, have_alone) in [(1, true), (2, false)] {
            let (bytes, index) = round_trip(&store, id, &texts, have_alone);
            let (_, dict_len) = index.dictionary.expect("a dictionary");
            assert!(dict_len > 0);
            assert!(
                bytes.len() * 2 < alone,
                "{} bytes with a dictionary, {alone} alone",
                bytes.len()
            );
        }
        // A damaged dictionary makes payloads fail their check, naming them.
        let (bytes, index) = round_trip(&store, 3, &texts, true);
        let (offset, len) = index.dictionary.unwrap();
        let mut damaged = bytes.clone();
        damaged[(offset + len as u64 / 2) as usize] ^= 0x10;
        store.put(&pack_name(4), &damaged).unwrap();
        let src = store.open(&pack_name(4)).unwrap();
        let d = read_dictionary(&*src, (offset, len), "pack 4").unwrap();
        let failed = index
            .entries
            .iter()
            .filter(|e| read_payload(&*src, e, Some(&d), "pack 4").is_err())
            .count();
        assert!(failed > 0, "a damaged dictionary went unnoticed");
    }

    #[test]
    fn a_dictionary_that_saves_nothing_is_left_out() {
        // Random bytes share nothing: compressed alone they are as small.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let texts: Vec<Vec<u8>> = (0..64)
            .map(|_| {
                (0..16 << 10)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        let (_, index) = round_trip(&store, 1, &texts, true);
        assert_eq!(index.dictionary, None);
    }

    #[test]
    fn packs_written_before_dictionaries_still_read() {
        let texts = prompts(40);
        let blobs: Vec<Blob> = texts
            .iter()
            .map(|t| Blob::compress(PayloadRef::of(t), t).unwrap())
            .collect();
        // Version 1: the frames, then the bare list of entries.
        let mut bytes = Vec::new();
        let mut entries = Vec::new();
        for b in &blobs {
            entries.push(PackEntry {
                id: b.id,
                offset: bytes.len() as u64,
                zlen: b.zstd.len() as u32,
                raw_len: b.raw_len,
            });
            bytes.extend_from_slice(&b.zstd);
        }
        let index_offset = bytes.len() as u64;
        let v1 = Envelope {
            version: 1,
            ..PACK_INDEX
        };
        bytes.extend_from_slice(&v1.seal(&postcard::to_stdvec(&entries).unwrap(), 3).unwrap());
        bytes.extend_from_slice(&index_offset.to_le_bytes());
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        store.put(&pack_name(1), &bytes).unwrap();
        let src = store.open(&pack_name(1)).unwrap();
        let index = read_index(&*src, "pack 1").unwrap();
        assert_eq!((index.dictionary, &index.entries), (None, &entries));
        for (e, t) in index.entries.iter().zip(&texts) {
            assert_eq!(read_payload(&*src, e, None, "pack 1").unwrap(), *t);
        }
    }
}
