//! A part's text index: built once from the part's rows with tantivy, stored
//! as one bundle file beside the part, searched in place.
//!
//! tantivy sees Skein's own tokens (pre-tokenized, so its analyzers never
//! run): one text field per [`Field`], postings without frequencies or
//! positions (phrases are decided by the naive model, tantivy only narrows),
//! no field norms, no stored documents, and the row number as a fast field,
//! so row numbers need not be dense or in order.

use std::borrow::Cow;
use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use std::ops::{Deref, Range};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};

use roaring::RoaringBitmap;
use stable_deref_trait::StableDeref;
use tantivy::columnar::{Cardinality, ColumnValues};
use tantivy::directory::{OwnedBytes, RamDirectory};
use tantivy::index::SegmentReader;
use tantivy::merge_policy::NoMergePolicy;
use tantivy::postings::TermInfo;
use tantivy::schema::{
    Field as TantivyField, FieldType, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Directory, Index, IndexMeta, IndexSettings, IndexWriter, InvertedIndexReader, TantivyDocument, Term};

use crate::TextError;
use crate::blocks::BLOCK_ROWS;
use crate::bundle::{self, BundleDirectory};
use crate::doc_bounds::DocBounds;
use crate::eval::{self, TermSource};
use crate::field::Field;
use crate::links::Links;
use crate::query::Query;
use crate::sources::{self, Source, SourceRows};
use crate::vocabulary::{VOCABULARY_TERMS, Vocabulary};

pub(crate) const ROW_FIELD: &str = "row";
/// The bundle member holding every row added, serialized roaring: the
/// universe `NOT` subtracts from (rows without text included).
pub(crate) const ROWS_FILE: &str = "skein.rows";
const META_FILE: &str = "meta.json";
/// The bundle member holding the [`Links`] of shared texts.
pub(crate) const LINKS_FILE: &str = "skein.links";
/// The bundle member holding the [`Source`]s (absent before version 3:
/// one source of the part's own rows).
pub(crate) const SOURCES_FILE: &str = "skein.sources";

/// Set in the number of a shared text's document (its key below): row
/// numbers are `u32`, so the two never meet.
const SHARED: u64 = 1 << 32;

/// tantivy's indexing memory before it writes a segment; a bigger part is
/// written as several segments, kept as they are (see
/// [`PartTextIndexBuilder::finish`]).
pub const DEFAULT_MEMORY_BUDGET: usize = 32 << 20;

pub(crate) struct Fields {
    text: [TantivyField; 4],
    row: TantivyField,
}

pub(crate) fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(TERMS_TOKENIZER)
        .set_index_option(IndexRecordOption::Basic)
        .set_fieldnorms(false);
    let options = TextOptions::default().set_indexing_options(indexing);
    let text = Field::ALL.map(|f| builder.add_text_field(f.name(), options.clone()));
    let row = builder.add_u64_field(ROW_FIELD, NumericOptions::default().set_fast());
    (builder.build(), Fields { text, row })
}

/// The terms of one document (a block of rows, or a shared text), per field,
/// as vocabulary ids.
#[derive(Default)]
struct Terms {
    ids: [Vec<u32>; 4],
}

impl Terms {
    fn is_empty(&self) -> bool {
        self.ids.iter().all(Vec::is_empty)
    }

    fn add(&mut self, vocabulary: &mut Vocabulary, field: Field, text: &str) {
        vocabulary.text(text, &mut self.ids[field.index()]);
    }

    /// The terms gathered as a tantivy document numbered `number` (a block,
    /// or [`SHARED`] | key), leaving `self` empty; `None` without terms.
    fn take_doc(&mut self, vocabulary: &mut Vocabulary, fields: &Fields, number: u64) -> Option<TantivyDocument> {
        let mut tdoc = TantivyDocument::default();
        let mut any = false;
        for (field, ids) in self.ids.iter_mut().enumerate() {
            if ids.is_empty() {
                continue;
            }
            any = true;
            vocabulary.dedup(ids);
            // Joined by NUL, which no term holds (it is not a word
            // character, and folding never makes one; folding can make a
            // space: NFKC of U+FDFA has three), they split back exactly.
            // (Pre-tokenized values go through JSON inside tantivy: a fifth
            // of the build.)
            let mut joined = String::with_capacity(ids.iter().map(|&id| vocabulary.term(id).len() + 1).sum());
            for &id in ids.iter() {
                if !joined.is_empty() {
                    joined.push(TERM_SEPARATOR);
                }
                joined.push_str(vocabulary.term(id));
            }
            ids.clear();
            tdoc.add_text(fields.text[field], joined);
        }
        any.then(|| {
            tdoc.add_u64(fields.row, number);
            tdoc
        })
    }
}

/// The tokenizer of the indexed fields: [`TermsTokenizer`].
const TERMS_TOKENIZER: &str = "skein_terms";
const TERM_SEPARATOR: char = '\0';

/// Splits a document's NUL-joined terms (see [`Terms::take_doc`]) back into
/// those terms, for tantivy.
#[derive(Clone, Default)]
struct TermsTokenizer {
    token: tantivy::tokenizer::Token,
}

struct TermsStream<'a> {
    parts: std::str::Split<'a, char>,
    token: &'a mut tantivy::tokenizer::Token,
}

impl tantivy::tokenizer::Tokenizer for TermsTokenizer {
    type TokenStream<'a> = TermsStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> TermsStream<'a> {
        self.token.reset();
        TermsStream {
            parts: text.split(TERM_SEPARATOR),
            token: &mut self.token,
        }
    }
}

