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
/// pages: a zstd chunk marked uncompressed; `None` for any other.
pub(crate) fn opened_raw(chunk: &ColumnChunkMetaData) -> Option<ColumnChunkMetaData> {
    matches!(chunk.compression(), Compression::ZSTD(_)).then(|| {
        chunk
            .clone()
            .into_builder()
            .set_compression(Compression::UNCOMPRESSED)
            .build()
            .unwrap_or_else(|_| chunk.clone())
    })
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
pub(crate) fn decompress(page: Page) -> ParquetResult<Page> {
    Ok(match page {
        Page::DataPage {
            buf,
            num_values,
            encoding,
            def_level_encoding,
            rep_level_encoding,
            statistics,
        } => Page::DataPage {
            buf: decompress_bytes(&buf, &[])?,
            num_values,
            encoding,
            def_level_encoding,
            rep_level_encoding,
            statistics,
        },
        Page::DictionaryPage {
            buf,
            num_values,
            encoding,
            is_sorted,
        } => Page::DictionaryPage {
            buf: decompress_bytes(&buf, &[])?,
            num_values,
            encoding,
            is_sorted,
        },
        Page::DataPageV2 {
            buf,
            num_values,
            encoding,
            num_nulls,
            num_rows,
            def_levels_byte_len,
            rep_levels_byte_len,
            is_compressed,
            statistics,
        } => {
            // Levels are stored uncompressed ahead of the values; a page of
            // nulls only may have no values to decompress.
            let levels = (def_levels_byte_len + rep_levels_byte_len) as usize;
            if levels > buf.len() {
                return Err(ParquetError::General("data page v2 levels overrun the page".into()));
            }
            let buf = if is_compressed && buf.len() > levels {
                decompress_bytes(&buf[levels..], &buf[..levels])?
            } else {
                buf
            };
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                num_nulls,
                num_rows,
                def_levels_byte_len,
                rep_levels_byte_len,
                is_compressed: false,
                statistics,
            }
        }
    })
}
