//! The web UI on the API port: every page (`/`, `/traces`, `/traces/{id}`,
//! `/logs`, `/metrics` for browsers, `/llm`, `/sessions/{id}`) is the same
//! HTML shell, whose ES modules route on the URL and read only the public
//! `/api/v1`; its files are under `/ui/`.

mod assets;
mod negotiate;

use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::App;
pub use negotiate::metrics_page_for_browsers;

/// No inline script, no eval, nothing from elsewhere: the page may load
/// only its own files and talk only to its own origin. Styles set from
/// script (element.style, as uPlot does) are CSSOM, which this allows.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; \
                       form-action 'self'; frame-ancestors 'none'";

/// The pages, each answered with the shell (`/metrics` is negotiated: see
/// [`negotiate`]).
pub const PAGES: &[&str] = &["/", "/traces", "/traces/{trace_id}", "/logs", "/llm", "/sessions/{id}"];

pub fn routes() -> Router<Arc<App>> {
    let mut r = Router::new();
    for page in PAGES {
        r = r.route(page, get(|h: HeaderMap| async move { index(&h) }));
    }
    r.route("/ui/{*path}", get(file))
}

/// The HTML shell.
pub fn index(headers: &HeaderMap) -> Response {
    serve("index.html", headers)
}

async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

/// An embedded file, gzipped when the client takes gzip, 304 when the
/// client's copy is current. Files are revalidated on every load (no-cache
/// with an ETag): a new binary's UI is never mixed with an old one's.
fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(f) = assets::get(path) else {
        return (StatusCode::NOT_FOUND, "no such file in the UI").into_response();
    };
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(f.asset.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    if let Ok(v) = HeaderValue::from_str(&f.etag) {
        h.insert(header::ETAG, v);
    }
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == f.etag || t.trim() == "*"));
    if matches {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    if accepts_gzip(headers) && !f.gzip.is_empty() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        return (h, f.gzip.clone()).into_response();
    }
    (h, f.asset.bytes).into_response()
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    negotiate::takes(headers, header::ACCEPT_ENCODING, |e| {
        e.eq_ignore_ascii_case("gzip") || e == "*"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn gzip_only_when_taken() {
        assert!(accepts_gzip(&with(header::ACCEPT_ENCODING, "gzip, deflate, br")));
        assert!(accepts_gzip(&with(header::ACCEPT_ENCODING, "br;q=1.0, gzip;q=0.8")));
        assert!(!accepts_gzip(&with(header::ACCEPT_ENCODING, "gzip;q=0, br")));
        assert!(!accepts_gzip(&with(header::ACCEPT_ENCODING, "identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn a_current_copy_is_not_sent_again() {
        let r = serve("index.html", &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        let etag = r.headers()[header::ETAG].to_str().unwrap().to_string();
        assert!(
            r.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("script-src 'self'")
        );
        let again = serve("index.html", &with(header::IF_NONE_MATCH, &etag));
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(serve("nope.js", &HeaderMap::new()).status(), StatusCode::NOT_FOUND);
        let z = serve("js/app.js", &with(header::ACCEPT_ENCODING, "gzip"));
        assert_eq!(z.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(z.headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
    }
}
