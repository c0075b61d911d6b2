//! The `toolhost` command: the same engine for plugin authors and CI.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
