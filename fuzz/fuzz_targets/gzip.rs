//! gzip request bodies (`Content-Encoding: gzip`) with the decompressed-size
//! cap. The first byte picks the limit (in units of 64 bytes).
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use skein_server::body::{BodyError, gunzip};

/// Large enough for anything this fuzzer's inputs decompress to in practice.
const GENEROUS: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&limit, gz)) = data.split_first() else { return };
    let limit = limit as usize * 64;
    let capped = gunzip(gz, limit);
    if let Ok(out) = &capped {
        assert!(
            out.len() <= limit,
            "gunzip returned {} bytes over a {limit} limit",
            out.len()
        );
    }
    // The cap only ever turns a success into TooLarge.
    match (&capped, gunzip(gz, GENEROUS)) {
        (Ok(a), Ok(b)) => assert_eq!(*a, b),
        (Ok(a), Err(e)) => panic!("{} bytes under the limit, but {e:?} without it", a.len()),
        (Err(BodyError::TooLarge(_)), Ok(b)) => assert!(b.len() > limit, "{} bytes called too large", b.len()),
        (Err(e), Ok(_)) => panic!("{e:?} under the limit, but fine without it"),
        (Err(_), Err(_)) => {}
    }
    // Whatever it decompressed round-trips through our own gzip.
    if let Ok(out) = capped {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&out).unwrap();
        assert_eq!(gunzip(&e.finish().unwrap(), limit).unwrap(), out);
    }
});
