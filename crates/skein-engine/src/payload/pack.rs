//! A pack: an immutable object holding many payloads,
//! `payloads/<id:020>.pack`, written once through the part store (temp →
//! fsync → rename) and never changed:
//!
//! ```text
//! [zstd frame 0][zstd frame 1]…   each frame: the bytes of one or more
//!                                 payloads, one after another
//! [index: the SKEINPAK envelope around a postcard PackIndex]
//! [index offset: u64 LE]
//! ```
//!
//! The frames are the ones payloads arrive in ([`super::Frame`]: a batch's
//! new payloads compressed together, up to [`super::FRAME_RAW_BYTES`]),
//! written as they are. A flush used to decompress every payload and
//! compress each alone against a dictionary sampled from the pack, so that
//! one could be read without the others; that was a tenth of the CPU of
//! agent ingest, for about the same bytes on disk (frames of a megabyte
//! share their system prompts as well as a dictionary did). Reading one
//! payload now decompresses its frame (a megabyte at most: a few hundred
//! microseconds), which a point read can afford: records keep a preview,
//! and the payload itself is read only when asked for.
//!
//! Opening a pack reads its last 8 bytes and its index only; a payload is
//! one range read of its frame, decompressed, sliced and checked against
//! its hash. An outside reader resolves a reference the same way: find the
//! entry whose `id` is the reference's hash in some pack's index.
//!
//! Versions 1 and 2 of the index, which earlier builds wrote, still read:
//! each payload a zstd frame of its own (version 2: compressed against the
//! pack's dictionary, raw content stored at the start of the pack). A
//! garbage collection that rewrites such a pack writes version 3.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Blob, PayloadRef};
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::storage::ObjectSource;

/// The pack index's envelope. Version 1 was the bare list of payloads each
/// compressed alone, version 2 added a dictionary; version 3 has frames.
pub const PACK_INDEX: Envelope = Envelope {
    magic: b"SKEINPAK",
    version: 3,
    what: "payload pack index",
    max_body: 1 << 30,
};
const FIRST_VERSION: u32 = 1;
const DICTIONARY_VERSION: u32 = 2;

/// A zstd frame of a pack: where it lies, and how many bytes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackFrame {
    pub offset: u64,
    pub zlen: u32,
    pub raw_len: u64,
}

/// Where one payload sits in its pack: bytes `at .. at + raw_len` of
/// `frame`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    pub id: PayloadRef,
    pub frame: PackFrame,
    pub at: u64,
    pub raw_len: u64,
}

impl PackEntry {
    /// Its share of its frame's compressed bytes (all of them when it is
    /// the frame's only payload).
    pub fn stored_bytes(&self) -> u64 {
        let (z, raw) = (u128::from(self.frame.zlen), u128::from(self.frame.raw_len));
        if self.raw_len == self.frame.raw_len {
            return self.frame.zlen.into();
        }
        (z * u128::from(self.raw_len) / raw.max(1)) as u64
    }
}

/// A pack's index: its dictionary, if it has one (version 2 only), and its
/// entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackIndex {
    /// Where the zstd dictionary every payload of the pack was compressed
    /// with lies, as (offset, length); `None`: none was.
    pub dictionary: Option<(u64, u32)>,
    pub entries: Vec<PackEntry>,
}

/// The index as version 3 writes it: each frame once, and the entries
/// pointing into them by number.
#[derive(Clone, Serialize, Deserialize)]
struct IndexV3 {
    frames: Vec<PackFrame>,
    entries: Vec<EntryV3>,
}

#[derive(Clone, Serialize, Deserialize)]
struct EntryV3 {
    id: PayloadRef,
    frame: u32,
    at: u64,
    raw_len: u64,
}

/// An entry of versions 1 and 2: a payload compressed alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct AloneEntry {
    id: PayloadRef,
    offset: u64,
    zlen: u32,
    raw_len: u64,
}

/// The index of version 2.
#[derive(Serialize, Deserialize)]
struct IndexV2 {
    dictionary: Option<(u64, u32)>,
    entries: Vec<AloneEntry>,
}

