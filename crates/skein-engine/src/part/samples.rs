//! A metric part's sample table (`metrics/<id>.samples`): the samples of
//! each number series (gauge and sum points) side by side, in chunks of at
//! most [`CHUNK_SAMPLES`], and a directory of which chunks hold which
//! series' samples over which times.
//!
//! Why a table of its own: a part's rows are in time order, so one series'
//! samples are spread over every page of the part, one row in every few
//! thousand. A PromQL range query over a day of 1k of 10k series decoded
//! the sample columns of all 57.6M rows to keep 5.76M. Here it decodes the
//! chunks of the series it wants, within its window, and nothing else; an
//! instant query decodes one chunk per series.
//!
//! It is derived from the part, like the calls table: the writer fills it
//! from the batches it writes and commits it before the part (a crash in
//! between leaves an orphan that recovery removes). Missing or unreadable,
//! the part is read without it: the same answers, slower (the damage is
//! logged). Rows it does not hold (distribution points) are listed in it,
//! and a scan reads those from the part.
//!
//! # Layout
//!
//! ```text
//! file      := chunk* directory trailer
//! trailer   := directory offset (u64 LE) | directory length (u32 LE)
//!              | CRC32 of the directory (u32 LE) | MAGIC
//! directory := varint series count, then per series, ascending by key:
//!                key (u64 LE) | varint first row | varint chunk count
//!                | per chunk: varint offset | varint length | varint samples
//!                             | varint min time | varint (max time - min time)
//!                             | CRC32 of the chunk (u32 LE)
//!              then varint length | the rows not held, a serialized roaring bitmap
//! chunk     := varint samples n | varint length of times | times | shape | [n tags] | values
//! times     := varint first time, then per later sample the zigzag varint of
//!              its delta minus the delta before it (wrapping)
//! shape     := DOUBLES (every sample a double, flags 0: no tags)
//!              | TAGGED (a tag per sample: value kind, and whether flags follow)
//! values    := per sample: a double as its XOR with the previous double's
//!              bits (a control byte: bytes trailing zero << 4 | bytes kept;
//!              then the kept bytes, little-endian), an int as the zigzag
//!              varint of its difference from the previous int, nothing for
//!              none; then, when tagged so, varint flags
//! ```
//!
//! Times within a series are non-decreasing (the part is written in time
//! order), so deltas of a regular scrape are equal and cost a byte each.

use std::io::Write;
use std::sync::Arc;

use arrow_array::RecordBatch;
use roaring::RoaringBitmap;
use skein_model::metric::Number;

use super::columns::metrics::{number_samples, sample_rows};
use crate::error::{Error, Result};
use crate::hash::FastMap;
use crate::query::Window;
use crate::storage::{ObjectSink, ObjectSource, PartStore};

/// Samples per chunk at most: what an instant query decodes per series.
pub const CHUNK_SAMPLES: usize = 120;

/// Bytes of open (unsealed) chunks a writer holds before it seals them all:
/// a part of very many series writes shorter chunks rather than more memory.
const OPEN_BYTES_LIMIT: usize = 32 << 20;

const MAGIC: &[u8; 8] = b"SKSMPL01";
const TRAILER: usize = 8 + 4 + 4 + 8;

const DOUBLES: u8 = 0;
const TAGGED: u8 = 1;
const KIND_NONE: u8 = 0;
const KIND_INT: u8 = 1;
const KIND_DOUBLE: u8 = 2;
const HAS_FLAGS: u8 = 4;

/// Object name of a metric part's sample table.
pub fn samples_name(id: u64) -> String {
    format!("metrics/{id:016x}.samples")
}

/// One sample of a number series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub time: u64,
    pub value: Option<Number>,
    pub flags: u32,
}

// ------------------------------------------------------------- varints

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads what the encoders above wrote, failing (never panicking) on bytes
/// that end early or run past a value's width.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    fn byte(&mut self) -> std::result::Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or("ends early")?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or("ends early")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    break;
                }
                return Ok(v);
            }
        }
        Err("a varint runs past 64 bits".into())
    }

    fn u32(&mut self) -> std::result::Result<u32, String> {
        u32::try_from(self.varint()?).map_err(|_| "a count runs past 32 bits".into())
    }

    fn u64_le(&mut self) -> std::result::Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| "ends early")?))
    }

    fn done(&self) -> bool {
        self.pos == self.bytes.len()
    }
}

// --------------------------------------------------------------- chunks

