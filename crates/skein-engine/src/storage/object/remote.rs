//! The bucket: an `object_store` client under one prefix, called from the
//! engine's synchronous threads through a small runtime of its own.
//!
//! Every call runs on that runtime and the caller blocks on its result, so
//! a caller inside another tokio runtime (a server handler) never starts a
//! nested runtime: it only parks its thread, as it would on a disk read.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::Serialize;

use crate::error::{Error, Result};

/// Where and how to reach a bucket.
#[derive(Debug, Clone, Default)]
pub struct RemoteConfig {
    /// `s3://BUCKET/PREFIX` (the prefix may be empty).
    pub url: String,
    /// Settings given on the command line, over the `AWS_*` environment
    /// (keys as `object_store` names them: `aws_endpoint`, `aws_region`,
    /// `aws_allow_http`, `aws_access_key_id`, `aws_secret_access_key`).
    pub options: Vec<(String, String)>,
}

/// Counters of requests made to the bucket.
#[derive(Debug, Default)]
pub(crate) struct RemoteCounters {
    pub gets: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub puts: AtomicU64,
    pub bytes_uploaded: AtomicU64,
    pub deletes: AtomicU64,
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct RemoteRequestStats {
    pub get_requests: u64,
    pub bytes_fetched: u64,
    pub put_requests: u64,
    pub bytes_uploaded: u64,
    pub delete_requests: u64,
}

/// One listed object.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub name: String,
    pub size: u64,
}

pub(crate) struct Remote {
    store: Arc<dyn ObjectStore>,
    /// `s3://bucket/prefix`, for messages.
    url: String,
    /// Object key prefix, without a trailing `/` (empty for the bucket's root).
    prefix: String,
    runtime: Option<tokio::runtime::Runtime>,
    pub counters: RemoteCounters,
}

/// Objects larger than this are uploaded in parts, read from their file a
/// part at a time, so an upload never holds a whole compacted part in memory.
pub(crate) const MULTIPART_THRESHOLD: u64 = 32 << 20;
const MULTIPART_CHUNK: usize = 16 << 20;

impl Remote {
    pub fn connect(cfg: &RemoteConfig) -> Result<Remote> {
        let (store, prefix) = build_store(cfg)?;
        Remote::over(store, cfg.url.trim_end_matches('/'), prefix)
    }

