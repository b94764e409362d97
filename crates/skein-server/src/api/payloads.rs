//! `GET /api/v1/payloads/{ref}`: a payload's bytes, with `Range` support
//! and the content type its bytes have (JSON, text or binary).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use skein_engine::PayloadRef;

use super::params::Params;
use super::{ApiError, on_blocking_thread};
use crate::app::App;
use crate::tenancy::Tenant;

type Q = Query<Vec<(String, String)>>;

pub async fn get_payload(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    Path(reference): Path<String>,
    headers: HeaderMap,
    Query(q): Q,
) -> Result<Response, ApiError> {
    let id = PayloadRef::parse(&reference).map_err(|e| ApiError::bad_request(&e))?;
    Params::new(q).finish()?;
    let bytes = on_blocking_thread(&app, &tenant, "payload", move |e| {
        e.payload(&id)?
            .ok_or_else(|| ApiError::not_found(format!("payload {id} not found")))
    })
    .await?;
    let content_type = content_type(&bytes);
    let range = match headers.get(header::RANGE).map(|v| v.to_str().unwrap_or("")) {
        None => None,
        Some(spec) => match byte_range(spec, bytes.len()) {
            Ok(r) => Some(r),
            Err(RangeError::Unsatisfiable) => {
                let mut r = (StatusCode::RANGE_NOT_SATISFIABLE, "").into_response();
                insert(&mut r, header::CONTENT_RANGE, &format!("bytes */{}", bytes.len()));
                return Ok(r);
            }
            // A Range header this server does not understand is ignored,
            // as RFC 9110 allows: the whole payload is sent.
            Err(RangeError::Unsupported) => None,
        },
    };
    let total = bytes.len();
    let mut r = match range {
        Some((start, end)) => {
            let mut r = (StatusCode::PARTIAL_CONTENT, bytes[start..end].to_vec()).into_response();
            insert(
                &mut r,
                header::CONTENT_RANGE,
                &format!("bytes {start}-{}/{total}", end - 1),
            );
            r
        }
        None => (StatusCode::OK, bytes).into_response(),
    };
    insert(&mut r, header::CONTENT_TYPE, content_type);
    insert(&mut r, header::ACCEPT_RANGES, "bytes");
    // The reference names the bytes: they never change.
    insert(&mut r, header::ETAG, &format!("\"{id}\""));
    insert(&mut r, header::CACHE_CONTROL, "public, max-age=31536000, immutable");
    Ok(r)
}

fn insert(r: &mut Response, name: header::HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

/// JSON (what GenAI messages are), other UTF-8 text, or bytes.
fn content_type(bytes: &[u8]) -> &'static str {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{' | b'[')) && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        "application/json"
    } else if std::str::from_utf8(bytes).is_ok() {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

#[derive(Debug, PartialEq)]
enum RangeError {
    Unsupported,
    Unsatisfiable,
}

/// The half-open byte range of a single-range `Range` header
/// (`bytes=a-b`, `bytes=a-`, `bytes=-n`) over `len` bytes.
fn byte_range(spec: &str, len: usize) -> Result<(usize, usize), RangeError> {
    let spec = spec.trim().strip_prefix("bytes=").ok_or(RangeError::Unsupported)?;
    if spec.contains(',') {
        return Err(RangeError::Unsupported);
    }
    let (a, b) = spec.split_once('-').ok_or(RangeError::Unsupported)?;
    let num = |s: &str| s.trim().parse::<usize>().map_err(|_| RangeError::Unsupported);
    let (start, end) = match (a.trim().is_empty(), b.trim().is_empty()) {
        (true, true) => return Err(RangeError::Unsupported),
        // The last n bytes.
        (true, false) => {
            let n = num(b)?;
            if n == 0 {
                return Err(RangeError::Unsatisfiable);
            }
            (len.saturating_sub(n), len)
        }
        (false, true) => (num(a)?, len),
        (false, false) => {
            let (start, last) = (num(a)?, num(b)?);
            if last < start {
                return Err(RangeError::Unsupported);
            }
            (start, last.saturating_add(1).min(len))
        }
    };
    if start >= len {
        return Err(RangeError::Unsatisfiable);
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_as_rfc_9110_says() {
        assert_eq!(byte_range("bytes=0-4", 10), Ok((0, 5)));
        assert_eq!(byte_range("bytes=5-", 10), Ok((5, 10)));
        assert_eq!(byte_range("bytes=-3", 10), Ok((7, 10)));
        assert_eq!(byte_range("bytes=-30", 10), Ok((0, 10)));
        assert_eq!(byte_range("bytes=8-100", 10), Ok((8, 10)));
        assert_eq!(byte_range("bytes=10-", 10), Err(RangeError::Unsatisfiable));
        assert_eq!(byte_range("bytes=-0", 10), Err(RangeError::Unsatisfiable));
        assert_eq!(byte_range("bytes=0-1,4-5", 10), Err(RangeError::Unsupported));
        assert_eq!(byte_range("items=0-1", 10), Err(RangeError::Unsupported));
        assert_eq!(byte_range("bytes=5-2", 10), Err(RangeError::Unsupported));
        assert_eq!(byte_range("bytes=x-2", 10), Err(RangeError::Unsupported));
    }

    #[test]
    fn content_types_follow_the_bytes() {
        assert_eq!(content_type(br#"[{"role":"user"}]"#), "application/json");
        assert_eq!(content_type(b"{not json"), "text/plain; charset=utf-8");
        assert_eq!(content_type("héllo".as_bytes()), "text/plain; charset=utf-8");
        assert_eq!(content_type(&[0xff, 0xfe, 0]), "application/octet-stream");
    }
}
