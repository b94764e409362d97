//! Immutable parts: time-sorted Parquet files of one signal, each with a
//! resident sidecar index.
//!
//! A part's identity and lineage live in its Parquet footer (key
//! `skein.part`), so the Parquet file alone is the source of truth: the
//! sidecar can be rebuilt from it, and compaction's "this part replaces
//! those" survives any crash (see `engine::recovery`).

pub mod calls;
pub mod columns;
mod constants;
pub mod index;
pub mod page_cache;
mod reader;
pub mod samples;
pub mod series_memo;
pub mod shared_traces;
mod sink;
pub mod trace_filter;
mod writer;
mod zstd_pages;

use serde::{Deserialize, Serialize};

pub use columns::{Columnar, FORMAT_VERSION};
pub use page_cache::{PageCache, PageCacheStats};
pub use reader::Part;
pub use writer::{PartWriter, WriterOptions};

use crate::record::Signal;

/// The footer metadata key holding [`PartMeta`] as JSON.
pub const META_KEY: &str = "skein.part";

/// What a part is, stored in its Parquet footer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartMeta {
    pub format_version: u32,
    pub signal: Signal,
    pub id: u64,
    pub rows: u64,
    pub min_time: u64,
    pub max_time: u64,
    /// Sequence numbers of the records it holds.
    pub min_seq: u64,
    pub max_seq: u64,
    /// Every record of this signal with a sequence number ≤ this is in this
    /// part or an older one: replay may skip them.
    pub covers_seq: u64,
    /// Parts this one was compacted from (to delete if a crash left them).
    pub replaces: Vec<u64>,
    pub level: u32,
    pub created_unix_ms: u64,
}

impl PartMeta {
    /// The metadata of a new part of `signal`, numbered `id`: no lineage
    /// and no sequence numbers yet; the writer fills in rows and times.
    pub fn new(signal: Signal, id: u64) -> PartMeta {
        PartMeta {
            format_version: FORMAT_VERSION,
            signal,
            id,
            rows: 0,
            min_time: 0,
            max_time: 0,
            min_seq: 0,
            max_seq: 0,
            covers_seq: 0,
            replaces: Vec::new(),
            level: 0,
            created_unix_ms: 0,
        }
    }
}

/// Object names of a part's files.
pub fn parquet_name(signal: Signal, id: u64) -> String {
    format!("{}/{id:016x}.parquet", signal.as_str())
}

pub fn index_name(signal: Signal, id: u64) -> String {
    format!("{}/{id:016x}.idx", signal.as_str())
}

/// The part's full-text index (a `skein-text` bundle).
pub fn text_name(signal: Signal, id: u64) -> String {
    format!("{}/{id:016x}.txt", signal.as_str())
}

/// Whether `name` is a part's full-text index.
pub fn is_text_index(name: &str) -> bool {
    name.ends_with(".txt") && parse_name(name).is_some()
}

/// The files beside a part's Parquet file, deleted with it (a span part's
/// calls table and a metric part's sample table too).
pub fn sidecar_names(signal: Signal, id: u64) -> Vec<String> {
    let mut names = vec![index_name(signal, id), text_name(signal, id)];
    match signal {
        Signal::Spans => names.push(calls::calls_name(id)),
        Signal::Metrics => names.push(samples::samples_name(id)),
        Signal::Logs => {}
    }
    names
}

/// Parses `spans/00000000000000ab.parquet` into (signal, id, is_parquet);
/// sidecars (`.idx`, `.txt`, `.calls`, `.samples`) are not Parquet.
pub fn parse_name(name: &str) -> Option<(Signal, u64, bool)> {
    let (prefix, file) = name.split_once('/')?;
    let signal = Signal::ALL.into_iter().find(|s| s.as_str() == prefix)?;
    let (stem, ext) = file.rsplit_once('.')?;
    let id = u64::from_str_radix(stem, 16).ok()?;
    match ext {
        "parquet" => Some((signal, id, true)),
        "idx" | "txt" | "calls" | "samples" => Some((signal, id, false)),
        _ => None,
    }
}
