//! A fast hasher for keys that are already well-mixed: term hashes, trace
//! and span ids (random by specification), content hashes. SipHash's
//! protection against adversarial keys buys nothing for these and costs a
//! large share of an insert on the ingest path.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Whole words as loads; the tail byte by byte (a variable-length
        // copy into a word would be a memcpy call, on every string lookup).
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let w = tail.iter().rev().fold(0u64, |w, &b| (w << 8) | b as u64);
            self.write_u64(w);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(K);
    }

    fn write_u128(&mut self, x: u128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }

    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;
pub type FastSet<K> = HashSet<K, BuildHasherDefault<WordHasher>>;

/// An `io::Write` that hashes what is written with XXH3-128 (serializing
/// a value into it with postcard hashes the value). The bytes are gathered
/// and hashed at once: postcard writes a value in many pieces of a few
/// bytes, and feeding those to a streaming XXH3 one by one cost more than
/// the hashing (the digest is the same: XXH3 of the same bytes).
#[derive(Default)]
pub struct HashWriter(Vec<u8>);

impl HashWriter {
    pub fn digest128(&self) -> u128 {
        xxhash_rust::xxh3::xxh3_128(&self.0)
    }
}

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys hashed before the bytes were gathered stay the same: a metric
    /// part's `series_key` column and the order of parts depend on them.
    #[test]
    fn gathered_bytes_hash_as_streamed_ones() {
        use std::io::Write;
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
        for pieces in [1usize, 3, 7, 64, 1000] {
            let mut streamed = xxhash_rust::xxh3::Xxh3::new();
            let mut gathered = HashWriter::default();
            for chunk in bytes.chunks(bytes.len().div_ceil(pieces)) {
                streamed.update(chunk);
                gathered.write_all(chunk).unwrap();
            }
            assert_eq!(gathered.digest128(), streamed.digest128());
        }
        assert_eq!(
            HashWriter::default().digest128(),
            xxhash_rust::xxh3::Xxh3::new().digest128()
        );
    }

    /// Bytes hash as little-endian words, the last one zero-padded.
    #[test]
    fn bytes_hash_as_padded_words() {
        let bytes: Vec<u8> = (1..=21).collect();
        for n in 0..=bytes.len() {
            let mut direct = WordHasher::default();
            direct.write(&bytes[..n]);
            let mut words = WordHasher::default();
            for chunk in bytes[..n].chunks(8) {
                let mut w = [0u8; 8];
                w[..chunk.len()].copy_from_slice(chunk);
                words.write_u64(u64::from_le_bytes(w));
            }
            assert_eq!(direct.finish(), words.finish(), "{n} bytes");
        }
    }
}
