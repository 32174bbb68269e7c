fn main() {
    std::process::exit(diffphd_cli::main());
}