impl tantivy::tokenizer::TokenStream for TermsStream<'_> {
    fn advance(&mut self) -> bool {
        for part in self.parts.by_ref() {
            if part.is_empty() {
                continue;
            }
            self.token.text.clear();
            self.token.text.push_str(part);
            self.token.position = self.token.position.wrapping_add(1);
            return true;
        }
        false
    }

    fn token(&self) -> &tantivy::tokenizer::Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        self.token
    }
}

/// Builds a part's text index from its rows.
pub struct PartTextIndexBuilder {
    ram: RamDirectory,
    index: Index,
    writer: IndexWriter<TantivyDocument>,
    fields: Fields,
    rows: RoaringBitmap,
    links: Links,
    /// The terms of the block being gathered, per field, and its number.
    block: Option<u32>,
    block_terms: Terms,
    vocabulary: Vocabulary,
    /// [`VOCABULARY_TERMS`], smaller in tests.
    vocabulary_terms: usize,
    /// Per shared text, the key of the group of well-known pieces it holds
    /// (see [`add_shared`](Self::add_shared)), if any.
    group_of: HashMap<u32, u32, FxBuildHasher>,
    /// Per field, each group indexed: the xxh3 of its text → its text and
    /// key.
    groups: [HashMap<u64, (Box<str>, u32), FxBuildHasher>; 4],
    /// Bytes of the groups' texts held.
    group_bytes: usize,
    /// [`GROUP_BYTES`]; 0 in tests that compare with groups off.
    group_bytes_limit: usize,
}

/// Bytes of group texts a builder holds; past them, well-known pieces are
/// indexed with each text that holds them, as any other.
const GROUP_BYTES: usize = 16 << 20;

impl PartTextIndexBuilder {
    pub fn new() -> Result<PartTextIndexBuilder, TextError> {
        PartTextIndexBuilder::with_memory_budget(DEFAULT_MEMORY_BUDGET)
    }

    /// A builder whose tantivy writer holds at most about `bytes` before it
    /// writes a segment (tantivy's minimum is 15 MB).
    pub fn with_memory_budget(bytes: usize) -> Result<PartTextIndexBuilder, TextError> {
        let (schema, fields) = schema();
        let ram = RamDirectory::create();
        let index = Index::create(ram.clone(), schema, IndexSettings::default())?;
        index
            .tokenizers()
            .register(TERMS_TOKENIZER, TextAnalyzer::from(TermsTokenizer::default()));
        // One thread: a flush or compaction already runs beside ingest, and
        // the machine is small; segments are merged once, at the end.
        let writer = index.writer_with_num_threads(1, bytes.max(15_000_000))?;
        writer.set_merge_policy(Box::new(NoMergePolicy));
        Ok(PartTextIndexBuilder {
            ram,
            index,
            writer,
            fields,
            rows: RoaringBitmap::new(),
            links: Links::default(),
            block: None,
            block_terms: Default::default(),
            vocabulary: Vocabulary::default(),
            vocabulary_terms: VOCABULARY_TERMS,
            group_of: HashMap::default(),
            groups: Default::default(),
            group_bytes: 0,
            group_bytes_limit: GROUP_BYTES,
        })
    }

    /// Indexes the text of part row `row`.
    pub fn add(&mut self, row: u32, doc: &[(Field, &str)]) -> Result<(), TextError> {
        self.rows.insert(row);
        let block = row / BLOCK_ROWS;
        if self.block != Some(block) {
            self.flush_block()?;
            self.block = Some(block);
        }
        for &(field, text) in doc {
            self.block_terms.add(&mut self.vocabulary, field, text);
        }
        Ok(())
    }

    /// Writes the gathered block as one document. A block may be written
    /// twice (rows added out of order): its rows are the union.
    fn flush_block(&mut self) -> Result<(), TextError> {
        let Some(block) = self.block.take() else {
            return Ok(());
        };
        // A block without text is only in the row set: no term can match it.
        let doc = self
            .block_terms
            .take_doc(&mut self.vocabulary, &self.fields, u64::from(block));
        self.vocabulary.trim(self.vocabulary_terms);
        if let Some(tdoc) = doc {
            self.writer.add_document(tdoc)?;
        }
        Ok(())
    }

    /// Indexes a shared text (see [`links`](crate::links)) in `field`
    /// once, and returns its key for [`link`](Self::link).
    ///
    /// Shared texts share text with each other too: every request's
    /// messages begin with one of a few system prompts. The pieces of a
    /// text the vocabulary knows well ([`Vocabulary::text_with_known`]),
    /// joined, are a *group*, indexed once as a shared text of its own; the
    /// text's document holds the rest of its terms, and a row linked to the
    /// text is linked to its group too. A text's terms are its document's
    /// and its group's (pieces are cut after whitespace, so the terms of
    /// pieces joined are the union of theirs), so candidates are what they
    /// were, at a fraction of the postings: a system prompt's terms are
    /// posted once per group, not once per request.
    pub fn add_shared(&mut self, field: Field, text: &str) -> Result<u32, TextError> {
        let key = self.new_shared()?;
        self.set_shared(key, field, text)?;
        Ok(key)
    }

    /// A key for a shared text whose text comes later, with
    /// [`set_shared`](Self::set_shared): rows may be linked to it
    /// meanwhile. (A caller reading many payloads reads them in the order
    /// cheapest for their store, not in the order rows name them.)
    pub fn new_shared(&mut self) -> Result<u32, TextError> {
        self.links.new_key()
    }

