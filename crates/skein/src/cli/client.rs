//! The HTTP client of the CLI: requests to the REST API, and the mapping of
//! every failure to a stable exit code and a `{"error": {"code", "message"}}`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::Url;
use reqwest::blocking::{Client as Http, RequestBuilder, Response};
use serde_json::{Value, json};

/// The exit codes of every client command. Stable: scripts and agents rely
/// on them (documented in docs/cli.md and the skill file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command worked and found something.
    Ok = 0,
    /// The command worked and found nothing: an empty list, a trace that
    /// does not exist.
    NoResults = 1,
    /// The command line or a parameter is wrong (also an API 400).
    Usage = 2,
    /// No answer from the server: connection refused, timeout.
    Unreachable = 3,
    /// The server failed (5xx) or answered something unexpected.
    Server = 4,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// A failed command: what to exit with and what to tell the caller.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub code: String,
    pub message: String,
}

impl CliError {
    pub fn new(exit: Exit, code: &str, message: impl Into<String>) -> Self {
        CliError {
            exit,
            code: code.to_string(),
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        CliError::new(Exit::Usage, "usage", message)
    }

    /// Stdout was closed by the reader (`skein tail -f | head`): not an
    /// error worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        self.code == "broken_pipe"
    }

    /// Writes the error to stderr: JSON when stderr is not a terminal (an
    /// agent or a script reads it), one plain line otherwise.
    pub fn report(&self) {
        if self.is_broken_pipe() {
            return;
        }
        if std::io::stderr().is_terminal() {
            eprintln!("skein: {}", self.message);
        } else {
            eprintln!("{}", json!({"error": {"code": self.code, "message": self.message}}));
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::new(Exit::Ok, "broken_pipe", "")
        } else {
            CliError::new(Exit::Server, "io_error", e.to_string())
        }
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// Query-string parameters, in order.
pub type Params = Vec<(String, String)>;

/// What a 404 means for a request: the thing asked for does not exist (a
/// trace: exit 1), or the server is not a Skein API (exit 4).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NotFound {
    NoResults,
    Unexpected,
}

pub struct Client {
    base: Url,
    http: Http,
    token: Option<String>,
    timeout: Option<Duration>,
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let msg = inner.to_string();
        if !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        src = inner.source();
    }
    s
}

/// The innermost error: `Connection refused (os error 111)`.
pub fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cur = e;
    while let Some(inner) = cur.source() {
        cur = inner;
    }
    cur.to_string()
}

/// The `--server` URL, checked: an `http://` or `https://` URL that can
/// take a path.
pub fn server_url(server: &str) -> CliResult<Url> {
    let base = Url::parse(server).map_err(|e| {
        CliError::usage(format!(
            "--server {server:?} is not a URL ({e}); e.g. http://127.0.0.1:7700"
        ))
    })?;
    if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
        return Err(CliError::usage(format!(
            "--server {server:?}: use an http:// or https:// URL, e.g. http://127.0.0.1:7700"
        )));
    }
    Ok(base)
}

