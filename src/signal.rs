//! Waiting for the process to be asked to stop: SIGINT (Ctrl-C) or SIGTERM (what a kubelet
//! sends). `olm catalog serve` and `olm run` both stop on it.

/// Completes when the process receives SIGINT or SIGTERM. Where SIGTERM cannot be watched
/// (not Unix, or the handler cannot be installed) it completes on SIGINT alone.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sigterm_completes_the_future() {
        let mut stop = std::pin::pin!(shutdown_signal());
        // The first poll installs the handlers; from then on SIGTERM no longer ends the
        // test process.
        tokio::select! {
            biased;
            _ = &mut stop => panic!("completed before any signal"),
            _ = tokio::task::yield_now() => {}
        }
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(std::time::Duration::from_secs(10), stop)
            .await
            .expect("SIGTERM completes shutdown_signal()");
    }
}
