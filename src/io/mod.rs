//! Files in and out: frames (binary PLY surfaces, `.vtu` volumes; `.vtu` also read back into
//! plain arrays by [`vtu_read`]), the decimal text of
//! numbers, and size-limited reading of input files (the run log's schema is
//! `cli::log`, beside the command that writes it). Every output file is
//! written to a temporary name and renamed into place, so a run killed half-way leaves each
//! finished file intact and never a half-written one.

pub mod frames;
pub mod input;
pub mod outdir;
pub mod ply;
pub mod text;
pub mod vtu;
pub mod vtu_read;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The package version of this binary.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

static GIT_COMMIT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Record the git commit of the program using the library (the `diffphd` binary and the
/// Python extension embed it at build time); the first call wins.
pub fn set_git_commit(commit: &'static str) {
    let _ = GIT_COMMIT.set(commit);
}

/// The git commit the program was built from (`-dirty` with uncommitted changes), or `None`
/// when it was not built from a git checkout or did not say.
pub fn git_commit() -> Option<&'static str> {
    GIT_COMMIT.get().copied().filter(|c| !c.is_empty())
}

/// Write `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
///
/// The temp name is unique per process and call (`.NAME.PID.N.tmp`), so parallel runs that
/// share a directory never write into each other's temp files; on a write error the temp
/// file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    let result = written.and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A temp-file name beside `path`, unique per process (pid) and per call (counter).
pub fn temp_path(path: &Path) -> std::path::PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_unique_per_call_and_hidden_beside_the_target() {
        let p = Path::new("/some/dir/log.json");
        let (a, b) = (temp_path(p), temp_path(p));
        assert_ne!(a, b);
        assert_eq!(a.parent(), p.parent());
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(".log.json."), "{name}");
        assert!(name.contains(&std::process::id().to_string()), "{name}");
        assert!(name.ends_with(".tmp"), "{name}");
    }

    #[test]
    fn write_atomic_from_many_threads_into_one_directory_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let d = dir.path();
                s.spawn(move || {
                    for k in 0..20 {
                        let body = format!("{t}-{k}");
                        write_atomic(&d.join("shared.json"), body.as_bytes()).unwrap();
                    }
                });
            }
        });
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("shared.json")]);
        let text = std::fs::read_to_string(dir.path().join("shared.json")).unwrap();
        assert!(text.contains('-') && text.ends_with(|c: char| c.is_ascii_digit()));
    }
}
