//! Start-up and the run loop every operator shares: a client from `--kubeconfig` (or the
//! in-cluster config), the probe server, a check that each watched resource can be listed
//! (a missing permission stops the operator at once, naming it, instead of a silent idle
//! controller), and the drain of a controller's results into logs and metrics.

use std::fmt::Debug;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Config, Resource};
use serde::de::DeserializeOwned;

use crate::cli::CommonArgs;
use crate::health::{self, Health};
use crate::leader::{self, Candidate};
use crate::namespaces::Namespaces;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading kubeconfig {path}: {error}")]
    Kubeconfig {
        path: String,
        #[source]
        error: kube::config::KubeconfigError,
    },
    #[error("no Kubernetes configuration (no --kubeconfig, $KUBECONFIG or in-cluster config): {0}")]
    InferConfig(#[source] kube::config::InferConfigError),
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("--leader-elect needs the pod's namespace (the ServiceAccount mount or POD_NAMESPACE)")]
    NoLeaseNamespace,
    #[error("electing a leader on Lease {lease}: {error}")]
    Leadership {
        lease: String,
        #[source]
        error: kube::Error,
    },
    #[error("cannot list {resource} in {scope}: {error} (is the permission in the CSV's RBAC?)")]
    NoAccess {
        resource: String,
        scope: String,
        #[source]
        error: kube::Error,
    },
}

/// What an operator's controllers share: the client, the watched namespaces, the one event
/// Recorder, and the health/metrics state.
pub struct Runtime {
    pub client: Client,
    pub namespaces: Namespaces,
    pub recorder: Recorder,
    pub health: Arc<Health>,
    /// The task that keeps the Lease (`--leader-elect`); see [`Runtime::finish`].
    leadership: Option<tokio::task::JoinHandle<()>>,
}

impl Runtime {
    /// Connects, starts the probe server, and logs what the operator watches.
    pub async fn start(operator: &str, args: &CommonArgs) -> Result<Runtime, Error> {
        let config = match &args.kubeconfig {
            Some(path) => {
                let kubeconfig =
                    Kubeconfig::read_from(path).map_err(|error| Error::Kubeconfig {
                        path: path.display().to_string(),
                        error,
                    })?;
                Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|error| Error::Kubeconfig {
                        path: path.display().to_string(),
                        error,
                    })?
            }
            None => Config::infer().await.map_err(Error::InferConfig)?,
        };
        let client = Client::try_from(config).map_err(Error::Client)?;
        let namespaces = Namespaces::parse(&args.namespace);
        let health = Health::new(operator);
        let server = health.clone();
        let address = args.probe_address;
        tokio::spawn(async move {
            if let Err(error) = health::serve(address, server).await {
                tracing::error!(%address, %error, "the probe server stopped");
                std::process::exit(1);
            }
        });
        let reporter = Reporter {
            controller: operator.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        tracing::info!(operator, namespaces = %namespaces, probes = %address, "starting");
        let mut leadership = None;
        if args.leader_elect {
            let candidate = Candidate::of_this_pod(operator).ok_or(Error::NoLeaseNamespace)?;
            let lease = candidate.name.clone();
            health.set_standby(true);
            let keeper = leader::acquire(&client, candidate)
                .await
                .map_err(|error| Error::Leadership { lease, error })?;
            leadership = Some(keeper);
            health.set_standby(false);
        }
        Ok(Runtime {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            namespaces,
            health,
            leadership,
        })
    }

    /// After the controllers stopped on a signal: waits (a few seconds at most) until the
    /// Lease is released, so that the next leader, a rolling update's new pod, starts now.
    pub async fn finish(self) {
        if let Some(keeper) = self.leadership {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), keeper).await;
        }
    }

    /// Lists one `K` in every watched namespace: fails naming the resource and namespace
    /// when the operator may not.
    pub async fn check_access<K>(
        &self,
        api_for: impl Fn(&Option<String>) -> Api<K>,
    ) -> Result<(), Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        for scope in self.namespaces.scopes() {
            api_for(&scope)
                .list_metadata(&ListParams::default().limit(1))
                .await
                .map_err(|error| Error::NoAccess {
                    resource: K::plural(&Default::default()).into_owned(),
                    scope: scope.clone().unwrap_or_else(|| "all namespaces".into()),
                    error,
                })?;
        }
        Ok(())
    }
}

impl Runtime {
    /// As [`Runtime::check_access`], for a kind that is not a type of ours (a dynamic
    /// object): `resource` names it in the error.
    pub async fn check_dynamic_access(
        &self,
        resource: &str,
        api_for: impl Fn(&Option<String>) -> Api<kube::api::DynamicObject>,
    ) -> Result<(), Error> {
        for scope in self.namespaces.scopes() {
            api_for(&scope)
                .list_metadata(&ListParams::default().limit(1))
                .await
                .map_err(|error| Error::NoAccess {
                    resource: resource.into(),
                    scope: scope.clone().unwrap_or_else(|| "all namespaces".into()),
                    error,
                })?;
        }
        Ok(())
    }
}

/// Runs a controller's result stream to its end: reconcile outcomes become metrics (their
/// errors are logged by each operator's error_policy), a failing watch is logged as an error
/// and makes /readyz fail until a watch succeeds again.
pub async fn drain<K, S, E>(kind: &str, health: &Health, results: S)
where
    K: Resource,
    S: Stream<
        Item = Result<(ObjectRef<K>, Action), controller::Error<E, kube::runtime::watcher::Error>>,
    >,
    E: std::error::Error + 'static,
{
    futures::pin_mut!(results);
    while let Some(result) = results.next().await {
        match result {
            Ok(_) => {
                health.watch_recovered();
                health.reconciled(kind, true);
            }
            Err(controller::Error::ReconcilerFailed(_, _)) => health.reconciled(kind, false),
            // The API server let the watch's resourceVersion expire (410): the watcher
            // lists again by itself. Not a failure; before, /readyz stayed failing until
            // the next reconcile, which never comes while the operator has no objects.
            Err(controller::Error::QueueError(error)) if expired(&error) => {
                tracing::info!(kind, %error, "watch expired; listing again");
            }
            Err(controller::Error::QueueError(error)) => {
                health.watch_failed();
                tracing::error!(kind, %error, "watch failed");
            }
            Err(error) => tracing::debug!(kind, %error, "controller"),
        }
    }
}

/// The process exit of an operator: success, or the error logged and a failure code.
pub fn exit_code(operator: &str, result: Result<(), Error>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "{operator} stopped");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A watch whose resourceVersion is too old (410 Gone, reason Expired), which the watcher
/// recovers from by listing again.
fn expired(error: &kube::runtime::watcher::Error) -> bool {
    matches!(error, kube::runtime::watcher::Error::WatchError(status) if status.code == 410)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_watch_is_not_a_failure_other_watch_errors_are() {
        let status = |code: u16| {
            let mut status = kube::core::Status::failure("too old resource version", "Expired");
            status.code = code;
            kube::runtime::watcher::Error::WatchError(Box::new(status))
        };
        assert!(expired(&status(410)));
        assert!(!expired(&status(403)));
        assert!(!expired(&kube::runtime::watcher::Error::NoResourceVersion));
    }
}
