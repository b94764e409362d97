//! Reading request bodies safely: a size cap before and after gzip, and the
//! content type decides the decoder.

use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Limited};

/// Why a body could not be read; each maps to one HTTP status.
#[derive(Debug)]
pub enum BodyError {
    /// 413
    TooLarge(String),
    /// 400
    Malformed(String),
    /// 415
    UnsupportedType(String),
}

impl BodyError {
    pub fn message(&self) -> &str {
        match self {
            BodyError::TooLarge(m) | BodyError::Malformed(m) | BodyError::UnsupportedType(m) => m,
        }
    }

    /// The HTTP status every ingest route answers it with.
    pub fn status(&self) -> http::StatusCode {
        match self {
            BodyError::TooLarge(_) => http::StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Malformed(_) => http::StatusCode::BAD_REQUEST,
            BodyError::UnsupportedType(_) => http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    /// The `reason` label of `skein_rejected_requests_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            BodyError::TooLarge(_) => "too_large",
            BodyError::Malformed(_) => "malformed",
            BodyError::UnsupportedType(_) => "content_type",
        }
    }
}

/// The two OTLP/HTTP encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Picks the decoder from `Content-Type` (parameters like charset ignored).
pub fn encoding(headers: &HeaderMap) -> Result<Encoding, BodyError> {
    let ct = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match ct.as_str() {
        "application/x-protobuf" | "application/protobuf" | "application/vnd.google.protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        "" => Err(BodyError::UnsupportedType(
            "missing Content-Type: send application/x-protobuf or application/json".into(),
        )),
        other => Err(BodyError::UnsupportedType(format!(
            "unsupported Content-Type {other:?}: send application/x-protobuf or application/json"
        ))),
    }
}

/// The announced body length, if any.
pub fn content_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

fn is_gzip(headers: &HeaderMap) -> Result<bool, BodyError> {
    match headers
        .get(http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
    {
        None => Ok(false),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Ok(true),
            "identity" | "" => Ok(false),
            other => Err(BodyError::UnsupportedType(format!(
                "unsupported Content-Encoding {other:?}: send gzip or identity"
            ))),
        },
    }
}

/// Reads the whole body, refusing more than `limit` bytes, and gunzips it
/// (again refusing more than `limit` decompressed bytes).
pub async fn read(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let gzip = is_gzip(headers)?;
    if let Some(announced) = content_length(headers)
        && announced > limit
    {
        // Read and drop what the client is still sending, when that is not
        // much, so that the 413 reaches it on a usable connection rather
        // than as a reset in the middle of its upload.
        if announced <= limit.saturating_mul(4) {
            drain(body, announced).await;
        }
        return Err(too_large(limit));
    }
    let raw = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                too_large(limit)
            } else {
                BodyError::Malformed(format!("reading the request body failed: {e}"))
            }
        })?
        .to_bytes();
    if gzip {
        gunzip(&raw, limit).map(Bytes::from)
    } else {
        Ok(raw)
    }
}

fn too_large(limit: usize) -> BodyError {
    BodyError::TooLarge(format!(
        "request body exceeds the {limit} byte limit (--max-body-bytes)"
    ))
}

/// Reads and discards a body (up to `limit` bytes, for at most 5 s) so that
/// an early refusal (503) reaches a client still sending, over a connection
/// that stays usable. Nothing is buffered.
pub async fn drain(body: Body, limit: usize) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut seen = 0usize;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while seen <= limit {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => seen += frame.data_ref().map_or(0, |d| d.len()),
            _ => break,
        }
    }
}

/// Decompresses gzip, stopping at `limit` bytes (a decompression bomb is
/// refused, not buffered).
pub fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>, BodyError> {
    use std::io::Read;
    let mut out = Vec::with_capacity((data.len() * 4).min(limit));
    let mut dec = flate2::read::MultiGzDecoder::new(data).take(limit as u64 + 1);
    dec.read_to_end(&mut out)
        .map_err(|e| BodyError::Malformed(format!("invalid gzip body: {e}")))?;
    if out.len() > limit {
        return Err(BodyError::TooLarge(format!(
            "gzip body decompresses to more than the {limit} byte limit (--max-body-bytes)"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_round_trips_and_bombs_are_refused() {
        assert_eq!(gunzip(&gz(b"hello"), 100).unwrap(), b"hello");
        let bomb = gz(&vec![0u8; 1 << 20]);
        assert!(matches!(gunzip(&bomb, 1000), Err(BodyError::TooLarge(_))));
        assert!(matches!(gunzip(b"not gzip", 1000), Err(BodyError::Malformed(_))));
    }

    /// Never more than `limit` bytes, and the cap only turns a success
    /// into `TooLarge`.
    fn check_limit(data: &[u8], limit: usize) -> Result<(), TestCaseError> {
        let capped = gunzip(data, limit);
        match (&capped, gunzip(data, 1 << 20)) {
            (Ok(a), Ok(b)) => {
                prop_assert!(a.len() <= limit);
                prop_assert_eq!(a, &b);
            }
            (Ok(a), Err(e)) => prop_assert!(false, "{} bytes under the limit, {e:?} without", a.len()),
            (Err(BodyError::TooLarge(_)), Ok(b)) => prop_assert!(b.len() > limit),
            (Err(e), Ok(_)) => prop_assert!(false, "{e:?} under the limit only"),
            (Err(_), Err(_)) => {}
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn gunzip_never_panics(data in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = gunzip(&data, 4096);
            let mut g = gz(&data);
            let n = g.len();
            g.truncate(n / 2);
            let _ = gunzip(&g, 4096);
        }

        #[test]
        fn damaged_gzip_respects_the_limit(
            data in prop::collection::vec(any::<u8>(), 0..2048),
            limit in 0usize..3000,
            edits in prop::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 0..3),
        ) {
            check_limit(&data, limit)?;
            let mut g = gz(&data);
            for (at, x) in &edits {
                let i = at.index(g.len());
                g[i] ^= x;
            }
            check_limit(&g, limit)?;
        }
    }
}
