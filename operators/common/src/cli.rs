//! Flags every operator takes, and its logs.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use tracing_subscriber::EnvFilter;

#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    /// Kubeconfig to use; without it the in-cluster config (or $KUBECONFIG) is used.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Namespaces to watch: one, a comma-separated list, or empty for all namespaces.
    /// OLM sets WATCH_NAMESPACE from the `olm.targetNamespaces` annotation.
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    pub namespace: String,

    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub probe_address: SocketAddr,

    /// Act only while holding the Lease `<operator>-leader` in the pod's namespace, so that
    /// replicas (and the old and new pods of a rolling update) never act at once. The
    /// Deployments of the older bundles pass it, as operator-sdk's operators took it.
    #[arg(long)]
    pub leader_elect: bool,

    /// Log format: one JSON object per line, or plain text.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Logs to stderr at `RUST_LOG` (default `info`).
pub fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}