impl From<AloneEntry> for PackEntry {
    fn from(e: AloneEntry) -> PackEntry {
        PackEntry {
            id: e.id,
            frame: PackFrame {
                offset: e.offset,
                zlen: e.zlen,
                raw_len: e.raw_len,
            },
            at: 0,
            raw_len: e.raw_len,
        }
    }
}

/// The object name of pack `id`.
pub fn pack_name(id: u64) -> String {
    format!("payloads/{id:020}.pack")
}

/// The pack id of an object name, as [`pack_name`] makes it.
pub fn parse_pack_name(name: &str) -> Option<u64> {
    name.strip_prefix("payloads/")?.strip_suffix(".pack")?.parse().ok()
}

/// The bytes of a pack holding `blobs`, and its index. Each frame holding
/// one of them is written whole, as it is, once for each run of blobs of
/// that frame: sort them with [`super::sort_by_frame`]. The caller makes
/// sure a frame holds no bytes that must not be kept (see
/// [`PayloadStore::write_pack`](super::PayloadStore::write_pack)).
pub fn encode(blobs: &[&Blob]) -> Result<(Vec<u8>, PackIndex)> {
    let mut out = Vec::new();
    let mut wire = IndexV3 {
        frames: Vec::new(),
        entries: Vec::with_capacity(blobs.len()),
    };
    let mut index = PackIndex::default();
    for run in blobs.chunk_by(|a, b| Arc::ptr_eq(&a.frame, &b.frame)) {
        let frame = &run[0].frame;
        let at = PackFrame {
            offset: out.len() as u64,
            zlen: u32::try_from(frame.zstd.len())
                .map_err(|_| Error::Other(format!("a payload frame of {} bytes", frame.zstd.len())))?,
            raw_len: frame.raw_len,
        };
        let number = wire.frames.len() as u32;
        wire.frames.push(at);
        out.extend_from_slice(&frame.zstd);
        for b in run {
            wire.entries.push(EntryV3 {
                id: b.id,
                frame: number,
                at: b.offset,
                raw_len: b.raw_len,
            });
            index.entries.push(PackEntry {
                id: b.id,
                frame: at,
                at: b.offset,
                raw_len: b.raw_len,
            });
        }
    }
    let index_offset = out.len() as u64;
    let body = postcard::to_stdvec(&wire).map_err(|e| Error::Other(format!("encode pack index: {e}")))?;
    out.extend_from_slice(&PACK_INDEX.seal(&body, 3)?);
    out.extend_from_slice(&index_offset.to_le_bytes());
    Ok((out, index))
}

