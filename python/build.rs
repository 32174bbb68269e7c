//! Records the git commit the Python extension was built from (`DIFFPHD_GIT_COMMIT`, empty outside a
//! checkout; suffixed `-dirty` when tracked files had uncommitted changes); the module's init hands it to
//! the library (`diffphd::io::set_git_commit`) so every output can say which code wrote it.
//! Lives here (as in `cli/build.rs`) so that a commit rebuilds the extension, not the library.

fn main() {
    record_git_commit();
}

include!("../cli/git_commit.rs");