    /// Indexes `text`, in `field`, as the text of `key` (from
    /// [`new_shared`](Self::new_shared)), once: as
    /// [`add_shared`](Self::add_shared) does. The rows linked to `key`
    /// already are linked to its group too.
    pub fn set_shared(&mut self, key: u32, field: Field, text: &str) -> Result<(), TextError> {
        if key as usize >= self.links.len() {
            return Err(TextError::Corrupt(format!(
                "text for shared text {key}, which was never made"
            )));
        }
        let mut terms = Terms::default();
        let mut known = Vec::new();
        let ids = &mut terms.ids[field.index()];
        self.vocabulary.text_with_known(text, ids, &mut known);
        if !known.is_empty() {
            let group: String = known.into_iter().map(|r| &text[r]).collect();
            match self.group_key(field, &group)? {
                Some(g) => {
                    self.group_of.insert(key, g);
                    self.links.link_rows_of(key, g);
                }
                None => self.vocabulary.text(&group, &mut terms.ids[field.index()]),
            }
        }
        let doc = terms.take_doc(&mut self.vocabulary, &self.fields, SHARED | u64::from(key));
        // A block may be half gathered (a row's shared texts come with it).
        if self.block_terms.is_empty() {
            self.vocabulary.trim(self.vocabulary_terms);
        }
        if let Some(tdoc) = doc {
            self.writer.add_document(tdoc)?;
        }
        Ok(())
    }

    /// The key of the group `group` in `field`, indexed as a shared text
    /// the first time; `None` once the groups hold [`GROUP_BYTES`].
    fn group_key(&mut self, field: Field, group: &str) -> Result<Option<u32>, TextError> {
        let hash = xxhash_rust::xxh3::xxh3_64(group.as_bytes());
        if let Some((text, key)) = self.groups[field.index()].get(&hash)
            && **text == *group
        {
            return Ok(Some(*key));
        }
        if self.group_bytes + group.len() > self.group_bytes_limit {
            return Ok(None);
        }
        let key = self.links.new_key()?;
        let mut terms = Terms::default();
        terms.add(&mut self.vocabulary, field, group);
        if let Some(tdoc) = terms.take_doc(&mut self.vocabulary, &self.fields, SHARED | u64::from(key)) {
            self.writer.add_document(tdoc)?;
        }
        self.group_bytes += group.len();
        // Another group with this hash keeps its key and document; only
        // this one is found by the hash from now on.
        self.groups[field.index()].insert(hash, (group.into(), key));
        Ok(Some(key))
    }

    /// Row `row` holds the shared text `key`: it matches that text's terms.
    pub fn link(&mut self, row: u32, key: u32) -> Result<(), TextError> {
        self.rows.insert(row);
        let group = self.group_of.get(&key).copied();
        for key in std::iter::once(key).chain(group) {
            self.links
                .link(key, row)
                .ok_or_else(|| TextError::Corrupt(format!("link to shared text {key}, which was never added")))?;
        }
        Ok(())
    }

    /// Writes the index and returns its bundle: the bytes of one file.
    pub fn finish(self) -> Result<Vec<u8>, TextError> {
        let built = self.commit()?;
        let (files, docs) = tantivy_files(&built.ram, &built.index)?;
        write_bundle(files, &built.rows, &built.links, &[own_rows(docs)])
    }

    /// Writes every document to tantivy, in the segments it wrote as its
    /// memory filled. They are not merged: a query reads any number of
    /// segments, compaction merges them with the part's, and merging them
    /// here was a quarter of a million-row part's index build (text_parts
    /// example, 4M records: builder CPU 4.46 -> 3.42 µs a record).
    fn commit(mut self) -> Result<Committed, TextError> {
        self.flush_block()?;
        self.writer.commit()?;
        self.writer.wait_merging_threads()?;
        Ok(Committed {
            ram: self.ram,
            index: self.index,
            rows: self.rows,
            links: self.links,
        })
    }

    /// A bundle of an index without documents, for the given rows.
    pub(crate) fn empty(rows: &RoaringBitmap, links: &Links, sources: &[Source]) -> Result<Vec<u8>, TextError> {
        let mut b = PartTextIndexBuilder::new()?;
        b.writer.commit()?;
        b.writer.wait_merging_threads()?;
        let (files, _) = tantivy_files(&b.ram, &b.index)?;
        write_bundle(files, rows, links, sources)
    }
}

/// A builder's index, all written.
struct Committed {
    ram: RamDirectory,
    index: Index,
    rows: RoaringBitmap,
    links: Links,
}

/// Named files, for a bundle.
pub(crate) type Files = Vec<(String, Vec<u8>)>;

/// The one source of a built part's index: documents `0..docs`, numbered
/// by the part's own rows.
fn own_rows(docs: u32) -> Source {
    Source {
        docs: 0..docs,
        keys: 0,
        rows: SourceRows::Own,
    }
}

/// The files of a tantivy index held in `ram`, and its documents.
pub(crate) fn tantivy_files(ram: &RamDirectory, index: &Index) -> Result<(Files, u32), TextError> {
    joined_tantivy_files(&[(ram, index)])
}

/// The files of tantivy indexes of one schema, held in `indexes`, as one
/// index whose segments are theirs in order, and its documents.
fn joined_tantivy_files(indexes: &[(&RamDirectory, &Index)]) -> Result<(Files, u32), TextError> {
    let mut files = Vec::new();
    let mut joined: Option<IndexMeta> = None;
    for (ram, index) in indexes {
        let metas = index.load_metas()?;
        segment_files(*ram, &metas, &mut files)?;
        match &mut joined {
            Some(joined) => joined.segments.extend(metas.segments),
            None => joined = Some(metas),
        }
    }
    let joined = joined.ok_or_else(|| TextError::Corrupt("no index to join".into()))?;
    // Segment ids are random (UUIDs): the segments' files never collide.
    files.insert(0, meta_file(&joined)?);
    Ok((files, documents(&joined)?))
}

