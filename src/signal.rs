//! SIGTERM and SIGINT (Ctrl-C): the one way every long-running command learns to stop.

/// Resolves on the first SIGTERM or SIGINT.
pub async fn shutdown_requested() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
