//! `/metrics` is two things on the API port: Prometheus's scrape endpoint
//! (since before the UI) and the UI's metrics page. Scrapers send `Accept:
//! application/openmetrics-text`, `text/plain` or nothing, and keep getting
//! the exposition exactly as before; only a client that asks for
//! `text/html` (a browser navigating) gets the page.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// Middleware of the API router: answers a browser's `GET /metrics` with
/// the UI, and a browser's GET of a path nothing serves (outside `/api/`)
/// with the UI's own "no such page" (status 404); passes everything else
/// on untouched.
pub async fn metrics_page_for_browsers(req: Request, next: Next) -> Response {
    let html = req.method() == Method::GET && wants_html(req.headers());
    if html && req.uri().path() == "/metrics" {
        return super::index(req.headers());
    }
    let page = html && !req.uri().path().starts_with("/api/");
    let headers = page.then(|| req.headers().clone());
    let r = next.run(req).await;
    match headers {
        Some(h) if r.status() == StatusCode::NOT_FOUND => {
            let mut shell = super::index(&h);
            *shell.status_mut() = StatusCode::NOT_FOUND;
            shell
        }
        _ => r,
    }
}

/// Whether `Accept` names `text/html` with a non-zero quality.
fn wants_html(headers: &HeaderMap) -> bool {
    takes(headers, header::ACCEPT, |media| media.eq_ignore_ascii_case("text/html"))
}

/// Whether a list header (`Accept`, `Accept-Encoding`) has an item that
/// `item` matches and whose quality (`;q=`) is not zero.
pub(super) fn takes(headers: &HeaderMap, name: header::HeaderName, item: impl Fn(&str) -> bool) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let mut parts = range.split(';');
            let value = parts.next().unwrap_or("").trim();
            let zero = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            item(value) && !zero
        })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn browsers_get_the_page_and_scrapers_the_exposition() {
        // Chromium's and Firefox's navigation requests.
        assert!(wants_html(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
        )));
        assert!(wants_html(&accept("TEXT/HTML")));
        // Prometheus (2.x and 3.x), curl, and nothing at all.
        assert!(!wants_html(&accept(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        assert!(!wants_html(&accept("text/plain;version=0.0.4")));
        assert!(!wants_html(&accept("*/*")));
        assert!(!wants_html(&HeaderMap::new()));
        assert!(!wants_html(&accept("text/html;q=0, text/plain")));
    }
}
