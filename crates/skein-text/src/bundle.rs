//! One file for a part's whole text index: tantivy's files laid end to end,
//! a table of contents, and a footer, so the index is a single object beside
//! its part (object storage has no directories and no atomic multi-file
//! renames) and is read in place, from memory or a mapping.
//!
//! ```text
//! [file bytes]*  [TOC]  [footer: 36 bytes]
//! TOC     u32 count, then per file: u16 name length, name (UTF-8), u64 offset, u64 length
//! footer  u64 TOC offset, u64 TOC length, u32 version, u64 xxh3 of every byte before it, "SKTXTIDX"
//! ```
//! All integers little-endian. The checksum is verified before anything is
//! parsed, so a damaged bundle is refused at open and tantivy never reads
//! damaged bytes.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::Directory;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{DirectoryLock, FileHandle, Lock, OwnedBytes, WatchCallback, WatchHandle, WritePtr};

use crate::TextError;

pub(crate) const MAGIC: &[u8; 8] = b"SKTXTIDX";
/// 2: documents are blocks of `BLOCK_ROWS` rows, shared texts linked.
/// 3: documents may come from several sources (merged parts' indexes, see
/// `sources`). A version 2 bundle reads as one source of the part's own
/// rows; a build that reads only version 2 refuses version 3 (it would
/// read carried block numbers as the part's rows).
pub(crate) const VERSION: u32 = 3;
/// The oldest version this build reads.
pub(crate) const OLDEST_VERSION: u32 = 2;
pub(crate) const FOOTER_LEN: usize = 8 + 8 + 4 + 8 + 8;

