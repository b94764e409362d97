//! The envelope every checked file of Skein's own shares:
//! `[magic: 8 bytes][version: u32 LE][crc32 of the body: u32 LE][body]`,
//! the body zstd-compressed. Today that is the part sidecar index
//! (`SKEINIDX`); a new file format (payload pack indexes, manifests) gets
//! its magic and version here rather than its own header code.
//!
//! Opening checks, in order: the magic (is this our file at all), the
//! version (written by a newer skein?), the CRC (damaged?), then the
//! decompressed size against a cap, so that a damaged or hostile file
//! fails with a message naming what is wrong instead of allocating
//! gigabytes. What the body means is the caller's to check.

use crate::error::{Error, Result};

/// One file format: its magic, its current version, and what to call it in
/// errors.
#[derive(Debug, Clone, Copy)]
pub struct Envelope {
    pub magic: &'static [u8; 8],
    pub version: u32,
    /// What the file is, for error messages ("part index").
    pub what: &'static str,
    /// The largest decompressed body accepted.
    pub max_body: usize,
}

impl Envelope {
    /// Bytes before the body.
    pub const HEADER_LEN: usize = 16;

    /// The file holding `raw`, compressed at `zstd_level`.
    pub fn seal(&self, raw: &[u8], zstd_level: i32) -> Result<Vec<u8>> {
        let body =
            zstd::bulk::compress(raw, zstd_level).map_err(|e| Error::io(format!("compress {}", self.what), e))?;
        Ok(self.wrap(&body))
    }

    /// The file around an already compressed `body` (tests and fuzz seeds
    /// build damaged bodies with it).
    pub fn wrap(&self, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::HEADER_LEN + body.len());
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    /// Checks a file and returns its decompressed body.
    pub fn open(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        self.open_since(bytes, self.version).map(|(_, body)| body)
    }

    /// Checks a file written at any version from `oldest` to the current
    /// one, and returns that version and the decompressed body (a format
    /// whose older bodies are still read: the caller decodes by version).
    pub fn open_since(&self, bytes: &[u8], oldest: u32) -> Result<(u32, Vec<u8>)> {
        let bad = |detail: String| Error::corrupt(self.what, detail);
        let Some((header, body)) = bytes.split_first_chunk::<{ Self::HEADER_LEN }>() else {
            return Err(bad(format!("{} bytes is too short for the header", bytes.len())));
        };
        let (magic, rest) = header.split_at(8);
        if magic != self.magic {
            return Err(bad(format!("missing {} header", String::from_utf8_lossy(self.magic))));
        }
        let (version, crc) = rest.split_at(4);
        let version = u32::from_le_bytes(version.try_into().map_err(|_| bad("short header".into()))?);
        if !(oldest..=self.version).contains(&version) {
            let expected = if oldest == self.version {
                self.version.to_string()
            } else {
                format!("{oldest} to {}", self.version)
            };
            return Err(bad(format!("version {version} (expected {expected})")));
        }
        let crc = u32::from_le_bytes(crc.try_into().map_err(|_| bad("short header".into()))?);
        if crc32fast::hash(body) != crc {
            return Err(bad("checksum mismatch".into()));
        }
        let body = zstd_decompress(body, self.max_body).map_err(|e| bad(e.to_string()))?;
        Ok((version, body))
    }
}

/// Decompresses zstd data of at most `max` bytes, allocating as the output
/// grows. (`zstd::bulk::decompress` reserves its whole capacity up front:
/// `max` bytes for every call, however small the data.)
pub fn zstd_decompress(bytes: &[u8], max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::with_capacity(initial_capacity(bytes, max));
    zstd::stream::read::Decoder::with_buffer(bytes)?
        .take(max as u64 + 1)
        .read_to_end(&mut out)?;
    if out.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("decompresses to more than {max} bytes"),
        ));
    }
    Ok(out)
}

