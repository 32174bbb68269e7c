//! Records the git commit the binary was built from (`DIFFPHD_GIT_COMMIT`, empty outside a
//! checkout; suffixed `-dirty` when tracked files had uncommitted changes); `main` hands it to
//! the library (`diffphd::io::set_git_commit`) so every output can say which code wrote it.
//! Lives in the CLI crate so that a commit rebuilds the binary, not the library.

fn main() {
    record_git_commit();
}

include!("git_commit.rs");
