//! Payload bytes as the engine reads them back: WAL payload records (kind 4
//! frames, kind 3 legacy blobs) and pack files (index and payload reads).
//! The first byte picks which; the rest is the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::bytes::Bytes;
use skein_engine::payload::pack::{self, PackReader};
use skein_engine::payload::{PayloadRef, decode_frames, decode_legacy_blobs, encode_frames};
use skein_engine::storage::InMemoryObject;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    match sel % 3 {
        0 => {
            let Ok(blobs) = decode_frames(rest) else { return };
            // What decodes encodes to the same bytes.
            assert_eq!(encode_frames(&blobs).expect("decoded frames encode"), rest);
            for b in &blobs {
                if let Ok(bytes) = b.decompress("fuzz") {
                    assert_eq!(PayloadRef::of(&bytes), b.id, "a payload returned under another name");
                }
            }
        }
        1 => {
            let Ok(blobs) = decode_legacy_blobs(rest) else { return };
            for b in &blobs {
                if let Ok(bytes) = b.decompress("fuzz") {
                    assert_eq!(PayloadRef::of(&bytes), b.id, "a payload returned under another name");
                }
            }
        }
        _ => {
            let src = InMemoryObject(Bytes::copy_from_slice(rest));
            let Ok(index) = pack::read_index(&src, "fuzz") else { return };
            let Ok(mut reader) = PackReader::new(&src, index.dictionary, "fuzz") else { return };
            for e in &index.entries {
                // Every payload read is checked against its name, however
                // it is read.
                for read in [reader.read(e), pack::read_payload(&src, e, None, "fuzz")] {
                    if let Ok(bytes) = read {
                        assert_eq!(PayloadRef::of(&bytes), e.id, "a payload returned under another name");
                        assert_eq!(bytes.len() as u64, e.raw_len);
                    }
                }
            }
        }
    }
});
