//! `skein verify --erasure ID --data-dir DIR`: checks an erasure's receipt
//! offline, with no server: its digest, the checksums of the files it
//! wrote, and that no part or WAL segment holds a record matching its
//! criteria (`skein_engine::erasure::verify_erasure`). Prints the report as
//! JSON; exit 0 when everything checks out, 4 when something does not, 2
//! for a bad command line or an unknown id.

use std::path::Path;

use super::client::{CliError, CliResult, Exit};
use super::{Ctx, Format};

pub fn run(ctx: &Ctx, id: &str, data_dir: &Path, storage: Option<&str>) -> CliResult<Exit> {
    // The bucket's settings come from the AWS_* environment, as `skein
    // restore` reaches one; the cache is the verify's own scratch.
    let bucket = storage.map(|url| skein_engine::ObjectStorageOptions {
        remote: skein_engine::RemoteConfig {
            url: url.to_string(),
            options: Vec::new(),
        },
        cache_dir: data_dir.join("cache"),
        cache_bytes: 0,
        read_only: true,
        removal_grace: std::time::Duration::ZERO,
    });
    let v = skein_engine::erasure::verify_erasure(data_dir, id, bucket.as_ref()).map_err(|e| {
        if e.is_invalid_input() {
            CliError::usage(e.to_string())
        } else {
            CliError::new(Exit::Server, "verify_failed", e.to_string())
        }
    })?;
    let value = serde_json::to_value(&v).map_err(|e| CliError::new(Exit::Server, "json", e.to_string()))?;
    if ctx.out.format == Format::Table {
        println!(
            "erasure {}: {} (digest {}, {} files checked, {} replaced since, {} mismatched, {} parts and {} WAL segments scanned, {} matching records)",
            v.id,
            if v.ok { "verified" } else { "NOT verified" },
            if v.digest_ok { "ok" } else { "wrong" },
            v.files_checked,
            v.files_replaced_since.len(),
            v.files_mismatched.len(),
            v.parts_scanned,
            v.wal_segments_scanned,
            v.matching_records.values().sum::<u64>()
        );
    } else {
        println!("{value}");
    }
    if v.ok {
        Ok(Exit::Ok)
    } else {
        Err(CliError::new(
            Exit::Server,
            "not_verified",
            format!(
                "erasure {} does not verify: {}",
                v.id,
                if !v.digest_ok {
                    "its receipt's digest does not match (or it is not completed)".to_string()
                } else if !v.files_mismatched.is_empty() {
                    format!("files differ from the receipt: {}", v.files_mismatched.join(", "))
                } else {
                    format!("records matching its criteria remain: {:?}", v.matching_records)
                }
            ),
        ))
    }
}
