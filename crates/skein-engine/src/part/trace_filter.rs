//! A Bloom filter of the traces held by a set of parts: "not held" is
//! certain, "held" only likely (about 1% of absent traces at 16 bits per
//! trace). A hot tier's traces are checked against it before the parts are
//! searched, so a query pays a probe per hot trace rather than one per hot
//! trace and part.
//!
//! Blocked: all of a trace's bits are in one word, chosen by the trace's
//! leading bits. Trace ids are random, so words fill evenly, and ascending
//! lists fill it in order — one cache line after another.

/// Bits per trace.
const BITS_PER_TRACE: usize = 16;

pub struct TraceFilter {
    words: Vec<u64>,
    /// log2 of the number of words.
    bits: u32,
}

impl TraceFilter {
    /// An empty filter sized for `traces` traces.
    pub fn with_capacity(traces: usize) -> TraceFilter {
        let words = (traces.max(1) * BITS_PER_TRACE / 64).max(1).next_power_of_two();
        TraceFilter {
            words: vec![0; words],
            bits: words.trailing_zeros(),
        }
    }

    /// The word and the mask of a trace's three bits in it: the word from
    /// the leading bits, the bits from a mix of the rest.
    fn locate(&self, trace: u128) -> (usize, u64) {
        let word = trace.checked_shr(128 - self.bits).unwrap_or(0) as usize;
        let h = ((trace as u64) ^ ((trace >> 64) as u64).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mask = (1u64 << (h >> 58)) | (1u64 << ((h >> 52) & 63)) | (1u64 << ((h >> 46) & 63));
        (word, mask)
    }

    pub fn insert(&mut self, trace: u128) {
        let (word, mask) = self.locate(trace);
        self.words[word] |= mask;
    }

    /// False only if no inserted trace is `trace`.
    pub fn may_contain(&self, trace: u128) -> bool {
        let (word, mask) = self.locate(trace);
        self.words[word] & mask == mask
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Never denies an inserted trace, whatever the filter's size.
        #[test]
        fn holds_every_inserted_trace(traces in prop::collection::vec(any::<u128>(), 0..200), capacity in 0usize..400) {
            let mut f = TraceFilter::with_capacity(capacity);
            for &t in &traces {
                f.insert(t);
            }
            for &t in &traces {
                prop_assert!(f.may_contain(t));
            }
        }
    }

    #[test]
    fn denies_most_absent_traces() {
        let mut x: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut f = TraceFilter::with_capacity(10_000);
        for _ in 0..10_000 {
            f.insert(next());
        }
        let false_positives = (0..10_000).filter(|_| f.may_contain(next())).count();
        assert!(
            false_positives < 500,
            "{false_positives} of 10,000 absent traces let through"
        );
    }
}
