//! zstd pages of point reads, decompressed with one context per thread.
//!
//! Parquet builds a codec for every column chunk it opens, and its zstd
//! codec sets up a compression and a decompression context, each asking
//! the CPU for BMI2 with `cpuid`. In a virtual machine `cpuid` traps to the
//! hypervisor (~10-25 µs here), and a point read opens a chunk of every
//! bulky column in every row group it touches: a full-text search of 37
//! rare hits spent an eighth of its time creating codecs it used once.
//!
//! So point reads open a zstd chunk as if it were uncompressed (Parquet
//! then hands its pages over as stored, no codec built) and decompress each
//! page here, with a decompression context kept per thread. A zstd frame
//! records its content size, and zstd fails a frame that does not hold
//! what it declares, which stands in for Parquet's own size check.

use std::cell::RefCell;

use bytes::Bytes;
use parquet::basic::Compression;
use parquet::column::page::Page;
use parquet::errors::{ParquetError, Result as ParquetResult};
use parquet::file::metadata::ColumnChunkMetaData;

/// `chunk` as Parquet should open it for [`decompress`] to finish its
/// pages: a zstd chunk marked uncompressed; `None` for any other (and if
/// the copy cannot be made: Parquet then decompresses as usual).
pub(crate) fn opened_raw(chunk: &ColumnChunkMetaData) -> Option<ColumnChunkMetaData> {
    if !matches!(chunk.compression(), Compression::ZSTD(_)) {
        return None;
    }
    chunk
        .clone()
        .into_builder()
        .set_compression(Compression::UNCOMPRESSED)
        .build()
        .ok()
}

thread_local! {
    static CONTEXT: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn decompress_bytes(compressed: &[u8], prefix: &[u8]) -> ParquetResult<Bytes> {
    if compressed.is_empty() {
        // A page with nothing stored (Parquet skips its codec too).
        return Ok(Bytes::copy_from_slice(prefix));
    }
    let Some(content) = zstd::zstd_safe::get_frame_content_size(compressed).ok().flatten() else {
        // Writers other than Parquet's may leave the size out: stream it.
        let mut out = prefix.to_vec();
        out.extend(zstd::stream::decode_all(compressed)?);
        return Ok(Bytes::from(out));
    };
    let mut out = Vec::with_capacity(prefix.len() + content as usize);
    out.extend_from_slice(prefix);
    CONTEXT.with(|cell| -> ParquetResult<()> {
        let mut slot = cell.borrow_mut();
        let context = match &mut *slot {
            Some(c) => c,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        let mut cursor = std::io::Cursor::new(&mut out);
        cursor.set_position(prefix.len() as u64);
        context.decompress_to_buffer(compressed, &mut cursor)?;
        Ok(())
    })?;
    if out.len() != prefix.len() + content as usize {
        return Err(ParquetError::General(format!(
            "zstd page holds {} bytes, its frame declares {content}",
            out.len() - prefix.len()
        )));
    }
    Ok(Bytes::from(out))
}

/// `page`, read from a chunk opened by [`opened_raw`], decompressed.
pub(crate) fn decompress(mut page: Page) -> ParquetResult<Page> {
    match &mut page {
        Page::DataPage { buf, .. } | Page::DictionaryPage { buf, .. } => *buf = decompress_bytes(buf, &[])?,
        Page::DataPageV2 {
            buf,
            def_levels_byte_len,
            rep_levels_byte_len,
            is_compressed,
            ..
        } => {
            // Levels are stored uncompressed ahead of the values; a page of
            // nulls only may have no values to decompress.
            let levels = (*def_levels_byte_len + *rep_levels_byte_len) as usize;
            if levels > buf.len() {
                return Err(ParquetError::General("data page v2 levels overrun the page".into()));
            }
            if *is_compressed && buf.len() > levels {
                *buf = decompress_bytes(&buf[levels..], &buf[..levels])?;
            }
            *is_compressed = false;
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::basic::Encoding;

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        zstd::bulk::compress(bytes, 3).unwrap()
    }

    #[test]
    fn pages_of_every_kind_decompress() {
        let values = b"pool timeout ".repeat(100);
        let v1 = Page::DataPage {
            buf: Bytes::from(zstd(&values)),
            num_values: 100,
            encoding: Encoding::PLAIN,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        assert_eq!(decompress(v1).unwrap().buffer().as_ref(), &values[..]);
        let dictionary = Page::DictionaryPage {
            buf: Bytes::from(zstd(&values)),
            num_values: 1,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        };
        assert_eq!(decompress(dictionary).unwrap().buffer().as_ref(), &values[..]);
        // v2: levels stay as stored ahead of the values.
        let v2 = |buf: Vec<u8>, is_compressed: bool| Page::DataPageV2 {
            buf: Bytes::from(buf),
            num_values: 100,
            encoding: Encoding::PLAIN,
            num_nulls: 0,
            num_rows: 100,
            def_levels_byte_len: 3,
            rep_levels_byte_len: 1,
            is_compressed,
            statistics: None,
        };
        let stored = [b"LLLL".to_vec(), zstd(&values)].concat();
        let page = decompress(v2(stored, true)).unwrap();
        assert_eq!(page.buffer().as_ref(), &[b"LLLL".as_slice(), &values].concat()[..]);
        assert!(matches!(
            page,
            Page::DataPageV2 {
                is_compressed: false,
                ..
            }
        ));
        // Levels only (a page of nulls), and values stored uncompressed.
        assert_eq!(
            decompress(v2(b"LLLL".to_vec(), true)).unwrap().buffer().as_ref(),
            b"LLLL"
        );
        assert_eq!(
            decompress(v2(b"LLLLraw".to_vec(), false)).unwrap().buffer().as_ref(),
            b"LLLLraw"
        );
        // Damage is an error, never a page.
        assert!(decompress(v2(b"LL".to_vec(), true)).is_err(), "levels overrun");
        let mut torn = zstd(&values);
        torn.truncate(torn.len() / 2);
        let torn = Page::DictionaryPage {
            buf: Bytes::from(torn),
            num_values: 1,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        };
        assert!(decompress(torn).is_err());
    }
}
