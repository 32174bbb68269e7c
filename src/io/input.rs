//! Reading input files with a size limit, so that a wrong path (`/dev/zero`, a huge or
//! endless file) is refused with a clear error instead of being read until memory runs out.
//!
//! The limit is [`DEFAULT_MAX_INPUT_BYTES`] (1 GiB); the environment variable
//! `DIFFPHD_MAX_INPUT_BYTES` (a byte count) replaces it, for unusually large meshes or to
//! test the guard cheaply.

use std::io::Read;
use std::path::Path;

/// Default limit on the size of one input file: 1 GiB.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// Environment variable that replaces [`DEFAULT_MAX_INPUT_BYTES`].
pub const MAX_INPUT_BYTES_VAR: &str = "DIFFPHD_MAX_INPUT_BYTES";

/// The input size limit in force: `DIFFPHD_MAX_INPUT_BYTES` when it holds a positive integer,
/// [`DEFAULT_MAX_INPUT_BYTES`] otherwise.
pub fn max_input_bytes() -> u64 {
    std::env::var(MAX_INPUT_BYTES_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&v| v > 0)
        .unwrap_or(DEFAULT_MAX_INPUT_BYTES)
}

/// Reads the whole file at `path`, refusing it (without reading on) once it exceeds `limit`
/// bytes. A regular file larger than the limit is refused from its metadata without reading
/// it; devices and pipes are read through a `take(limit + 1)` guard. The error for an
/// oversized file has kind [`std::io::ErrorKind::InvalidData`] and names the limit.
pub fn read_capped(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "file is larger than the input size limit of {limit} bytes (set {MAX_INPUT_BYTES_VAR} to raise it)"
            ),
        )
    };
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(if meta.is_file() {
        meta.len() as usize
    } else {
        0
    });
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_capped`] with the limit of [`max_input_bytes`].
pub fn read_input(path: &Path) -> std::io::Result<Vec<u8>> {
    read_capped(path, max_input_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_devices_and_large_files_are_refused_at_the_limit() {
        // Regression (#18): `/dev/zero` was read until memory ran out.
        if Path::new("/dev/zero").exists() {
            let e = read_capped(Path::new("/dev/zero"), 1 << 16).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
            assert!(
                e.to_string().contains("input size limit of 65536 bytes"),
                "{e}"
            );
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f.txt");
        std::fs::write(&p, vec![b'x'; 100]).expect("write");
        assert_eq!(read_capped(&p, 100).expect("at the limit").len(), 100);
        assert!(read_capped(&p, 99).is_err());
    }
}