/// The `meta.json` of an index of the segments `metas` lists.
pub(crate) fn meta_file(metas: &IndexMeta) -> Result<(String, Vec<u8>), TextError> {
    let json = serde_json::to_vec_pretty(metas).map_err(std::io::Error::from)?;
    Ok((META_FILE.to_owned(), json))
}

pub(crate) fn documents(metas: &IndexMeta) -> Result<u32, TextError> {
    let docs = metas.segments.iter().map(|s| u64::from(s.max_doc())).sum::<u64>();
    u32::try_from(docs).map_err(|_| TextError::TooLarge("documents"))
}

/// Appends the files of the segments of `metas`, held in `dir`, to `files`.
pub(crate) fn segment_files(dir: &dyn Directory, metas: &IndexMeta, files: &mut Files) -> Result<(), TextError> {
    let mut paths: Vec<_> = metas.list_segment_files().into_iter().collect();
    paths.sort();
    for path in paths {
        // Candidates include components a segment may not have.
        if !dir.exists(&path).map_err(tantivy::TantivyError::from)? {
            continue;
        }
        let bytes = dir
            .open_read(&path)
            .map_err(tantivy::TantivyError::from)?
            .read_bytes()?;
        let name = path
            .to_str()
            .ok_or_else(|| TextError::Corrupt(format!("tantivy file {path:?}")))?;
        files.push((name.to_owned(), bytes.as_slice().to_vec()));
    }
    Ok(())
}

/// Lays out a bundle: tantivy's files, the row set, the links, the sources.
pub(crate) fn write_bundle(
    mut files: Files,
    rows: &RoaringBitmap,
    links: &Links,
    sources: &[Source],
) -> Result<Vec<u8>, TextError> {
    let mut set = Vec::with_capacity(rows.serialized_size());
    rows.serialize_into(&mut set)?;
    files.push((ROWS_FILE.to_owned(), set));
    files.push((LINKS_FILE.to_owned(), links.encode()?));
    files.push((SOURCES_FILE.to_owned(), sources::encode(sources)?));
    bundle::write(&files)
}

/// Keeps the caller's bytes alive for tantivy, which borrows them for as
/// long as any of its readers lives.
struct Holder<B: ?Sized>(Arc<B>);

impl<B: AsRef<[u8]> + ?Sized> Deref for Holder<B> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

// SAFETY: the slice lives inside the `Arc`'s allocation (or memory the `B`
// there owns, such as a heap buffer or a mapping), which does not move when
// the `Holder` moves, and nothing can mutate `B` through a shared `Arc`.
unsafe impl<B: AsRef<[u8]> + ?Sized> StableDeref for Holder<B> {}

pub(crate) struct Segment {
    inverted: [Arc<InvertedIndexReader>; 4],
    pub(crate) rows: Arc<dyn ColumnValues<u64>>,
    pub(crate) max_doc: u32,
    /// The number of its first document across the index's segments.
    base: u32,
    /// Made by the first search of a window (a merge never needs them).
    bounds: OnceLock<DocBounds>,
}

impl Segment {
    /// The documents, in ascending ranges, outside which none names a row
    /// in `window`.
    fn docs_within(&self, window: &Range<u32>, sources: &[Source], links: &Links) -> Vec<Range<u32>> {
        if window.start == 0 && window.end == u32::MAX {
            let all = 0..self.max_doc;
            return vec![all];
        }
        self.bounds
            .get_or_init(|| DocBounds::new(&*self.rows, self.max_doc, self.base, sources, links, SHARED))
            .docs_within(window)
    }
}

/// A part's text index, opened over its bundle's bytes (in memory or mapped).
pub struct PartTextIndex {
    text: [TantivyField; 4],
    /// For merging into another part's index.
    pub(crate) index: Index,
    /// The bundle's files as written, for carrying segments into another
    /// part's index (tantivy's own directory hands out files without their
    /// footers).
    pub(crate) files: BundleDirectory,
    pub(crate) segments: Vec<Segment>,
    pub(crate) rows: RoaringBitmap,
    pub(crate) links: Links,
    pub(crate) sources: Vec<Source>,
    bytes: usize,
}

