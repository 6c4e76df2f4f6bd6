//! `olm run`: one process hosting OLM's controllers.
//!
//! Start-up: connect to the API server, check that the CRDs are installed, open the admin
//! server, start the election, and hand the controllers to the [`host`]: the catalog cache
//! loads on every replica, status writers run on the leader only. SIGTERM drains in-flight
//! rounds and releases the Lease so a standby takes over at once; losing the Lease aborts
//! every controller and ends the process with an error, so two replicas never act at once.

// The process shell: its start-up errors, from ten sources, end as the one message the
// process exits with, so anyhow is allowed here as in src/cli (clippy.toml keeps it out of
// the library).
#![allow(clippy::disallowed_types, clippy::disallowed_macros)]

pub mod admin;
pub mod leader;
pub mod secure_admin;

use crate::cluster::informers::{ClusterInformers, Informers};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::CatalogSource;
use crate::controllers;
use crate::controllers::context::{Context, Settings};
use crate::controllers::host;
use crate::controllers::metrics::Metrics;
use crate::snapshots::CatalogSnapshots;
use leader::{LeaderElector, LeaderError, LeaseConfig};

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub admin_address: SocketAddr,
    /// `/metrics` and `/debug/catalogs` over TLS with bearer tokens (`--secure-admin-address`).
    pub secure_admin_address: Option<SocketAddr>,
    /// `None` runs without election (a single replica, or tests).
    pub leader_election: Option<LeaseConfig>,
    pub identity: String,
    /// Watched namespaces (empty: all). Each gets its own set of controllers.
    pub watch_namespaces: Vec<String>,
    pub settings: Settings,
    /// The packagemanifests API (`--packages-address`); `None` leaves it off.
    pub packages: Option<crate::packageserver::PackagesConfig>,
}

pub async fn run(config: RunConfig) -> anyhow::Result<()> {
    let client = connect().await?;
    ensure_crds_installed(&client, config.watch_namespaces.first().map(String::as_str)).await?;

    let metrics = Arc::new(Metrics::default());
    let snapshots = catalog_snapshots(config.packages.is_some());
    let ready = Arc::new(AtomicBool::new(false));
    let (leading_tx, leading_rx) = watch::channel(false);
    let stop_rx = stop_on_signal();

    let admin_state = admin::AdminState {
        metrics: Arc::clone(&metrics),
        snapshots: Arc::clone(&snapshots),
        ready: Arc::clone(&ready),
        leading: leading_rx.clone(),
        global_catalog_namespace: config.settings.global_catalog_namespace.clone(),
    };
    start_admin(&config, admin_state, &client, &stop_rx).await?;

    let election = Election::start(config.leader_election.clone(), &client, &leading_tx);
    tokio::spawn(report_leadership(Arc::clone(&metrics), leading_rx.clone()));

    let cluster = Arc::new(ClusterInformers::new(&client));
    let scope = config.settings.watch_namespace.as_deref();
    let informers = Arc::new(Informers::new(&client, scope, cluster));
    tokio::spawn(crate::cluster::mirror_sets::run(
        client.clone(),
        Arc::clone(&informers.cluster),
        Arc::clone(&config.settings.mirrors),
    ));
    let (ctx, events) = Context::new(
        client,
        informers,
        config.identity.clone(),
        metrics,
        snapshots,
        config.settings.clone(),
        leading_rx.clone(),
    );
    tokio::spawn(events);
    let ctx = Arc::new(ctx);
    let scoped = scoped_contexts(&ctx, &config.watch_namespaces);
    // Every replica serves packagemanifests from its snapshots; no leadership needed.
    let packages = config
        .packages
        .clone()
        .map(|packages| spawn_packages(&ctx, &scoped, packages, &stop_rx));

    let hosted_controllers = hosted_controllers(scoped);
    ready.store(true, Ordering::Release);
    let hosted = host::run(hosted_controllers, leading_rx, stop_rx.clone()).await;

    let election = election.stop().await;
    // The packages API stops with the same signal and removes a loopback registration.
    if let Some(packages) = packages {
        packages
            .await
            .context("packages API task")?
            .context("packages API")?;
    }
    hosted?;
    election
}

async fn connect() -> anyhow::Result<Client> {
    kube::Config::infer()
        .await
        .map_err(anyhow::Error::from)
        .and_then(|config| Ok(crate::cluster::warnings::client(config)?))
        .context("connecting to the API server (KUBECONFIG or in-cluster config)")
}

fn catalog_snapshots(serve_packages: bool) -> Arc<CatalogSnapshots> {
    let snapshots = Arc::new(CatalogSnapshots::default());
    // Serving packagemanifests: catalog loads keep the channel heads' CSVs they show.
    if serve_packages {
        snapshots.set_projection(Arc::new(
            crate::packageserver::manifest::ChannelHeadProjection,
        ));
    }
    snapshots
}

