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
    /// A key for a shared text whose text comes later.
    fn new_shared(&mut self) -> Result<u32, TextError>;
    fn set_shared(&mut self, key: u32, field: TextField, text: &str) -> Result<(), TextError>;
    fn link(&mut self, row: u32, key: u32) -> Result<(), TextError>;
}

impl TextSink for PartTextIndexBuilder {
    fn own(&mut self, row: u32, doc: &[(TextField, &str)]) -> Result<(), TextError> {
        self.add(row, doc)
    }
    fn new_shared(&mut self) -> Result<u32, TextError> {
        PartTextIndexBuilder::new_shared(self)
    }
    fn set_shared(&mut self, key: u32, field: TextField, text: &str) -> Result<(), TextError> {
        PartTextIndexBuilder::set_shared(self, key, field, text)
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
    fn new_shared(&mut self) -> Result<u32, TextError> {
        Ok(MemTextIndex::new_shared(self))
    }
    fn set_shared(&mut self, key: u32, field: TextField, text: &str) -> Result<(), TextError> {
        MemTextIndex::set_shared(self, key, field, text);
        Ok(())
    }
    fn link(&mut self, row: u32, key: u32) -> Result<(), TextError> {
        MemTextIndex::link(self, row, key);
        Ok(())
    }
}

/// The shared-text key of each payload (and field) an index holds.
type SharedKeys = FastMap<(PayloadRef, TextField), u32>;

/// Payloads met in rows whose text is not read yet: rows are linked to
/// their keys at once, and the text is read later, many payloads at a
/// time, in the order of their places ([`PayloadText::place`]). Rows name
/// payloads in time order, which is no frame's order: read as they came,
/// each read could decompress a frame of payloads again.
#[derive(Default)]
struct PendingPayloads {
    payloads: Vec<PendingPayload>,
    /// Bytes of their previews.
    preview_bytes: usize,
}

struct PendingPayload {
    key: u32,
    field: TextField,
    id: PayloadRef,
    /// Indexed in its place if the payload cannot be read: what a query's
    /// re-check then reads too.
    preview: String,
}

/// Payloads pending before their text is read, whatever the rows to come
/// (it bounds the memory of a build): a flushed tier's are fewer.
const PENDING_PAYLOADS: usize = 1 << 16;
const PENDING_PREVIEW_BYTES: usize = 16 << 20;

impl PendingPayloads {
    fn is_full(&self) -> bool {
        self.payloads.len() >= PENDING_PAYLOADS || self.preview_bytes >= PENDING_PREVIEW_BYTES
    }

    /// Reads every pending payload, in the order of their places, and
    /// indexes its text (or its preview) as its key's.
    ///
    /// Many are read on a thread of their own, a few ahead of the indexing:
    /// reading (decompressing frames, checking UTF-8) was a fifth of this
    /// loop, and the loop ends the build of a part, which a flush and so
    /// ingest wait for, while a core sat partly idle (on the agent corpus).
    fn index<S: TextSink>(&mut self, sink: &mut S, read: &PayloadText) -> Result<(), TextError> {
        let mut payloads = std::mem::take(&mut self.payloads);
        self.preview_bytes = 0;
        payloads.sort_by_cached_key(|p| read.place(&p.id));
        if payloads.len() < READ_AHEAD_FROM {
            for p in payloads {
                let text = read.read(&p.id);
                p.index(sink, text)?;
            }
            return Ok(());
        }
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD);
            std::thread::Builder::new()
                .name(READER_THREAD.into())
                .spawn_scoped(s, move || {
                    for p in payloads {
                        let text = read.read(&p.id);
                        // A closed channel: indexing failed, and says why.
                        if tx.send((p, text)).is_err() {
                            return;
                        }
                    }
                })?;
            let indexed = rx.iter().try_for_each(|(p, text)| p.index(sink, text));
            // Stops the reader if indexing stopped early (the scope joins it).
            drop(rx);
            indexed
        })
    }
}

impl PendingPayload {
    /// Indexes `text`, the payload's, or its preview if it could not be read.
    fn index<S: TextSink>(self, sink: &mut S, text: Option<String>) -> Result<(), TextError> {
        sink.set_shared(self.key, self.field, text.as_deref().unwrap_or(&self.preview))
    }
}

/// From this many pending payloads on, they are read on a thread of their
/// own; fewer are read inline (a hot index catching up on a few new rows).
const READ_AHEAD_FROM: usize = 64;
/// Payloads read ahead of the indexing, at most.
const READ_AHEAD: usize = 32;
const READER_THREAD: &str = "skein-text-read";

