//! Output-folder ownership: a run claims its output folder before writing anything, so two
//! runs never mix their files in one folder and no run silently overwrites another's.
//!
//! The claim is a small marker file ([`MARKER`]) recording the scene hash (of the scene after
//! `--set` overrides), the overrides and the commands that wrote into the folder. A folder is
//! free when it holds none of diffphd's output files ([`is_output_name`]); other files (a
//! user's notes, a sweep's `stderr.log`) neither block a claim nor are ever removed. A folder
//! holding outputs may be reused by another command on the **same** scene hash (`simulate`,
//! `grad` and `gradcheck` write different files), except that `simulate` and `optimize`
//! both write frame files and so never share a folder. Anything else is refused unless the
//! caller passes `overwrite`, which first removes every diffphd output file in the folder
//! (stale frames included) and then claims it afresh.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Name of the ownership marker inside an output folder.
pub const MARKER: &str = "diffphd-run.json";

/// Who owns a folder: the effective scene and the commands that wrote into it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunMarker {
    pub scene: String,
    /// SHA-256 of the effective scene (after overrides).
    pub scene_hash: String,
    pub overrides: Vec<String>,
    pub commands: Vec<String>,
    pub diffphd_version: String,
    /// SHA-256 of the effective scene without `solver.threads`: a run that differs from the
    /// folder's only in its thread count replaces its output without `--overwrite` (the
    /// threads stay in `scene_hash`, `overrides` and the logs). Absent in older markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_without_threads: Option<String>,
}

/// Why a folder cannot be claimed.
#[derive(Debug, thiserror::Error)]
pub enum OutdirError {
    #[error("cannot create output directory {dir}: {err}")]
    Create { dir: PathBuf, err: std::io::Error },
    #[error("cannot read output directory {dir}: {err}")]
    Read { dir: PathBuf, err: std::io::Error },
    #[error("{dir} is not a directory")]
    NotDir { dir: PathBuf },
    #[error("cannot remove {file} (replacing the earlier run's output): {err}")]
    Remove { file: PathBuf, err: std::io::Error },
    #[error("cannot write {file}: {err}")]
    Write { file: PathBuf, err: std::io::Error },
    #[error("output directory {dir} holds {cause}; pass --overwrite to replace it (its diffphd files are removed first) or choose another --out")]
    Taken { dir: PathBuf, cause: String },
}

/// Is `name` a file diffphd writes into an output folder (or the temp file of one)?
pub fn is_output_name(name: &str) -> bool {
    const FIXED: [&str; 7] = [
        MARKER,
        "log.json",
        "grad.json",
        "gradcheck.json",
        "optimize.json",
        "optimized.toml",
        "frames.pvd",
    ];
    if FIXED.contains(&name) {
        return true;
    }
    if name.starts_with('.') && name.ends_with(".tmp") {
        return true;
    }
    if let Some(rest) = name.strip_prefix("frame_") {
        if let Some((num, ext)) = rest.split_once('.') {
            return !num.is_empty()
                && num.bytes().all(|b| b.is_ascii_digit())
                && (ext == "ply" || ext == "vtu");
        }
    }
    false
}

