// Shared by `cli/build.rs` and `python/build.rs` (each `include!`s it): the git commit the
// artifact was built from, as `DIFFPHD_GIT_COMMIT` (empty outside a checkout; suffixed
// `-dirty` when tracked files had uncommitted changes).

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn record_git_commit() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=../src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    for p in ["HEAD", "logs/HEAD", "index"] {
        if let Some(path) = git(&["rev-parse", "--git-path", p]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            // `--no-optional-locks`: a plain `git status` refreshes and rewrites the index of
            // a fresh clone (its racily clean entries), and the index is watched above, so
            // the next cargo command re-ran this script and recompiled everything that
            // depends on it (in CI: the CLI, its test binaries and the extension, again).
            let dirty = git(&[
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
            ])
                .map(|s| !s.is_empty())
                .unwrap_or(false);
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => String::new(),
    };
    println!("cargo:rustc-env=DIFFPHD_GIT_COMMIT={commit}");
}
