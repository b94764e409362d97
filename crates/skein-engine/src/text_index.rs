//! How records enter full-text indexes: a part's index is built as the part
//! is written; a hot table's is built lazily, by the first text query after
//! new rows arrived, so ingest pays nothing for it.
//!
//! A value stored as a payload is indexed once per index as a *shared text*
//! (keyed by its reference and field) and each row holding it is linked to
//! it: 10,000 spans sharing one system prompt cost one document. A payload
//! that cannot be read is indexed by its preview, which is what the query's
//! re-check then reads too.

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::Mutex;
use roaring::RoaringBitmap;
use skein_text::{MemTextIndex, PartTextIndexBuilder, TextError};

use crate::hash::FastMap;
use crate::payload::PayloadRef;
use crate::text::{PayloadText, TextField, TextQuery, TextRecord, TextValue};

/// Where [`index_record`] puts a record's text.
trait TextSink {
    fn own(&mut self, row: u32, doc: &[(TextField, &str)]) -> Result<(), TextError>;
    fn shared(&mut self, field: TextField, text: &str) -> Result<u32, TextError>;
    fn link(&mut self, row: u32, key: u32) -> Result<(), TextError>;
}

impl TextSink for PartTextIndexBuilder {
    fn own(&mut self, row: u32, doc: &[(TextField, &str)]) -> Result<(), TextError> {
        self.add(row, doc)
    }
    fn shared(&mut self, field: TextField, text: &str) -> Result<u32, TextError> {
        self.add_shared(field, text)
    }
    fn link(&mut self, row: u32, key: u32) -> Result<(), TextError> {
        PartTextIndexBuilder::link(self, row, key)
    }
}

impl TextSink for MemTextIndex {
    fn own(&mut self, row: u32, doc: &[(TextField, &str)]) -> Result<(), TextError> {
        self.add(row, doc);
        Ok(())
    }
    fn shared(&mut self, field: TextField, text: &str) -> Result<u32, TextError> {
        Ok(self.add_shared(field, text))
    }
    fn link(&mut self, row: u32, key: u32) -> Result<(), TextError> {
        MemTextIndex::link(self, row, key);
        Ok(())
    }
}

/// The shared-text key of each payload (and field) an index holds.
type SharedKeys = FastMap<(PayloadRef, TextField), u32>;

/// Indexes record `r` as row `row`.
fn index_record<R: TextRecord, S: TextSink>(
    sink: &mut S,
    keys: &mut SharedKeys,
    row: u32,
    r: &R,
    read: Option<&PayloadText>,
) -> Result<(), TextError> {
    let mut vals = Vec::new();
    r.text_values(&mut vals);
    let mut own: Vec<(TextField, Cow<'_, str>)> = Vec::with_capacity(vals.len());
    for (field, value) in vals.drain(..) {
        match value {
            TextValue::Text(t) => own.push((field, t)),
            TextValue::Payload { id, preview } => {
                if let Some(&key) = keys.get(&(id, field)) {
                    sink.link(row, key)?;
                    continue;
                }
                match read.and_then(|read| (read.0)(&id)) {
                    Some(text) => {
                        let key = sink.shared(field, &text)?;
                        keys.insert((id, field), key);
                        sink.link(row, key)?;
                    }
                    None => own.push((field, preview.into())),
                }
            }
        }
    }
    let doc: Vec<(TextField, &str)> = own.iter().map(|(f, t)| (*f, t.as_ref())).collect();
    sink.own(row, &doc)
}

/// Builds a part's text index from its rows, in the order they are written.
pub struct PartTextBuilder {
    builder: PartTextIndexBuilder,
    keys: SharedKeys,
    read: Option<PayloadText>,
    rows: u32,
}

impl PartTextBuilder {
    /// Payload values are read through `read` (without it, by their preview).
    pub fn new(read: Option<PayloadText>) -> Result<PartTextBuilder, TextError> {
        Ok(PartTextBuilder {
            builder: PartTextIndexBuilder::new()?,
            keys: SharedKeys::default(),
            read,
            rows: 0,
        })
    }

    /// Indexes the next row.
    pub fn push<R: TextRecord>(&mut self, r: &R) -> Result<(), TextError> {
        let row = self.rows;
        self.rows += 1;
        index_record(&mut self.builder, &mut self.keys, row, r, self.read.as_ref())
    }

    /// The index as the bytes of one file.
    pub fn finish(self) -> Result<Vec<u8>, TextError> {
        self.builder.finish()
    }
}

/// A hot table's text index, covering its rows below `upto`.
#[derive(Default)]
pub struct HotText {
    index: MemTextIndex,
    keys: SharedKeys,
    upto: u32,
}

impl HotText {
    /// Rows below this are indexed.
    pub fn upto(&self) -> u32 {
        self.upto
    }

    /// Estimated heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.index.memory_bytes() + self.keys.len() * 48
    }
}

impl HotText {
    /// Indexes `rows`, the table's rows from `start` on, skipping any this
    /// index covers already (another query may have indexed them).
    pub fn index_rows<R: TextRecord>(&mut self, start: u32, rows: &[Arc<R>], read: Option<&PayloadText>) {
        let HotText { index, keys, upto } = self;
        for (i, r) in rows.iter().enumerate() {
            let row = start + i as u32;
            if row < *upto {
                continue;
            }
            // A hot index cannot fail (it is maps in memory).
            let _ = index_record(index, keys, row, &**r, read);
            *upto = row + 1;
        }
    }
}

/// Candidate rows of `q` in a hot table's index: every row that may match,
/// rows it does not cover yet included (`total_rows` is the table's).
pub fn hot_candidates(text: &Mutex<HotText>, q: &TextQuery, total_rows: u32) -> RoaringBitmap {
    let hot = text.lock();
    let mut rows = hot.index.search(q);
    if hot.upto < total_rows {
        rows.insert_range(hot.upto..total_rows);
    }
    rows
}

/// A hot table's text index, shared with the queries that catch it up.
pub type SharedHotText = Arc<Mutex<HotText>>;
