//! `/healthz` (the process serves), `/readyz` (every watch has listed its objects and none
//! is failing, or a standby waits for leadership) and `/metrics` (Prometheus text).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

pub struct Health {
    started: AtomicBool,
    /// Waiting for leadership (`--leader-elect`): Ready, as a standby that can take over, so
    /// that a rolling update does not wait on a Lease the old pod holds until it stops.
    standby: AtomicBool,
    failing_watches: AtomicUsize,
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    watch_errors: Counter,
}

impl Health {
    pub fn new(operator: &str) -> Arc<Health> {
        let mut registry = Registry::with_prefix(operator.replace('-', "_"));
        let reconciles = Family::<Labels, Counter>::default();
        let watch_errors = Counter::default();
        registry.register(
            "reconciles",
            "Reconciles by outcome (ok, error)",
            reconciles.clone(),
        );
        registry.register(
            "watch_errors",
            "Failed list/watch requests (for example a missing permission)",
            watch_errors.clone(),
        );
        Arc::new(Health {
            started: AtomicBool::new(false),
            standby: AtomicBool::new(false),
            failing_watches: AtomicUsize::new(0),
            registry,
            reconciles,
            watch_errors,
        })
    }

    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Relaxed);
    }

    pub fn set_started(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    pub fn reconciled(&self, kind: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.reconciles
            .get_or_create(&vec![
                ("kind".to_string(), kind.to_string()),
                ("outcome".to_string(), outcome.to_string()),
            ])
            .inc();
    }

    pub fn watch_failed(&self) {
        self.watch_errors.inc();
        self.failing_watches.store(1, Ordering::Relaxed);
    }

    pub fn watch_recovered(&self) {
        self.failing_watches.store(0, Ordering::Relaxed);
    }

    fn ready(&self) -> bool {
        let acting = self.started.load(Ordering::Relaxed) || self.standby.load(Ordering::Relaxed);
        acting && self.failing_watches.load(Ordering::Relaxed) == 0
    }

    fn metrics_text(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

pub async fn serve(address: SocketAddr, health: Arc<Health>) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(health);
    let listener = tokio::net::TcpListener::bind(address).await?;
    axum::serve(listener, app).await
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    if health.ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn metrics(State(health): State<Arc<Health>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        health.metrics_text(),
    )
}
