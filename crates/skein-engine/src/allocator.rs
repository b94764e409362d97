//! Tuning for processes that run the engine on mimalloc (the `skein` binary
//! and the benchmarks do).
//!
//! The hot tier allocates a tier's worth of small objects (records, their
//! strings, index lists), and a flush frees them all at once. mimalloc
//! returns freed pages to the OS after `purge_delay` (1 s by default); the
//! next tier then touches fresh pages, and each first touch is a page fault
//! that the kernel must zero — on a virtual machine, a fault the host must
//! back as well. In the ingest benchmark that was some 38,000 faults per
//! million spans and 5–15% of ingest CPU. Keeping freed pages for 2 s lets
//! the next tiers reuse them (a tier fills and flushes in about a second
//! under full load); an idle process still gives them back.
//!
//! Longer is not better: nothing freed during a burst is returned, so peak
//! RSS becomes the sum of everything the burst ever held. Ingesting and
//! compacting 1M spans peaked at 384–424 MiB with 10 s, 356–373 MiB with
//! 2 s (7,700–18,400 faults), 362 MiB with 1 s (31,000 faults).

/// mimalloc's `mi_option_purge_delay` (not exported as a constant by
/// libmimalloc-sys: its position in `mi_option_e`, mimalloc.h).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds freed memory stays with the process before it is returned.
const PURGE_DELAY_MS: std::os::raw::c_long = 2_000;

/// Applies the tuning above, unless `MIMALLOC_PURGE_DELAY` is set (the
/// environment wins). Call early in `main`.
pub fn tune_mimalloc() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; mimalloc reads options atomically.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

/// The purge delay in force, in milliseconds.
pub fn purge_delay_ms() -> std::os::raw::c_long {
    // SAFETY: reads one integer option.
    unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_the_purge_delay() {
        // If mimalloc renumbered its options, index 15 would hold another
        // option's default, not the documented 1,000 ms purge delay.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(purge_delay_ms(), 1000);
            tune_mimalloc();
            assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
        }
    }
}