/// Reads a pack's index, checking that its dictionary and every frame lie
/// inside the data, and every entry inside its frame.
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
    let decode_err = |e: postcard::Error| bad(format!("index: {e}"));
    let index = match version {
        FIRST_VERSION => PackIndex {
            dictionary: None,
            entries: postcard::from_bytes::<Vec<AloneEntry>>(&body)
                .map_err(decode_err)?
                .into_iter()
                .map(PackEntry::from)
                .collect(),
        },
        DICTIONARY_VERSION => {
            let v2: IndexV2 = postcard::from_bytes(&body).map_err(decode_err)?;
            PackIndex {
                dictionary: v2.dictionary,
                entries: v2.entries.into_iter().map(PackEntry::from).collect(),
            }
        }
        _ => {
            let v3: IndexV3 = postcard::from_bytes(&body).map_err(decode_err)?;
            let mut entries = Vec::with_capacity(v3.entries.len());
            for e in v3.entries {
                let frame = *v3
                    .frames
                    .get(e.frame as usize)
                    .ok_or_else(|| bad(format!("payload {} is in frame {}, which it lacks", e.id, e.frame)))?;
                entries.push(PackEntry {
                    id: e.id,
                    frame,
                    at: e.at,
                    raw_len: e.raw_len,
                });
            }
            PackIndex {
                dictionary: None,
                entries,
            }
        }
    };
    let inside = |offset: u64, len: u64| offset.checked_add(len).is_some_and(|end| end <= index_offset);
    if let Some((offset, len)) = index.dictionary
        && !inside(offset, len as u64)
    {
        return Err(bad("its dictionary lies outside the pack's data".into()));
    }
    for e in &index.entries {
        if !inside(e.frame.offset, e.frame.zlen as u64) {
            return Err(bad(format!("payload {} lies outside the pack's data", e.id)));
        }
        if e.frame.raw_len > super::MAX_PAYLOAD_BYTES
            || e.at.checked_add(e.raw_len).is_none_or(|end| end > e.frame.raw_len)
        {
            return Err(bad(format!("payload {} lies outside its frame", e.id)));
        }
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

/// The bytes of the frame `e` is in, decompressed (with `dictionary`, the
/// pack's, when it has one); a frame that does not decompress to its
/// declared length is an error naming the payload.
pub fn read_frame(
    src: &dyn ObjectSource,
    e: &PackEntry,
    dictionary: Option<&Dictionary>,
    what: &str,
) -> Result<Vec<u8>> {
    let f = e.frame;
    let zstd = src
        .read_at(f.offset, f.zlen as usize)
        .map_err(|err| Error::io(format!("read payload {} from {what}", e.id), err))?;
    let raw = super::checked_len(f.raw_len).and_then(|len| match dictionary {
        None => super::decompress_exact(&zstd, len),
        Some(Dictionary(d)) => {
            let zstd_err = |code| std::io::Error::other(zstd::zstd_safe::get_error_name(code));
            let mut dctx = zstd::zstd_safe::DCtx::try_create().ok_or_else(|| zstd_err(0))?;
            // Fails on a frame that holds more than the declared length.
            let mut out = Vec::with_capacity(len);
            dctx.decompress_using_ddict(&mut out, &zstd, d).map_err(zstd_err)?;
            Ok(out)
        }
    });
    match raw {
        Ok(raw) if raw.len() as u64 == f.raw_len => Ok(raw),
        Ok(raw) => Err(damaged(
            e,
            what,
            format!("its frame holds {} bytes, not {}", raw.len(), f.raw_len),
        )),
        Err(err) => Err(damaged(e, what, err.to_string())),
    }
}

/// Payload `e` out of `frame`, its frame's bytes ([`read_frame`]), checked
/// against its name: a payload whose bytes do not hash to it is an error
/// naming it and the pack, never returned as valid.
pub fn payload_in_frame(frame: &[u8], e: &PackEntry, what: &str) -> Result<Vec<u8>> {
    let bytes = usize::try_from(e.at)
        .ok()
        .zip(usize::try_from(e.raw_len).ok())
        .and_then(|(at, len)| frame.get(at..at.checked_add(len)?))
        .ok_or_else(|| damaged(e, what, format!("its frame holds {} bytes", frame.len())))?;
    if PayloadRef::of(bytes) != e.id {
        return Err(damaged(e, what, "its bytes do not hash to its name".into()));
    }
    Ok(bytes.to_vec())
}

fn damaged(e: &PackEntry, what: &str, detail: String) -> Error {
    Error::corrupt(format!("payload {} in {what}", e.id), detail)
}

/// Reads one payload: its frame, decompressed, and the payload's bytes in
/// it, checked against its name.
pub fn read_payload(
    src: &dyn ObjectSource,
    e: &PackEntry,
    dictionary: Option<&Dictionary>,
    what: &str,
) -> Result<Vec<u8>> {
    payload_in_frame(&read_frame(src, e, dictionary, what)?, e, what)
}

/// Reads many payloads of one pack, decompressing a frame once for a run
/// of its payloads: ask in frame order (sort the entries by
/// `(frame.offset, at)`) and each frame is decompressed once.
pub struct PackReader<'a> {
    src: &'a dyn ObjectSource,
    dictionary: Option<Dictionary>,
    what: &'a str,
    /// The frame read last, by offset.
    last: Option<(u64, Vec<u8>)>,
}

