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
//! read alone. A zstd dictionary holding what they share lets each be
//! compressed against it: about a third of the bytes of compressing them
//! one by one (`tests::a_dictionary_shrinks_payloads_that_share_text`).
//!
//! The dictionary is *raw content*: whole payloads of the pack, chosen
//! evenly over it and unlike each other in their first bytes
//! ([`sample_dictionary`]). zstd trains dictionaries too, but training was
//! half the cost of writing a pack (a tenth of a second per pack), and on
//! agent payloads the raw sample compresses as well (system prompts come
//! whole, not as the fragments training keeps). zstd tells the two kinds
//! apart by the magic number a trained one starts with, so packs with
//! trained dictionaries still read. The dictionary comes from the pack's
//! payloads only, so a pack rewritten without some (garbage collection, an
//! erasure) samples a new one from those it keeps, and no byte of a
//! dropped payload stays behind in it.

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
const DICTIONARY_BYTES: usize = 128 << 10;
/// Payloads considered for a dictionary, spread evenly over the pack.
const DICTIONARY_CANDIDATES: usize = 64;
/// Most bytes of one payload in a dictionary.
const DICTIONARY_PAYLOAD_BYTES: usize = 32 << 10;
/// A candidate whose first this-many bytes equal those of one taken
/// already is left out: most likely it begins with the same system prompt.
const DICTIONARY_HEAD_BYTES: usize = 256;
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
            alone: b.alone_zstd(),
        }
    }
}

/// The bytes of a pack holding `inputs`, and its index. `raw(i)` is the
/// bytes of `inputs[i]`, asked for at most twice each (a sample for the
/// dictionary, then each to compress), so a pack never holds its payloads
/// uncompressed all at once. The pack gets a dictionary when it is big
/// enough to pay for one and the dictionary saves bytes.
pub fn encode(inputs: &[PackInput], raw: &dyn Fn(usize) -> Result<Vec<u8>>) -> Result<(Vec<u8>, PackIndex)> {
    let total: u64 = inputs.iter().map(|i| i.raw_len).sum();
    if inputs.len() >= DICTIONARY_MIN_PAYLOADS
        && total >= DICTIONARY_MIN_BYTES
        && let Some(dictionary) = sample_dictionary(inputs, raw)?
    {
        let with = encode_with(inputs, raw, Some(&dictionary))?;
        // Compressing alone costs nothing to find out when every payload's
        // bytes alone are at hand; otherwise the dictionary is kept (it
        // holds these very payloads). It must save a real share: a raw
        // dictionary compresses the payloads it holds to almost nothing,
        // which pays for its own bytes whether or not it helps the rest.
        let alone: Option<u64> = inputs.iter().map(|i| i.alone.map(|a| a.len() as u64)).sum();
        if alone.is_none_or(|alone| (with.0.len() as u64) < alone - alone / 32) {
            return Ok(with);
        }
    }
    encode_with(inputs, raw, None)
}

/// A raw-content dictionary: candidates spread evenly over `inputs`, each
/// up to [`DICTIONARY_PAYLOAD_BYTES`], skipping one that begins like a
/// candidate taken already, until [`DICTIONARY_BYTES`]. `None` when that
/// holds too little to be a dictionary.
fn sample_dictionary(inputs: &[PackInput], raw: &dyn Fn(usize) -> Result<Vec<u8>>) -> Result<Option<Vec<u8>>> {
    let every = inputs.len().div_ceil(DICTIONARY_CANDIDATES).max(1);
    let mut dictionary = Vec::with_capacity(DICTIONARY_BYTES);
    let mut heads: Vec<Vec<u8>> = Vec::new();
    for i in (0..inputs.len()).step_by(every) {
        let bytes = raw(i)?;
        let head = &bytes[..bytes.len().min(DICTIONARY_HEAD_BYTES)];
        if heads.iter().any(|h| h == head) {
            continue;
        }
        heads.push(head.to_vec());
        let take = bytes
            .len()
            .min(DICTIONARY_PAYLOAD_BYTES)
            .min(DICTIONARY_BYTES - dictionary.len());
        dictionary.extend_from_slice(&bytes[..take]);
        if dictionary.len() == DICTIONARY_BYTES {
            break;
        }
    }
    // zstd reads bytes that begin with its dictionary magic number as a
    // trained dictionary, and raw content must not.
    while dictionary.starts_with(&TRAINED_DICTIONARY_MAGIC) {
        dictionary.remove(0);
    }
    Ok((dictionary.len() >= MIN_DICTIONARY_BYTES).then_some(dictionary))
}

/// How a trained zstd dictionary begins.
const TRAINED_DICTIONARY_MAGIC: [u8; 4] = zstd::zstd_safe::zstd_sys::ZSTD_MAGIC_DICTIONARY.to_le_bytes();
/// Below this, a dictionary is not worth a pass over the pack.
const MIN_DICTIONARY_BYTES: usize = 1 << 10;

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
    let blob = Blob::alone(e.id, e.raw_len, zstd.as_ref().into());
    let Some(Dictionary(d)) = dictionary else {
        return blob.decompress(what);
    };
    let raw = super::checked_len(e.raw_len).and_then(|len| {
        let zstd_err = |code| std::io::Error::other(zstd::zstd_safe::get_error_name(code));
        let mut dctx = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| zstd_err(0))?;
        // Fails on a frame that holds more than the declared length.
        let mut out = Vec::with_capacity(len);
        dctx.decompress_using_ddict(&mut out, &blob.frame.zstd, d)
            .map_err(zstd_err)?;
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
            .map(|t| Blob::compress(PayloadRef::of(t), t).unwrap().frame.zstd.len())
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

    /// Raw content that begins like a trained dictionary would be read as
    /// one (and refused, or worse): the sample never begins that way.
    #[test]
    fn payloads_that_begin_like_a_trained_dictionary_still_round_trip() {
        let texts: Vec<Vec<u8>> = prompts(300)
            .into_iter()
            .map(|t| [&TRAINED_DICTIONARY_MAGIC[..], &TRAINED_DICTIONARY_MAGIC[..], &t].concat())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        let (bytes, index) = round_trip(&store, 1, &texts, true);
        let (offset, len) = index.dictionary.expect("a dictionary");
        let dictionary = &bytes[offset as usize..][..len as usize];
        assert!(!dictionary.starts_with(&TRAINED_DICTIONARY_MAGIC));
        assert!(len as usize > texts[0].len(), "it samples several payloads");
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
                zlen: b.frame.zstd.len() as u32,
                raw_len: b.raw_len,
            });
            bytes.extend_from_slice(&b.frame.zstd);
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
