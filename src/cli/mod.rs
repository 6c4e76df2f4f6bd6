//! The `olm` command line: parse flags, call a library function, print.

// Errors end here as messages, so anyhow is at home (clippy.toml keeps it out of the rest).
#![allow(clippy::disallowed_types, clippy::disallowed_macros)]

mod catalog;
mod crds;
mod fbc;
mod image;
mod plan;
mod resolve;
mod rollback;
pub mod run;

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
    /// Container images in OCI layouts and registries.
    #[command(subcommand)]
    Image(ImageCommand),
    /// InstallPlans: `olm plan show NAMESPACE/PLAN` prints what running one changes.
    #[command(subcommand)]
    Plan(plan::PlanCommand),
    /// What would these Subscriptions install or upgrade, given these catalogs? (no cluster)
    Resolve(resolve::ResolveArgs),
    /// Run OLM's controllers against the cluster (leader-elected; admin server on 127.0.0.1:8080).
    Run(Box<run::RunArgs>),
    /// Take a Subscription's package back to the version its installed one replaced, and
    /// hold it there (sets `spec.upgradePolicy.rollbackTo`; refused when unsafe).
    Rollback(rollback::RollbackArgs),
}

#[derive(Subcommand, Debug)]
pub enum ImageCommand {
    /// Push an image from an OCI image layout (`LAYOUT` or `LAYOUT:TAG`) to a registry.
    Push(image::PushArgs),
    /// Build images of this repository's binaries (`olm`, `olm-registry`, the operators)
    /// as `operators/images.yaml` describes them: the binary (and its shared libraries),
    /// entrypoint, labels; tagged `<registry>/<name>:v<crate version>`.
    BuildBinary(image::BuildBinaryArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Crds(args) => crds::run(args),
        Command::Catalog(command) => catalog::run_catalog(command),
        Command::Bundle(command) => catalog::run_bundle(command),
        Command::Image(ImageCommand::Push(args)) => image::push(args),
        Command::Image(ImageCommand::BuildBinary(args)) => image::build_binary(args),
        Command::Plan(command) => plan::run(command),
        Command::Resolve(args) => resolve::run(args),
        Command::Run(args) => run::run(*args),
        Command::Rollback(args) => rollback::run(args),
    }
}

/// An error and its causes as one line, as `{:#}` prints them, but without a cause whose
/// text the message before it already ends with: errors that print their source
/// themselves (`"{path}: {source}"`) would otherwise say it twice.
pub fn error_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod error_line_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct Says {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::new(Says {
            path: "a/manifests/".into(),
            source: io(),
        });
        assert_eq!(super::error_line(&err), "a/manifests/: No such file");
        let wrapped = anyhow::Error::new(io()).context("reading a/manifests/");
        assert_eq!(
            super::error_line(&wrapped),
            "reading a/manifests/: No such file"
        );
    }
}
