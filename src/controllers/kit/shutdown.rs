//! The stop signal every controller is run with.

use std::future::Future;

use tokio::sync::watch;

/// Resolves when the process is asked to stop (SIGTERM/SIGINT).
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    pub fn new(stop: watch::Receiver<bool>) -> Self {
        Shutdown(stop)
    }

    pub fn requested(self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut stop = self.0;
        async move {
            // A dropped sender means the process is going away: stop too.
            let _ = stop.wait_for(|stop| *stop).await;
        }
    }
}
