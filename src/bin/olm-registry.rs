//! `olm-registry DIR`: the catalog server alone, for catalog images and pods, where only
//! `olm catalog serve` is needed. Same flags, same answers; a much smaller binary, so that
//! its resident code (most of a catalog server's memory once the index is compact) is only
//! the serving path, not the controllers, resolver and tooling of `olm`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use olm::telemetry::LogFormat;

/// Serve a file-based catalog over the registry gRPC API (as `opm serve` does).
#[derive(Parser, Debug)]
#[command(name = "olm-registry", version)]
struct Args {
    /// The catalog directory (FBC, JSON or YAML).
    dir: PathBuf,
    #[arg(short, long, default_value_t = 50051)]
    port: u16,
    #[arg(long, default_value = "127.0.0.1")]
    address: IpAddr,
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "OLM_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(flatten)]
    cache: olm::registry::CacheArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    olm::telemetry::init(args.log_format);
    match olm::registry::run(
        &args.dir,
        SocketAddr::new(args.address, args.port),
        &args.cache,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", olm::cli::error_line(&err.into()));
            ExitCode::FAILURE
        }
    }
}
