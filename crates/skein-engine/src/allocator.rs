//! Tuning for processes that run the engine on mimalloc (the `skein` binary
//! and the benchmarks do).
//!
//! The hot tier allocates a tier's worth of small objects (records, their
//! strings, index lists), and a flush frees them all at once. mimalloc
//! returns freed pages to the OS after `purge_delay` (1 s by default); the
//! next tier then touches fresh pages, and each first touch is a page fault
//! that the kernel must zero — on a virtual machine, a fault the host must
//! back as well. In the ingest benchmark that was some 38,000 faults per
//! million spans and 5–15% of ingest CPU. Keeping freed pages for 10 s lets
//! the next tiers reuse them; an idle process still gives them back.
//!
//! Transparent huge pages are turned off for the process. mimalloc asks for
//! them on its arenas, and the kernel then backs and keeps memory in 2 MiB
//! pages that the hot tier's small objects leave partly used: ingesting and
//! compacting 1M spans peaked at 384–424 MiB with them and 350–354 MiB
//! without, at the same ingest rate and request latency (in the e2e
//! benchmark at half load, p99 17.8–20.0 ms against 18.6–22.8 ms, p95
//! 12.2–16.1 ms against 12.4–13.4 ms). Each fault then zeroes 4 KiB instead
//! of 2 MiB. A shorter purge delay also lowers the peak (2 s: 357–373 MiB),
//! but at half load a tier outlives it, so the next tier faults its memory
//! in again inside requests: p95 went from 12.4–12.7 to 15.5–17.4 ms.

/// mimalloc's `mi_option_purge_delay` (not exported as a constant by
/// libmimalloc-sys: its position in `mi_option_e`, mimalloc.h).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds freed memory stays with the process before it is returned.
const PURGE_DELAY_MS: std::os::raw::c_long = 10_000;

/// mimalloc's `mi_option_allow_thp` (its position in `mi_option_e`).
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Applies the tuning above, each part unless its mimalloc variable
/// (`MIMALLOC_PURGE_DELAY`, `MIMALLOC_ALLOW_THP`) is set: the environment
/// wins. Call early in `main`.
pub fn tune_mimalloc() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; mimalloc reads options atomically.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, PURGE_DELAY_MS) };
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // mimalloc reads this option once at start-up, before `main`, to
        // tell the kernel; afterwards only to decide whether to ask for huge
        // pages on new arenas. So the process flag is set here too: it
        // applies to every mapping, the ones made before `main` included.
        // SAFETY: one integer option; a prctl that only sets a flag of this
        // process's address space.
        unsafe {
            libmimalloc_sys::mi_option_set(ALLOW_THP, 0);
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
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

    /// Whether mimalloc may ask for transparent huge pages.
    fn huge_pages_allowed() -> bool {
        // SAFETY: reads one integer option.
        unsafe { libmimalloc_sys::mi_option_get(ALLOW_THP) != 0 }
    }

    /// One test, so no other test tunes the process between the default
    /// checks and the tuning.
    #[test]
    fn tuning_sets_the_options_it_names() {
        // If mimalloc renumbered its options, these positions would hold
        // other options' defaults: the purge delay is 1,000 ms, huge pages
        // are allowed (1), and the option before them caps cross-thread
        // page reclaims at 32 (options.c; the header says 16).
        // SAFETY: reads one integer option.
        let before_allow_thp = unsafe { libmimalloc_sys::mi_option_get(ALLOW_THP - 1) };
        let purge_env = std::env::var_os("MIMALLOC_PURGE_DELAY").is_none();
        let thp_env = std::env::var_os("MIMALLOC_ALLOW_THP").is_none();
        if purge_env {
            assert_eq!(purge_delay_ms(), 1000);
        }
        if thp_env {
            assert!(huge_pages_allowed());
            assert_eq!(before_allow_thp, 32);
        }
        tune_mimalloc();
        if purge_env {
            assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
        }
        if thp_env {
            assert!(!huge_pages_allowed());
            #[cfg(target_os = "linux")]
            {
                // SAFETY: reads a flag of this process.
                let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
                assert_eq!(disabled, 1);
            }
        }
    }
}
