//! The admin HTTP server of `olm run`: `/healthz` (the process is alive), `/readyz` (it is
//! connected to the API server and serving; standbys are ready too, so that a rollout does
//! not wait for leadership), `/metrics` (Prometheus) and `/debug/catalogs` (the catalog
//! snapshots this process holds, as JSON; `?visibleFrom=NS` narrows them to what namespace
//! NS resolves against, in priority order).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use tokio::sync::watch;

use crate::controllers::metrics::Metrics;
use crate::snapshots::CatalogSnapshots;

#[derive(Clone)]
pub struct AdminState {
    pub metrics: Arc<Metrics>,
    pub snapshots: Arc<CatalogSnapshots>,
    pub ready: Arc<AtomicBool>,
    pub leading: watch::Receiver<bool>,
    pub global_catalog_namespace: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CatalogsQuery {
    /// Only the catalogs a namespace resolves against: its own plus the global ones.
    visible_from: Option<String>,
}

/// The probes; `/metrics` and `/debug/catalogs` too when `open` (a loopback address: only
/// this host reaches it). Off the host they are served by [`super::secure_admin`] alone.
pub fn router(state: AdminState, open: bool) -> Router {
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz));
    let router = if open {
        router
            .route("/metrics", get(metrics))
            .route("/debug/catalogs", get(catalogs))
    } else {
        router
    };
    router.with_state(state)
}

async fn readyz(State(state): State<AdminState>) -> Response {
    if state.ready.load(Ordering::Acquire) {
        let role = if *state.leading.borrow() {
            "leader"
        } else {
            "standby"
        };
        (StatusCode::OK, format!("ok ({role})")).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting").into_response()
    }
}

pub(super) async fn metrics(State(state): State<AdminState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

async fn catalogs(State(state): State<AdminState>, Query(query): Query<CatalogsQuery>) -> Response {
    Json(catalog_summaries(&state, query)).into_response()
}

/// The snapshots' summaries, narrowed to what `visibleFrom` resolves against when asked.
pub(super) fn catalog_summaries(
    state: &AdminState,
    query: CatalogsQuery,
) -> Vec<crate::snapshots::SnapshotSummary> {
    let mut summaries = state.snapshots.summaries();
    if let Some(namespace) = query.visible_from {
        let visible: Vec<(String, String)> = state
            .snapshots
            .visible_from(&namespace, &state.global_catalog_namespace)
            .iter()
            .map(|s| (s.catalog.namespace.clone(), s.catalog.name.clone()))
            .collect();
        summaries.retain(|s| visible.contains(&(s.namespace.clone(), s.name.clone())));
        summaries.sort_by_key(|s| {
            visible
                .iter()
                .position(|v| v.0 == s.namespace && v.1 == s.name)
        });
    }
    summaries
}

/// Binds the admin address; done before anything else starts, so a taken port fails fast.
pub async fn bind(address: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(address = %listener.local_addr()?, "admin server listening (/healthz /readyz /metrics /debug/catalogs)");
    Ok(listener)
}

/// Serves until `shutdown` turns true.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let open = listener.local_addr()?.ip().is_loopback();
    if !open {
        tracing::info!(
            "the admin address is not a loopback one: /metrics and /debug/catalogs are served only by the secure admin server"
        );
    }
    axum::serve(listener, router(state, open))
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await
}

/// Serves on a thread with a runtime of its own until `shutdown` turns true: `/readyz` and
/// `/healthz` then answer within milliseconds even while hundreds of reconciles keep the
/// main runtime's threads busy (a probe that times out gets a busy process restarted).
pub fn serve_on_own_thread(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let listener = listener.into_std()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("admin-server".into())
        .spawn(move || {
            let served = runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                serve(listener, state, shutdown).await
            });
            if let Err(error) = served {
                tracing::error!(%error, "admin server failed");
            }
        })?;
    Ok(())
}
