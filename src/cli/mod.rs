//! The `olm` command line: parse flags, call a library function, print.

mod catalog;
mod crds;
mod resolve;
mod run;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

#[derive(Parser, Debug)]
#[command(
    name = "olm",
    version,
    about = "Operator Lifecycle Manager: installs, upgrades and manages operators"
)]
pub struct Cli {
    /// Log format on stderr; the level comes from RUST_LOG (default: info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "OLM_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the operators.coreos.com CRDs as YAML (`olm crds | kubectl apply -f -`).
    Crds(crds::CrdsArgs),
    /// File-based catalogs: render, validate, generate, templates.
    #[command(subcommand)]
    Catalog(catalog::CatalogCommand),
    /// registry+v1 bundles.
    #[command(subcommand)]
    Bundle(catalog::BundleCommand),
    /// What would these Subscriptions install or upgrade, given these catalogs? (no cluster)
    Resolve(resolve::ResolveArgs),
    /// Run OLM's controllers against the cluster (leader-elected; admin server on :8080).
    Run(Box<run::RunArgs>),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Crds(args) => crds::run(args),
        Command::Catalog(command) => catalog::run_catalog(command),
        Command::Bundle(command) => catalog::run_bundle(command),
        Command::Resolve(args) => resolve::run(args),
        Command::Run(args) => run::run(*args),
    }
}