impl<'a> PackReader<'a> {
    /// A reader of the pack in `src`, whose index has `dictionary`.
    pub fn new(src: &'a dyn ObjectSource, dictionary: Option<(u64, u32)>, what: &'a str) -> Result<PackReader<'a>> {
        let dictionary = dictionary.map(|at| read_dictionary(src, at, what)).transpose()?;
        Ok(PackReader {
            src,
            dictionary,
            what,
            last: None,
        })
    }

    /// Payload `e`'s bytes, checked against its name.
    pub fn read(&mut self, e: &PackEntry) -> Result<Vec<u8>> {
        let frame = match self.last.take() {
            Some((offset, frame)) if offset == e.frame.offset => frame,
            _ => read_frame(self.src, e, self.dictionary.as_ref(), self.what)?,
        };
        let payload = payload_in_frame(&frame, e, self.what);
        self.last = Some((e.frame.offset, frame));
        payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{FrameBuilder, sort_by_frame};
    use crate::storage::{LocalStore, PartStore};

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

    fn framed(texts: &[Vec<u8>]) -> Vec<Blob> {
        let mut fb = FrameBuilder::default();
        for t in texts {
            fb.push(PayloadRef::of(t), t).unwrap();
        }
        fb.finish().unwrap()
    }

    /// Reads every payload of pack `id` back, one by one and in frame
    /// order, and returns its index.
    fn read_back(store: &LocalStore, id: u64, texts: &[Vec<u8>]) -> PackIndex {
        let src = store.open(&pack_name(id)).unwrap();
        let index = read_index(&*src, "the pack").unwrap();
        let dictionary = index.dictionary.map(|d| read_dictionary(&*src, d, "the pack").unwrap());
        let mut reader = PackReader::new(&*src, index.dictionary, "the pack").unwrap();
        let by_id: std::collections::HashMap<PayloadRef, &Vec<u8>> =
            texts.iter().map(|t| (PayloadRef::of(t), t)).collect();
        assert_eq!(index.entries.len(), by_id.len());
        for e in &index.entries {
            let t = by_id[&e.id];
            assert_eq!(read_payload(&*src, e, dictionary.as_ref(), "the pack").unwrap(), *t);
            assert_eq!(reader.read(e).unwrap(), *t);
        }
        index
    }

    #[test]
    fn packs_hold_frames_as_they_are_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        let mut texts = prompts(300);
        texts.insert(0, Vec::new());
        texts.push(vec![3u8; super::super::FRAME_RAW_BYTES + 1]);
        let blobs = framed(&texts);
        let mut refs: Vec<&Blob> = blobs.iter().collect();
        sort_by_frame(&mut refs);
        let (bytes, index) = encode(&refs).unwrap();
        let frames: usize = blobs.chunk_by(|a, b| Arc::ptr_eq(&a.frame, &b.frame)).count();
        assert!(frames > 2, "{frames} frames");
        // Each frame once, as it is: the pack is the frames and an index.
        let zstd: usize = blobs
            .chunk_by(|a, b| Arc::ptr_eq(&a.frame, &b.frame))
            .map(|run| run[0].frame.zstd.len())
            .sum();
        assert_eq!(
            index.entries.last().unwrap().frame.offset as usize + index.entries.last().unwrap().frame.zlen as usize,
            zstd
        );
        let raw: usize = texts.iter().map(Vec::len).sum();
        assert!(
            zstd * 5 < raw,
            "{zstd} bytes for {raw}: shared prompts compress together"
        );
        let shares: u64 = index.entries.iter().map(PackEntry::stored_bytes).sum();
        assert!(
            shares.abs_diff(zstd as u64) < index.entries.len() as u64,
            "{shares} ≈ {zstd}"
        );
        store.put(&pack_name(1), &bytes).unwrap();
        assert_eq!(read_back(&store, 1, &texts), index);
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
        // A damaged frame: its payloads read right or fail, naming
        // themselves and the pack; never wrong.
        let e = index.entries[5];
        let mut damaged = bytes.clone();
        damaged[(e.frame.offset + e.frame.zlen as u64 / 2) as usize] ^= 0x01;
        store.put(&pack_name(3), &damaged).unwrap();
        let src = store.open(&pack_name(3)).unwrap();
        let by_id: std::collections::HashMap<PayloadRef, &Vec<u8>> =
            texts.iter().map(|t| (PayloadRef::of(t), t)).collect();
        let mut failed = 0;
        for f in index.entries.iter().filter(|f| f.frame == e.frame) {
            match read_payload(&*src, f, None, "pack 3") {
                Ok(bytes) => assert_eq!(bytes, *by_id[&f.id]),
                Err(err) => {
                    let err = err.to_string();
                    assert!(err.contains("pack 3") && err.contains(&f.id.to_string()), "{err}");
                    failed += 1;
                }
            }
        }
        assert!(failed > 0, "the damage went unnoticed");
        // An entry whose bytes are another's is refused by its hash.
        let mut liar = index.entries[2];
        liar.id = index.entries[3].id;
        let src = store.open(&pack_name(1)).unwrap();
        assert!(read_payload(&*src, &liar, None, "pack 1").is_err());
    }

    /// What the `payloads` fuzz target checks, over damaged real records
    /// and packs and over arbitrary bytes: decoding never panics, and a
    /// payload read is an error or the bytes its name hashes.
    mod damaged {
        use super::*;
        use crate::payload::{decode_frames, decode_legacy_blobs, encode_frames};
        use crate::storage::InMemoryObject;
        use proptest::prelude::*;
        use std::sync::OnceLock;

        /// A WAL payload record, a legacy one, and a pack: of the same payloads.
        fn valid() -> &'static [Vec<u8>; 3] {
            static VALID: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
            VALID.get_or_init(|| {
                let mut texts = prompts(6);
                texts.push(Vec::new());
                texts.push(vec![0, 159, 146, 150, 255]);
                let blobs = framed(&texts);
                let mut legacy = Vec::new();
                for t in &texts {
                    let z = zstd::bulk::compress(t, 1).unwrap();
                    legacy.extend_from_slice(&PayloadRef::of(t).0);
                    legacy.extend_from_slice(&(t.len() as u64).to_le_bytes());
                    legacy.extend_from_slice(&(z.len() as u32).to_le_bytes());
                    legacy.extend_from_slice(&z);
                }
                let mut refs: Vec<&Blob> = blobs.iter().collect();
                sort_by_frame(&mut refs);
                [encode_frames(&blobs).unwrap(), legacy, encode(&refs).unwrap().0]
            })
        }

        /// Decodes `bytes` as `kind` (0 frames, 1 legacy blobs, 2 a pack)
        /// and reads every payload it names.
        fn decode(kind: usize, bytes: &[u8]) {
            let check = |id: PayloadRef, read: Result<Vec<u8>>| {
                if let Ok(b) = read {
                    assert_eq!(PayloadRef::of(&b), id, "a payload returned under another name");
                }
            };
            match kind {
                0 => {
                    for b in decode_frames(bytes).unwrap_or_default() {
                        check(b.id, b.decompress("test"));
                    }
                }
                1 => {
                    for b in decode_legacy_blobs(bytes).unwrap_or_default() {
                        check(b.id, b.decompress("test"));
                    }
                }
                _ => {
                    let src = InMemoryObject(bytes::Bytes::copy_from_slice(bytes));
                    let Ok(index) = read_index(&src, "test") else { return };
                    let Ok(mut reader) = PackReader::new(&src, index.dictionary, "test") else {
                        return;
                    };
                    for e in &index.entries {
                        check(e.id, reader.read(e));
                        check(e.id, read_payload(&src, e, None, "test"));
                    }
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn damaged_payload_records_and_packs_never_panic(
                kind in 0usize..3,
                flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
                cut in any::<prop::sample::Index>(),
                truncate in any::<bool>(),
            ) {
                let mut bytes = valid()[kind].clone();
                for (at, x) in flips {
                    let i = at.index(bytes.len());
                    bytes[i] ^= x;
                }
                if truncate {
                    bytes.truncate(cut.index(bytes.len()));
                }
                decode(kind, &bytes);
            }

            #[test]
            fn arbitrary_payload_bytes_never_panic(
                kind in 0usize..3,
                bytes in prop::collection::vec(any::<u8>(), 0..512),
            ) {
                decode(kind, &bytes);
            }
        }

        #[test]
        fn the_valid_inputs_decode() {
            for (kind, bytes) in valid().iter().enumerate() {
                decode(kind, bytes);
            }
            assert_eq!(decode_frames(&valid()[0]).unwrap().len(), 8);
            assert_eq!(decode_legacy_blobs(&valid()[1]).unwrap().len(), 8);
            let src = InMemoryObject(bytes::Bytes::copy_from_slice(&valid()[2]));
            assert_eq!(read_index(&src, "test").unwrap().entries.len(), 8);
        }
    }

    /// An index whose entry reaches past its frame is refused on open.
    #[test]
    fn an_entry_outside_its_frame_is_refused() {
        let texts = prompts(3);
        let blobs = framed(&texts);
        let refs: Vec<&Blob> = blobs.iter().collect();
        let (bytes, _) = encode(&refs).unwrap();
        let index_offset = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
        let body = PACK_INDEX.open(&bytes[index_offset as usize..bytes.len() - 8]).unwrap();
        let wire: IndexV3 = postcard::from_bytes(&body).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        for (n, damage) in [
            |w: &mut IndexV3| w.entries[1].at = w.frames[0].raw_len,
            |w: &mut IndexV3| w.entries[0].frame = 7,
            |w: &mut IndexV3| w.frames[0].zlen += 1,
        ]
        .into_iter()
        .enumerate()
        {
            let mut w = wire.clone();
            damage(&mut w);
            let mut pack = bytes[..index_offset as usize].to_vec();
            pack.extend_from_slice(&PACK_INDEX.seal(&postcard::to_stdvec(&w).unwrap(), 3).unwrap());
            pack.extend_from_slice(&index_offset.to_le_bytes());
            store.put(&pack_name(n as u64), &pack).unwrap();
            let err = read_index(&*store.open(&pack_name(n as u64)).unwrap(), "the pack").unwrap_err();
            assert!(err.to_string().contains("the pack"), "{err}");
        }
    }

    /// Payloads compressed alone, as earlier builds wrote them: the frames
    /// then the index, `dictionary` first when given.
    fn alone_pack(texts: &[Vec<u8>], version: u32, dictionary: Option<&[u8]>) -> Vec<u8> {
        let mut bytes = dictionary.unwrap_or_default().to_vec();
        let mut compressor = dictionary.map(|d| zstd::bulk::Compressor::with_dictionary(3, d).unwrap());
        let mut entries = Vec::new();
        for t in texts {
            let z = match &mut compressor {
                Some(c) => c.compress(t).unwrap(),
                None => zstd::bulk::compress(t, 3).unwrap(),
            };
            entries.push(AloneEntry {
                id: PayloadRef::of(t),
                offset: bytes.len() as u64,
                zlen: z.len() as u32,
                raw_len: t.len() as u64,
            });
            bytes.extend_from_slice(&z);
        }
        let index_offset = bytes.len() as u64;
        let envelope = Envelope { version, ..PACK_INDEX };
        let body = match version {
            FIRST_VERSION => postcard::to_stdvec(&entries).unwrap(),
            _ => postcard::to_stdvec(&IndexV2 {
                dictionary: dictionary.map(|d| (0, d.len() as u32)),
                entries,
            })
            .unwrap(),
        };
        bytes.extend_from_slice(&envelope.seal(&body, 3).unwrap());
        bytes.extend_from_slice(&index_offset.to_le_bytes());
        bytes
    }

    #[test]
    fn packs_of_earlier_versions_still_read() {
        let texts = prompts(40);
        let dictionary = texts[..3].concat();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        for (id, version, dictionary) in [(1, 1, None), (2, 2, None), (3, 2, Some(&dictionary[..]))] {
            store
                .put(&pack_name(id), &alone_pack(&texts, version, dictionary))
                .unwrap();
            let index = read_back(&store, id, &texts);
            assert_eq!(index.dictionary.is_some(), dictionary.is_some());
            assert!(index.entries.iter().all(|e| e.at == 0 && e.frame.raw_len == e.raw_len));
            assert_eq!(index.entries[0].stored_bytes(), u64::from(index.entries[0].frame.zlen));
        }
        // A damaged dictionary makes payloads fail their check, naming them.
        let mut damaged = alone_pack(&texts, 2, Some(&dictionary));
        damaged[dictionary.len() / 2] ^= 0x10;
        store.put(&pack_name(4), &damaged).unwrap();
        let src = store.open(&pack_name(4)).unwrap();
        let index = read_index(&*src, "pack 4").unwrap();
        let d = read_dictionary(&*src, index.dictionary.unwrap(), "pack 4").unwrap();
        let failed = index
            .entries
            .iter()
            .filter(|e| read_payload(&*src, e, Some(&d), "pack 4").is_err())
            .count();
        assert!(failed > 0, "a damaged dictionary went unnoticed");
    }
}
