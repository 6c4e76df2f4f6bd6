//! `olm-operator [flags of olm run]`: OLM's controllers alone, for the deployment. Same flags
//! and behaviour as `olm run`; a smaller binary, as `olm-registry` is for serving catalogs.
//! On a machine that maps a binary's text in large folios nearly all of it is resident, so
//! the code `olm` carries for its other commands (publishing, rendering, validation, CRD
//! generation) is memory the deployed controllers would hold for nothing.

use std::process::ExitCode;

use clap::Parser;
use olm::telemetry::LogFormat;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Run OLM's controllers against the cluster (leader-elected; admin server on :8080).
#[derive(Parser, Debug)]
#[command(name = "olm-operator", version)]
struct Args {
    /// Log format on stderr; the level comes from RUST_LOG (default: info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "OLM_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(flatten)]
    run: olm::cli::run::RunArgs,
}

fn main() -> ExitCode {
    // The tuning `olm run` allocates with (one arena, no thread caches, a purging thread).
    std::hint::black_box(&olm::allocator::malloc_conf);
    let args = Args::parse();
    olm::telemetry::init(args.log_format);
    match olm::cli::run::run(args.run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", olm::cli::error_line(&err));
            ExitCode::FAILURE
        }
    }
}
