//! What a query did: which indexes narrowed it, which sources it pruned,
//! how many rows it examined and how many it had to decode.

use serde::Serialize;

use crate::record::Signal;

#[derive(Debug, Clone, Serialize)]
pub struct SourceExplain {
    /// `hot` (memory) or `part`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_id: Option<u64>,
    /// Why the source was skipped without reading rows, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pruned: Option<String>,
    /// What was read instead of the part's own columns (its calls table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<&'static str>,
    pub rows_examined: u64,
    pub rows_decoded: u64,
}

impl SourceExplain {
    pub fn new(kind: &'static str, part_id: Option<u64>) -> Self {
        SourceExplain {
            kind,
            part_id,
            pruned: None,
            read_from: None,
            rows_examined: 0,
            rows_decoded: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Explain {
    pub signal: Signal,
    pub index_used: Vec<String>,
    pub parts_total: u64,
    pub parts_pruned: u64,
    pub parts_read: u64,
    pub rows_examined: u64,
    pub rows_decoded: u64,
    /// Answered from pre-aggregated part statistics, not rows.
    pub parts_from_stats: u64,
    pub sources: Vec<SourceExplain>,
}

impl Explain {
    pub fn new(signal: Signal) -> Self {
        Explain {
            signal,
            index_used: Vec::new(),
            parts_total: 0,
            parts_pruned: 0,
            parts_read: 0,
            rows_examined: 0,
            rows_decoded: 0,
            parts_from_stats: 0,
            sources: Vec::new(),
        }
    }

    pub fn add(&mut self, s: SourceExplain) {
        if s.kind == "part" {
            self.parts_total += 1;
            if s.pruned.is_some() || (s.rows_examined == 0 && s.rows_decoded == 0) {
                self.parts_pruned += 1;
            } else {
                self.parts_read += 1;
            }
        }
        self.rows_examined += s.rows_examined;
        self.rows_decoded += s.rows_decoded;
        self.sources.push(s);
    }
}