/// A chunk being filled, encoded as it goes.
#[derive(Debug, Default)]
struct ChunkEncoder {
    samples: u32,
    min_time: u64,
    max_time: u64,
    times: Vec<u8>,
    prev_delta: u64,
    tags: Vec<u8>,
    /// Whether a tag is anything but a double without flags.
    tagged: bool,
    values: Vec<u8>,
    prev_double: u64,
    prev_int: i64,
}

impl ChunkEncoder {
    fn push(&mut self, s: Sample) {
        if self.samples == 0 {
            self.min_time = s.time;
            put_varint(&mut self.times, s.time);
        } else {
            let delta = s.time.wrapping_sub(self.max_time);
            put_varint(&mut self.times, zigzag(delta.wrapping_sub(self.prev_delta) as i64));
            self.prev_delta = delta;
        }
        self.max_time = s.time;
        self.samples += 1;
        let mut tag = match s.value {
            None => KIND_NONE,
            Some(Number::Int(i)) => {
                put_varint(&mut self.values, zigzag(i.wrapping_sub(self.prev_int)));
                self.prev_int = i;
                KIND_INT
            }
            Some(Number::Double(d)) => {
                let bits = d.to_bits();
                put_xor(&mut self.values, bits ^ self.prev_double);
                self.prev_double = bits;
                KIND_DOUBLE
            }
        };
        if s.flags != 0 {
            put_varint(&mut self.values, u64::from(s.flags));
            tag |= HAS_FLAGS;
        }
        self.tagged |= tag != KIND_DOUBLE;
        self.tags.push(tag);
    }

    fn bytes(&self) -> usize {
        self.times.len() + self.tags.len() + self.values.len()
    }

    /// The chunk's bytes.
    fn seal(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes() + 12);
        put_varint(&mut out, u64::from(self.samples));
        put_varint(&mut out, self.times.len() as u64);
        out.extend_from_slice(&self.times);
        if self.tagged {
            out.push(TAGGED);
            out.extend_from_slice(&self.tags);
        } else {
            out.push(DOUBLES);
        }
        out.extend_from_slice(&self.values);
        out
    }
}

/// A double's XOR with the one before: a control byte (trailing zero bytes
/// << 4 | bytes kept), then the kept bytes. Equal doubles cost one byte.
fn put_xor(out: &mut Vec<u8>, x: u64) {
    if x == 0 {
        out.push(0);
        return;
    }
    let trail = x.trailing_zeros() / 8;
    let lead = x.leading_zeros() / 8;
    let kept = 8 - trail - lead;
    out.push(((trail as u8) << 4) | kept as u8);
    let v = x >> (trail * 8);
    out.extend_from_slice(&v.to_le_bytes()[..kept as usize]);
}

fn get_xor(c: &mut Cursor) -> std::result::Result<u64, String> {
    let control = c.byte()?;
    if control == 0 {
        return Ok(0);
    }
    let (trail, kept) = ((control >> 4) as usize, (control & 0x0f) as usize);
    if kept == 0 || trail + kept > 8 {
        return Err(format!("a double's control byte {control:#x} is out of range"));
    }
    let mut le = [0u8; 8];
    le[..kept].copy_from_slice(c.take(kept)?);
    Ok(u64::from_le_bytes(le) << (trail * 8))
}

/// Appends the samples of one chunk's bytes to `out`.
pub fn decode_chunk(bytes: &[u8], out: &mut Vec<Sample>) -> std::result::Result<(), String> {
    let mut c = Cursor::new(bytes);
    let n = c.u32()? as usize;
    let times_len = usize::try_from(c.varint()?).map_err(|_| "times too long")?;
    let mut times = Cursor::new(c.take(times_len)?);
    // Every sample costs at least a byte of times: a count beyond that is
    // damage, not a reason to allocate.
    if n > times_len {
        return Err(format!("{n} samples in {times_len} bytes of times"));
    }
    let tags = match c.byte()? {
        DOUBLES => None,
        TAGGED => Some(c.take(n)?),
        other => return Err(format!("unknown chunk shape {other}")),
    };
    out.reserve(n);
    let (mut time, mut delta, mut double, mut int) = (0u64, 0u64, 0u64, 0i64);
    for i in 0..n {
        if i == 0 {
            time = times.varint()?;
        } else {
            delta = delta.wrapping_add(unzigzag(times.varint()?) as u64);
            time = time.wrapping_add(delta);
        }
        let tag = tags.map_or(KIND_DOUBLE, |t| t[i]);
        let value = match tag & 3 {
            KIND_NONE => None,
            KIND_INT => {
                int = int.wrapping_add(unzigzag(c.varint()?));
                Some(Number::Int(int))
            }
            KIND_DOUBLE => {
                double ^= get_xor(&mut c)?;
                Some(Number::Double(f64::from_bits(double)))
            }
            other => return Err(format!("unknown value kind {other}")),
        };
        let flags = if tag & HAS_FLAGS != 0 {
            u32::try_from(c.varint()?).map_err(|_| "flags run past 32 bits")?
        } else {
            0
        };
        out.push(Sample { time, value, flags });
    }
    if !times.done() || !c.done() {
        return Err("bytes left over after the last sample".into());
    }
    Ok(())
}

