//! `skein backup`, `skein restore`, `skein verify`: copies of the data that
//! outlive the disk, and checks that say what is damaged.
//!
//! `backup` asks the running server (`POST /api/v1/backups`), which copies
//! while it goes on ingesting; with `--data-dir` it opens a stopped
//! server's directory itself. `restore` and `verify` work on directories
//! and buckets directly, with no server.

use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};
use skein_engine::backup::{self, Location};

use super::Ctx;
use super::client::{CliError, CliResult, Exit};
use super::output::{human_bytes, write_stdout};

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// An empty (or new) directory, or s3://BUCKET/PREFIX. Through the
    /// server, the path is on the server's machine and a bucket is reached
    /// with the server's --s3-* settings; with --data-dir, with the AWS_*
    /// environment.
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    pub to: String,
    /// Back up this data directory directly, with no server running on it
    /// (it is opened, recovered and flushed first).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The backup: a directory or s3://BUCKET/PREFIX (reached with the
    /// AWS_* environment).
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    pub from: String,
    /// The data directory to create; it must be empty or not exist.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// The data directory the backup was taken of (or a copy of its
    /// `erasures/`, tenants' included): erasures it has that the backup
    /// does not are carried into the restore and run at its first start,
    /// so nothing erased after the backup comes back.
    #[arg(long, value_name = "DIR")]
    pub erasures_from: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// A data directory (of a stopped server) or a backup directory.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "backup",
        conflicts_with = "backup"
    )]
    pub data_dir: Option<PathBuf>,
    /// A backup in a bucket: s3://BUCKET/PREFIX (AWS_* environment).
    #[arg(long, value_name = "s3://BUCKET/PREFIX")]
    pub backup: Option<String>,
    /// Check this erasure's receipt in --data-dir instead (its id, from
    /// POST /api/v1/erasures).
    #[arg(long, value_name = "ID", requires = "data_dir")]
    pub erasure: Option<String>,
    /// With --erasure: the bucket the server keeps its parts in (its
    /// --storage), scanned too, read only, with the AWS_* environment.
    /// Without it, only the parts on local disk are scanned.
    #[arg(long, value_name = "s3://BUCKET/PREFIX", requires = "erasure")]
    pub storage: Option<String>,
}

fn engine_error(e: skein_engine::Error) -> CliError {
    if e.is_invalid_input() {
        CliError::new(Exit::Usage, "bad_request", e.to_string())
    } else {
        CliError::new(Exit::Server, "failed", e.to_string())
    }
}

pub fn backup(ctx: &Ctx, a: &BackupArgs) -> CliResult<Exit> {
    let report: Value = match &a.data_dir {
        Some(dir) => {
            let to = Location::parse(&a.to, Vec::new());
            let mut report = back_up_dir(dir, &to)?;
            // Tenants' data directories, each to its place in the backup.
            let mut tenants = serde_json::Map::new();
            for name in backup::nested(&Location::Dir(dir.clone())).map_err(engine_error)? {
                let rel = format!("{}/{name}", backup::NESTED_DIR);
                tenants.insert(name, back_up_dir(&dir.join(&rel), &to.child(&rel))?);
            }
            if !tenants.is_empty() {
                report["tenants"] = Value::Object(tenants);
            }
            report
        }
        None => {
            // A backup takes as long as its bytes take: no request timeout
            // (and --ca-cert, as every command).
            let c = ctx.client(true)?;
            c.post_json(&["api", "v1", "backups"], &[], &json!({"to": a.to}))?
        }
    };
    if ctx.out.table() {
        write_stdout(&format!(
            "backed up {} files ({}) to {} in {:.1} s",
            report["files"],
            human_bytes(report["bytes"].as_f64().unwrap_or(0.0)),
            report["location"].as_str().unwrap_or(&a.to),
            report["seconds"].as_f64().unwrap_or(0.0)
        ))?;
    } else {
        ctx.out.json(&report)?;
    }
    Ok(Exit::Ok)
}

/// Opens a stopped server's data directory (recovering and flushing it)
/// and backs it up to `to`.
fn back_up_dir(dir: &std::path::Path, to: &Location) -> CliResult<Value> {
    let mut opts = skein_engine::EngineOptions::new(dir);
    opts.background = false;
    let engine = skein_engine::Engine::open(opts).map_err(engine_error)?;
    let r = engine.backup(to).map_err(engine_error);
    engine.close().map_err(engine_error)?;
    Ok(serde_json::to_value(r?).unwrap_or(Value::Null))
}

pub fn restore(ctx: &Ctx, a: &RestoreArgs) -> CliResult<Exit> {
    let r = backup::restore(&Location::parse(&a.from, Vec::new()), &a.data_dir).map_err(engine_error)?;
    let mut carried = Vec::new();
    if let Some(from) = &a.erasures_from {
        let mut places = vec![(from.clone(), a.data_dir.clone())];
        for name in &r.nested {
            let rel = PathBuf::from(backup::NESTED_DIR).join(name);
            places.push((from.join(&rel), a.data_dir.join(&rel)));
        }
        for (from, into) in places {
            carried.extend(skein_engine::erasure::carry_erasures(&from, &into).map_err(engine_error)?);
        }
    }
    if ctx.out.table() {
        let erasures = if carried.is_empty() {
            String::new()
        } else {
            format!("; {} erasures made since run at its first start", carried.len())
        };
        write_stdout(&format!(
            "restored {} files ({}) into {} in {:.1} s{erasures}; start it with: skein serve --data-dir {}",
            r.files,
            human_bytes(r.bytes as f64),
            r.data_dir,
            r.seconds,
            r.data_dir
        ))?;
    } else {
        let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
        if a.erasures_from.is_some() {
            v["erasures_carried"] = serde_json::json!(carried);
        }
        ctx.out.json(&v)?;
    }
    Ok(Exit::Ok)
}

/// Exit 0 when every file is intact, 4 (naming each damaged file) when not.
pub fn verify(ctx: &Ctx, a: &VerifyArgs) -> CliResult<Exit> {
    if let (Some(id), Some(dir)) = (&a.erasure, &a.data_dir) {
        return super::verify_erasure::run(ctx, id, dir, a.storage.as_deref());
    }
    let loc = match (&a.data_dir, &a.backup) {
        (Some(d), _) => {
            if !d.is_dir() {
                return Err(CliError::usage(format!("{} is not a directory", d.display())));
            }
            Location::Dir(d.clone())
        }
        (None, Some(b)) => Location::parse(b, Vec::new()),
        (None, None) => return Err(CliError::usage("give --data-dir DIR or --backup s3://BUCKET/PREFIX")),
    };
    let r = backup::verify(&loc).map_err(engine_error)?;
    if ctx.out.table() {
        let mut text = format!(
            "{} {}: {} files ({}) checked{}",
            if r.backup { "backup" } else { "data directory" },
            r.location,
            r.files_checked,
            human_bytes(r.bytes_checked as f64),
            if r.ok() {
                ", all intact".to_string()
            } else {
                format!(", {} DAMAGED", r.damaged.len())
            }
        );
        for d in &r.damaged {
            text.push_str(&format!("\n  DAMAGED {}: {}", d.file, d.problem));
        }
        for n in &r.notes {
            text.push_str(&format!("\n  note: {n}"));
        }
        write_stdout(&text)?;
    } else {
        let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
        v["ok"] = r.ok().into();
        ctx.out.json(&v)?;
    }
    Ok(if r.ok() { Exit::Ok } else { Exit::Server })
}