impl std::fmt::Debug for PartTextIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartTextIndex")
            .field("segments", &self.segments.len())
            .field("sources", &self.sources.len())
            .field("rows", &self.rows.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl PartTextIndex {
    /// Opens a bundle held by `bytes`: a `Vec<u8>`, `bytes::Bytes`, a
    /// `memmap2::Mmap`. Damaged bytes are an error.
    pub fn open<B: AsRef<[u8]> + Send + Sync + 'static>(bytes: B) -> Result<PartTextIndex, TextError> {
        PartTextIndex::open_shared(Arc::new(bytes))
    }

    /// Opens a bundle whose bytes are shared (an `Arc<Mmap>` the caller also
    /// reads).
    pub fn open_shared<B: AsRef<[u8]> + Send + Sync + ?Sized + 'static>(
        bytes: Arc<B>,
    ) -> Result<PartTextIndex, TextError> {
        let owned = OwnedBytes::new(Holder(bytes));
        let files = bundle::read(&owned)?;
        guarded(|| PartTextIndex::open_files(files, owned.len()))
    }

    fn open_files(mut files: HashMap<String, OwnedBytes>, bytes: usize) -> Result<PartTextIndex, TextError> {
        let rows = files
            .remove(ROWS_FILE)
            .ok_or_else(|| TextError::Corrupt("no row set".into()))?;
        let rows = RoaringBitmap::deserialize_from(rows.as_slice())
            .map_err(|e| TextError::Corrupt(format!("row set: {e}")))?;
        let links = files
            .remove(LINKS_FILE)
            .ok_or_else(|| TextError::Corrupt("no shared text links".into()))?;
        let links = Links::decode(links.as_slice())?;
        let sources = files.remove(SOURCES_FILE);
        let files = BundleDirectory::new(files);
        let index = Index::open(files.clone())?;
        let schema = index.schema();
        let fields = schema_fields(&schema)?;
        let mut segments = Vec::new();
        let mut docs: u32 = 0;
        for segment in index.searchable_segments()? {
            let reader = SegmentReader::open(&segment)?;
            let mut inverted = Vec::with_capacity(4);
            for f in fields.text {
                inverted.push(reader.inverted_index(f)?);
            }
            let inverted: [Arc<InvertedIndexReader>; 4] = inverted
                .try_into()
                .map_err(|_| TextError::Corrupt("field count".into()))?;
            let column = reader.fast_fields().u64(ROW_FIELD)?;
            // Every indexed document has its row.
            if column.get_cardinality() != Cardinality::Full {
                return Err(TextError::Corrupt("a document without a row number".into()));
            }
            let max_doc = reader.max_doc();
            segments.push(Segment {
                inverted,
                rows: column.values,
                max_doc,
                base: docs,
                bounds: OnceLock::new(),
            });
            docs = docs
                .checked_add(max_doc)
                .ok_or_else(|| TextError::Corrupt("too many documents".into()))?;
        }
        let sources = match sources {
            Some(bytes) => sources::decode(bytes.as_slice(), docs, links.len())?,
            // Version 2: every document is the part's own.
            None => vec![Source {
                docs: 0..docs,
                keys: 0,
                rows: SourceRows::Own,
            }],
        };
        Ok(PartTextIndex {
            text: fields.text,
            index,
            files,
            segments,
            rows,
            links,
            sources,
            bytes,
        })
    }

    /// Candidate rows for `query`: every row it matches, maybe more; filter
    /// them with [`Query::matches`].
    pub fn search(&self, query: &Query) -> Result<RoaringBitmap, TextError> {
        let all = Windowed {
            ix: self,
            window: 0..u32::MAX,
            universe: Cow::Borrowed(&self.rows),
        };
        guarded(|| eval::candidates(&query.root, &all).map(|(rows, _)| rows))
    }

    /// [`search`](Self::search)'s candidates in `window` of the part's rows.
    /// Only the postings of documents that may name rows in the window are
    /// read, and rows are made only in the window: a common word's
    /// candidates over a part of ten million rows cost ~70 ms, and a page
    /// of its newest hits needs a few hundred rows.
    pub fn search_within(&self, query: &Query, window: Range<u32>) -> Result<RoaringBitmap, TextError> {
        // Past the last row there is nothing to find (and a range to
        // u32::MAX would be a bitmap of half a gigabyte).
        let end = self.rows.max().map_or(0, |m| m.saturating_add(1));
        let window = window.start..window.end.min(end);
        let mut universe = RoaringBitmap::new();
        if window.start < window.end {
            universe.insert_range(window.clone());
        }
        universe &= &self.rows;
        let windowed = Windowed {
            ix: self,
            window,
            universe: Cow::Owned(universe),
        };
        guarded(|| eval::candidates(&query.root, &windowed).map(|(rows, _)| rows))
    }

    /// Every row the index was built with.
    pub fn rows(&self) -> &RoaringBitmap {
        &self.rows
    }

    /// Estimated heap bytes held beside the bundle's bytes: the row set, the
    /// shared-text links and tantivy's per-segment readers.
    pub fn memory_bytes(&self) -> usize {
        let sources: usize = self
            .sources
            .iter()
            .map(|s| match &s.rows {
                SourceRows::Own => 32,
                SourceRows::Carried { out, starts } => 32 + out.serialized_size() + 4 * starts.len(),
            })
            .sum();
        let bounds: usize = self
            .segments
            .iter()
            .filter_map(|s| s.bounds.get())
            .map(DocBounds::memory_bytes)
            .sum();
        self.rows.serialized_size() + self.links.memory_bytes() + self.segments.len() * 4096 + sources + bounds
    }

    /// How many indexes this one was merged from (1 for one built from
    /// rows): each flushed part's index is a source, and merges keep them.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Size of the bundle in bytes.
    /// The number of tantivy segments it reads (a merged part's may be
    /// its inputs', see [`SegmentPolicy`](crate::SegmentPolicy)).
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// Adds the numbers of the documents in a posting list that lie in
    /// `ranges` (those of a segment that may name rows in a window): rows
    /// to `found.rows`, shared texts' keys to `found.keys`. The postings of
    /// other documents are skipped unread (see [`crate::doc_bounds`]).
    fn collect(
        &self,
        seg: &Segment,
        inverted: &InvertedIndexReader,
        info: &TermInfo,
        ranges: &[Range<u32>],
        found: &mut Found,
    ) -> Result<(), TextError> {
        let mut postings = inverted.read_block_postings_from_terminfo(info, IndexRecordOption::Basic)?;
        let mut numbers = Vec::new();
        let mut source = 0;
        for within in ranges.iter().cloned() {
            // The first document at or past the range's start, in the
            // block the skip list jumps to (ranges ascend, as seeks must).
            let mut skip = postings.seek(within.start);
            loop {
                let block = postings.docs().get(skip..).unwrap_or_default();
                skip = 0;
                if block.iter().any(|&d| d >= seg.max_doc) {
                    return Err(TextError::Corrupt("a posting past the last document".into()));
                }
                let docs = &block[..block.partition_point(|&d| d < within.end)];
                if docs.is_empty() {
                    break;
                }
                #[cfg(test)]
                POSTINGS_READ.with(|n| n.set(n.get() + docs.len()));
                numbers.resize(docs.len(), 0);
                seg.rows.get_vals(docs, &mut numbers);
                for (&doc, &n) in docs.iter().zip(&numbers) {
                    let doc = seg.base + doc;
                    source = sources::source_of(&self.sources, doc, source)
                        .ok_or_else(|| TextError::Corrupt(format!("document {doc} has no source")))?;
                    let number =
                        u32::try_from(n & !SHARED).map_err(|_| TextError::Corrupt(format!("document number {n}")))?;
                    if n & SHARED == 0 {
                        found.blocks[source].push(number);
                    } else {
                        // A key past the links links nothing.
                        found.keys.push(number.saturating_add(self.sources[source].keys));
                    }
                }
                if docs.len() < block.len() {
                    break;
                }
                postings.advance();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
thread_local! {
    /// Documents read from postings on this thread: what windows save.
    pub(crate) static POSTINGS_READ: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Document numbers collected from postings: blocks, per source, and keys
/// of shared texts (standing for the rows linked to them).
struct Found {
    blocks: Vec<Vec<u32>>,
    keys: Vec<u32>,
}

impl Found {
    fn new(sources: usize) -> Found {
        Found {
            blocks: vec![Vec::new(); sources],
            keys: Vec::new(),
        }
    }

    /// The rows found in `within` (the part's rows in a window of them):
    /// every row of each block, and those linked to each shared text.
    fn into_rows(self, ix: &PartTextIndex, window: &Range<u32>, within: &RoaringBitmap) -> RoaringBitmap {
        let mut rows = RoaringBitmap::new();
        for (source, mut blocks) in ix.sources.iter().zip(self.blocks) {
            if blocks.is_empty() {
                continue;
            }
            if !blocks.is_sorted() {
                blocks.sort_unstable();
            }
            blocks.dedup();
            source.block_rows(&blocks, &mut rows, window);
        }
        rows &= within;
        if !self.keys.is_empty() {
            rows |= ix.links.rows_within(self.keys, within);
        }
        rows
    }
}

/// Runs tantivy on a bundle's files. The checksum keeps damaged bytes from
/// ever reaching tantivy, but tantivy panics on some inconsistent input (a
/// byte of its files changed and the bundle resealed: about one flip in ten,
/// tried over a whole bundle), so a panic there is a damaged index, not a
/// crash of the process. Its readers are immutable, so nothing is left half
/// updated.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, TextError>) -> Result<T, TextError> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(_) => Err(TextError::Corrupt(
            "tantivy could not read the index: its files are inconsistent".into(),
        )),
    }
}

