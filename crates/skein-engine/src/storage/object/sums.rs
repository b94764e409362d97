//! Checksums of an object's 64 KiB chunks, kept in the bucket beside it as
//! `NAME.sums`, so that bytes read back by range are checked before they
//! are cached or served: a changed byte in the bucket is an error naming
//! the object, never data. (Parquet as Skein writes it has no page
//! checksums, and S3 offers none for a range.)
//!
//! Format: the envelope `SKEINSUM`, version 1 (magic, version, CRC32, zstd
//! body), around a body of `[object length: u64 LE][chunk size: u32 LE]`
//! and an xxh3-64 (u64 LE) per chunk, the last chunk possibly short.
//!
//! Crash safety: the sums are put before their object and deleted after it,
//! so an object in the bucket always has its sums; a crash between leaves
//! sums without an object, which the next open deletes. An object without
//! sums (written by an older skein) is read unchecked.

use std::io::Read;

use crate::envelope::Envelope;
use crate::error::{Error, Result};

pub const SUFFIX: &str = ".sums";
pub const CHUNK: u64 = 64 << 10;

const ENVELOPE: Envelope = Envelope {
    magic: b"SKEINSUM",
    version: 1,
    what: "object checksums",
    // 8 bytes per 64 KiB: enough for objects of 256 GiB.
    max_body: 32 << 20,
};

/// The sums' object name for an object.
pub fn name_of(object: &str) -> String {
    format!("{object}{SUFFIX}")
}

/// The object a sums name belongs to, if it is one.
pub fn object_of(name: &str) -> Option<&str> {
    name.strip_suffix(SUFFIX)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sums {
    pub len: u64,
    chunks: Vec<u64>,
}

/// Why bytes did not pass.
#[derive(Debug, PartialEq)]
pub enum Mismatch {
    /// The object's size is not the one its sums were made for.
    Length { listed: u64, summed: u64 },
    /// The chunk starting at this offset differs.
    Chunk { offset: u64 },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Length { listed, summed } => write!(
                f,
                "it is {listed} bytes, but was written as {summed} (truncated or replaced in the bucket)"
            ),
            Mismatch::Chunk { offset } => write!(
                f,
                "bytes {offset}..{} do not match their checksum (changed in the bucket)",
                offset + CHUNK
            ),
        }
    }
}

impl Sums {
    /// The sums of `len` bytes read from `r`.
    pub fn of(mut r: impl Read, len: u64) -> std::io::Result<Sums> {
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK) as usize);
        let mut buf = vec![0u8; CHUNK as usize];
        let mut left = len;
        while left > 0 {
            let n = left.min(CHUNK) as usize;
            r.read_exact(&mut buf[..n])?;
            chunks.push(xxhash_rust::xxh3::xxh3_64(&buf[..n]));
            left -= n as u64;
        }
        Ok(Sums { len, chunks })
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut raw = Vec::with_capacity(12 + self.chunks.len() * 8);
        raw.extend_from_slice(&self.len.to_le_bytes());
        raw.extend_from_slice(&(CHUNK as u32).to_le_bytes());
        for c in &self.chunks {
            raw.extend_from_slice(&c.to_le_bytes());
        }
        ENVELOPE.seal(&raw, 1)
    }

    pub fn decode(bytes: &[u8], what: &str) -> Result<Sums> {
        let raw = ENVELOPE.open(bytes)?;
        let bad = |d: String| Error::corrupt(format!("checksums of {what}"), d);
        let (len, rest) = raw.split_first_chunk::<8>().ok_or_else(|| bad("too short".into()))?;
        let (chunk, rest) = rest.split_first_chunk::<4>().ok_or_else(|| bad("too short".into()))?;
        let len = u64::from_le_bytes(*len);
        if u32::from_le_bytes(*chunk) as u64 != CHUNK {
            return Err(bad(format!("chunk size {}, not {CHUNK}", u32::from_le_bytes(*chunk))));
        }
        if rest.len() as u64 != len.div_ceil(CHUNK) * 8 {
            return Err(bad(format!("{} bytes of sums for {len} bytes", rest.len())));
        }
        let chunks = rest
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        Ok(Sums { len, chunks })
    }

    /// Checks that the object is still the size it was written at.
    pub fn check_len(&self, listed: u64) -> std::result::Result<(), Mismatch> {
        if listed == self.len {
            Ok(())
        } else {
            Err(Mismatch::Length {
                listed,
                summed: self.len,
            })
        }
    }

    /// Checks `bytes`, read from `offset` (a multiple of [`CHUNK`]), made
    /// of whole chunks (the last may end with the object).
    pub fn check(&self, offset: u64, bytes: &[u8]) -> std::result::Result<(), Mismatch> {
        debug_assert_eq!(offset % CHUNK, 0);
        for (i, chunk) in bytes.chunks(CHUNK as usize).enumerate() {
            let at = offset + i as u64 * CHUNK;
            let want = self.chunks.get((at / CHUNK) as usize);
            let whole = chunk.len() as u64 == CHUNK.min(self.len.saturating_sub(at));
            if !whole || want != Some(&xxhash_rust::xxh3::xxh3_64(chunk)) {
                return Err(Mismatch::Chunk { offset: at });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_changed_byte_and_size_is_caught() {
        let data: Vec<u8> = (0..(3 * CHUNK + 100)).map(|i| (i * 7 % 251) as u8).collect();
        let sums = Sums::of(&data[..], data.len() as u64).unwrap();
        let back = Sums::decode(&sums.encode().unwrap(), "x").unwrap();
        assert_eq!(back, sums);
        assert_eq!(back.check(0, &data), Ok(()));
        assert_eq!(back.check(CHUNK, &data[CHUNK as usize..2 * CHUNK as usize]), Ok(()));
        assert_eq!(back.check(3 * CHUNK, &data[3 * CHUNK as usize..]), Ok(()));
        let mut bad = data.clone();
        bad[2 * CHUNK as usize + 5] ^= 1;
        assert_eq!(back.check(0, &bad), Err(Mismatch::Chunk { offset: 2 * CHUNK }));
        assert_eq!(
            back.check(3 * CHUNK, &data[3 * CHUNK as usize..data.len() - 1]),
            Err(Mismatch::Chunk { offset: 3 * CHUNK }),
            "a short last chunk"
        );
        assert!(back.check_len(data.len() as u64).is_ok());
        assert!(back.check_len(data.len() as u64 - 1).is_err());
        let empty = Sums::of(&[][..], 0).unwrap();
        assert_eq!(Sums::decode(&empty.encode().unwrap(), "x").unwrap(), empty);
        let mut file = sums.encode().unwrap();
        let last = file.len() - 1;
        file[last] ^= 1;
        assert!(Sums::decode(&file, "x").is_err());
    }

    #[test]
    fn names_pair_up() {
        assert_eq!(name_of("spans/1.parquet"), "spans/1.parquet.sums");
        assert_eq!(object_of("spans/1.parquet.sums"), Some("spans/1.parquet"));
        assert_eq!(object_of("spans/1.parquet"), None);
    }
}
