fn main() {
    std::process::exit(diffphd::cli::main());
}