/// The schema an index was written with must be the one this build reads.
fn schema_fields(schema: &Schema) -> Result<Fields, TextError> {
    let (_, fields) = self::schema();
    for (name, f) in Field::ALL.iter().map(|f| f.name()).zip(fields.text) {
        let found = schema
            .get_field(name)
            .map_err(|_| TextError::Corrupt(format!("no field {name}")))?;
        if found != f || !matches!(schema.get_field_entry(found).field_type(), FieldType::Str(_)) {
            return Err(TextError::Corrupt(format!("field {name} has another type or place")));
        }
    }
    let row = schema
        .get_field(ROW_FIELD)
        .map_err(|_| TextError::Corrupt("no row field".into()))?;
    if row != fields.row || !matches!(schema.get_field_entry(row).field_type(), FieldType::U64(o) if o.is_fast()) {
        return Err(TextError::Corrupt("the row field has another type or place".into()));
    }
    Ok(fields)
}

/// A part's index seen through a window of its rows: what a query reads.
struct Windowed<'a> {
    ix: &'a PartTextIndex,
    window: Range<u32>,
    /// The index's rows in the window: what `NOT` subtracts from.
    universe: Cow<'a, RoaringBitmap>,
}

impl TermSource for Windowed<'_> {
    type Error = TextError;

    fn term(&self, field: Field, term: &str) -> Result<Cow<'_, RoaringBitmap>, TextError> {
        let ix = self.ix;
        let t = Term::from_field_text(ix.text[field.index()], term);
        let mut found = Found::new(ix.sources.len());
        for seg in &ix.segments {
            // A segment none of whose documents reach the window is not
            // read at all (its term dictionary included).
            let ranges = seg.docs_within(&self.window, &ix.sources, &ix.links);
            if ranges.is_empty() {
                continue;
            }
            let inverted = &seg.inverted[field.index()];
            if let Some(info) = inverted.get_term_info(&t)? {
                ix.collect(seg, inverted, &info, &ranges, &mut found)?;
            }
        }
        Ok(Cow::Owned(found.into_rows(ix, &self.window, &self.universe)))
    }

    fn prefix(&self, field: Field, prefix: &str) -> Result<RoaringBitmap, TextError> {
        let ix = self.ix;
        let mut found = Found::new(ix.sources.len());
        for seg in &ix.segments {
            let ranges = seg.docs_within(&self.window, &ix.sources, &ix.links);
            if ranges.is_empty() {
                continue;
            }
            let inverted = &seg.inverted[field.index()];
            let mut stream = inverted.terms().range().ge(prefix.as_bytes()).into_stream()?;
            while stream.advance() {
                if !stream.key().starts_with(prefix.as_bytes()) {
                    break;
                }
                ix.collect(seg, inverted, stream.value(), &ranges, &mut found)?;
            }
        }
        Ok(found.into_rows(ix, &self.window, &self.universe))
    }

    fn universe(&self) -> &RoaringBitmap {
        &self.universe
    }

    /// Postings are of blocks of rows: a superset of the rows per term.
    fn exact(&self) -> bool {
        BLOCK_ROWS == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RowMap;

    /// Texts that share long prompts are indexed with each prompt's
    /// well-known pieces once, as a group: the same candidates as without
    /// groups, in a much smaller index.
    #[test]
    fn shared_texts_index_the_pieces_they_share_once() {
        let prompt = |p: usize| -> String {
            (0..80)
                .map(|k| {
                    format!(
                        "Rule {k} of prompt{p}: check tool{} before topic{}. ",
                        k * 37 % 101,
                        k * k % 97
                    )
                })
                .collect()
        };
        let prompts: Vec<String> = (0..3).map(prompt).collect();
        let text = |row: u32| format!("{}user turn {row}: about tail{row}word", prompts[row as usize % 3]);
        // `late`: every row is linked to its key before any text is set,
        // the texts then set newest first (as an index builder reading
        // payloads in their store's order does).
        let build = |groups: bool, late: bool| {
            let mut b = PartTextIndexBuilder::new().unwrap();
            if !groups {
                b.group_bytes_limit = 0;
            }
            if late {
                let keys: Vec<u32> = (0..600u32)
                    .map(|row| {
                        let key = b.new_shared().unwrap();
                        b.link(row, key).unwrap();
                        key
                    })
                    .collect();
                for row in (0..600u32).rev() {
                    b.set_shared(keys[row as usize], Field::Payload, &text(row)).unwrap();
                }
            } else {
                for row in 0..600u32 {
                    let key = b.add_shared(Field::Payload, &text(row)).unwrap();
                    b.link(row, key).unwrap();
                }
            }
            let grouped = b.group_of.len();
            (PartTextIndex::open(b.finish().unwrap()).unwrap(), grouped)
        };
        let ((with, grouped), (without, none)) = (build(true, false), build(false, false));
        let (late, late_grouped) = build(true, true);
        assert!(grouped > 590, "{grouped} texts in groups");
        assert!(late_grouped > 590, "{late_grouped} texts set late in groups");
        assert_eq!(none, 0);
        let mut b = PartTextIndexBuilder::new().unwrap();
        assert!(b.set_shared(0, Field::Payload, "text of no key").is_err());
        let postings = |ix: &PartTextIndex| -> u64 {
            let mut n = 0;
            for seg in &ix.segments {
                let mut terms = seg.inverted[Field::Payload.index()].terms().stream().unwrap();
                while terms.advance() {
                    n += u64::from(terms.value().doc_freq);
                }
            }
            n
        };
        let (p_with, p_without) = (postings(&with), postings(&without));
        assert!(
            p_with * 10 < p_without,
            "{p_with} postings with groups, {p_without} without"
        );
        assert!(
            with.bytes < without.bytes,
            "{} bytes with groups, {} without",
            with.bytes,
            without.bytes
        );
        let rows = |f: &dyn Fn(u32) -> bool| (0..600u32).filter(|r| f(*r)).collect::<RoaringBitmap>();
        for (q, want) in [
            ("prompt1", rows(&|r| r % 3 == 1)),
            ("tail17word", rows(&|r| r == 17)),
            ("prompt2 AND tail17word", rows(&|r| r == 17)),
            ("prompt0 AND tail17word", RoaringBitmap::new()),
            ("tool36 OR tail5word", rows(&|_| true)),
            ("payload:rule AND turn", rows(&|_| true)),
        ] {
            let query = Query::parse(q).unwrap();
            assert_eq!(with.search(&query).unwrap(), want, "{q}");
            assert_eq!(without.search(&query).unwrap(), want, "{q}");
            assert_eq!(
                late.search(&query).unwrap(),
                want,
                "{q}: texts set after their rows were linked"
            );
        }
    }

    /// A version 2 bundle (no sources) reads as one source of the part's
    /// own rows, with the same answers.
    #[test]
    fn a_version_2_bundle_still_opens() {
        let mut b = PartTextIndexBuilder::new().unwrap();
        for row in 0..100u32 {
            b.add(row, &[(Field::Body, &format!("row{row} common"))]).unwrap();
        }
        let bytes = b.finish().unwrap();
        let files = bundle::read(&OwnedBytes::new(bytes.clone())).unwrap();
        let mut old: Vec<(String, Vec<u8>)> = files
            .into_iter()
            .filter(|(name, _)| name != SOURCES_FILE)
            .map(|(name, b)| (name, b.as_slice().to_vec()))
            .collect();
        old.sort();
        let old = PartTextIndex::open(bundle::write_version(&old, 2).unwrap()).unwrap();
        let new = PartTextIndex::open(bytes).unwrap();
        assert_eq!(old.sources(), 1);
        for q in ["row7", "row99", "common", "nothing"] {
            let q = Query::parse(q).unwrap();
            assert_eq!(old.search(&q).unwrap(), new.search(&q).unwrap());
        }
    }

    /// The vocabulary starting over (here every few terms) never loses a
    /// term of a block being gathered, shared texts arriving mid-block
    /// included.
    #[test]
    fn a_vocabulary_that_starts_over_loses_nothing() {
        let mut b = PartTextIndexBuilder::new().unwrap();
        b.vocabulary_terms = 3;
        let words: Vec<String> = (0..200).map(|i| format!("w{i}x")).collect();
        for (row, w) in words.iter().enumerate() {
            let row = row as u32;
            b.add(row, &[(Field::Body, &format!("{w} common"))]).unwrap();
            if row.is_multiple_of(3) {
                let key = b.add_shared(Field::Payload, &format!("shared{row} common")).unwrap();
                b.link(row, key).unwrap();
            }
        }
        let ix = PartTextIndex::open(b.finish().unwrap()).unwrap();
        for (row, w) in words.iter().enumerate() {
            let rows = ix.search(&Query::parse(w).unwrap()).unwrap();
            assert!(rows.contains(row as u32), "{w} lost");
            if row.is_multiple_of(3) {
                let rows = ix
                    .search(&Query::parse(&format!("payload:shared{row}")).unwrap())
                    .unwrap();
                assert!(rows.contains(row as u32), "shared{row} lost");
            }
        }
        assert_eq!(ix.search(&Query::parse("body:common").unwrap()).unwrap().len(), 200);
    }

    /// A window's candidates are the whole part's in that window, for a
    /// part of many checkpoints' documents, flushed or merged (rows
    /// interleaved, some dropped), with shared texts among its documents;
    /// and a window of the newest rows reads a fraction of a common word's
    /// postings.
    #[test]
    fn a_window_reads_only_the_postings_that_can_reach_it() {
        const ROWS: u32 = 100_000;
        let text = |part: u32, row: u32| {
            let rare = if row.is_multiple_of(997) { " quetzal" } else { "" };
            format!("common word{} p{part}{rare}", row % 13)
        };
        let build = |part: u32| {
            let mut b = PartTextIndexBuilder::new().unwrap();
            let mut first_key = None;
            for row in 0..ROWS {
                b.add(row, &[(Field::Body, &text(part, row))]).unwrap();
                // Shared texts among the older blocks' documents.
                if row < ROWS / 2 && row % 5_000 == 7 {
                    let key = b
                        .add_shared(Field::Payload, &format!("prompt common shared{row}"))
                        .unwrap();
                    b.link(row, key).unwrap();
                    first_key.get_or_insert(key);
                }
            }
            // The oldest shared text is the newest row's too: its document
            // comes first, and the newest rows' windows must read it.
            b.link(ROWS - 1, first_key.unwrap()).unwrap();
            PartTextIndex::open(b.finish().unwrap()).unwrap()
        };
        let (a, b) = (build(0), build(1));
        // Interleaved row by row, every ninth row of `b` dropped.
        let (mut map_a, mut map_b, mut out) = (RowMap::new(), RowMap::new(), 0u32);
        for row in 0..ROWS {
            map_a.keep(row, out).unwrap();
            out += 1;
            if row % 9 != 0 {
                map_b.keep(row, out).unwrap();
                out += 1;
            }
        }
        let merged = PartTextIndex::open(PartTextIndex::merge(&[(&a, &map_a), (&b, &map_b)]).unwrap()).unwrap();
        for (name, ix) in [("flushed", &a), ("merged", &merged)] {
            let n = ix.rows().max().unwrap() + 1;
            assert!(ix.segments.iter().any(|s| s.max_doc > 8 * crate::doc_bounds::CHUNK));
            for q in [
                "common",
                "quetzal",
                "p1",
                "word3 AND NOT word4",
                "shared*",
                "payload:common",
            ] {
                let query = Query::parse(q).unwrap();
                let whole = ix.search(&query).unwrap();
                for window in [
                    n - 100..n,
                    n - 4096..n,
                    n / 2..n / 2 + 33,
                    0..1,
                    0..n,
                    7..8,
                    5_007..5_008,
                    n / 3..n / 3,
                    1..u32::MAX,
                ] {
                    let mut want = whole.clone();
                    want.remove_range(..window.start);
                    want.remove_range(window.end..);
                    let got = ix.search_within(&query, window.clone()).unwrap();
                    assert_eq!(got, want, "{name}: {q} in {window:?}");
                }
            }
            let common = Query::parse("body:common").unwrap();
            let read = |window: Range<u32>| {
                POSTINGS_READ.with(|r| r.set(0));
                ix.search_within(&common, window).unwrap();
                POSTINGS_READ.with(|r| r.get())
            };
            let (all, newest) = (read(0..n), read(n - 1000..n));
            assert!(all as u32 >= n / BLOCK_ROWS, "{name}: every block's document read");
            // The newest 32 or so blocks' chunks of 128 documents (one or
            // two per source) and the chunk of the shared text: 190 and 380
            // of 3125 and 6250.
            assert!(newest * 10 < all, "{name}: newest rows read {newest} of {all} postings");
        }
    }

    /// A part whose postings outgrow the builder's memory keeps the
    /// segments tantivy wrote, and answers as one segment would.
    #[test]
    fn a_part_larger_than_the_memory_budget_keeps_its_segments() {
        const ROWS: u32 = 120_000;
        let mut b = PartTextIndexBuilder::with_memory_budget(0).unwrap();
        for row in 0..ROWS {
            b.add(row, &[(Field::Body, &format!("common w{} unique{row}", row % 100))])
                .unwrap();
        }
        let ix = PartTextIndex::open(b.finish().unwrap()).unwrap();
        assert!(ix.segments.len() > 1, "{} segment(s)", ix.segments.len());
        let blocks = |f: &dyn Fn(u32) -> bool| -> RoaringBitmap {
            (0..ROWS)
                .filter(|r| f(*r))
                .flat_map(|r| {
                    let b = r / BLOCK_ROWS * BLOCK_ROWS;
                    b..(b + BLOCK_ROWS).min(ROWS)
                })
                .collect()
        };
        let search = |q: &str| ix.search(&Query::parse(q).unwrap()).unwrap();
        assert_eq!(search("common"), blocks(&|_| true));
        assert_eq!(search("w7"), blocks(&|r| r % 100 == 7));
        for row in [0, 1, 77_777, ROWS - 1] {
            assert_eq!(search(&format!("unique{row}")), blocks(&|r| r == row), "unique{row}");
        }
        assert_eq!(search("nothing"), RoaringBitmap::new());
    }
}
