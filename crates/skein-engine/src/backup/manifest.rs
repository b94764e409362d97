//! `manifest.json`: what a backup holds, with the size and BLAKE3 of every
//! file. Written last, so its presence marks a complete backup; restore and
//! verify check every file against it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub const NAME: &str = "manifest.json";
const FORMAT: &str = "skein-backup";
const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Always `skein-backup`.
    pub format: String,
    pub version: u32,
    /// The skein that wrote it.
    pub skein_version: String,
    /// When the snapshot was taken (Unix ms): every record acknowledged
    /// before then is in it.
    pub created_unix_ms: u64,
    /// The data directory it was taken from.
    pub source: String,
    /// Sequence numbers below this are covered by the backup's parts.
    pub covers_seq: u64,
    pub files: Vec<ManifestFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManifestFile {
    /// Relative to the backup's root (and to a data directory's).
    pub name: String,
    pub bytes: u64,
    /// BLAKE3 of the file, 64 hex digits.
    pub blake3: String,
}

impl Manifest {
    pub fn new(source: String, covers_seq: u64, created_unix_ms: u64, mut files: Vec<ManifestFile>) -> Manifest {
        files.sort();
        Manifest {
            format: FORMAT.to_string(),
            version: VERSION,
            skein_version: env!("CARGO_PKG_VERSION").to_string(),
            created_unix_ms,
            source,
            covers_seq,
            files,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    pub fn decode(bytes: &[u8], what: &str) -> Result<Manifest> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| Error::corrupt(what, e.to_string()))?;
        if m.format != FORMAT {
            return Err(Error::corrupt(what, format!("format {:?}, not {FORMAT:?}", m.format)));
        }
        if m.version > VERSION {
            return Err(Error::corrupt(
                what,
                format!("version {} is newer than this skein reads ({VERSION})", m.version),
            ));
        }
        for f in &m.files {
            let safe = !f.name.is_empty()
                && !f.name.starts_with('/')
                && f.name.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
            if !safe {
                return Err(Error::corrupt(
                    what,
                    format!("file name {:?} leaves the backup", f.name),
                ));
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> ManifestFile {
        ManifestFile {
            name: name.into(),
            bytes: 3,
            blake3: blake3::hash(b"abc").to_hex().to_string(),
        }
    }

    #[test]
    fn round_trips_sorted() {
        let m = Manifest::new(
            "d".into(),
            7,
            1,
            vec![file("parts/spans/2.parquet"), file("parts/logs/1.parquet")],
        );
        assert_eq!(m.files[0].name, "parts/logs/1.parquet");
        assert_eq!(Manifest::decode(&m.encode(), "m").unwrap(), m);
    }

    #[test]
    fn names_that_leave_the_backup_are_refused() {
        for bad in ["../etc/passwd", "/etc/passwd", "parts//x", "parts/./x", ""] {
            let m = Manifest::new("d".into(), 1, 1, vec![file(bad)]);
            let err = Manifest::decode(&m.encode(), "m").unwrap_err().to_string();
            assert!(err.contains("leaves the backup"), "{bad}: {err}");
        }
        assert!(Manifest::decode(b"{}", "m").is_err());
        let mut m = Manifest::new("d".into(), 1, 1, vec![]);
        m.format = "other".into();
        assert!(
            Manifest::decode(&m.encode(), "m")
                .unwrap_err()
                .to_string()
                .contains("format")
        );
    }
}
