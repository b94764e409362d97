//! TLS on every port (`--tls-cert`, `--tls-key`), on the real binary, with a
//! self-signed certificate made by the `openssl` CLI for each test:
//! - the OpenTelemetry Python SDK exports over gRPC and HTTP with TLS,
//!   trusting only that certificate (tests/conformance/otel_tls.py), and
//!   the spans read back over the TLS API, by reqwest and by the CLI with
//!   `--ca-cert`;
//! - plain HTTP to a TLS port gets no HTTP answer; a client that does not
//!   trust the certificate is refused;
//! - a missing key, an unreadable or invalid file refuse to start, naming
//!   the flag and the file.
//!
//! `openssl` and the Python SDK are installed by test.sh; missing, the test
//! fails saying so.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::Server;

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// A test CA and a certificate it signed for 127.0.0.1 and localhost:
/// (CA certificate, server certificate, server key). Clients trust the CA
/// (strict verifiers, Python's among them, refuse a self-signed leaf).
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let (ca, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    let (cert, key, csr) = (dir.join("cert.pem"), dir.join("key.pem"), dir.join("cert.csr"));
    let ext = dir.join("ext.cnf");
    std::fs::write(
        &ext,
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
    )
    .unwrap();
    let openssl = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("openssl")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("the openssl CLI is missing ({e}); ./test.sh installs it (apt-get install openssl)")
            });
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let s = |x: &str| std::ffi::OsString::from(x);
    openssl(&[
        &s("req"),
        &s("-x509"),
        &s("-newkey"),
        &s("ec"),
        &s("-pkeyopt"),
        &s("ec_paramgen_curve:prime256v1"),
        &s("-nodes"),
        &s("-days"),
        &s("2"),
        &s("-subj"),
        &s("/CN=skein-test-ca"),
        &s("-keyout"),
        ca_key.as_os_str(),
        &s("-out"),
        ca.as_os_str(),
    ]);
    openssl(&[
        &s("req"),
        &s("-newkey"),
        &s("ec"),
        &s("-pkeyopt"),
        &s("ec_paramgen_curve:prime256v1"),
        &s("-nodes"),
        &s("-subj"),
        &s("/CN=127.0.0.1"),
        &s("-keyout"),
        key.as_os_str(),
        &s("-out"),
        csr.as_os_str(),
    ]);
    openssl(&[
        &s("x509"),
        &s("-req"),
        &s("-in"),
        csr.as_os_str(),
        &s("-CA"),
        ca.as_os_str(),
        &s("-CAkey"),
        ca_key.as_os_str(),
        &s("-CAcreateserial"),
        &s("-days"),
        &s("2"),
        &s("-extfile"),
        ext.as_os_str(),
        &s("-out"),
        cert.as_os_str(),
    ]);
    (cert, key)
}

/// The CA that signed [`self_signed`]'s certificate.
fn ca_of(cert: &Path) -> PathBuf {
    cert.with_file_name("ca.pem")
}

fn trusting(cert: &Path) -> reqwest::blocking::Client {
    let pem = std::fs::read(cert).unwrap();
    reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap()
}

fn skein(args: &[&str]) -> std::process::Output {
    Command::new(common::bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn otel_sdk_exports_over_grpc_and_http_with_tls_and_the_api_answers_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path());
    let data = dir.path().join("data");
    let server = Server::start(
        &data,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--hot-max-age",
            "1h",
        ],
    );
    assert!(server.api.starts_with("https://"), "{}", server.api);

    let out = Command::new("python3")
        .current_dir(repo_root())
        .arg(repo_root().join("tests/conformance/otel_tls.py"))
        .args(["--grpc", &server.grpc, "--http", &server.otlp_http])
        .arg("--ca")
        .arg(ca_of(&cert))
        .args(["--service", "tls-svc"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); ./test.sh installs tests/requirements.txt"));
    assert!(
        out.status.success(),
        "otel_tls.py failed ({}; python3 -m pip install -r tests/requirements.txt if a module is missing):\n{}\n{}\n--- skein log\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );

    // Both spans, read back over the TLS API by a client trusting only the
    // test's certificate.
    let http = trusting(&ca_of(&cert));
    let v: serde_json::Value = http
        .get(format!("{}/api/v1/spans?service=tls-svc&limit=10", server.api))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut names: Vec<&str> = v["spans"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["over-grpc", "over-http"], "{v}");

    // The CLI with --ca-cert.
    let out = skein(&[
        "--server",
        &server.api,
        "--ca-cert",
        ca_of(&cert).to_str().unwrap(),
        "--format",
        "json",
        "services",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("tls-svc"),
        "skein services over TLS: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Without it, the self-signed certificate is not trusted: unreachable
    // (exit 3), saying why.
    let out = skein(&["--server", &server.api, "--format", "json", "services"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
    // A client that does not trust it is refused by reqwest too.
    let untrusting = reqwest::blocking::Client::new();
    assert!(untrusting.get(format!("{}/healthz", server.api)).send().is_err());

    // Plain HTTP to the TLS ports gets no HTTP answer.
    for url in [&server.api, &server.otlp_http] {
        let plain = url.replacen("https://", "http://", 1);
        let r = reqwest::blocking::Client::new().get(format!("{plain}/healthz")).send();
        assert!(
            r.is_err(),
            "plain HTTP to {plain} was answered: {:?}",
            r.map(|r| r.status())
        );
    }
    // The server is still serving TLS after those.
    assert!(
        http.get(format!("{}/healthz", server.api))
            .send()
            .unwrap()
            .status()
            .is_success()
    );
}

#[test]
fn bad_tls_flags_refuse_to_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path());
    let data = dir.path().join("data");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "this is not PEM\n").unwrap();
    let missing = dir.path().join("missing.pem");
    let port = || format!("127.0.0.1:{}", common::free_port());
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec!["--tls-cert".into(), cert.display().to_string()],
            vec!["--tls-cert needs --tls-key".into()],
        ),
        (
            vec!["--tls-key".into(), key.display().to_string()],
            vec!["--tls-key needs --tls-cert".into()],
        ),
        (
            vec![
                "--tls-cert".into(),
                missing.display().to_string(),
                "--tls-key".into(),
                key.display().to_string(),
            ],
            vec!["--tls-cert".into(), missing.display().to_string()],
        ),
        (
            vec![
                "--tls-cert".into(),
                junk.display().to_string(),
                "--tls-key".into(),
                key.display().to_string(),
            ],
            vec!["--tls-cert".into(), junk.display().to_string()],
        ),
        (
            vec![
                "--tls-cert".into(),
                cert.display().to_string(),
                "--tls-key".into(),
                junk.display().to_string(),
            ],
            vec!["--tls-key".into(), junk.display().to_string()],
        ),
        (
            // The certificate as its own key.
            vec![
                "--tls-cert".into(),
                cert.display().to_string(),
                "--tls-key".into(),
                cert.display().to_string(),
            ],
            vec!["--tls-key".into(), cert.display().to_string()],
        ),
    ];
    for (flags, says) in cases {
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--data-dir".into(),
            data.display().to_string(),
            "--otlp-grpc-addr".into(),
            port(),
            "--otlp-http-addr".into(),
            port(),
            "--api-addr".into(),
            port(),
        ];
        args.extend(flags.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = skein(&refs);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started: {stderr}");
        for s in &says {
            assert!(stderr.contains(s.as_str()), "{flags:?}: expected {s:?} in:\n{stderr}");
        }
    }
}
