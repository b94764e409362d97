//! Conformance with real OpenTelemetry clients that nobody here wrote: the
//! Python SDK (OTLP over gRPC and HTTP/protobuf) and the JS SDK (OTLP/HTTP
//! JSON) export traces, logs and metrics to the real `skein` binary, then
//! read everything back through the API and check every field
//! (tests/conformance/otel_python.py, tests/conformance/otel_js.mjs).
//!
//! The clients come from tests/requirements.txt (pip) and
//! tests/conformance/package.json (`npm ci --prefix tests/conformance`),
//! which test.sh installs. A missing client fails the test, saying how to
//! install it: a skipped conformance test would read as a passing one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Server;

/// A client script gets this long to export and check everything.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Fails the test when a client is missing, naming what and how to get it.
fn require_client(what: &str, missing: Option<String>, install: &str) {
    if let Some(why) = missing {
        panic!("{what} is missing ({why}); ./test.sh installs it, or from the repository root: {install}");
    }
}

/// Why python3 cannot run `code` (an import line), or None when it can.
fn python_cannot(root: &Path, code: &str) -> Option<String> {
    let out = Command::new("python3").current_dir(root).args(["-c", code]).output();
    match out {
        Err(e) => Some(format!("cannot run python3: {e}")),
        Ok(o) if !o.status.success() => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Ok(_) => None,
    }
}

fn python_missing(root: &Path) -> Option<String> {
    python_cannot(
        root,
        "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.grpc, \
         opentelemetry.exporter.otlp.proto.http, google.protobuf",
    )
}

fn node_missing(root: &Path) -> Option<String> {
    if let Err(e) = Command::new("node").arg("--version").output() {
        return Some(format!("cannot run node: {e}"));
    }
    let modules = root.join("tests/conformance/node_modules/@opentelemetry");
    for pkg in [
        "sdk-trace-base",
        "exporter-trace-otlp-http",
        "sdk-logs",
        "exporter-logs-otlp-http",
        "sdk-metrics",
        "exporter-metrics-otlp-http",
        "otlp-transformer",
    ] {
        if !modules.join(pkg).join("package.json").exists() {
            return Some(format!("{} not found", modules.join(pkg).display()));
        }
    }
    None
}

/// Runs a client against the server; panics with its output (and the
/// server's log) unless it exits 0 in time.
fn run_client(what: &str, mut cmd: Command, server: &Server) {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = cmd
        .current_dir(repo_root())
        .args([
            "--grpc",
            &server.grpc,
            "--http",
            &server.otlp_http,
            "--api",
            &server.api,
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    match status {
        Some(s) if s.success() => println!("{what}: {}", stdout.trim()),
        _ => {
            let log = server.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "{what} {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- skein log (last 40 lines)\n{}",
                match status {
                    Some(s) => format!("failed ({s})"),
                    None => format!("did not finish in {CLIENT_TIMEOUT:?}"),
                },
                tail.join("\n")
            );
        }
    }
}

#[test]
fn opentelemetry_python_sdk_over_grpc_and_http_protobuf() {
    let root = repo_root();
    require_client(
        "the OpenTelemetry Python SDK",
        python_missing(&root),
        "python3 -m pip install -r tests/requirements.txt",
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("tests/conformance/otel_python.py"));
    run_client("otel_python.py", cmd, &server);
}

#[test]
fn opentelemetry_js_sdk_over_http_json() {
    let root = repo_root();
    require_client(
        "the OpenTelemetry JS SDK",
        node_missing(&root),
        "npm ci --prefix tests/conformance",
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let mut cmd = Command::new("node");
    cmd.arg(root.join("tests/conformance/otel_js.mjs"));
    run_client("otel_js.mjs", cmd, &server);
}

fn genai_missing(root: &Path, module: &str) -> Option<String> {
    python_cannot(root, &format!("import openai, opentelemetry.sdk, {module}"))
}

/// A GenAI instrumentation of the OpenAI client exports two model calls, a
/// tool call and a session to skein; genai_python.py checks what skein
/// makes of them (tokens by kind, cost under `--pricing`, session, messages).
fn genai_instrumentation(which: &str, module: &str, package: &str) {
    let root = repo_root();
    require_client(
        package,
        genai_missing(&root, module),
        "python3 -m pip install -r tests/requirements.txt",
    );
    let dir = tempfile::tempdir().unwrap();
    let pricing = root.join("tests/conformance/test_pricing.toml");
    let server = Server::start(&dir.path().join("data"), &["--pricing", pricing.to_str().unwrap()]);
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("tests/conformance/genai_python.py"))
        .args(["--instrumentation", which]);
    run_client("genai_python.py", cmd, &server);
}

#[test]
fn genai_official_opentelemetry_openai_instrumentation() {
    genai_instrumentation(
        "otel",
        "opentelemetry.instrumentation.openai_v2",
        "opentelemetry-instrumentation-openai-v2",
    );
}

#[test]
fn genai_openinference_openai_instrumentation() {
    genai_instrumentation(
        "openinference",
        "openinference.instrumentation.openai",
        "openinference-instrumentation-openai",
    );
}

#[test]
fn genai_openllmetry_openai_instrumentation() {
    genai_instrumentation(
        "openllmetry",
        "opentelemetry.instrumentation.openai",
        "opentelemetry-instrumentation-openai (OpenLLMetry)",
    );
}

fn mcp_missing(root: &Path) -> Option<String> {
    python_cannot(
        root,
        "import mcp, jsonschema, httpx; from mcp import Client, StdioServerParameters",
    )
}

/// The official MCP Python SDK drives `skein mcp` over stdio and `/mcp` of
/// `skein serve` over streamable HTTP: every tool called and checked
/// against its output schema, caps and cursors, untrusted-text marking with
/// prompt injections in a span name and a log body, isError results for bad
/// arguments, and the Host/Origin checks (tests/conformance/mcp_python.py).
#[test]
fn mcp_python_sdk_over_stdio_and_streamable_http() {
    let root = repo_root();
    require_client(
        "the MCP Python SDK (mcp, jsonschema)",
        mcp_missing(&root),
        "python3 -m pip install -r tests/requirements.txt",
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--mcp-max-bytes", "4096"]);
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("tests/conformance/mcp_python.py")).args([
        "--skein",
        env!("CARGO_BIN_EXE_skein"),
        "--http-max-bytes",
        "4096",
    ]);
    run_client("mcp_python.py", cmd, &server);
}

#[test]
fn opentelemetry_python_exporters_send_the_tokens_skein_checks() {
    let root = repo_root();
    require_client(
        "the OpenTelemetry Python SDK",
        python_missing(&root),
        "python3 -m pip install -r tests/requirements.txt",
    );
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"ci\"\nsecret = \"1ngest-secret\"\nscopes = [\"ingest\"]\n\n[[token]]\nname = \"ro\"\nsecret = \"r3ad-secret\"\nscopes = [\"read\"]\n",
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), &["--auth-tokens", tokens.to_str().unwrap()]);
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("tests/conformance/auth_python.py"))
        .args(["--ingest", "1ngest-secret", "--read", "r3ad-secret"]);
    run_client("auth_python.py", cmd, &server);
}