// ------------------------------------------------------------ directory

/// Where a chunk is, and the times its samples span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    pub offset: u64,
    pub len: u32,
    pub samples: u32,
    pub min_time: u64,
    pub max_time: u64,
    /// CRC32 of the chunk's bytes: a damaged chunk is an error, never
    /// samples.
    pub crc: u32,
}

/// A number series of the part: its key (`stats::series_key`), the part row
/// of its first point (read to describe the series), and its chunks in time
/// order (indexes into [`SampleTable::chunks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesEntry {
    pub key: u64,
    pub first_row: u32,
    pub chunks: std::ops::Range<u32>,
}

/// A table's directory: what [`SampleTable`] keeps resident.
#[derive(Debug, Default, Clone, PartialEq)]
struct Directory {
    series: Vec<SeriesEntry>,
    chunks: Vec<ChunkRef>,
    uncovered: RoaringBitmap,
}

impl Directory {
    fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(16 + self.series.len() * 16 + self.chunks.len() * 16);
        put_varint(&mut out, self.series.len() as u64);
        for s in &self.series {
            out.extend_from_slice(&s.key.to_le_bytes());
            put_varint(&mut out, u64::from(s.first_row));
            put_varint(&mut out, u64::from(s.chunks.end - s.chunks.start));
            for c in &self.chunks[s.chunks.start as usize..s.chunks.end as usize] {
                put_varint(&mut out, c.offset);
                put_varint(&mut out, u64::from(c.len));
                put_varint(&mut out, u64::from(c.samples));
                put_varint(&mut out, c.min_time);
                put_varint(&mut out, c.max_time - c.min_time);
                out.extend_from_slice(&c.crc.to_le_bytes());
            }
        }
        let mut rows = Vec::with_capacity(self.uncovered.serialized_size());
        self.uncovered
            .serialize_into(&mut rows)
            .map_err(|e| Error::Other(format!("sample table: {e}")))?;
        put_varint(&mut out, rows.len() as u64);
        out.extend_from_slice(&rows);
        Ok(out)
    }

    /// Decodes a directory, checking that its chunks lie before
    /// `body_end` and its series ascend.
    fn decode(bytes: &[u8], body_end: u64) -> std::result::Result<Directory, String> {
        let mut c = Cursor::new(bytes);
        let count = c.varint()?;
        // A series costs at least 10 bytes: a count beyond that is damage.
        if count > bytes.len() as u64 / 10 {
            return Err(format!("{count} series in {} bytes", bytes.len()));
        }
        let mut d = Directory::default();
        let mut prev_key = None;
        for _ in 0..count {
            let key = c.u64_le()?;
            if prev_key.is_some_and(|p| p >= key) {
                return Err("series keys do not ascend".into());
            }
            prev_key = Some(key);
            let first_row = c.u32()?;
            let n = c.u32()?;
            let start = d.chunks.len() as u32;
            for _ in 0..n {
                let offset = c.varint()?;
                let len = c.u32()?;
                let samples = c.u32()?;
                let min_time = c.varint()?;
                let max_time = min_time.checked_add(c.varint()?).ok_or("a chunk's times overflow")?;
                let crc = u32::from_le_bytes(c.take(4)?.try_into().map_err(|_| "ends early")?);
                if offset.checked_add(u64::from(len)).is_none_or(|e| e > body_end) {
                    return Err(format!(
                        "a chunk at {offset} (+{len}) lies past the chunks' end {body_end}"
                    ));
                }
                d.chunks.push(ChunkRef {
                    offset,
                    len,
                    samples,
                    min_time,
                    max_time,
                    crc,
                });
            }
            d.series.push(SeriesEntry {
                key,
                first_row,
                chunks: start..d.chunks.len() as u32,
            });
        }
        let len = usize::try_from(c.varint()?).map_err(|_| "bitmap too long")?;
        d.uncovered = RoaringBitmap::deserialize_from(c.take(len)?).map_err(|e| format!("rows not held: {e}"))?;
        if !c.done() {
            return Err("bytes left over after the directory".into());
        }
        Ok(d)
    }
}

