//! A pack: an immutable object holding many payloads,
//! `payloads/<id:020>.pack`, written once through the part store (temp →
//! fsync → rename) and never changed:
//!
//! ```text
//! [zstd bytes of payload 0][zstd bytes of payload 1]…
//! [index: the SKEINPAK envelope around postcard Vec<PackEntry>]
//! [index offset: u64 LE]
//! ```
//!
//! Opening a pack reads its last 8 bytes and its index only; a payload is
//! one range read at `offset..offset + zlen`, decompressed and checked
//! against its hash. An outside reader resolves a reference the same way:
//! find the entry whose `id` is the reference's hash in some pack's index.

use serde::{Deserialize, Serialize};

use super::{Blob, PayloadRef};
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::storage::ObjectSource;

/// The pack index's envelope.
pub const PACK_INDEX: Envelope = Envelope {
    magic: b"SKEINPAK",
    version: 1,
    what: "payload pack index",
    max_body: 1 << 30,
};

/// Where one payload sits in its pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackEntry {
    pub id: PayloadRef,
    pub offset: u64,
    pub zlen: u32,
    pub raw_len: u64,
}

/// The object name of pack `id`.
pub fn pack_name(id: u64) -> String {
    format!("payloads/{id:020}.pack")
}

/// The pack id of an object name, as [`pack_name`] makes it.
pub fn parse_pack_name(name: &str) -> Option<u64> {
    name.strip_prefix("payloads/")?.strip_suffix(".pack")?.parse().ok()
}

/// The bytes of a pack holding `blobs`, and its index.
pub fn encode(blobs: &[&Blob]) -> Result<(Vec<u8>, Vec<PackEntry>)> {
    let mut out = Vec::with_capacity(blobs.iter().map(|b| b.zstd.len()).sum::<usize>() + 64 * blobs.len() + 32);
    let mut entries = Vec::with_capacity(blobs.len());
    for b in blobs {
        entries.push(PackEntry {
            id: b.id,
            offset: out.len() as u64,
            zlen: b.zstd.len() as u32,
            raw_len: b.raw_len,
        });
        out.extend_from_slice(&b.zstd);
    }
    let index_offset = out.len() as u64;
    let raw = postcard::to_stdvec(&entries).map_err(|e| Error::Other(format!("encode pack index: {e}")))?;
    out.extend_from_slice(&PACK_INDEX.seal(&raw, 3)?);
    out.extend_from_slice(&index_offset.to_le_bytes());
    Ok((out, entries))
}

/// Reads a pack's index, checking that every entry lies inside the data.
pub fn read_index(src: &dyn ObjectSource, what: &str) -> Result<Vec<PackEntry>> {
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
    let raw = PACK_INDEX.open(&index).map_err(|e| bad(e.to_string()))?;
    let entries: Vec<PackEntry> = postcard::from_bytes(&raw).map_err(|e| bad(format!("index: {e}")))?;
    if let Some(e) = entries
        .iter()
        .find(|e| e.offset.checked_add(e.zlen as u64).is_none_or(|end| end > index_offset))
    {
        return Err(bad(format!("payload {} lies outside the pack's data", e.id)));
    }
    Ok(entries)
}

/// Reads one payload's compressed bytes.
pub fn read_blob(src: &dyn ObjectSource, e: &PackEntry, what: &str) -> Result<Blob> {
    let zstd = src
        .read_at(e.offset, e.zlen as usize)
        .map_err(|err| Error::io(format!("read payload {} from {what}", e.id), err))?;
    Ok(Blob {
        id: e.id,
        raw_len: e.raw_len,
        zstd: zstd.as_ref().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LocalStore, PartStore};

    #[test]
    fn packs_round_trip_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), &["payloads"]).unwrap();
        let texts: Vec<Vec<u8>> = vec![b"".to_vec(), b"first".to_vec(), vec![3u8; 50_000]];
        let blobs: Vec<Blob> = texts
            .iter()
            .map(|t| Blob::compress(PayloadRef::of(t), t).unwrap())
            .collect();
        let (bytes, entries) = encode(&blobs.iter().collect::<Vec<_>>()).unwrap();
        store.put(&pack_name(1), &bytes).unwrap();
        let src = store.open(&pack_name(1)).unwrap();
        let read = read_index(&*src, "pack 1").unwrap();
        assert_eq!(read, entries);
        for (e, t) in read.iter().zip(&texts) {
            assert_eq!(read_blob(&*src, e, "pack 1").unwrap().decompress("pack 1").unwrap(), *t);
        }
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
        damaged[entries[2].offset as usize + 5] ^= 0x01;
        store.put(&pack_name(3), &damaged).unwrap();
        let src = store.open(&pack_name(3)).unwrap();
        let e = read_index(&*src, "pack 3").unwrap()[2];
        assert!(read_blob(&*src, &e, "pack 3").unwrap().decompress("pack 3").is_err());
    }
}
