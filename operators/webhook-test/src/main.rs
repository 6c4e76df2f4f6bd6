//! A test operator for OLM's webhooks and OperatorConditions on a real node. It serves, over
//! HTTPS with the certificate OLM mounts (re-read when the kubelet updates the files):
//!
//! * `/mutate`: labels every `Widget` `webhook-test.olm-rs.io/mutated: "true"`;
//! * `/validate`: refuses a `Widget` whose `spec.color` is `forbidden`;
//! * `/convert`: `Widget` v1 `spec.color` is v2 `spec.colour`.
//!
//! When OLM mounts an API service certificate (it does for every served Deployment), it
//! also serves a minimal aggregated API on `APISERVICE_PORT` (5443) with it: see
//! [`aggregated`].
//!
//! At start it reports `Upgradeable` in its OperatorCondition (`OPERATOR_CONDITION_NAME`,
//! in-cluster config) when `UPGRADEABLE` is set (`True` or `False`, with
//! `UPGRADEABLE_REASON` and `UPGRADEABLE_MESSAGE`).

mod aggregated;
mod condition;
mod review;

use std::path::PathBuf;
use std::process::ExitCode;

use axum::Json;
use axum::Router;
use axum::routing::{get, post};
use serde_json::Value;
use webhook_test_operator::tls;

const OPERATOR: &str = "webhook-test-operator";
/// Where OLM mounts a webhook Deployment's serving certificate.
const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
const DEFAULT_PORT: u16 = 9443;
/// Where OLM mounts an API service Deployment's serving certificate.
const DEFAULT_APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
const DEFAULT_APISERVICE_PORT: u16 = 5443;

/// Why the operator stopped.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{0}")]
    Tls(#[from] tls::TlsError),
    #[error("{name} {value:?} is no port number")]
    Port { name: &'static str, value: String },
}

#[tokio::main]
async fn main() -> ExitCode {
    webhook_test_operator::main(OPERATOR, run()).await
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn port(name: &'static str, default: u16) -> Result<u16, Error> {
    match std::env::var(name) {
        Ok(value) => value.parse().map_err(|_| Error::Port { name, value }),
        Err(_) => Ok(default),
    }
}

async fn run() -> Result<(), Error> {
    let cert_dir = PathBuf::from(env_or("CERT_DIR", DEFAULT_CERT_DIR));
    let webhooks = tls::listen(
        port("WEBHOOK_PORT", DEFAULT_PORT)?,
        tls::Files::webhook(&cert_dir),
        router(),
    )
    .await?;
    let api_dir = PathBuf::from(env_or("APISERVICE_CERT_DIR", DEFAULT_APISERVICE_CERT_DIR));
    let api_files = tls::Files::api_service(&api_dir);
    if api_files.cert.exists() {
        let api = tls::listen(
            port("APISERVICE_PORT", DEFAULT_APISERVICE_PORT)?,
            api_files,
            aggregated::router(),
        )
        .await?;
        tokio::spawn(api);
    }
    if let Some(upgradeable) = condition::Upgradeable::from_env() {
        tokio::spawn(condition::report(upgradeable));
    }
    tokio::select! {
        () = webhooks => {}
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
