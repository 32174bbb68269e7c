//! Shared by the file-based targets: a per-process scratch folder (the public reading API
//! of the mesh readers takes a path).

use std::path::PathBuf;

pub fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("diffphd-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// Write `bytes` to `name` in the scratch folder and return the path.
pub fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = scratch().join(name);
    std::fs::write(&p, bytes).expect("scratch file");
    p
}
