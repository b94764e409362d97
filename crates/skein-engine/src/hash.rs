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

/// An `io::Write` that hashes what is written with XXH3-128: serializing a
/// value into it (postcard) hashes the value without buffering its bytes.
#[derive(Default)]
pub struct HashWriter(xxhash_rust::xxh3::Xxh3);

impl HashWriter {
    pub fn digest128(&self) -> u128 {
        self.0.digest128()
    }
}

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