    /// A remote over any `object_store` (tests use the in-memory one).
    pub fn over(store: Arc<dyn ObjectStore>, url: &str, prefix: String) -> Result<Remote> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("skein-object-io")
            .enable_all()
            .build()
            .map_err(|e| Error::io("start the object storage runtime", e))?;
        Ok(Remote {
            store,
            url: url.to_string(),
            prefix,
            runtime: Some(runtime),
            counters: RemoteCounters::default(),
        })
    }

    /// `s3://bucket/prefix/name`, for messages.
    pub fn describe(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    fn run<F>(&self, f: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let rt = self.runtime.as_ref().expect("the runtime lives as long as the remote");
        let task = rt.spawn(f);
        match futures::executor::block_on(task) {
            Ok(out) => out,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    fn err(&self, op: &str, name: &str, e: object_store::Error) -> Error {
        Error::Storage {
            what: format!("{op} {}", self.describe(name)),
            detail: error_chain(&e),
        }
    }

    /// Every object under the prefix, names relative to it.
    pub fn list(&self) -> Result<Vec<Listed>> {
        let store = self.store.clone();
        let prefix = (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()));
        let skip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        let found = self.run(async move {
            let mut out = Vec::new();
            let mut stream = store.list(prefix.as_ref());
            while let Some(meta) = stream.next().await {
                let meta = meta?;
                out.push(Listed {
                    name: meta.location.as_ref().get(skip..).unwrap_or_default().to_string(),
                    size: meta.size,
                });
            }
            Ok::<_, object_store::Error>(out)
        });
        found.map_err(|e| self.err("list", "", e))
    }

    /// Bytes `range` of `name`; exactly that many, or an error naming it.
    pub fn get_range(&self, name: &str, range: Range<u64>) -> Result<Bytes> {
        let store = self.store.clone();
        let path = self.path(name);
        let want = range.end - range.start;
        let got = self
            .run(async move { store.get_range(&path, range).await })
            .map_err(|e| self.err("read", name, e))?;
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_fetched
            .fetch_add(got.len() as u64, Ordering::Relaxed);
        if got.len() as u64 != want {
            return Err(Error::corrupt(
                format!("object {}", self.describe(name)),
                format!("a read of {want} bytes returned {} (truncated object?)", got.len()),
            ));
        }
        Ok(got)
    }

    /// The whole of a small object, with its version tag (for the lease).
    pub fn get(&self, name: &str) -> Result<Option<(Bytes, Option<String>)>> {
        let store = self.store.clone();
        let path = self.path(name);
        let got = self.run(async move {
            let r = store.get(&path).await?;
            let tag = r.meta.e_tag.clone();
            Ok::<_, object_store::Error>((r.bytes().await?, tag))
        });
        match got {
            Ok(v) => {
                self.counters.gets.fetch_add(1, Ordering::Relaxed);
                Ok(Some(v))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("read", name, e)),
        }
    }

    /// Writes a small object atomically. `mode` decides what happens when
    /// it exists: see [`PutMode`]. Returns the new version tag.
    pub fn put(&self, name: &str, bytes: Bytes, mode: PutMode) -> std::result::Result<Option<String>, PutError> {
        let store = self.store.clone();
        let path = self.path(name);
        let len = bytes.len() as u64;
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let res = self.run(async move { store.put_opts(&path, PutPayload::from_bytes(bytes), opts).await });
        match res {
            Ok(r) => {
                self.counters.puts.fetch_add(1, Ordering::Relaxed);
                self.counters.bytes_uploaded.fetch_add(len, Ordering::Relaxed);
                Ok(r.e_tag)
            }
            Err(object_store::Error::AlreadyExists { .. }) => Err(PutError::Exists),
            Err(object_store::Error::Precondition { .. }) => Err(PutError::Changed),
            Err(e) => Err(PutError::Failed(self.err("write", name, e))),
        }
    }

    /// Uploads a local file as `name`, atomically: the object appears
    /// whole or not at all (a single conditional PUT for small files, a
    /// multipart upload, completed only after its last part, for big ones).
    pub fn upload_file(&self, name: &str, file: &std::path::Path, len: u64) -> std::result::Result<(), PutError> {
        let f = std::fs::File::open(file)
            .map_err(|e| PutError::Failed(Error::io(format!("read {}", file.display()), e)))?;
        self.upload_reader(name, len, f)
    }

    /// Uploads `len` bytes read from `reader` as `name`, atomically, as
    /// [`Remote::upload_file`] does; never more than a part in memory.
    pub fn upload_reader(
        &self,
        name: &str,
        len: u64,
        mut reader: impl std::io::Read + Send + 'static,
    ) -> std::result::Result<(), PutError> {
        if len <= MULTIPART_THRESHOLD {
            let mut bytes = Vec::with_capacity(len as usize);
            reader
                .read_to_end(&mut bytes)
                .map_err(|e| PutError::Failed(Error::io(format!("read the bytes for {}", self.describe(name)), e)))?;
            return self.put(name, Bytes::from(bytes), PutMode::Create).map(|_| ());
        }
        let store = self.store.clone();
        let path = self.path(name);
        let res = self.run(async move {
            let mut upload = store.put_multipart(&path).await?;
            let mut sent = 0u64;
            loop {
                let mut chunk = vec![0u8; MULTIPART_CHUNK];
                let mut filled = 0;
                while filled < chunk.len() {
                    let n = reader
                        .read(&mut chunk[filled..])
                        .map_err(|e| object_store::Error::Generic {
                            store: "skein",
                            source: Box::new(e),
                        })?;
                    if n == 0 {
                        break;
                    }
                    filled += n;
                }
                if filled == 0 {
                    break;
                }
                chunk.truncate(filled);
                sent += filled as u64;
                if let Err(e) = upload.put_part(PutPayload::from(chunk)).await {
                    let _ = upload.abort().await;
                    return Err(e);
                }
            }
            upload.complete().await?;
            Ok(sent)
        });
        match res {
            Ok(sent) => {
                self.counters.puts.fetch_add(1, Ordering::Relaxed);
                self.counters.bytes_uploaded.fetch_add(sent, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(PutError::Failed(self.err("upload", name, e))),
        }
    }

    /// The size of `name`, or `None` when there is no such object.
    pub fn size(&self, name: &str) -> Result<Option<u64>> {
        let store = self.store.clone();
        let path = self.path(name);
        match self.run(async move { store.head(&path).await }) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("stat", name, e)),
        }
    }

    /// Deletes `name`; a missing object is not an error.
    pub fn delete(&self, name: &str) -> Result<()> {
        let store = self.store.clone();
        let path = self.path(name);
        match self.run(async move { store.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                self.counters.deletes.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(self.err("delete", name, e)),
        }
    }

    pub fn request_stats(&self) -> RemoteRequestStats {
        let c = &self.counters;
        RemoteRequestStats {
            get_requests: c.gets.load(Ordering::Relaxed),
            bytes_fetched: c.bytes_fetched.load(Ordering::Relaxed),
            put_requests: c.puts.load(Ordering::Relaxed),
            bytes_uploaded: c.bytes_uploaded.load(Ordering::Relaxed),
            delete_requests: c.deletes.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's thread panics; letting
        // its workers go in the background never does.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// An error and its causes, the innermost last: object_store's own
/// message often hides the one an operator needs ("connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cause = c.source();
    }
    out
}

/// Why a conditional write did not happen.
#[derive(Debug)]
pub(crate) enum PutError {
    /// `PutMode::Create`, and the object exists.
    Exists,
    /// `PutMode::Update`, and the object changed since the version given.
    Changed,
    Failed(Error),
}

impl PutError {
    pub fn into_error(self) -> Error {
        match self {
            PutError::Failed(e) => e,
            PutError::Exists => Error::Other("the object exists".into()),
            PutError::Changed => Error::Other("the object changed".into()),
        }
    }
}

/// Builds the client for `cfg.url`. Only `s3://` is compiled in; GCS and
/// Azure are `object_store` features away (`gcp`, `azure`) and would take
/// their settings the same way.
fn build_store(cfg: &RemoteConfig) -> Result<(Arc<dyn ObjectStore>, String)> {
    let bad = |detail: String| Error::Invalid(format!("--storage {:?}: {detail}", cfg.url));
    let Some(rest) = cfg.url.strip_prefix("s3://") else {
        let scheme = cfg.url.split("://").next().unwrap_or("");
        return Err(bad(if cfg.url.contains("://") {
            format!("the scheme {scheme:?} is not supported (s3://BUCKET/PREFIX is)")
        } else {
            "expected s3://BUCKET/PREFIX".to_string()
        }));
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket name".into()));
    }
    let prefix = prefix.trim_matches('/').to_string();
    if prefix.split('/').any(|p| p == "." || p == "..") {
        return Err(bad("the prefix may not hold . or .. segments".into()));
    }
    // Timeouts go in as settings: `with_client_options` would replace the
    // client settings the environment gave (AWS_ALLOW_HTTP).
    use object_store::ClientConfigKey;
    use object_store::aws::AmazonS3ConfigKey;
    let mut builder = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), "5s")
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), "60s");
    for (k, v) in &cfg.options {
        let key = k
            .parse::<AmazonS3ConfigKey>()
            .map_err(|e| bad(format!("setting {k}: {e}")))?;
        builder = builder.with_config(key, v);
    }
    // Reads retry a few times within seconds; an outage is not waited out
    // here (uploads retry on their own schedule, queries fail and say why).
    let retry = object_store::RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(10),
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
    };
    let store = builder.with_retry(retry).build().map_err(|e| bad(e.to_string()))?;
    Ok((Arc::new(store), prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> RemoteConfig {
        RemoteConfig {
            url: url.into(),
            options: vec![
                ("aws_region".into(), "us-east-1".into()),
                ("aws_access_key_id".into(), "k".into()),
                ("aws_secret_access_key".into(), "s".into()),
            ],
        }
    }

    #[test]
    fn storage_urls_are_checked_before_anything_is_reached() {
        for (url, needle) in [
            ("/var/data", "expected s3://"),
            ("gs://bucket/x", "\"gs\" is not supported"),
            ("s3:///prefix", "no bucket"),
            ("s3://b/a/../c", ". or .."),
        ] {
            let e = build_store(&cfg(url)).err().unwrap_or_else(|| panic!("{url} accepted"));
            assert!(e.to_string().contains(needle), "{url}: {e}");
        }
        let mut bad_key = cfg("s3://b/p");
        bad_key.options.push(("aws_no_such_thing".into(), "1".into()));
        assert!(build_store(&bad_key).is_err());
        let (_, prefix) = build_store(&cfg("s3://bucket/a/b/")).unwrap();
        assert_eq!(prefix, "a/b");
        let (_, prefix) = build_store(&cfg("s3://bucket")).unwrap();
        assert_eq!(prefix, "");
    }
}
