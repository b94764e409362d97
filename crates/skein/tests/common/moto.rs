//! A moto S3 server (PyPI `moto[server]`, installed by test.sh) on a free
//! loopback port, for the tests of object storage and backups.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// A moto S3 server on a free loopback port, stopped on drop.
pub struct Moto {
    child: Child,
    pub port: u16,
}

/// The `--s3-*` flags that reach moto (or a proxy in front of it) at
/// `endpoint`, with its test credentials.
pub fn s3_flags(endpoint: &str) -> Vec<String> {
    [
        "--s3-endpoint",
        endpoint,
        "--s3-allow-http",
        "--s3-region",
        "us-east-1",
        "--s3-access-key-id",
        "test",
        "--s3-secret-access-key",
        "test",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The `AWS_*` environment that reaches moto at `endpoint` (for the
/// commands that take no `--s3-*` flags: verify, restore).
pub fn aws_env(endpoint: &str) -> [(&'static str, String); 5] {
    [
        ("AWS_ENDPOINT_URL", endpoint.to_string()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
    ]
}

impl Moto {
    pub fn start() -> Moto {
        let port = free_port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server is missing: ./test.sh installs it (pip install 'moto[server]')");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Moto { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let r = reqwest::blocking::Client::new()
            .put(format!("{}/{bucket}", self.url()))
            .send()
            .unwrap();
        assert!(r.status().is_success(), "create bucket: {}", r.status());
    }

    /// Runs boto3 (a client of the S3 API nobody here wrote) on `script`
    /// with the endpoint, then `args`; its stdout.
    fn boto3(&self, script: &str, args: &[&str]) -> Vec<u8> {
        let script = format!(
            "import sys, boto3\ns3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n{script}"
        );
        let out = Command::new("python3")
            .args(["-c", &script, &self.url()])
            .args(args)
            .output()
            .expect("python3 with boto3 (installed with moto by test.sh)");
        assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    /// An object's bytes.
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        self.boto3(
            "sys.stdout.buffer.write(s3.get_object(Bucket=sys.argv[2], Key=sys.argv[3])['Body'].read())",
            &[bucket, key],
        )
    }

    /// Replaces an object behind Skein's back.
    pub fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        self.boto3(
            "s3.put_object(Bucket=sys.argv[2], Key=sys.argv[3], Body=open(sys.argv[4], 'rb').read())",
            &[bucket, key, file.path().to_str().unwrap()],
        );
    }

    /// Every object under `prefix`, read back whole through boto3 (a client
    /// of the S3 API nobody here wrote): key, listed size, bytes read, and
    /// whether it begins and ends as a Parquet file does.
    pub fn objects(&self, bucket: &str, prefix: &str) -> Vec<S3Object> {
        let script = r#"
import json, sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="test",
                  aws_secret_access_key="test", region_name="us-east-1")
out = []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[2], Prefix=sys.argv[3]):
    for o in page.get("Contents", []):
        body = s3.get_object(Bucket=sys.argv[2], Key=o["Key"])["Body"].read()
        out.append({"key": o["Key"], "size": o["Size"], "read": len(body),
                    "parquet": body[:4] == b"PAR1" and body[-4:] == b"PAR1"})
print(json.dumps(out))
"#;
        let out = Command::new("python3")
            .args(["-c", script, &self.url(), bucket, prefix])
            .output()
            .expect("python3 with boto3 (installed with moto by test.sh)");
        assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[derive(serde::Deserialize, Debug)]
pub struct S3Object {
    pub key: String,
    pub size: u64,
    pub read: u64,
    pub parquet: bool,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