/// Indexes record `r` as row `row`. A payload it
/// holds that the index has no key for yet is added to `pending`, for its
/// text to be read later (here, if `pending` is then full); without `read`,
/// its preview is indexed as the row's own text.
fn index_record<R: TextRecord, S: TextSink>(
    sink: &mut S,
    keys: &mut SharedKeys,
    pending: &mut PendingPayloads,
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
                if read.is_none() {
                    own.push((field, preview.into()));
                    continue;
                }
                let key = sink.new_shared()?;
                keys.insert((id, field), key);
                sink.link(row, key)?;
                pending.preview_bytes += preview.len();
                pending.payloads.push(PendingPayload {
                    key,
                    field,
                    id,
                    preview: preview.to_string(),
                });
            }
        }
    }
    let doc: Vec<(TextField, &str)> = own.iter().map(|(f, t)| (*f, t.as_ref())).collect();
    sink.own(row, &doc)?;
    match read {
        Some(read) if pending.is_full() => pending.index(sink, read),
        _ => Ok(()),
    }
}

/// Builds a part's text index from its rows, in the order they are written.
pub struct PartTextBuilder {
    builder: PartTextIndexBuilder,
    keys: SharedKeys,
    pending: PendingPayloads,
    read: Option<PayloadText>,
    /// Rows pushed.
    rows: u32,
}

impl PartTextBuilder {
    /// Payload values are read through `read` (without it, by their preview).
    pub fn new(read: Option<PayloadText>) -> Result<PartTextBuilder, TextError> {
        Ok(PartTextBuilder {
            builder: PartTextIndexBuilder::new()?,
            keys: SharedKeys::default(),
            pending: PendingPayloads::default(),
            read,
            rows: 0,
        })
    }

    /// Indexes the next row.
    pub fn push<R: TextRecord>(&mut self, r: &R) -> Result<(), TextError> {
        let row = self.rows;
        self.rows += 1;
        let read = self.read.as_ref();
        index_record(&mut self.builder, &mut self.keys, &mut self.pending, row, r, read)
    }