/// Lays `files` out as one bundle.
pub(crate) fn write(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, TextError> {
    write_version(files, VERSION)
}

/// [`write`] with another version in the footer (for testing what older
/// builds wrote).
pub(crate) fn write_version(files: &[(String, Vec<u8>)], version: u32) -> Result<Vec<u8>, TextError> {
    let body: usize = files.iter().map(|(_, b)| b.len()).sum();
    let mut out = Vec::with_capacity(body + 64 * files.len() + FOOTER_LEN);
    let mut toc = Vec::new();
    let count = u32::try_from(files.len()).map_err(|_| TextError::TooLarge("files in a bundle"))?;
    toc.extend_from_slice(&count.to_le_bytes());
    for (name, bytes) in files {
        let name_len = u16::try_from(name.len()).map_err(|_| TextError::TooLarge("a file name"))?;
        toc.extend_from_slice(&name_len.to_le_bytes());
        toc.extend_from_slice(name.as_bytes());
        toc.extend_from_slice(&(out.len() as u64).to_le_bytes());
        toc.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    let toc_offset = out.len() as u64;
    out.extend_from_slice(&toc);
    out.extend_from_slice(&toc_offset.to_le_bytes());
    out.extend_from_slice(&(toc.len() as u64).to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(MAGIC);
    Ok(out)
}

fn corrupt(what: impl Into<String>) -> TextError {
    TextError::Corrupt(what.into())
}

/// Reads little-endian integers off the front of a slice, refusing to run
/// past its end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TextError> {
        if self.0.len() < n {
            return Err(corrupt("table of contents ends early"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TextError> {
        self.take(N)?
            .first_chunk::<N>()
            .copied()
            .ok_or_else(|| corrupt("table of contents ends early"))
    }

    fn u16(&mut self) -> Result<u16, TextError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, TextError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, TextError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// Checks a bundle and returns its files, each a slice of `bytes` (no copy).
pub(crate) fn read(bytes: &OwnedBytes) -> Result<HashMap<String, OwnedBytes>, TextError> {
    let data = bytes.as_slice();
    let len = data.len();
    if len < FOOTER_LEN {
        return Err(corrupt(format!("{len} bytes is too short for a text index")));
    }
    let footer = &data[len - FOOTER_LEN..];
    if &footer[28..] != MAGIC {
        return Err(corrupt("not a Skein text index (bad magic)"));
    }
    let mut f = Cursor(footer);
    let toc_offset = f.u64()?;
    let toc_len = f.u64()?;
    let version = f.u32()?;
    let sum = f.u64()?;
    if xxhash_rust::xxh3::xxh3_64(&data[..len - 16]) != sum {
        return Err(corrupt("checksum mismatch: the text index is damaged"));
    }
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(TextError::Version(version));
    }
    let toc_start = usize::try_from(toc_offset).map_err(|_| corrupt("TOC offset out of range"))?;
    let toc_end = toc_start
        .checked_add(usize::try_from(toc_len).map_err(|_| corrupt("TOC length out of range"))?)
        .ok_or_else(|| corrupt("TOC out of range"))?;
    if toc_end != len - FOOTER_LEN {
        return Err(corrupt("the TOC does not end at the footer"));
    }
    let mut toc = Cursor(&data[toc_start..toc_end]);
    let count = toc.u32()?;
    let mut files = HashMap::new();
    for _ in 0..count {
        let name_len = usize::from(toc.u16()?);
        let name = std::str::from_utf8(toc.take(name_len)?).map_err(|_| corrupt("a file name is not UTF-8"))?;
        let offset = usize::try_from(toc.u64()?).map_err(|_| corrupt("file offset out of range"))?;
        let size = usize::try_from(toc.u64()?).map_err(|_| corrupt("file length out of range"))?;
        let end = offset
            .checked_add(size)
            .ok_or_else(|| corrupt("file range overflows"))?;
        if end > toc_start {
            return Err(corrupt(format!("file {name} runs past the data")));
        }
        if files.insert(name.to_owned(), bytes.slice(offset..end)).is_some() {
            return Err(corrupt(format!("file {name} listed twice")));
        }
    }
    if !toc.0.is_empty() {
        return Err(corrupt("trailing bytes in the TOC"));
    }
    Ok(files)
}

/// A read-only tantivy directory over a bundle's files.
#[derive(Debug, Clone)]
pub(crate) struct BundleDirectory {
    files: Arc<HashMap<PathBuf, OwnedBytes>>,
}

impl BundleDirectory {
    pub(crate) fn new(files: HashMap<String, OwnedBytes>) -> BundleDirectory {
        BundleDirectory {
            files: Arc::new(files.into_iter().map(|(k, v)| (PathBuf::from(k), v)).collect()),
        }
    }
}

fn read_only() -> Arc<io::Error> {
    Arc::new(io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a bundled text index is read-only",
    ))
}

impl Directory for BundleDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        match self.files.get(path) {
            Some(bytes) => Ok(Arc::new(bytes.clone())),
            None => Err(OpenReadError::FileDoesNotExist(path.to_path_buf())),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: read_only(),
            filepath: path.to_path_buf(),
        })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        Ok(self.files.contains_key(path))
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: read_only(),
            filepath: path.to_path_buf(),
        })
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        match self.files.get(path) {
            Some(bytes) => Ok(bytes.as_slice().to_vec()),
            None => Err(OpenReadError::FileDoesNotExist(path.to_path_buf())),
        }
    }

    fn atomic_write(&self, _path: &Path, _data: &[u8]) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a bundled text index is read-only",
        ))
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }

    /// Nothing changes under a reader, so there is nothing to lock against
    /// (the default would create a lock file, which this directory cannot).
    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, _callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let files = vec![("a".to_owned(), b"hello".to_vec()), ("b/c".to_owned(), Vec::new())];
        let bytes = write(&files).unwrap_or_else(|e| panic!("{e}"));
        let read = read(&OwnedBytes::new(bytes.clone())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.get("a").map(|b| b.as_slice()), Some(&b"hello"[..]));
        assert_eq!(read.get("b/c").map(|b| b.len()), Some(0));

        assert!(super::read(&OwnedBytes::new(bytes[..bytes.len() - 1].to_vec())).is_err());
        assert!(super::read(&OwnedBytes::new(Vec::new())).is_err());
        let mut flipped = bytes.clone();
        flipped[2] ^= 1;
        assert!(matches!(
            super::read(&OwnedBytes::new(flipped)),
            Err(TextError::Corrupt(_))
        ));
    }
}
