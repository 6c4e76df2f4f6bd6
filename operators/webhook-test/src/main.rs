//! A test operator for OLM's webhooks and OperatorConditions on a real node. It serves, over
//! HTTPS with the certificate OLM mounts (re-read when the kubelet updates the files):
//!
//! * `/mutate`: labels every `Widget` `webhook-test.olm-rs.io/mutated: "true"`;
//! * `/validate`: refuses a `Widget` whose `spec.color` is `forbidden`;
//! * `/convert`: `Widget` v1 `spec.color` is v2 `spec.colour`.
//!
//! At start it reports `Upgradeable` in its OperatorCondition (`OPERATOR_CONDITION_NAME`,
//! in-cluster config) when `UPGRADEABLE` is set (`True` or `False`, with
//! `UPGRADEABLE_REASON` and `UPGRADEABLE_MESSAGE`).

mod condition;
mod review;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use axum::Json;
use axum::Router;
use axum::routing::{get, post};
use serde_json::Value;

const OPERATOR: &str = "webhook-test-operator";
/// Where OLM mounts a webhook Deployment's serving certificate.
const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
const DEFAULT_PORT: u16 = 9443;

/// Why the operator stopped.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{0}")]
    Tls(#[from] tls::TlsError),
    #[error("listening on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("WEBHOOK_PORT {0:?} is no port number")]
    Port(String),
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "{OPERATOR} failed");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Error> {
    let cert_dir =
        PathBuf::from(std::env::var("CERT_DIR").unwrap_or_else(|_| DEFAULT_CERT_DIR.to_string()));
    let port = match std::env::var("WEBHOOK_PORT") {
        Ok(text) => text.parse().map_err(|_| Error::Port(text))?,
        Err(_) => DEFAULT_PORT,
    };
    let certificate = tls::Reloading::load(&cert_dir)?;
    tokio::spawn(certificate.clone().watch());
    if let Some(upgradeable) = condition::Upgradeable::from_env() {
        tokio::spawn(condition::report(upgradeable));
    }
    let address = SocketAddr::from(([0, 0, 0, 0], port));
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| Error::Listen { address, source })?;
    tracing::info!(%address, cert_dir = %cert_dir.display(), "serving webhooks");
    let served = tls::serve(listener, certificate.server_config()?, router());
    tokio::select! {
        () = served => {}
        () = stopped() => tracing::info!("{OPERATOR} shut down"),
    }
    Ok(())
}

fn router() -> Router {
    Router::new()
        .route(
            "/mutate",
            post(|Json(r): Json<Value>| async move { Json(review::mutate(&r)) }),
        )
        .route(
            "/validate",
            post(|Json(r): Json<Value>| async move { Json(review::validate(&r)) }),
        )
        .route(
            "/convert",
            post(|Json(r): Json<Value>| async move { Json(review::convert(&r)) }),
        )
        .route("/healthz", get(|| async { "ok" }))
}

/// SIGTERM or SIGINT.
async fn stopped() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(error) => {
            tracing::warn!(%error, "no SIGTERM handler");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
