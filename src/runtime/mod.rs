//! `olm run`: one process hosting OLM's controllers.
//!
//! Start-up: connect to the API server, check that the CRDs are installed, open the admin
//! server, then wait for the leader Lease (standbys stay here, ready but idle). The leader
//! runs the controllers until SIGTERM/SIGINT, lets in-flight rounds finish, and releases the
//! Lease so a standby takes over at once. Losing the Lease ends the process with an error,
//! so that two replicas never act at once.

pub mod admin;
pub mod leader;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, bail};
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::watch;

use crate::api::CatalogSource;
use crate::controllers::catalogsource;
use crate::controllers::context::{Context, Settings};
use crate::controllers::metrics::Metrics;
use crate::controllers::snapshots::CatalogSnapshots;
use leader::{LeaderElector, LeaseConfig};

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub admin_address: SocketAddr,
    /// `None` runs without election (a single replica, or tests).
    pub leader_election: Option<LeaseConfig>,
    /// Only watch this namespace (upstream's `-watchedNamespaces` with one entry).
    pub watch_namespace: Option<String>,
    pub identity: String,
    pub settings: Settings,
}

pub async fn run(config: RunConfig) -> anyhow::Result<()> {
    let client = Client::try_default()
        .await
        .context("connecting to the API server (KUBECONFIG or in-cluster config)")?;
    ensure_crds_installed(&client).await?;

    let metrics = Arc::new(Metrics::default());
    let snapshots = Arc::new(CatalogSnapshots::default());
    let ready = Arc::new(AtomicBool::new(false));
    let (leading_tx, leading_rx) = watch::channel(false);
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(stop_on_signal(stop_tx));

    let listener = admin::bind(config.admin_address)
        .await
        .with_context(|| format!("binding the admin server to {}", config.admin_address))?;
    let admin = tokio::spawn(admin::serve(
        listener,
        admin::AdminState {
            metrics: Arc::clone(&metrics),
            snapshots: Arc::clone(&snapshots),
            ready: Arc::clone(&ready),
            leading: leading_rx.clone(),
            global_catalog_namespace: config.settings.global_catalog_namespace.clone(),
        },
        stop_rx.clone(),
    ));

    // The elector stops only after the controllers have, so the Lease is released last.
    let (elector_stop_tx, elector_stop_rx) = watch::channel(false);
    let elector = match config.leader_election.clone() {
        Some(lease) => {
            tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "waiting for leadership");
            let elector = LeaderElector::new(client.clone(), lease);
            Some(tokio::spawn(leader::run(
                elector,
                leading_tx.clone(),
                elector_stop_rx,
            )))
        }
        None => {
            leading_tx.send_replace(true);
            None
        }
    };
    {
        let metrics = Arc::clone(&metrics);
        let mut leading = leading_rx.clone();
        tokio::spawn(async move {
            loop {
                metrics.leader.set(i64::from(*leading.borrow_and_update()));
                if leading.changed().await.is_err() {
                    break;
                }
            }
        });
    }
    ready.store(true, Ordering::Release);

    let result = lead(
        config,
        client,
        metrics,
        snapshots,
        leading_rx,
        stop_rx.clone(),
    )
    .await;

    elector_stop_tx.send_replace(true);
    let election = match elector {
        Some(handle) => handle
            .await
            .context("leader election task")?
            .map_err(anyhow::Error::from),
        None => Ok(()),
    };
    admin.abort();
    result.and(election)
}

/// Waits for leadership, then runs the controllers until shutdown or loss of the Lease.
async fn lead(
    config: RunConfig,
    client: Client,
    metrics: Arc<Metrics>,
    snapshots: Arc<CatalogSnapshots>,
    mut leading: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    tokio::select! {
        result = leading.wait_for(|leading| *leading) => {
            if result.is_err() {
                bail!("leader election ended before this process led");
            }
        }
        _ = stop.wait_for(|stop| *stop) => return Ok(()),
    }
    tracing::info!(identity = %config.identity, "leading: starting controllers");
    let ctx = Arc::new(Context::new(
        client,
        config.identity.clone(),
        metrics,
        snapshots,
        config.settings.clone(),
    ));

    let mut lost = leading.clone();
    let mut stop_for_controllers = stop.clone();
    let (lost_tx, mut lost_rx) = watch::channel(false);
    let shutdown = async move {
        tokio::select! {
            _ = stop_for_controllers.wait_for(|stop| *stop) => {}
            _ = lost.wait_for(|leading| !*leading) => { lost_tx.send_replace(true); }
        }
    };
    catalogsource::run(ctx, config.watch_namespace.clone(), shutdown).await;
    if *lost_rx.borrow_and_update() {
        bail!("lost leadership; exiting so that only the new leader acts");
    }
    tracing::info!("controllers stopped");
    Ok(())
}

async fn ensure_crds_installed(client: &Client) -> anyhow::Result<()> {
    let api: Api<CatalogSource> = Api::all(client.clone());
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => bail!(
            "the operators.coreos.com CRDs are not installed; install them with `olm crds | kubectl apply --server-side -f -`"
        ),
        Err(error) => Err(error).context("listing CatalogSources"),
    }
}

async fn stop_on_signal(stop: watch::Sender<bool>) {
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
        _ = terminate => {}
    }
    tracing::info!("shutting down");
    stop.send_replace(true);
}

/// `POD_NAME` when running in a pod, else `<hostname>-<pid>`: unique per replica.
pub fn default_identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "olm".into());
    format!("{host}-{}", std::process::id())
}
