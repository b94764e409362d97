//! WAL framing: `[len: u32 LE][crc32: u32 LE][payload; len]`.
//!
//! The CRC covers the payload, so a frame is either whole and intact or
//! detectably not. Scanning distinguishes a *torn tail* (the last write of a
//! crashed process, never acknowledged) from *corruption* (damage to data
//! that was acknowledged), because only the first may be silently dropped.

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 8;
/// Payloads larger than this are refused on write and mean damage on read.
pub const MAX_PAYLOAD: usize = 256 << 20;

/// Appends one frame to `out`, its payload the concatenation of `parts`
/// (a record's header and body, without first joining them). Returns the
/// frame's length. The payload must be 1..=[`MAX_PAYLOAD`] bytes; callers
/// check that, as it is the caller's input that is too large.
pub fn append(out: &mut Vec<u8>, parts: &[&[u8]]) -> usize {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    debug_assert!(len > 0 && len <= MAX_PAYLOAD, "frame payload of {len} bytes");
    let mut crc = crc32fast::Hasher::new();
    for p in parts {
        crc.update(p);
    }
    out.reserve(HEADER_LEN + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
    HEADER_LEN + len
}

/// How a scan of a segment's frames ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to an intact frame.
    Clean,
    /// The bytes from `offset` on are an unfinished final write.
    Torn { offset: usize, reason: String },
    /// A damaged frame at `offset`, with more data after it.
    Corrupt { offset: usize, reason: String },
}

#[derive(Debug)]
pub struct Scan<'a> {
    /// (offset, payload) of each intact frame, in order.
    pub frames: Vec<(usize, &'a [u8])>,
    pub tail: Tail,
}

