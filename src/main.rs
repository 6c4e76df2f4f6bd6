use clap::Parser;

/// jemalloc for `olm run` and `olm catalog serve`, mimalloc for batch commands.
#[global_allocator]
static ALLOCATOR: olm::allocator::PerCommand = olm::allocator::PerCommand::new();

fn main() -> std::process::ExitCode {
    let cli = olm::cli::Cli::parse();
    olm::telemetry::init(cli.log_format);
    match olm::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", olm::cli::error_line(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