// --------------------------------------------------------------- writer

/// A series as the writer builds it.
#[derive(Debug, Default)]
struct SeriesBuild {
    first_row: u32,
    chunks: Vec<ChunkRef>,
    open: ChunkEncoder,
}

/// Writes a metric part's sample table from the part's batches as they
/// are written (in the part's row order).
pub struct SamplesWriter {
    sink: Box<dyn ObjectSink>,
    written: u64,
    series: FastMap<u64, SeriesBuild>,
    open_bytes: usize,
    uncovered: RoaringBitmap,
    next_row: u32,
}

impl SamplesWriter {
    pub fn new(store: &Arc<dyn PartStore>, id: u64) -> Result<SamplesWriter> {
        Ok(SamplesWriter {
            sink: store.create(&samples_name(id))?,
            written: 0,
            series: FastMap::default(),
            open_bytes: 0,
            uncovered: RoaringBitmap::new(),
            next_row: 0,
        })
    }

    /// Takes the samples of the part's next rows (a batch of the part's
    /// columns).
    pub fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let first = self.next_row;
        self.next_row += batch.num_rows() as u32;
        let rows = sample_rows(batch)?;
        let numbers = number_samples(batch)?;
        for (i, (s, number)) in rows.iter().zip(numbers).enumerate() {
            let row = first + i as u32;
            let Some(key) = s.key.filter(|_| number) else {
                self.uncovered.insert(row);
                continue;
            };
            let series = self.series.entry(key).or_insert_with(|| SeriesBuild {
                first_row: row,
                ..Default::default()
            });
            let before = series.open.bytes();
            series.open.push(Sample {
                time: s.time,
                value: s.value,
                flags: s.flags,
            });
            self.open_bytes += series.open.bytes() - before;
            if series.open.samples as usize >= CHUNK_SAMPLES {
                self.open_bytes -= series.open.bytes();
                let open = std::mem::take(&mut series.open);
                let written = &mut self.written;
                series.chunks.push(write_chunk(&mut self.sink, written, &open)?);
            }
        }
        if self.open_bytes > OPEN_BYTES_LIMIT {
            self.seal_all()?;
        }
        Ok(())
    }

    fn seal_all(&mut self) -> Result<()> {
        for series in self.series.values_mut() {
            if series.open.samples > 0 {
                let open = std::mem::take(&mut series.open);
                series
                    .chunks
                    .push(write_chunk(&mut self.sink, &mut self.written, &open)?);
            }
        }
        self.open_bytes = 0;
        Ok(())
    }

    /// Seals every chunk, writes the directory and commits the table
    /// (durably, as the store commits any object).
    pub fn finish(mut self) -> Result<()> {
        self.seal_all()?;
        let mut series: Vec<(u64, SeriesBuild)> = self.series.drain().collect();
        series.sort_unstable_by_key(|(k, _)| *k);
        let mut d = Directory {
            uncovered: std::mem::take(&mut self.uncovered),
            ..Default::default()
        };
        for (key, s) in series {
            let start = d.chunks.len() as u32;
            d.chunks.extend(s.chunks);
            d.series.push(SeriesEntry {
                key,
                first_row: s.first_row,
                chunks: start..d.chunks.len() as u32,
            });
        }
        let bytes = d.encode()?;
        let len = u32::try_from(bytes.len()).map_err(|_| Error::Other("sample table: directory over 4 GiB".into()))?;
        let mut trailer = Vec::with_capacity(TRAILER);
        trailer.extend_from_slice(&self.written.to_le_bytes());
        trailer.extend_from_slice(&len.to_le_bytes());
        trailer.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
        trailer.extend_from_slice(MAGIC);
        let io = |e| Error::io("write a sample table", e);
        self.sink.write_all(&bytes).map_err(io)?;
        self.sink.write_all(&trailer).map_err(io)?;
        self.sink.commit()
    }
}

