//! A part's sidecar index file (`<id>.idx`: magic, version, CRC, zstd
//! postcard). The first byte picks what the rest is: 0 the file as stored;
//! 1 the zstd body (the header and CRC are made here); 2 the postcard bytes
//! (compressed and framed here), so that mutations get past the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_engine::Window;
use skein_engine::part::index::{INDEX_ZSTD_LEVEL, PartIndex, SIDECAR, decode, encode};

fn framed(body: &[u8]) -> Vec<u8> {
    SIDECAR.wrap(body)
}

/// Everything a query may ask of a loaded index.
fn exercise(ix: &PartIndex) -> String {
    for id in ix.traces.ids() {
        assert!(ix.traces.contains(*id));
        let _ = ix.traces.rows_of(*id);
    }
    let _ = (ix.traces.rows_of(0), ix.traces.len(), ix.memory_bytes());
    let _ = ix.row_range(u32::MAX / 2, Window::ALL);
    let _ = ix.row_range(5000, Window::new(1 << 40, 1 << 50));
    // A bitmap's size (not its rows: a few bytes of runs can hold billions).
    let mut postings: Vec<_> = ix
        .postings
        .iter()
        .map(|(t, b)| (*t, b.len(), b.min(), b.max(), b.serialized_size()))
        .collect();
    postings.sort_unstable();
    let mut unindexed: Vec<_> = ix.unindexed_keys.iter().copied().collect();
    unindexed.sort_unstable();
    format!(
        "{:?} {postings:?} {unindexed:?} {:?} {:?}",
        ix.traces, ix.time_marks, ix.stats
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = match mode % 3 {
        0 => rest.to_vec(),
        1 => framed(rest),
        _ => framed(&zstd::bulk::compress(rest, 1).expect("compress")),
    };
    let Ok(ix) = decode(&file) else { return };
    let seen = exercise(&ix);
    let again = decode(&encode(&ix, INDEX_ZSTD_LEVEL).expect("a decoded index encodes")).expect("an encoded index decodes");
    assert_eq!(exercise(&again), seen, "index round trip changed it");
});
