use clap::Parser;

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