    /// The index as the bytes of one file. The payloads still pending are
    /// read here, all in the order of their places: one drain per part
    /// decompresses each frame once, where a drain per chunk of rows
    /// decompressed a frame again for each chunk that named it (a part's
    /// row order is no frame's order).
    pub fn finish(mut self) -> Result<Vec<u8>, TextError> {
        if let Some(read) = &self.read {
            self.pending.index(&mut self.builder, read)?;
        }
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
        let mut pending = PendingPayloads::default();
        for (i, r) in rows.iter().enumerate() {
            let row = start + i as u32;
            if row < *upto {
                continue;
            }
            // A hot index cannot fail (it is maps in memory).
            let _ = index_record(index, keys, &mut pending, row, &**r, read);
        }
        // Rows are covered once their payloads' text is in.
        if let Some(read) = read {
            let _ = pending.index(index, read);
        }
        *upto = (*upto).max(start + rows.len() as u32);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::ref_value;
    use crate::text::PayloadPlace;
    use skein_model::LogRecord;
    use skein_text::PartTextIndex;

    /// Log records whose bodies are payloads: payload `p` (of `n`) is in
    /// frame `p % 5` at offset `p`, and in row `r` the payload is
    /// `r * 7 % n` (no frame's order). Each payload's text holds
    /// `deep{p}` past its preview; payload 3 cannot be read.
    struct Fixture {
        rows: Vec<Arc<LogRecord>>,
        read: PayloadText,
        reads: Arc<Mutex<Vec<PayloadRef>>>,
        /// The threads that read them.
        readers: Arc<Mutex<std::collections::BTreeSet<String>>>,
        places: Arc<FastMap<PayloadRef, PayloadPlace>>,
    }

    fn fixture(n: usize) -> Fixture {
        let texts: Vec<String> = (0..n).map(|p| format!("{} deep{p}", "filler ".repeat(40))).collect();
        let ids: Vec<PayloadRef> = texts.iter().map(|t| PayloadRef::of(t.as_bytes())).collect();
        let places: Arc<FastMap<PayloadRef, PayloadPlace>> = Arc::new(
            ids.iter()
                .enumerate()
                .map(|(p, id)| (*id, (0, (p % 5) as u64, p as u64)))
                .collect(),
        );
        let rows = (0..n * 3)
            .map(|r| {
                let p = r * 7 % n;
                let mut l = crate::testdata::logs(1).remove(0);
                l.body = ref_value(ids[p], &texts[p]);
                Arc::new(l)
            })
            .collect();
        let reads = Arc::new(Mutex::new(Vec::new()));
        let readers = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        let readers_log = readers.clone();
        let (log, by_id): (_, FastMap<PayloadRef, String>) = (reads.clone(), ids.iter().copied().zip(texts).collect());
        let unreadable = ids[3];
        let place_of = places.clone();
        let read = PayloadText::new(move |id| {
            log.lock().push(*id);
            readers_log
                .lock()
                .insert(std::thread::current().name().unwrap_or("").to_string());
            by_id.get(id).filter(|_| *id != unreadable).cloned()
        })
        .with_places(move |id| place_of[id]);
        Fixture {
            rows,
            read,
            reads,
            readers,
            places,
        }
    }

    impl Fixture {
        /// Every payload was read once, in the order of its place.
        fn check_reads(&self, n: usize) {
            let reads = self.reads.lock();
            assert_eq!(reads.len(), n, "each payload read once");
            let places: Vec<PayloadPlace> = reads.iter().map(|id| self.places[id]).collect();
            assert!(places.is_sorted(), "read in the order of their places: {places:?}");
        }

        /// The rows holding payload `p`.
        fn rows_of(&self, p: usize) -> RoaringBitmap {
            let n = self.rows.len() / 3;
            (0..self.rows.len() as u32)
                .filter(|r| *r as usize * 7 % n == p)
                .collect()
        }
    }

    #[test]
    fn a_part_reads_its_payloads_a_frame_at_a_time() {
        a_part_reads_payloads(40, false);
    }

    #[test]
    fn a_part_reads_many_payloads_ahead_on_a_thread_of_their_own() {
        a_part_reads_payloads(READ_AHEAD_FROM * 3, true);
    }

    fn a_part_reads_payloads(n: usize, ahead: bool) {
        let f = fixture(n);
        let mut b = PartTextBuilder::new(Some(f.read.clone())).unwrap();
        for r in &f.rows {
            b.push(&**r).unwrap();
        }
        assert!(f.reads.lock().is_empty(), "read once the part's rows are in");
        let ix = PartTextIndex::open(b.finish().unwrap()).unwrap();
        let readers = f.readers.lock().clone();
        assert_eq!(readers.contains(READER_THREAD), ahead, "read by {readers:?}");
        assert_eq!(readers.len(), 1, "read by {readers:?}");
        check_part(&f, &ix, n);
    }

    /// `ix`, the index of `f`'s rows, read each of `n` payloads once, in
    /// the order of their places, and finds the rows holding each.
    fn check_part(f: &Fixture, ix: &PartTextIndex, n: usize) {
        f.check_reads(n);
        let search = |q: &str| ix.search(&TextQuery::parse(q).unwrap()).unwrap();
        for p in [0, 1, 17, 39] {
            assert_eq!(search(&format!("deep{p}")), f.rows_of(p), "deep{p}");
        }
        assert!(
            search("deep3").is_empty(),
            "an unreadable payload is indexed by its preview"
        );
        assert_eq!(search("filler"), (0..f.rows.len() as u32).collect::<RoaringBitmap>());
    }

    /// Fails its fifth shared text.
    #[derive(Default)]
    struct FailingSink {
        shared: usize,
    }

    impl TextSink for FailingSink {
        fn own(&mut self, _: u32, _: &[(TextField, &str)]) -> Result<(), TextError> {
            Ok(())
        }
        fn new_shared(&mut self) -> Result<u32, TextError> {
            Ok(0)
        }
        fn set_shared(&mut self, _: u32, _: TextField, _: &str) -> Result<(), TextError> {
            self.shared += 1;
            match self.shared {
                5 => Err(TextError::TooLarge("shared texts")),
                _ => Ok(()),
            }
        }
        fn link(&mut self, _: u32, _: u32) -> Result<(), TextError> {
            Ok(())
        }
    }

    #[test]
    fn an_indexing_failure_stops_the_reader_and_is_returned() {
        let n = READ_AHEAD_FROM * 8;
        let f = fixture(n);
        let mut pending = PendingPayloads::default();
        for (key, id) in f.places.keys().enumerate() {
            pending.payloads.push(PendingPayload {
                key: key as u32,
                field: TextField::Body,
                id: *id,
                preview: String::new(),
            });
        }
        let mut sink = FailingSink::default();
        let err = pending.index(&mut sink, &f.read).unwrap_err();
        assert!(matches!(err, TextError::TooLarge(_)), "{err}");
        assert_eq!(sink.shared, 5, "nothing indexed past the failure");
        let reads = f.reads.lock().len();
        assert!(reads < n, "the reader stopped early: {reads} of {n} read");
    }

    #[test]
    fn a_hot_index_reads_its_payloads_a_frame_at_a_time() {
        let n = 40;
        let f = fixture(n);
        let mut hot = HotText::default();
        hot.index_rows(0, &f.rows[..60], Some(&f.read));
        assert_eq!(hot.upto(), 60);
        hot.index_rows(0, &f.rows, Some(&f.read));
        assert_eq!(hot.upto(), f.rows.len() as u32);
        f.check_reads(n);
        let text = Mutex::new(hot);
        let total = f.rows.len() as u32;
        let search = |q: &str| hot_candidates(&text, &TextQuery::parse(q).unwrap(), total);
        for p in [0, 1, 17, 39] {
            assert_eq!(search(&format!("deep{p}")), f.rows_of(p), "deep{p}");
        }
        assert!(search("deep3").is_empty());
    }
}
