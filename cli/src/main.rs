fn main() {
    diffphd::io::set_git_commit(env!("DIFFPHD_GIT_COMMIT"));
    std::process::exit(diffphd_cli::main());
}
