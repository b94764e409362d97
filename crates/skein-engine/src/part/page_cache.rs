//! A cache of decompressed Parquet pages for point reads.
//!
//! A point read (a trace, the newest rows matching an attribute) touches a
//! handful of rows in each of a part's ~30 columns, and pays for each one a
//! whole page: read, decompress, and skip to the rows. Reads cluster on the
//! recent end of the data (dashboards, agents re-asking), so the same pages
//! come back again and again; keeping them decompressed turns those reads
//! into a clone of a `Bytes`.
//!
//! The cache sits below Parquet's column readers: [`CachedRowGroups`] feeds
//! `ParquetRecordBatchReader` page readers that serve data and dictionary
//! pages from the cache and fall through to the file on a miss. Parts are
//! immutable, so an entry never goes stale; keys carry a process-unique part
//! instance number, so parts of different engines or reopened files never
//! collide. Only point reads go through it — scans (compaction, rebuilds,
//! aggregations) would flush the working set for nothing.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parquet::arrow::arrow_reader::RowGroups;
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::errors::Result as ParquetResult;
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::serialized_reader::SerializedPageReader;

use crate::hash::WordHasher;
use crate::storage::ParquetSource;

use super::zstd_pages;

/// (part instance, row group, column, page ordinal; `DICTIONARY` for the
/// dictionary page).
type Key = (u64, u32, u32, u32);

const DICTIONARY: u32 = u32::MAX;

#[derive(Clone)]
struct PageWeight;

impl quick_cache::Weighter<Key, Page> for PageWeight {
    fn weight(&self, _key: &Key, page: &Page) -> u64 {
        // Buffer plus the fixed cost of an entry.
        page.buffer().len() as u64 + 128
    }
}