fn write_chunk(sink: &mut Box<dyn ObjectSink>, written: &mut u64, open: &ChunkEncoder) -> Result<ChunkRef> {
    let bytes = open.seal();
    sink.write_all(&bytes)
        .map_err(|e| Error::io("write a sample table", e))?;
    let c = ChunkRef {
        offset: *written,
        len: bytes.len() as u32,
        samples: open.samples,
        min_time: open.min_time,
        max_time: open.max_time,
        crc: crc32fast::hash(&bytes),
    };
    *written += bytes.len() as u64;
    Ok(c)
}

// --------------------------------------------------------------- reader

/// An open sample table: its directory resident, its chunks read on
/// demand (from the mapped file when the store can map it).
pub struct SampleTable {
    source: Arc<dyn ObjectSource>,
    directory: Directory,
    name: String,
}

impl std::fmt::Debug for SampleTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SampleTable").field("name", &self.name).finish()
    }
}

impl SampleTable {
    /// Opens part `id`'s table; `Ok(None)` when it has none.
    pub fn open(store: &Arc<dyn PartStore>, id: u64) -> Result<Option<SampleTable>> {
        let name = samples_name(id);
        let Ok(source) = store.open(&name) else {
            return Ok(None);
        };
        let source = match source.for_point_reads() {
            Ok(Some(mapped)) => mapped,
            _ => source,
        };
        SampleTable::read_from(source, store.describe(&name)).map(Some)
    }

    /// The table held by `source` (named `name` in errors).
    pub fn read_from(source: Arc<dyn ObjectSource>, name: String) -> Result<SampleTable> {
        let what = || format!("sample table {name}");
        let corrupt = |detail: String| Error::corrupt(what(), detail);
        let len = source.len();
        if len < TRAILER as u64 {
            return Err(corrupt(format!("{len} bytes, shorter than its trailer")));
        }
        let io = |e| Error::io(format!("read {}", what()), e);
        let trailer = source.read_at(len - TRAILER as u64, TRAILER).map_err(io)?;
        if &trailer[16..] != MAGIC {
            return Err(corrupt("no sample table trailer".into()));
        }
        let field = |r: std::ops::Range<usize>| trailer[r].iter().rev().fold(0u64, |v, b| (v << 8) | u64::from(*b));
        let (offset, dir_len, crc) = (field(0..8), field(8..12), field(12..16) as u32);
        if offset.checked_add(dir_len) != Some(len - TRAILER as u64) {
            return Err(corrupt(format!(
                "directory at {offset} (+{dir_len}) does not end at the trailer"
            )));
        }
        let bytes = source.read_at(offset, dir_len as usize).map_err(io)?;
        if crc32fast::hash(&bytes) != crc {
            return Err(corrupt("directory fails its checksum".into()));
        }
        let directory = Directory::decode(&bytes, offset).map_err(corrupt)?;
        Ok(SampleTable {
            source,
            directory,
            name,
        })
    }

    /// Decodes every chunk (a backup's check); returns the samples.
    pub fn verify(&self) -> Result<u64> {
        let mut buf = Vec::new();
        let mut samples = 0;
        for c in &self.directory.chunks {
            buf.clear();
            self.read(c, &mut buf)?;
            samples += buf.len() as u64;
        }
        Ok(samples)
    }

    /// The series, ascending by key.
    pub fn series(&self) -> &[SeriesEntry] {
        &self.directory.series
    }

    /// The part's rows this table does not hold (read them from the part).
    pub fn uncovered(&self) -> &RoaringBitmap {
        &self.directory.uncovered
    }

    /// A series' chunks, in time order.
    pub fn chunks(&self, s: &SeriesEntry) -> &[ChunkRef] {
        &self.directory.chunks[s.chunks.start as usize..s.chunks.end as usize]
    }

    /// Whether some sample of `s` may fall in `w`.
    pub fn spans(&self, s: &SeriesEntry, w: Window) -> bool {
        let c = self.chunks(s);
        match (c.first(), c.last()) {
            (Some(a), Some(b)) => !w.misses(a.min_time, b.max_time),
            _ => false,
        }
    }

    /// Appends the samples of chunk `c` to `out`.
    pub fn read(&self, c: &ChunkRef, out: &mut Vec<Sample>) -> Result<()> {
        let bytes = self
            .source
            .read_at(c.offset, c.len as usize)
            .map_err(|e| Error::io(format!("read sample table {}", self.name), e))?;
        if crc32fast::hash(&bytes) != c.crc {
            return Err(Error::corrupt(
                format!("sample table {}", self.name),
                format!("the chunk at {} fails its checksum", c.offset),
            ));
        }
        let before = out.len();
        decode_chunk(&bytes, out).map_err(|e| Error::corrupt(format!("sample table {}", self.name), e))?;
        if out.len() - before != c.samples as usize {
            return Err(Error::corrupt(
                format!("sample table {}", self.name),
                format!(
                    "a chunk holds {} samples, its directory says {}",
                    out.len() - before,
                    c.samples
                ),
            ));
        }
        Ok(())
    }

