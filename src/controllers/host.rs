//! The controller host: runs the list of controllers `olm run` is made of, with one shutdown
//! and one leadership gate.
//!
//! - [`Role::EveryReplica`] controllers start at once on every replica: they fill read-only
//!   caches (the catalog snapshots) that servers on every replica answer from, and write
//!   nothing unless [`Context::is_leader`] says so.
//! - [`Role::Leader`] controllers start when this replica gains the Lease.
//! - SIGTERM: every controller is told to stop, in-flight rounds finish, then `run` returns.
//! - Loss of the Lease: every controller is aborted at once, mid-round (not drained: a new
//!   leader may already act), and `run` fails so the process exits and restarts clean.
//! - A controller that ends on its own is a bug: the rest are aborted and `run` fails.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::{Id, JoinSet};

use crate::controllers::context::Context;
use crate::controllers::kit::Shutdown;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    EveryReplica,
    Leader,
}

type Start = Box<dyn FnOnce(Arc<Context>, Shutdown) -> BoxFuture<'static, ()> + Send>;

/// One controller: its name (logs, errors), when it runs, and how to start it.
pub struct Controller {
    pub name: &'static str,
    pub role: Role,
    start: Start,
}

impl Controller {
    pub fn new<F, Fut>(name: &'static str, role: Role, start: F) -> Self
    where
        F: FnOnce(Arc<Context>, Shutdown) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Controller {
            name,
            role,
            start: Box::new(move |ctx, shutdown| Box::pin(start(ctx, shutdown))),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("lost leadership; controllers aborted, exiting so that only the new leader acts")]
    LostLeadership,
    #[error("leader election ended before this replica led")]
    ElectionEnded,
    #[error("controller {0} stopped on its own")]
    ControllerExited(&'static str),
    #[error("controller {name} panicked outside a reconcile: {message}")]
    ControllerPanicked { name: &'static str, message: String },
}

/// How long in-flight rounds get to finish after SIGTERM.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs each controller with its context (one per watched namespace when several are).
pub async fn run(
    controllers: Vec<(Arc<Context>, Controller)>,
    mut leading: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
) -> Result<(), HostError> {
    let mut running = Running::default();
    let mut waiting = Vec::new();
    for (ctx, controller) in controllers {
        match controller.role {
            Role::EveryReplica => running.start(controller, &ctx, &stop),
            Role::Leader => waiting.push((ctx, controller)),
        }
    }
    let stop_requested = Shutdown::new(stop.clone()).requested();
    let mut stop_requested = std::pin::pin!(stop_requested);
    let outcome = match standby(&mut running, &mut leading, &stop, &mut stop_requested).await {
        Ok(true) => {
            tracing::info!(
                controllers = ?waiting.iter().map(|(_, c)| c.name).collect::<Vec<_>>(),
                "leading: starting controllers"
            );
            for (ctx, controller) in waiting {
                running.start(controller, &ctx, &stop);
            }
            lead(&mut running, &mut leading, &stop, &mut stop_requested).await
        }
        Ok(false) => Ok(()),
        Err(error) => Err(error),
    };
    running.finish(outcome).await
}

/// Standing by: the every-replica controllers run; the rest wait for the Lease. True once
/// this replica leads, false when asked to stop first.
async fn standby<F: Future<Output = ()>>(
    running: &mut Running,
    leading: &mut watch::Receiver<bool>,
    stop: &watch::Receiver<bool>,
    stop_requested: &mut Pin<&mut F>,
) -> Result<bool, HostError> {
    tokio::select! {
        biased;
        () = stop_requested.as_mut() => Ok(false),
        result = leading.wait_for(|leading| *leading) => match result {
            Ok(_) => Ok(true),
            Err(_) => Err(HostError::ElectionEnded),
        },
        exited = running.next_exit() => if *stop.borrow() { Ok(false) } else { Err(exited) },
    }
}

/// Leading: every controller runs until the stop signal, a lost Lease or a controller's end.
async fn lead<F: Future<Output = ()>>(
    running: &mut Running,
    leading: &mut watch::Receiver<bool>,
    stop: &watch::Receiver<bool>,
    stop_requested: &mut Pin<&mut F>,
) -> Result<(), HostError> {
    tokio::select! {
        biased;
        () = stop_requested.as_mut() => Ok(()),
        _ = leading.wait_for(|leading| !*leading) => Err(HostError::LostLeadership),
        // Controllers stop on the same signal: one that ends first is stopping.
        exited = running.next_exit() => if *stop.borrow() { Ok(()) } else { Err(exited) },
    }
}

#[derive(Default)]
struct Running {
    tasks: JoinSet<()>,
    names: Vec<(Id, &'static str)>,
}

impl Running {
    fn start(&mut self, controller: Controller, ctx: &Arc<Context>, stop: &watch::Receiver<bool>) {
        tracing::debug!(controller = controller.name, role = ?controller.role, "starting");
        let future = (controller.start)(Arc::clone(ctx), Shutdown::new(stop.clone()));
        let handle = self.tasks.spawn(future);
        self.names.push((handle.id(), controller.name));
    }

    fn name(&self, id: Id) -> &'static str {
        self.names
            .iter()
            .find(|(task, _)| *task == id)
            .map_or("unknown", |(_, name)| name)
    }

    /// The first controller to end (pending forever when none runs).
    async fn next_exit(&mut self) -> HostError {
        match self.tasks.join_next_with_id().await {
            Some(Ok((id, ()))) => HostError::ControllerExited(self.name(id)),
            Some(Err(error)) => {
                let name = self.name(error.id());
                let message = match error.try_into_panic() {
                    Ok(payload) => payload
                        .downcast_ref::<&str>()
                        .map(std::string::ToString::to_string)
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_default(),
                    Err(_) => "cancelled".into(),
                };
                HostError::ControllerPanicked { name, message }
            }
            None => std::future::pending().await,
        }
    }

    /// A clean stop lets in-flight rounds finish (within [`DRAIN_TIMEOUT`]); an error
    /// aborts every controller, and nothing of theirs runs after this returns.
    async fn finish(mut self, outcome: Result<(), HostError>) -> Result<(), HostError> {
        if let Err(error) = outcome {
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
            return Err(error);
        }
        tracing::info!("stopping: letting in-flight rounds finish");
        if tokio::time::timeout(DRAIN_TIMEOUT, self.drain())
            .await
            .is_err()
        {
            tracing::warn!(timeout = ?DRAIN_TIMEOUT, "controllers did not stop in time; aborting them");
            self.tasks.abort_all();
        }
        tracing::info!("controllers stopped");
        Ok(())
    }

    async fn drain(&mut self) {
        while let Some(result) = self.tasks.join_next_with_id().await {
            if let Err(error) = result {
                tracing::warn!(controller = self.name(error.id()), %error, "controller ended badly while stopping");
            }
        }
    }
}