/// Commands whose files collide (both write frame files).
fn commands_collide(a: &str, b: &str) -> bool {
    let frames = |c: &str| c == "simulate" || c == "optimize";
    a != b && frames(a) && frames(b)
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// The diffphd output files present in `dir` (sorted names).
pub fn output_files(dir: &Path) -> Result<Vec<String>, OutdirError> {
    let rd = std::fs::read_dir(dir).map_err(|err| OutdirError::Read {
        dir: dir.to_path_buf(),
        err,
    })?;
    let mut names = Vec::new();
    for e in rd {
        let e = e.map_err(|err| OutdirError::Read {
            dir: dir.to_path_buf(),
            err,
        })?;
        if let Some(n) = e.file_name().to_str() {
            if is_output_name(n) && e.file_type().map(|t| t.is_file()).unwrap_or(false) {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    Ok(names)
}

/// Why `existing` (or no readable marker) keeps `me` out; `None` when the folder may be shared.
fn conflict(existing: Option<&RunMarker>, files: &[String], me: &RunMarker) -> Option<String> {
    let command = me.commands.first().map(String::as_str).unwrap_or("");
    let Some(m) = existing else {
        return Some(format!(
            "diffphd output of an unknown run ({} file(s), e.g. {}, and no readable {MARKER})",
            files.len(),
            files.first().map(String::as_str).unwrap_or("?")
        ));
    };
    if m.scene_hash != me.scene_hash {
        let overrides = if m.overrides != me.overrides {
            format!(
                "; overrides [{}] there, [{}] here",
                m.overrides.join(", "),
                me.overrides.join(", ")
            )
        } else {
            String::new()
        };
        return Some(format!(
            "the output of another run ({} of {}, scene hash {}; this run's is {}{overrides})",
            m.commands.join("+"),
            m.scene,
            short(&m.scene_hash),
            short(&me.scene_hash)
        ));
    }
    if let Some(c) = m.commands.iter().find(|c| commands_collide(c, command)) {
        return Some(format!(
            "the frames of a `{c}` run of the same scene, which `{command}` would overwrite"
        ));
    }
    None
}

/// Whether `me` differs from the folder's run `existing` only in its thread count.
fn only_threads_differ(existing: Option<&RunMarker>, me: &RunMarker) -> bool {
    existing.is_some_and(|m| {
        m.scene_hash != me.scene_hash
            && m.hash_without_threads.is_some()
            && m.hash_without_threads == me.hash_without_threads
    })
}

/// Claim `dir` for a run described by `me` (its `commands` holds this run's command only).
/// Creates the folder; refuses one holding another run's output unless `overwrite`, which
/// removes every diffphd output file there first, or unless the two runs differ only in
/// their thread count ([`RunMarker::hash_without_threads`]): then the earlier output is
/// replaced the same way (frames of two thread counts are never mixed). Returns the names
/// removed.
pub fn claim(dir: &Path, me: &RunMarker, overwrite: bool) -> Result<Vec<String>, OutdirError> {
    if dir.exists() && !dir.is_dir() {
        return Err(OutdirError::NotDir {
            dir: dir.to_path_buf(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|err| OutdirError::Create {
        dir: dir.to_path_buf(),
        err,
    })?;
    let file = dir.join(MARKER);
    let mut removed = Vec::new();
    // Two runs may claim an empty folder at the same moment: the marker of a free folder is
    // created exclusively (O_EXCL), and the loser looks again and finds the winner's claim.
    for _ in 0..4 {
        let files = output_files(dir)?;
        let existing: Option<RunMarker> = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if !files.is_empty() {
            let replace = overwrite || only_threads_differ(existing.as_ref(), me);
            match conflict(existing.as_ref(), &files, me) {
                None => {
                    let mut marker =
                        existing.expect("conflict() reports files without a marker as a conflict");
                    for c in &me.commands {
                        if !marker.commands.contains(c) {
                            marker.commands.push(c.clone());
                        }
                    }
                    let text = serde_json::to_string_pretty(&marker)
                        .expect("a RunMarker (strings and numbers) serializes to JSON");
                    super::write_atomic(&file, text.as_bytes())
                        .map_err(|err| OutdirError::Write { file, err })?;
                    return Ok(removed);
                }
                Some(cause) if !replace => {
                    return Err(OutdirError::Taken {
                        dir: dir.to_path_buf(),
                        cause,
                    })
                }
                Some(_) => {
                    for f in &files {
                        let p = dir.join(f);
                        match std::fs::remove_file(&p) {
                            Ok(()) => removed.push(f.clone()),
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(err) => return Err(OutdirError::Remove { file: p, err }),
                        }
                    }
                }
            }
        }
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file);
        match created {
            Ok(mut f) => {
                use std::io::Write;
                let text = serde_json::to_string_pretty(me)
                    .expect("a RunMarker (strings and numbers) serializes to JSON");
                f.write_all(text.as_bytes())
                    .and_then(|_| f.sync_all())
                    .map_err(|err| OutdirError::Write {
                        file: file.clone(),
                        err,
                    })?;
                return Ok(removed);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(OutdirError::Write { file, err }),
        }
    }
    Err(OutdirError::Taken {
        dir: dir.to_path_buf(),
        cause: "the output of other runs claiming it at the same time".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(cmd: &str, hash: &str) -> RunMarker {
        RunMarker {
            scene: "s.toml".into(),
            scene_hash: hash.into(),
            overrides: vec![],
            commands: vec![cmd.into()],
            diffphd_version: "test".into(),
            hash_without_threads: None,
        }
    }

    #[test]
    fn output_names_are_recognised_and_others_are_not() {
        for n in [
            "log.json",
            "frame_00012.ply",
            "frame_3.vtu",
            "frames.pvd",
            ".log.json.12.0.tmp",
            MARKER,
        ] {
            assert!(is_output_name(n), "{n}");
        }
        for n in [
            "notes.txt",
            "frame_.ply",
            "frame_12a.ply",
            "stderr.log",
            "frame_1.obj",
        ] {
            assert!(!is_output_name(n), "{n}");
        }
    }

    #[test]
    fn another_scene_is_refused_naming_the_folder_and_overwrite_removes_only_diffphd_files() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("out");
        claim(&dir, &marker("simulate", "aaaa"), false).unwrap();
        for f in [
            "frame_00000.ply",
            "frame_00005.ply",
            "log.json",
            "notes.txt",
        ] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        let e = claim(&dir, &marker("simulate", "bbbb"), false).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(&dir.display().to_string()), "{msg}");
        assert!(
            msg.contains("another run") && msg.contains("--overwrite"),
            "{msg}"
        );
        let removed = claim(&dir, &marker("simulate", "bbbb"), true).unwrap();
        assert_eq!(removed.len(), 4, "{removed:?}");
        assert!(!dir.join("frame_00005.ply").exists());
        assert!(dir.join("notes.txt").exists());
        let m: RunMarker =
            serde_json::from_str(&std::fs::read_to_string(dir.join(MARKER)).unwrap()).unwrap();
        assert_eq!(m.scene_hash, "bbbb");
    }

    #[test]
    fn same_scene_commands_share_a_folder_but_simulate_and_optimize_do_not() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_path_buf();
        claim(&dir, &marker("simulate", "h"), false).unwrap();
        std::fs::write(dir.join("log.json"), "{}").unwrap();
        claim(&dir, &marker("simulate", "h"), false).unwrap();
        claim(&dir, &marker("grad", "h"), false).unwrap();
        let m: RunMarker =
            serde_json::from_str(&std::fs::read_to_string(dir.join(MARKER)).unwrap()).unwrap();
        assert_eq!(m.commands, vec!["simulate", "grad"]);
        let e = claim(&dir, &marker("optimize", "h"), false).unwrap_err();
        assert!(e.to_string().contains("frames of a `simulate` run"), "{e}");
    }

    #[test]
    fn outputs_without_a_marker_are_refused_and_unrelated_files_are_not() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("README"), "x").unwrap();
        claim(d.path(), &marker("grad", "h"), false).unwrap();
        let d2 = tempfile::tempdir().unwrap();
        std::fs::write(d2.path().join("frame_00001.ply"), "x").unwrap();
        let e = claim(d2.path(), &marker("grad", "h"), false).unwrap_err();
        assert!(e.to_string().contains("unknown run"), "{e}");
    }
}