    pub fn memory_bytes(&self) -> usize {
        self.directory.series.len() * std::mem::size_of::<SeriesEntry>()
            + self.directory.chunks.len() * std::mem::size_of::<ChunkRef>()
            + self.directory.uncovered.serialized_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> impl Strategy<Value = Sample> {
        (
            any::<u64>(),
            prop_oneof![
                Just(None),
                any::<i64>().prop_map(|i| Some(Number::Int(i))),
                any::<f64>().prop_map(|d| Some(Number::Double(d))),
                (0u32..1000).prop_map(|c| Some(Number::Double(c as f64 * 0.5))),
            ],
            prop_oneof![Just(0u32), any::<u32>()],
        )
            .prop_map(|(time, value, flags)| Sample { time, value, flags })
    }

    /// Equality that tells NaNs apart by their bits.
    fn same(a: &[Sample], b: &[Sample]) -> bool {
        let bits = |s: &Sample| {
            (
                s.time,
                s.flags,
                match s.value {
                    None => (0, 0),
                    Some(Number::Int(i)) => (1, i as u64),
                    Some(Number::Double(d)) => (2, d.to_bits()),
                },
            )
        };
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
    }

    proptest! {
        #[test]
        fn a_chunk_gives_back_its_samples(mut samples in prop::collection::vec(sample(), 1..300)) {
            samples.sort_by_key(|s| s.time);
            let mut enc = ChunkEncoder::default();
            for s in &samples {
                enc.push(*s);
            }
            let mut out = Vec::new();
            decode_chunk(&enc.seal(), &mut out).unwrap();
            prop_assert!(same(&out, &samples));
        }

        #[test]
        fn damaged_chunks_fail_or_decode_without_panic(samples in prop::collection::vec(sample(), 1..50),
                                                      cut in any::<prop::sample::Index>(),
                                                      flip in any::<(prop::sample::Index, u8)>()) {
            let mut enc = ChunkEncoder::default();
            for s in &samples {
                enc.push(*s);
            }
            let bytes = enc.seal();
            let mut out = Vec::new();
            let _ = decode_chunk(&bytes[..cut.index(bytes.len())], &mut out);
            let mut flipped = bytes.clone();
            let i = flip.0.index(flipped.len());
            flipped[i] ^= flip.1 | 1;
            let _ = decode_chunk(&flipped, &mut out);
        }
    }

    #[test]
    fn a_regular_counter_costs_a_few_bytes_a_sample() {
        let mut enc = ChunkEncoder::default();
        let mut v = 1000.0;
        for k in 0..CHUNK_SAMPLES as u64 {
            v += (k % 7) as f64;
            enc.push(Sample {
                time: 1_700_000_000_000_000_000 + k * 15_000_000_000,
                value: Some(Number::Double(v)),
                flags: 0,
            });
        }
        let bytes = enc.seal().len();
        assert!(bytes <= CHUNK_SAMPLES * 5, "{bytes} bytes for {CHUNK_SAMPLES} samples");
        assert!(!enc.tagged);
    }

    #[test]
    fn a_directory_round_trips_and_refuses_chunks_past_the_body() {
        let mut uncovered = RoaringBitmap::new();
        uncovered.insert_range(10..20);
        let c = |offset, min_time| ChunkRef {
            offset,
            len: 5,
            samples: 2,
            min_time,
            max_time: min_time + 7,
            crc: offset as u32 * 31,
        };
        let d = Directory {
            series: vec![
                SeriesEntry {
                    key: 3,
                    first_row: 0,
                    chunks: 0..2,
                },
                SeriesEntry {
                    key: u64::MAX,
                    first_row: 9,
                    chunks: 2..3,
                },
            ],
            chunks: vec![c(0, 100), c(10, 200), c(5, 100)],
            uncovered,
        };
        let bytes = d.encode().unwrap();
        assert_eq!(Directory::decode(&bytes, 15).unwrap(), d);
        assert!(Directory::decode(&bytes, 14).is_err());
        for cut in 0..bytes.len() {
            assert!(Directory::decode(&bytes[..cut], 15).is_err());
        }
    }
}
