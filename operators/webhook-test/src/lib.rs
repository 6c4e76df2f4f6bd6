//! What the test operator and the mock extension API server share: HTTPS with the
//! certificate OLM mounts, reloaded when the kubelet rewrites it.

pub mod mock;
pub mod tls;

/// Logs at `RUST_LOG` (default `info`), runs `run`, and turns its error into a logged
/// failure exit: the `main` of both binaries.
pub async fn main<E: std::fmt::Display>(
    name: &str,
    run: impl Future<Output = Result<(), E>>,
) -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    match run.await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "{name} failed");
            std::process::ExitCode::FAILURE
        }
    }
}