/// Scans `buf` (the bytes after the segment header) into frames.
pub fn scan(buf: &[u8]) -> Scan<'_> {
    let mut frames = Vec::new();
    let mut pos = 0;
    let tail = loop {
        let rest = &buf[pos..];
        if rest.is_empty() {
            break Tail::Clean;
        }
        if rest.len() < HEADER_LEN {
            break Tail::Torn {
                offset: pos,
                reason: format!("{} bytes of an unfinished frame header", rest.len()),
            };
        }
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().unwrap_or_default());
        if len == 0 {
            // A file extended but never written (delayed allocation after a
            // crash) reads as zeros; only all-zero remainders are benign.
            break if rest.iter().all(|b| *b == 0) {
                Tail::Torn {
                    offset: pos,
                    reason: format!("{} zero bytes after the last frame", rest.len()),
                }
            } else {
                Tail::Corrupt {
                    offset: pos,
                    reason: "zero-length frame followed by data".into(),
                }
            };
        }
        if len > MAX_PAYLOAD {
            break Tail::Corrupt {
                offset: pos,
                reason: format!("frame length {len} exceeds the maximum {MAX_PAYLOAD}"),
            };
        }
        if rest.len() < HEADER_LEN + len {
            break Tail::Torn {
                offset: pos,
                reason: format!(
                    "frame of {len} bytes has only {} bytes written",
                    rest.len() - HEADER_LEN
                ),
            };
        }
        let payload = &rest[HEADER_LEN..HEADER_LEN + len];
        if crc32fast::hash(payload) != crc {
            let end = pos + HEADER_LEN + len;
            // The final frame of the file may have been partly persisted by
            // a crash mid-write: that write was never acknowledged.
            break if end == buf.len() {
                Tail::Torn {
                    offset: pos,
                    reason: "final frame fails its checksum (partially persisted write)".into(),
                }
            } else {
                Tail::Corrupt {
                    offset: pos,
                    reason: format!(
                        "frame of {len} bytes fails its checksum, with {} bytes after it",
                        buf.len() - end
                    ),
                }
            };
        }
        frames.push((pos, payload));
        pos += HEADER_LEN + len;
    };
    Scan { frames, tail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        append(&mut v, &[payload]);
        v
    }

    fn log_of(payloads: &[Vec<u8>]) -> Vec<u8> {
        payloads.iter().flat_map(|p| frame(p)).collect()
    }

    proptest! {
        #[test]
        fn frames_round_trip(payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..200), 0..20)) {
            let buf = log_of(&payloads);
            let s = scan(&buf);
            prop_assert_eq!(s.tail, Tail::Clean);
            let got: Vec<Vec<u8>> = s.frames.iter().map(|(_, p)| p.to_vec()).collect();
            prop_assert_eq!(got, payloads);
        }

        #[test]
        fn any_truncation_is_a_torn_tail_keeping_whole_frames(
            payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..100), 1..10),
            cut in any::<prop::sample::Index>(),
        ) {
            let buf = log_of(&payloads);
            let cut = cut.index(buf.len());
            let s = scan(&buf[..cut]);
            // Every frame that ends before the cut survives, nothing else.
            let mut end = 0;
            let mut whole = 0;
            for p in &payloads {
                end += HEADER_LEN + p.len();
                if end <= cut { whole += 1; }
            }
            prop_assert_eq!(s.frames.len(), whole);
            match s.tail {
                Tail::Clean => prop_assert_eq!(end_of(&payloads, whole), cut),
                Tail::Torn { offset, .. } => prop_assert_eq!(offset, end_of(&payloads, whole)),
                Tail::Corrupt { .. } => prop_assert!(false, "a truncation is never corruption"),
            }
        }

        #[test]
        fn a_flipped_byte_is_never_silently_accepted(
            payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..100), 2..10),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut buf = log_of(&payloads);
            let at = at.index(buf.len());
            buf[at] ^= 1 << bit;
            let s = scan(&buf);
            // Intact frames are the originals; the damage is reported.
            for (i, (_, p)) in s.frames.iter().enumerate() {
                prop_assert_eq!(*p, &payloads[i][..]);
            }
            prop_assert!(s.tail != Tail::Clean, "damage must never scan clean");
        }
    }

    proptest! {
        /// Any bytes at all (a damaged file): the frames found are intact,
        /// contiguous from the start, and the tail starts where they end,
        /// so cutting there leaves a clean log of the same frames.
        #[test]
        fn arbitrary_bytes_scan_consistently(
            prefix in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..50), 0..4),
            junk in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut buf = log_of(&prefix);
            buf.extend_from_slice(&junk);
            let s = scan(&buf);
            let mut pos = 0;
            for &(offset, payload) in &s.frames {
                prop_assert_eq!(offset, pos);
                prop_assert_eq!(&buf[pos..pos + HEADER_LEN + payload.len()], &frame(payload)[..]);
                pos += HEADER_LEN + payload.len();
            }
            prop_assert!(s.frames.len() >= prefix.len());
            match &s.tail {
                Tail::Clean => prop_assert_eq!(pos, buf.len()),
                Tail::Torn { offset, .. } | Tail::Corrupt { offset, .. } => {
                    prop_assert_eq!(*offset, pos);
                    prop_assert!(*offset < buf.len());
                }
            }
            let cut = scan(&buf[..pos]);
            prop_assert_eq!(cut.tail, Tail::Clean);
            prop_assert_eq!(cut.frames, s.frames);
        }
    }

    fn end_of(payloads: &[Vec<u8>], n: usize) -> usize {
        payloads[..n].iter().map(|p| HEADER_LEN + p.len()).sum()
    }

    /// A payload given in parts frames exactly as the same bytes in one.
    #[test]
    fn parts_frame_like_their_concatenation() {
        let mut split = Vec::new();
        let n = append(&mut split, &[b"head", b"", b"body bytes"]);
        assert_eq!(n, split.len());
        assert_eq!(split, frame(b"headbody bytes"));
        let s = scan(&split);
        assert_eq!(s.frames, vec![(0, &b"headbody bytes"[..])]);
    }

    #[test]
    fn corruption_mid_log_is_not_a_torn_tail() {
        let mut buf = log_of(&[vec![1; 10], vec![2; 10], vec![3; 10]]);
        buf[HEADER_LEN + 2] ^= 0xFF; // damage the first payload
        let s = scan(&buf);
        assert!(s.frames.is_empty());
        assert!(matches!(s.tail, Tail::Corrupt { offset: 0, .. }), "{:?}", s.tail);
        // The same damage in the final frame is a torn write.
        let mut buf = log_of(&[vec![1; 10], vec![2; 10]]);
        let last = buf.len() - 1;
        buf[last] ^= 0xFF;
        let s = scan(&buf);
        assert_eq!(s.frames.len(), 1);
        assert!(matches!(s.tail, Tail::Torn { .. }), "{:?}", s.tail);
    }

    #[test]
    fn zero_fill_is_torn_but_zero_then_data_is_corrupt() {
        let mut buf = log_of(&[vec![1; 10]]);
        buf.extend_from_slice(&[0; 100]);
        assert!(matches!(scan(&buf).tail, Tail::Torn { .. }));
        buf.push(7);
        assert!(matches!(scan(&buf).tail, Tail::Corrupt { .. }));
    }
}