/// A receiver that turns true on SIGTERM or SIGINT.
fn stop_on_signal() -> watch::Receiver<bool> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        crate::signal::shutdown_signal().await;
        tracing::info!("shutting down");
        stop_tx.send_replace(true);
    });
    stop_rx
}

async fn start_admin(
    config: &RunConfig,
    admin_state: admin::AdminState,
    client: &Client,
    stop_rx: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = admin::bind(config.admin_address)
        .await
        .with_context(|| format!("binding the admin server to {}", config.admin_address))?;
    // On a thread of its own: probes answer however busy the controllers keep the runtime.
    admin::serve_on_own_thread(listener, admin_state.clone(), stop_rx.clone())
        .context("starting the admin server thread")?;
    if let Some(address) = config.secure_admin_address {
        secure_admin::start(address, admin_state, client.clone(), stop_rx.clone()).await?;
    }
    Ok(())
}

/// The election task, when there is one, and the switch that ends it. The elector stops only
/// after the controllers have, so the Lease is released last.
struct Election {
    stop_tx: watch::Sender<bool>,
    task: Option<JoinHandle<Result<(), LeaderError>>>,
}

impl Election {
    /// Without a Lease this replica leads from the start.
    fn start(
        lease: Option<LeaseConfig>,
        client: &Client,
        leading_tx: &watch::Sender<bool>,
    ) -> Self {
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = match lease {
            Some(lease) => {
                tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "waiting for leadership");
                let elector = LeaderElector::new(client.clone(), lease);
                Some(tokio::spawn(leader::run(
                    elector,
                    leading_tx.clone(),
                    stop_rx,
                )))
            }
            None => {
                leading_tx.send_replace(true);
                None
            }
        };
        Self { stop_tx, task }
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.stop_tx.send_replace(true);
        match self.task {
            // On loss the elector has already ended; on shutdown it releases the Lease now.
            Some(handle) => handle
                .await
                .context("leader election task")?
                .map_err(anyhow::Error::from),
            None => Ok(()),
        }
    }
}

/// One context per watched namespace, or one for the whole cluster.
fn scoped_contexts(ctx: &Context, watch_namespaces: &[String]) -> Vec<Arc<Context>> {
    let scopes: Vec<Option<String>> = if watch_namespaces.is_empty() {
        vec![None]
    } else {
        watch_namespaces.iter().cloned().map(Some).collect()
    };
    scopes
        .into_iter()
        .map(|scope| {
            let cluster = Arc::clone(&ctx.informers.cluster);
            let informers = Arc::new(Informers::new(&ctx.client, scope.as_deref(), cluster));
            ctx.informers.cluster.add_scope(&informers);
            Arc::new(ctx.scoped_to(scope, informers))
        })
        .collect()
}

fn spawn_packages(
    ctx: &Context,
    scoped: &[Arc<Context>],
    packages: crate::packageserver::PackagesConfig,
    stop_rx: &watch::Receiver<bool>,
) -> JoinHandle<Result<(), crate::packageserver::PackagesError>> {
    tokio::spawn(crate::packageserver::run(
        ctx.client.clone(),
        Arc::clone(&ctx.snapshots),
        scoped.iter().map(|c| Arc::clone(&c.informers)).collect(),
        packages,
        stop_rx.clone(),
    ))
}

/// Every controller once per scope; those of cluster singletons once, with the first scope's
/// context (they read every scope through the shared cluster informers).
fn hosted_controllers(scoped: Vec<Arc<Context>>) -> Vec<(Arc<Context>, host::Controller)> {
    let mut hosted = Vec::new();
    if let Some(first) = scoped.first() {
        for controller in controllers::once_per_process() {
            hosted.push((Arc::clone(first), controller));
        }
    }
    for scoped in scoped {
        for controller in controllers::all() {
            hosted.push((Arc::clone(&scoped), controller));
        }
    }
    hosted
}

/// One cheap list (limit 1) in the watched namespace, so that namespace-scoped RBAC is enough.
async fn ensure_crds_installed(client: &Client, namespace: Option<&str>) -> anyhow::Result<()> {
    let api: Api<CatalogSource> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let missing = || {
        anyhow::anyhow!(
            "the operators.coreos.com CRDs are not installed; install them with `olm crds | kubectl apply --server-side -f -`"
        )
    };
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Err(missing()),
        Err(error) => return Err(error).context("listing CatalogSources"),
    }
    // Added later than the others: a cluster whose CRDs predate it would otherwise get no
    // copied CSVs (the copier waits for the OLMConfig) and no word why.
    let configs: Api<crate::api::OlmConfig> = Api::all(client.clone());
    match configs.list_metadata(&ListParams::default().limit(1)).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Err(missing()),
        _ => Ok(()),
    }
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

/// Keeps the `leader` gauge equal to whether this replica leads.
async fn report_leadership(metrics: Arc<Metrics>, mut leading: watch::Receiver<bool>) {
    loop {
        metrics.leader.set(i64::from(*leading.borrow_and_update()));
        if leading.changed().await.is_err() {
            break;
        }
    }
}
