//! Where the tools get their answers: a [`Backend`] takes "GET these path
//! segments with these query parameters" and returns the API's status and
//! JSON. `skein serve` answers `/mcp` through [`InProcess`], the API router
//! itself (so an MCP answer is the REST answer, with no network hop);
//! `skein mcp` talks to a server over HTTP (its backend lives in the binary).

use axum::Router;
use axum::body::Body;
pub use futures::future::BoxFuture;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::tenancy::Tenant;

/// One GET of the API: path segments (each percent-encoded as one segment
/// by the backend), query parameters, and the tenant whose space it reads
/// (the MCP request's; over HTTP the token says it instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub segments: Vec<String>,
    pub params: Vec<(String, String)>,
    pub tenant: Tenant,
}

impl Request {
    /// `GET /api/v1/<segments…>`.
    pub fn api(segments: &[&str]) -> Self {
        let mut all = vec!["api".to_string(), "v1".to_string()];
        all.extend(segments.iter().map(|s| s.to_string()));
        Request {
            segments: all,
            params: Vec::new(),
            tenant: Tenant::HOME,
        }
    }

    /// The path and query, percent-encoded: `/api/v1/services/a%20b?last=1h`.
    pub fn path_and_query(&self) -> String {
        let mut s = String::new();
        for seg in &self.segments {
            s.push('/');
            encode_into(&mut s, seg);
        }
        for (i, (k, v)) in self.params.iter().enumerate() {
            s.push(if i == 0 { '?' } else { '&' });
            encode_into(&mut s, k);
            s.push('=');
            encode_into(&mut s, v);
        }
        s
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode_into(out: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// The API's answer: its HTTP status and JSON body (`Value::Null` when the
/// body was empty).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// Asks the REST API. `Err` is a failure to get an answer at all (no
/// connection, a body that is not JSON), worded for the agent.
pub trait Backend: Send + Sync + 'static {
    fn get<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Answer, String>>;
}

/// The API router of this process, called without a network hop.
pub struct InProcess {
    router: Router,
}

impl InProcess {
    /// `router` answers `/api/v1/…` and `/readyz` (the API port's router,
    /// without `/mcp`).
    pub fn new(router: Router) -> Self {
        InProcess { router }
    }
}

impl Backend for InProcess {
    fn get<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Answer, String>> {
        Box::pin(async move {
            let mut req = http::Request::get(request.path_and_query())
                .body(Body::empty())
                .map_err(|e| format!("bad request path: {e}"))?;
            // On behalf of the MCP request, admitted by the gate already.
            req.extensions_mut().insert(request.tenant.clone());
            let resp = self.router.clone().oneshot(req).await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("reading the API's answer: {e}"))?
                .to_bytes();
            parse_answer(status, &bytes)
        })
    }
}

/// The JSON of an answer's body (any backend's).
pub fn parse_answer(status: u16, bytes: &[u8]) -> Result<Answer, String> {
    if bytes.is_empty() {
        return Ok(Answer {
            status,
            body: Value::Null,
        });
    }
    serde_json::from_slice(bytes)
        .map(|body| Answer { status, body })
        .map_err(|e| format!("the API answered HTTP {status} with something that is not JSON ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_queries_are_percent_encoded() {
        let mut r = Request::api(&["services", "a b/c", "operations"]);
        r.params.push(("attr.http.route".into(), "/x?y=1&z".into()));
        assert_eq!(
            r.path_and_query(),
            "/api/v1/services/a%20b%2Fc/operations?attr.http.route=%2Fx%3Fy%3D1%26z"
        );
    }
}
