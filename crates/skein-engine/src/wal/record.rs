//! A WAL record: one frame, `[version u8][kind u8][seq_base u64 LE][count
//! u32 LE][body]`. Kinds 0–2 are a batch of one signal (spans, logs, metric
//! points; the body as `codec` encodes it); kind 4 is the new payloads of
//! the batch that follows it (the body as `payload::encode_frames` encodes
//! it, `count` the number of payloads), and kind 3 the same as earlier
//! builds wrote it, each payload compressed alone (replayed, never
//! written). The header is encoded and decoded
//! here, side by side; `Wal::append`, replay, the tests and the fuzz seeds
//! all go through [`RecordHeader`].

use super::frame;
use crate::record::Signal;

/// Version of the record layout inside frames.
pub const RECORD_VERSION: u8 = 1;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    Batch(Signal),
    /// The payloads of the next batch record that the log does not hold
    /// already, compressed together in frames.
    Payloads,
    /// The same, each compressed alone, as builds before frames wrote them.
    LegacyPayloads,
}

impl RecordKind {
    const LEGACY_PAYLOADS_CODE: u8 = 3;
    const PAYLOADS_CODE: u8 = 4;

    pub fn code(self) -> u8 {
        match self {
            RecordKind::Batch(s) => s.code(),
            RecordKind::Payloads => Self::PAYLOADS_CODE,
            RecordKind::LegacyPayloads => Self::LEGACY_PAYLOADS_CODE,
        }
    }

    pub fn from_code(c: u8) -> Option<RecordKind> {
        match c {
            Self::PAYLOADS_CODE => Some(RecordKind::Payloads),
            Self::LEGACY_PAYLOADS_CODE => Some(RecordKind::LegacyPayloads),
            c => Signal::from_code(c).map(RecordKind::Batch),
        }
    }
}

/// What precedes a record's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub kind: RecordKind,
    /// The sequence number of the batch's first record; the others follow.
    pub seq_base: u64,
    /// Records in the batch.
    pub count: u32,
}

/// One decoded WAL record.
#[derive(Debug)]
pub struct WalRecord {
    pub kind: RecordKind,
    pub seq_base: u64,
    pub count: u32,
    /// The batch body (see `codec`).
    pub body: Vec<u8>,
}

impl RecordHeader {
    /// Bytes of an encoded header.
    pub const LEN: usize = 14;
    /// The largest body a frame can carry after the header.
    pub const MAX_BODY: usize = frame::MAX_PAYLOAD - Self::LEN;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut h = [0u8; Self::LEN];
        h[0] = RECORD_VERSION;
        h[1] = self.kind.code();
        h[2..10].copy_from_slice(&self.seq_base.to_le_bytes());
        h[10..14].copy_from_slice(&self.count.to_le_bytes());
        h
    }

    /// Appends the frame of this header and `body` to `out` (a body of at
    /// most [`MAX_BODY`](Self::MAX_BODY) bytes). Returns the frame's length.
    pub fn append_frame(&self, body: &[u8], out: &mut Vec<u8>) -> usize {
        frame::append(out, &[&self.encode(), body])
    }

    /// Splits a frame's payload into its header and body.
    pub fn decode(payload: &[u8]) -> Result<(RecordHeader, &[u8]), String> {
        let Some((head, body)) = payload.split_first_chunk::<{ Self::LEN }>() else {
            return Err(format!("record of {} bytes is shorter than its header", payload.len()));
        };
        if head[0] != RECORD_VERSION {
            return Err(format!(
                "record version {} is not supported by this skein (expects {RECORD_VERSION})",
                head[0]
            ));
        }
        let kind = RecordKind::from_code(head[1]).ok_or_else(|| format!("unknown record kind {}", head[1]))?;
        let (seq, count) = head[2..].split_at(8);
        let header = RecordHeader {
            kind,
            seq_base: u64::from_le_bytes(seq.try_into().map_err(|_| "short header")?),
            count: u32::from_le_bytes(count.try_into().map_err(|_| "short header")?),
        };
        Ok((header, body))
    }
}

impl WalRecord {
    /// Decodes a frame's payload, copying the body out of the segment.
    pub fn decode(payload: &[u8]) -> Result<WalRecord, String> {
        let (h, body) = RecordHeader::decode(payload)?;
        Ok(WalRecord {
            kind: h.kind,
            seq_base: h.seq_base,
            count: h.count,
            body: body.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn records_round_trip_through_their_frame(
            kind in 0u8..4,
            seq_base in any::<u64>(),
            count in any::<u32>(),
            body in prop::collection::vec(any::<u8>(), 0..100),
        ) {
            let h = RecordHeader { kind: RecordKind::from_code(kind).unwrap(), seq_base, count };
            let mut out = Vec::new();
            let n = h.append_frame(&body, &mut out);
            prop_assert_eq!(n, out.len());
            let scan = frame::scan(&out);
            prop_assert_eq!(scan.tail, frame::Tail::Clean);
            let (back, back_body) = RecordHeader::decode(scan.frames[0].1).unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(back_body, &body[..]);
        }

        /// Any payload decodes or is refused with a reason; never a panic.
        #[test]
        fn arbitrary_payloads_decode_or_are_refused(payload in prop::collection::vec(any::<u8>(), 0..40)) {
            if let Ok((h, body)) = RecordHeader::decode(&payload) {
                prop_assert_eq!(body.len() + RecordHeader::LEN, payload.len());
                prop_assert_eq!(&h.encode()[..], &payload[..RecordHeader::LEN]);
            }
        }
    }

    #[test]
    fn damage_to_the_header_is_named() {
        let h = RecordHeader {
            kind: RecordKind::Batch(Signal::Logs),
            seq_base: 7,
            count: 2,
        };
        let mut payload = h.encode().to_vec();
        payload.extend_from_slice(b"body");
        assert!(
            RecordHeader::decode(&payload[..5])
                .unwrap_err()
                .contains("shorter than its header")
        );
        let mut v2 = payload.clone();
        v2[0] = 2;
        assert!(RecordHeader::decode(&v2).unwrap_err().contains("record version 2"));
        let mut bad_signal = payload.clone();
        bad_signal[1] = 9;
        assert!(
            RecordHeader::decode(&bad_signal)
                .unwrap_err()
                .contains("unknown record kind 9")
        );
    }
}