/// The size the frame declares (`zstd::bulk::compress` writes it), but no
/// more than a plausible compression ratio allows, so that a damaged header
/// cannot reserve `max`; past this the buffer grows as data arrives.
fn initial_capacity(bytes: &[u8], max: usize) -> usize {
    let declared = zstd::zstd_safe::get_frame_content_size(bytes)
        .ok()
        .flatten()
        .unwrap_or(0);
    declared.min(max as u64).min(bytes.len() as u64 * 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: Envelope = Envelope {
        magic: b"SKEINTST",
        version: 3,
        what: "test file",
        max_body: 1 << 20,
    };

    #[test]
    fn sealed_files_open_to_their_body() {
        let file = TEST.seal(b"the body", 3).unwrap();
        assert_eq!(&file[..8], b"SKEINTST");
        assert_eq!(TEST.open(&file).unwrap(), b"the body");
        assert_eq!(
            TEST.open(&TEST.wrap(&zstd::bulk::compress(b"", 1).unwrap())).unwrap(),
            b""
        );
    }

    #[test]
    fn each_check_names_what_is_wrong() {
        let file = TEST.seal(b"the body", 3).unwrap();
        let err = |bytes: &[u8]| TEST.open(bytes).unwrap_err().to_string();
        assert!(err(&file[..10]).contains("too short"), "{}", err(&file[..10]));
        let mut other = file.clone();
        other[..8].copy_from_slice(b"SKEINIDX");
        assert!(err(&other).contains("missing SKEINTST header"), "{}", err(&other));
        let newer = Envelope { version: 4, ..TEST }.seal(b"x", 1).unwrap();
        assert!(err(&newer).contains("version 4 (expected 3)"), "{}", err(&newer));
        let mut damaged = file.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert!(err(&damaged).contains("checksum mismatch"), "{}", err(&damaged));
        let big = TEST.seal(&vec![0u8; (1 << 20) + 1], 1).unwrap();
        assert!(err(&big).contains("more than"), "{}", err(&big));
        assert!(err(&damaged).starts_with("corrupt test file: "), "{}", err(&damaged));
    }

    #[test]
    fn older_versions_open_when_the_caller_still_reads_them() {
        let old = Envelope { version: 2, ..TEST }.seal(b"old body", 3).unwrap();
        assert_eq!(TEST.open_since(&old, 2).unwrap(), (2, b"old body".to_vec()));
        assert!(
            TEST.open(&old)
                .unwrap_err()
                .to_string()
                .contains("version 2 (expected 3)")
        );
        let older = Envelope { version: 1, ..TEST }.seal(b"x", 3).unwrap();
        let err = TEST.open_since(&older, 2).unwrap_err().to_string();
        assert!(err.contains("version 1 (expected 2 to 3)"), "{err}");
        assert_eq!(
            TEST.open_since(&TEST.seal(b"now", 3).unwrap(), 2).unwrap(),
            (3, b"now".to_vec())
        );
    }

    /// Regression (found by fuzz/part_index, input `[0x0a]`: an empty body
    /// with a matching checksum): `zstd::bulk::decompress` reserved its whole
    /// cap, 1 GiB per WAL batch and 2 GiB per part sidecar, whatever the data.
    #[test]
    fn decompression_reserves_only_what_the_data_needs() {
        let small = zstd::bulk::compress(b"hello", 1).unwrap();
        let out = zstd_decompress(&small, 1 << 31).unwrap();
        assert_eq!(out, b"hello");
        assert!(out.capacity() < 1 << 20, "reserved {} bytes", out.capacity());
        assert_eq!(initial_capacity(&small, 1 << 31), 5);
        // A frame declaring 1 TiB of content, holding one raw block "hello",
        // reserves little and fails.
        let mut lying = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
        lying.extend_from_slice(&(1u64 << 40).to_le_bytes());
        lying.extend_from_slice(&[5 << 3 | 1, 0, 0]);
        lying.extend_from_slice(b"hello");
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&lying).unwrap(), Some(1 << 40));
        assert!(initial_capacity(&lying, 1 << 31) <= 64 * lying.len());
        assert!(zstd_decompress(&lying, 1 << 31).is_err());
        // The cap still holds, and data at the cap decodes.
        let big = zstd::bulk::compress(&[0u8; 10_000], 1).unwrap();
        assert!(zstd_decompress(&big, 9_999).is_err());
        assert_eq!(zstd_decompress(&big, 10_000).unwrap(), vec![0u8; 10_000]);
        assert!(zstd_decompress(b"", 100).unwrap_or_default().is_empty());
        assert!(zstd_decompress(b"not zstd", 100).is_err());
    }
}
