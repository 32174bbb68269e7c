//! Output files: binary PLY surface frames and the JSON run log. Every file is written to
//! a temporary name and renamed into place, so a run killed half-way leaves each finished
//! file intact and never a half-written one.

pub mod log;
pub mod ply;

use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        // Leave nothing behind but complete files (issue 18).
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
