//! The WAL frame scanner over a (possibly damaged) segment body, and the
//! record header decoder over every intact frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_engine::wal::RecordHeader;
use skein_engine::wal::frame::{HEADER_LEN, MAX_PAYLOAD, Tail, append, scan};

fuzz_target!(|data: &[u8]| {
    let s = scan(data);
    // Frames are contiguous from the start, intact, and borrowed in place.
    let mut pos = 0;
    for &(offset, payload) in &s.frames {
        assert_eq!(offset, pos);
        assert!(!payload.is_empty() && payload.len() <= MAX_PAYLOAD);
        let mut framed = Vec::new();
        append(&mut framed, &[payload]);
        assert_eq!(&data[pos..pos + framed.len()], &framed[..]);
        assert_eq!(data[pos + HEADER_LEN..].as_ptr(), payload.as_ptr());
        // What replay decodes, re-encoded through the same type, is the
        // same frame.
        if let Ok((header, body)) = RecordHeader::decode(payload) {
            let mut again = Vec::new();
            header.append_frame(body, &mut again);
            assert_eq!(again, framed, "record header round trip changed the frame");
        }
        pos += HEADER_LEN + payload.len();
    }
    match &s.tail {
        Tail::Clean => assert_eq!(pos, data.len()),
        Tail::Torn { offset, .. } | Tail::Corrupt { offset, .. } => {
            assert_eq!(*offset, pos);
            assert!(*offset < data.len());
        }
    }
    // Cutting the log at the damage (what recovery does) leaves a clean log
    // of the same frames.
    let cut = scan(&data[..pos]);
    assert_eq!(cut.tail, Tail::Clean);
    assert_eq!(cut.frames, s.frames);
});