/// The `--ca-cert` file: PEM certificates to trust for an `https://`
/// server besides the system's roots (a self-signed server certificate,
/// a private CA).
pub fn ca_certificates(path: &std::path::Path) -> CliResult<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path).map_err(|e| CliError::usage(format!("--ca-cert {}: {e}", path.display())))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| CliError::usage(format!("--ca-cert {}: not PEM certificates ({e})", path.display())))?;
    if certs.is_empty() {
        return Err(CliError::usage(format!(
            "--ca-cert {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

impl Client {
    /// A client of the server at `server`; `timeout` bounds each request
    /// (`None`: streams, which may stay open for ever).
    #[cfg(test)]
    pub fn new(server: &str, token: Option<String>, timeout: Option<Duration>) -> CliResult<Client> {
        Client::with_ca(server, token, timeout, None)
    }

    /// [`Client::new`] also trusting the certificates of `ca` (`--ca-cert`).
    pub fn with_ca(
        server: &str,
        token: Option<String>,
        timeout: Option<Duration>,
        ca: Option<&std::path::Path>,
    ) -> CliResult<Client> {
        let base = server_url(server)?;
        let connect = timeout.unwrap_or(Duration::from_secs(10)).min(Duration::from_secs(10));
        let mut builder = Http::builder();
        if let Some(path) = ca {
            for c in ca_certificates(path)? {
                builder = builder.add_root_certificate(c);
            }
        }
        let http = builder
            .timeout(timeout)
            .connect_timeout(connect)
            .user_agent(concat!("skein-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::new(Exit::Server, "client_error", error_chain(&e)))?;
        Ok(Client {
            base,
            http,
            token: token.filter(|t| !t.is_empty()),
            timeout,
        })
    }

    pub fn base(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// The URL of `segments` (each percent-encoded as one path segment)
    /// under the server URL, with `params`.
    pub fn url(&self, segments: &[&str], params: &[(String, String)]) -> Url {
        let mut u = self.base.clone();
        if let Ok(mut p) = u.path_segments_mut() {
            p.pop_if_empty();
            p.extend(segments);
        }
        if !params.is_empty() {
            u.query_pairs_mut().extend_pairs(params);
        }
        u
    }

    fn request(&self, url: Url) -> RequestBuilder {
        let mut r = self.http.get(url);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        r
    }

    /// Sends a GET; transport failures are "unreachable" (exit 3).
    pub fn send(&self, segments: &[&str], params: &[(String, String)]) -> CliResult<Response> {
        let url = self.url(segments, params);
        self.request(url).send().map_err(|e| self.transport_error(&e))
    }

    fn transport_error(&self, e: &reqwest::Error) -> CliError {
        let base = self.base();
        if e.is_timeout() {
            let within = self
                .timeout
                .map(|t| format!(" within {}", humantime::format_duration(t)))
                .unwrap_or_default();
            return CliError::new(
                Exit::Unreachable,
                "unreachable",
                format!("no answer from {base}{within} (use --timeout to wait longer)"),
            );
        }
        if e.is_connect() {
            return CliError::new(
                Exit::Unreachable,
                "unreachable",
                format!(
                    "cannot connect to {base} ({}); is `skein serve` running there? (set --server or SKEIN_SERVER)",
                    root_cause(e)
                ),
            );
        }
        CliError::new(
            Exit::Unreachable,
            "unreachable",
            format!("lost the connection to {base}: {}", error_chain(e)),
        )
    }

    /// POST a JSON body to the API; its JSON answer, HTTP errors mapped to
    /// exit codes.
    pub fn post_json(&self, segments: &[&str], params: &[(String, String)], body: &Value) -> CliResult<Value> {
        let url = self.url(segments, params);
        let mut r = self.http.post(url).json(body);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        let r = r.send().map_err(|e| self.transport_error(&e))?;
        let status = r.status();
        let bytes = r.bytes().map_err(|e| self.transport_error(&e))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                CliError::new(
                    Exit::Server,
                    "bad_answer",
                    format!("the server's answer is not JSON: {e}"),
                )
            });
        }
        Err(api_error(status, &bytes, NotFound::Unexpected))
    }

    /// GET a JSON object from the API, mapping HTTP errors to exit codes.
    pub fn get_json(&self, segments: &[&str], params: &[(String, String)], not_found: NotFound) -> CliResult<Value> {
        let r = self.send(segments, params)?;
        let status = r.status();
        let body = r.bytes().map_err(|e| self.transport_error(&e))?;
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|e| {
                CliError::new(
                    Exit::Server,
                    "unexpected_response",
                    format!(
                        "the server's answer is not JSON ({e}); is {} a Skein server?",
                        self.base()
                    ),
                )
            });
        }
        Err(api_error(status, &body, not_found))
    }
}

/// The error for a non-2xx answer: the API's own `{"error": {code,
/// message}}` when it sent one, with the exit code its status calls for.
pub fn api_error(status: StatusCode, body: &[u8], not_found: NotFound) -> CliError {
    let parsed: Option<(String, String)> = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        let e = v.get("error")?;
        // The Prometheus API's errors: {"errorType", "error"}.
        if let (Some(kind), Some(message)) = (v.get("errorType").and_then(Value::as_str), e.as_str()) {
            return Some((kind.to_string(), message.to_string()));
        }
        Some((
            e.get("code")?.as_str()?.to_string(),
            e.get("message")?.as_str()?.to_string(),
        ))
    });
    let exit = match status.as_u16() {
        404 if not_found == NotFound::NoResults && parsed.is_some() => Exit::NoResults,
        404 => Exit::Server,
        400..=499 => Exit::Usage,
        _ => Exit::Server,
    };
    match parsed {
        Some((code, message)) => CliError::new(exit, &code, message),
        None => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            let shown: String = text.chars().take(200).collect();
            CliError::new(
                exit,
                &format!("http_{}", status.as_u16()),
                format!("HTTP {status}{}{shown}", if shown.is_empty() { "" } else { ": " }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_segments_and_keep_a_base_path() {
        let c = Client::new("http://127.0.0.1:7700/prefix/", None, None).unwrap();
        let u = c.url(
            &["api", "v1", "services", "a b/c", "operations"],
            &[("attr.k".into(), "v&w".into())],
        );
        assert_eq!(
            u.as_str(),
            "http://127.0.0.1:7700/prefix/api/v1/services/a%20b%2Fc/operations?attr.k=v%26w"
        );
        assert!(Client::new("ftp://x", None, None).is_err());
        assert!(Client::new("https://127.0.0.1:7700", None, None).is_ok());
        assert!(Client::new("not a url", None, None).is_err());
    }

    #[test]
    fn statuses_map_to_exit_codes() {
        let e = br#"{"error":{"code":"not_found","message":"trace x not found"}}"#;
        assert_eq!(
            api_error(StatusCode::NOT_FOUND, e, NotFound::NoResults).exit,
            Exit::NoResults
        );
        assert_eq!(
            api_error(StatusCode::NOT_FOUND, e, NotFound::Unexpected).exit,
            Exit::Server
        );
        assert_eq!(
            api_error(StatusCode::NOT_FOUND, b"<html>", NotFound::NoResults).exit,
            Exit::Server
        );
        let bad = api_error(
            StatusCode::BAD_REQUEST,
            br#"{"error":{"code":"bad_request","message":"m"}}"#,
            NotFound::NoResults,
        );
        assert_eq!(
            (bad.exit, bad.code.as_str(), bad.message.as_str()),
            (Exit::Usage, "bad_request", "m")
        );
        let e = api_error(StatusCode::BAD_GATEWAY, b"upstream down", NotFound::NoResults);
        assert_eq!((e.exit, e.code.as_str()), (Exit::Server, "http_502"));
        assert!(e.message.contains("upstream down"));
    }
}