/// Decompressed pages of parts, bounded in bytes (LRU-like eviction).
pub struct PageCache {
    pages: quick_cache::sync::Cache<Key, Page, PageWeight>,
    /// Pages missed once: a Bloom filter of two bits per page. A page is
    /// cached on its second miss: a lookup of data nobody reads again (a
    /// random trace) then costs no insert, no eviction and no retained
    /// buffer, which made cold lookups 15-20% slower than with no cache at
    /// all. Pages read again, like those of a repeated search, are kept
    /// from their second read on. A false positive only admits a page at
    /// its first miss (a direct-mapped table of marks, where two pages
    /// sharing a slot erase each other's, would keep both out for good);
    /// the filter is cleared when an eighth of its bits have been set, so
    /// it never fills up.
    missed_once: Box<[AtomicU64]>,
    /// Pages marked in `missed_once` since it was last cleared.
    marked: AtomicU64,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What the cache holds and how well it does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageCacheStats {
    pub capacity_bytes: u64,
    pub bytes: u64,
    pub pages: u64,
    pub hits: u64,
    pub misses: u64,
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// A process-unique number for an opened part, the namespace of its pages.
pub(crate) fn next_instance() -> u64 {
    NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
}

impl PageCache {
    /// A cache of at most `capacity_bytes` of pages; 0 disables it.
    pub fn new(capacity_bytes: u64) -> Arc<PageCache> {
        // ~16 KiB per page is typical: the estimate sizes the hash table.
        let items = (capacity_bytes / (16 << 10)).max(16) as usize;
        let words = if capacity_bytes == 0 {
            0
        } else {
            (items * 4).next_power_of_two()
        };
        Arc::new(PageCache {
            pages: quick_cache::sync::Cache::with_weighter(items, capacity_bytes.max(1), PageWeight),
            missed_once: (0..words).map(|_| AtomicU64::new(0)).collect(),
            marked: AtomicU64::new(0),
            capacity: capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    pub fn stats(&self) -> PageCacheStats {
        PageCacheStats {
            capacity_bytes: self.capacity,
            bytes: self.pages.weight(),
            pages: self.pages.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    fn get(&self, key: &Key) -> Option<Page> {
        let hit = self.pages.get(key);
        let counter = if hit.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        hit
    }

    /// Caches `page` if it was missed before.
    fn insert_if_missed_before(&self, key: Key, page: &Page) {
        if self.missed_once.is_empty() {
            return;
        }
        let hash = {
            let mut h = WordHasher::default();
            key.hash(&mut h);
            h.finish()
        };
        let bits = self.missed_once.len() as u64 * 64;
        let mut seen = true;
        for bit in [hash % bits, (hash >> 32 ^ hash.rotate_left(17)) % bits] {
            let mask = 1u64 << (bit % 64);
            let word = &self.missed_once[(bit / 64) as usize];
            seen &= word.fetch_or(mask, Ordering::Relaxed) & mask != 0;
        }
        if seen {
            self.pages.insert(key, page.clone());
        } else if self.marked.fetch_add(1, Ordering::Relaxed) + 1 >= bits / 16 {
            // Two bits a page: an eighth of the bits set. Clearing while
            // others mark only loses marks (a later admission).
            self.marked.store(0, Ordering::Relaxed);
            for word in self.missed_once.iter() {
                word.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Some row groups of one part, read through the page cache.
pub(crate) struct CachedRowGroups<'a> {
    pub cache: &'a Arc<PageCache>,
    pub instance: u64,
    pub source: &'a ParquetSource,
    pub metadata: &'a Arc<ParquetMetaData>,
    pub row_groups: &'a [usize],
}

impl RowGroups for CachedRowGroups<'_> {
    fn num_rows(&self) -> usize {
        self.row_groups
            .iter()
            .map(|&g| self.metadata.row_group(g).num_rows() as usize)
            .sum()
    }

    fn column_chunks(&self, column: usize) -> ParquetResult<Box<dyn PageIterator>> {
        let mut readers = Vec::with_capacity(self.row_groups.len());
        for &g in self.row_groups {
            let rg = self.metadata.row_group(g);
            let chunk = rg.column(column);
            let locations = self
                .metadata
                .offset_index()
                .and_then(|ix| ix.get(g))
                .and_then(|cols| cols.get(column))
                .map(|c| c.page_locations.clone());
            let has_locations = locations.is_some();
            let source = Arc::new(self.source.clone());
            let rows = rg.num_rows() as usize;
            let reader: Box<dyn PageReader> = if has_locations && self.cache.enabled() {
                // Page ordinals are only stable when pages are located
                // through the offset index.
                let raw = zstd_pages::opened_raw(chunk);
                let inner = SerializedPageReader::new(source, raw.as_ref().unwrap_or(chunk), rows, locations)?;
                Box::new(CachedPageReader {
                    inner,
                    zstd: raw.is_some(),
                    cache: self.cache.clone(),
                    row_group: g as u32,
                    column: column as u32,
                    instance: self.instance,
                    next_page: 0,
                })
            } else {
                Box::new(SerializedPageReader::new(source, chunk, rows, locations)?)
            };
            readers.push(Ok(reader));
        }
        Ok(Box::new(PageReaders(readers.into_iter())))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.row_groups.iter().map(|&g| self.metadata.row_group(g)))
    }

    fn metadata(&self) -> &ParquetMetaData {
        self.metadata
    }
}

struct PageReaders(std::vec::IntoIter<ParquetResult<Box<dyn PageReader>>>);

impl Iterator for PageReaders {
    type Item = ParquetResult<Box<dyn PageReader>>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl PageIterator for PageReaders {}

/// Serves the pages of one column chunk from the cache, keeping `inner`
/// positioned in step (a hit skips the page in `inner`, which with an
/// offset index reads nothing).
struct CachedPageReader {
    inner: SerializedPageReader<ParquetSource>,
    /// `inner` hands over zstd pages as stored (see [`zstd_pages`]).
    zstd: bool,
    cache: Arc<PageCache>,
    instance: u64,
    row_group: u32,
    column: u32,
    /// Ordinal of the next data page.
    next_page: u32,
}

impl CachedPageReader {
    fn key(&self, dictionary: bool) -> Key {
        let page = if dictionary { DICTIONARY } else { self.next_page };
        (self.instance, self.row_group, self.column, page)
    }
}

impl Iterator for CachedPageReader {
    type Item = ParquetResult<Page>;
    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl PageReader for CachedPageReader {
    fn get_next_page(&mut self) -> ParquetResult<Option<Page>> {
        let Some(meta) = self.inner.peek_next_page()? else {
            return Ok(None);
        };
        let key = self.key(meta.is_dict);
        let page = match self.cache.get(&key) {
            Some(page) => {
                self.inner.skip_next_page()?;
                page
            }
            None => {
                let Some(page) = self.inner.get_next_page()? else {
                    return Ok(None);
                };
                let page = if self.zstd { zstd_pages::decompress(page)? } else { page };
                self.cache.insert_if_missed_before(key, &page);
                page
            }
        };
        if !meta.is_dict {
            self.next_page += 1;
        }
        Ok(Some(page))
    }

    fn peek_next_page(&mut self) -> ParquetResult<Option<PageMetadata>> {
        self.inner.peek_next_page()
    }

    fn skip_next_page(&mut self) -> ParquetResult<()> {
        if let Some(meta) = self.inner.peek_next_page()?
            && !meta.is_dict
        {
            self.next_page += 1;
        }
        self.inner.skip_next_page()
    }

    fn at_record_boundary(&mut self) -> ParquetResult<bool> {
        self.inner.at_record_boundary()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use parquet::basic::Encoding;

    use super::*;

    fn page(n: usize) -> Page {
        Page::DictionaryPage {
            buf: Bytes::from(vec![7u8; n]),
            num_values: 1,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        }
    }

    #[test]
    fn a_page_is_cached_on_its_second_miss() {
        let cache = PageCache::new(1 << 20);
        let key = (1, 0, 3, 0);
        assert!(cache.get(&key).is_none());
        cache.insert_if_missed_before(key, &page(100));
        assert!(cache.get(&key).is_none(), "a page missed once is not kept");
        cache.insert_if_missed_before(key, &page(100));
        assert_eq!(cache.get(&key).map(|p| p.buffer().len()), Some(100));
        // Other pages have their own fingerprints.
        let other = (1, 0, 3, 1);
        cache.insert_if_missed_before(other, &page(10));
        assert!(cache.get(&other).is_none());
        let s = cache.stats();
        assert_eq!((s.pages, s.hits, s.misses), (1, 1, 3));
        // A disabled cache keeps nothing, however often a page is missed.
        let off = PageCache::new(0);
        for _ in 0..3 {
            off.insert_if_missed_before(key, &page(10));
        }
        assert_eq!(off.stats().pages, 0);
    }

    /// Every page read twice is cached, however many there are: a filter
    /// collision admits a page early, it never keeps one out.
    #[test]
    fn every_page_missed_twice_is_cached() {
        let cache = PageCache::new(32 << 20);
        let keys: Vec<Key> = (0..3000).map(|i| (7, i / 100, i % 100 / 10, i % 10)).collect();
        for _ in 0..2 {
            for &k in &keys {
                if cache.get(&k).is_none() {
                    cache.insert_if_missed_before(k, &page(64));
                }
            }
        }
        assert!(keys.iter().all(|k| cache.get(k).is_some()), "{:?}", cache.stats());
        // Marks are cleared as they pile up, yet pages keep being admitted.
        for round in 0..40u32 {
            for i in 0..1000 {
                let k = (8, round, 0, i);
                cache.insert_if_missed_before(k, &page(8));
                cache.insert_if_missed_before(k, &page(8));
            }
        }
        assert!(cache.marked.load(Ordering::Relaxed) < cache.missed_once.len() as u64 * 4);
        assert!(cache.get(&(8, 39, 0, 999)).is_some());
    }
}
