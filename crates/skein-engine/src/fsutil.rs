//! File-system primitives with their crash-safety reasoning.
//!
//! Every durable file is created as `NAME.tmp`, written, fsynced, renamed to
//! `NAME`, and its directory fsynced. A crash before the rename leaves a
//! `.tmp` file that recovery deletes; after the rename, the file is whole.
//! The directory fsync makes the rename itself survive power loss.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// Suffix of files still being written; never read, deleted on open.
pub const TMP_SUFFIX: &str = ".tmp";

pub fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .ctx(|| format!("fsync directory {}", dir.display()))
}

/// Writes `bytes` to `dir/name` atomically and durably.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let dst = dir.join(name);
    let mut f = File::create(&tmp).ctx(|| format!("create {}", tmp.display()))?;
    f.write_all(bytes).ctx(|| format!("write {}", tmp.display()))?;
    f.sync_all().ctx(|| format!("fsync {}", tmp.display()))?;
    drop(f);
    fs::rename(&tmp, &dst).ctx(|| format!("rename {} to {}", tmp.display(), dst.display()))?;
    fsync_dir(dir)
}

pub fn create_dir_all(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).ctx(|| format!("create directory {}", dir.display()))
}

/// Removes leftovers of interrupted writes in `dir`.
pub fn remove_tmp_files(dir: &Path) -> Result<usize> {
    let mut n = 0;
    for entry in fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))? {
        let entry = entry.ctx(|| format!("list {}", dir.display()))?;
        if entry.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
            fs::remove_file(entry.path()).ctx(|| format!("remove {}", entry.path().display()))?;
            n += 1;
        }
    }
    Ok(n)
}

/// This data directory's identity, made once and kept in `instance-id`:
/// what an object storage lease names its holder by, so a restart of the
/// same directory takes its own lease back at once.
pub fn instance_id(data_dir: &Path) -> Result<String> {
    const NAME: &str = "instance-id";
    let path = data_dir.join(NAME);
    match fs::read_to_string(&path) {
        Ok(s) if s.trim().len() == 32 => return Ok(s.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    }
    let seed = format!(
        "{:?} {} {}",
        std::time::SystemTime::now(),
        std::process::id(),
        data_dir.display()
    );
    let id = blake3::hash(seed.as_bytes()).to_hex()[..32].to_string();
    write_atomic(data_dir, NAME, id.as_bytes())?;
    Ok(id)
}

/// An exclusive lock on a data directory, held for the life of the engine.
///
/// `flock` is released by the kernel when its holder dies, so a lock left by
/// a killed process is reclaimed automatically; the PID written inside only
/// serves the error message of a second process.
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join("LOCK");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .ctx(|| format!("open {}", path.display()))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a valid, owned file descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let pid = fs::read_to_string(&path).unwrap_or_default().trim().to_string();
            return Err(Error::Locked {
                dir: dir.to_path_buf(),
                pid: if pid.is_empty() { "unknown".into() } else { pid },
            });
        }
        file.set_len(0).ctx(|| format!("truncate {}", path.display()))?;
        write!(file, "{}", std::process::id()).ctx(|| format!("write {}", path.display()))?;
        file.sync_all().ctx(|| format!("fsync {}", path.display()))?;
        Ok(DirLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_fails_with_pid_and_first_release_frees() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DirLock::acquire(dir.path()).unwrap();
        // flock locks are per open file description, so a second open in the
        // same process conflicts just like another process would.
        let err = DirLock::acquire(dir.path()).err().unwrap();
        assert!(err.to_string().contains(&std::process::id().to_string()), "{err}");
        drop(lock);
        DirLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn atomic_write_leaves_no_tmp() {
        let dir = tempfile::tempdir().unwrap();
        write_atomic(dir.path(), "a", b"hello").unwrap();
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"hello");
        fs::write(dir.path().join("b.tmp"), b"partial").unwrap();
        assert_eq!(remove_tmp_files(dir.path()).unwrap(), 1);
        assert!(!dir.path().join("b.tmp").exists());
    }
}
