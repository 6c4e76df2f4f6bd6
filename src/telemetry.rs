//! Logging: `RUST_LOG` filters (default `info`), text for people or JSON for log pipelines.

use tracing_subscriber::EnvFilter;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber. Logs go to stderr so that stdout stays clean for
/// commands whose output is data (`olm crds | kubectl apply -f -`).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, not for log files and pipes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // A subscriber may already be set (tests); keeping the existing one is fine.
    let _ = result;
}
