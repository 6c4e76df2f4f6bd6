//! The `packages.operators.coreos.com/v1` aggregated API (`kubectl get packagemanifests`),
//! served by `olm run` itself from the catalog snapshots it already holds: no second copy of
//! any catalog and no extra process. Every replica serves it (it is read-only).
//!
//! - [`manifest`]: PackageManifests from a snapshot (pure), field for field as upstream;
//!   [`description`]: what they show of a CSV; [`icon`]: the icon subresource's icons.
//! - [`store`]: the served manifests, their resourceVersions and watch events.
//! - [`selector`], [`respond`], [`openapi`]: selectors, response shapes, discovery/OpenAPI.
//! - [`auth`]: front-proxy identity and SubjectAccessReviews; [`tls`]: certificates.
//! - [`server`]: the HTTPS routes; [`register`]: the Service/APIService registration.

pub mod auth;
pub mod description;
pub mod icon;
pub mod listed;
pub mod manifest;
pub mod openapi;
pub mod register;
pub mod respond;
pub mod selector;
pub mod server;
pub mod store;
pub mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;

use crate::api::CatalogSource;
use crate::cluster::informers::Informers;
use crate::resolver::input::CatalogRef;
use crate::snapshots::CatalogSnapshots;
use manifest::CatalogInfo;
use register::ServiceRef;

/// How often an in-cluster replica re-reads the serving certificate Secret (rotation by
/// another replica reaches it within this).
const CERT_RECHECK: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug)]
pub struct PackagesConfig {
    pub address: SocketAddr,
    /// The Service the APIService points at (in a cluster, from `deploy/`; on loopback, made
    /// by us as an ExternalName to localhost).
    pub service: ServiceRef,
    /// The Secret holding the serving certificate (in a cluster).
    pub cert_secret: String,
    pub global_namespace: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PackagesError {
    #[error(transparent)]
    Auth(#[from] auth::AuthError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Register(#[from] register::RegisterError),
    #[error("binding the packages API to {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Serves until `stop`; a loopback registration is removed before returning.
pub async fn run(
    client: kube::Client,
    snapshots: Arc<CatalogSnapshots>,
    informers: Vec<Arc<Informers>>,
    config: PackagesConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), PackagesError> {
    let request_header = auth::RequestHeaderConfig::load(&client).await?;
    let listening = listen(&client, &config, &request_header.client_ca_pem).await?;
    let store = Arc::new(store::Store::new(config.global_namespace.clone()));
    let sync = tokio::spawn(keep_in_sync(
        Arc::clone(&snapshots),
        Arc::clone(&store),
        informers,
    ));
    let state = server::AppState {
        store,
        request_header: Arc::new(request_header),
        authorizer: Arc::new(auth::Authorizer::new(client.clone())),
    };
    let serving = tokio::spawn(server::serve(
        listening.listener,
        listening.tls_config,
        server::router(state),
        stop.clone(),
    ));
    let (cert, port) = (listening.cert, listening.port);
    announce(&client, &config, listening.resolver, &cert, port, &stop).await?;
    let _ = serving.await;
    sync.abort();
    if config.address.ip().is_loopback() {
        withdraw(&client, &config, &cert).await;
    }
    Ok(())
}

/// The bound listener and what it serves with.
struct Listening {
    listener: tokio::net::TcpListener,
    port: u16,
    cert: tls::ServingCert,
    resolver: Arc<tls::CertResolver>,
    tls_config: Arc<rustls::ServerConfig>,
}

/// The serving certificate (made here on loopback, else read from its Secret) and the
/// bound listener.
async fn listen(
    client: &kube::Client,
    config: &PackagesConfig,
    client_ca_pem: &str,
) -> Result<Listening, PackagesError> {
    let cert = if config.address.ip().is_loopback() {
        tls::generate(&[config.service.dns_name(), "localhost".into()])?
    } else {
        register::serving_cert_from_secret(client, &config.service, &config.cert_secret).await?
    };
    let resolver = Arc::new(tls::CertResolver::new(&cert)?);
    let tls_config = Arc::new(tls::server_config(Arc::clone(&resolver), client_ca_pem)?);
    let listener = tokio::net::TcpListener::bind(config.address)
        .await
        .map_err(|source| PackagesError::Bind {
            address: config.address,
            source,
        })?;
    let port = listener
        .local_addr()
        .map_or(config.address.port(), |a| a.port());
    tracing::info!(address = %config.address, "packages API (packagemanifests) listening");
    Ok(Listening {
        listener,
        port,
        cert,
        resolver,
        tls_config,
    })
}

/// Makes the API server route to us: on loopback an APIService of our own (ExternalName to
/// localhost), else the deployed APIService's caBundle, kept equal to the rotating cert.
async fn announce(
    client: &kube::Client,
    config: &PackagesConfig,
    resolver: Arc<tls::CertResolver>,
    cert: &tls::ServingCert,
    port: u16,
    stop: &watch::Receiver<bool>,
) -> Result<(), PackagesError> {
    if config.address.ip().is_loopback() {
        register::register_loopback(client, &config.service, port, &cert.ca_pem).await?;
        tracing::info!(service = %config.service.dns_name(), port, "registered APIService {} (ExternalName to localhost)", register::API_SERVICE);
    } else {
        register::sync_ca_bundle(client, &cert.ca_pem).await?;
        tokio::spawn(keep_cert_current(
            client.clone(),
            config.clone(),
            resolver,
            cert.clone(),
            stop.clone(),
        ));
    }
    Ok(())
}

/// Removes the loopback APIService registration.
async fn withdraw(client: &kube::Client, config: &PackagesConfig, cert: &tls::ServingCert) {
    match register::unregister_loopback(client, &config.service, &cert.ca_pem).await {
        Ok(()) => tracing::info!("removed APIService {}", register::API_SERVICE),
        Err(error) => tracing::warn!(%error, "removing the loopback APIService registration"),
    }
}

/// Re-reads (and, when due, rotates) the serving certificate; swaps it in and keeps the
/// APIService's caBundle equal to it.
async fn keep_cert_current(
    client: kube::Client,
    config: PackagesConfig,
    resolver: Arc<tls::CertResolver>,
    mut current: tls::ServingCert,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(CERT_RECHECK) => {}
        }
        match register::serving_cert_from_secret(&client, &config.service, &config.cert_secret)
            .await
        {
            Ok(cert) if cert != current => {
                if let Err(error) = resolver.replace(&cert) {
                    tracing::warn!(%error, "loading the rotated serving certificate");
                    continue;
                }
                if let Err(error) = register::sync_ca_bundle(&client, &cert.ca_pem).await {
                    tracing::warn!(%error, "updating the APIService caBundle");
                }
                current = cert;
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "reading the serving certificate Secret"),
        }
    }
}

/// What a PackageManifest shows of a CatalogSource.
fn catalog_info(source: &CatalogSource) -> Option<(CatalogRef, CatalogInfo)> {
    let name = source.metadata.name.clone()?;
    let namespace = source.metadata.namespace.clone()?;
    let info = CatalogInfo {
        name: name.clone(),
        namespace: namespace.clone(),
        display_name: source.spec.display_name.clone().unwrap_or_default(),
        publisher: source.spec.publisher.clone().unwrap_or_default(),
        labels: source.metadata.labels.clone().unwrap_or_default(),
        creation_timestamp: source
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
    };
    Some((CatalogRef::new(name, namespace), info))
}

/// Follows the CatalogSources of each watched scope through the controllers' shared
/// informers (no watch of its own) and the snapshots, and brings the store up to date on
/// every change.
async fn keep_in_sync(
    snapshots: Arc<CatalogSnapshots>,
    store: Arc<store::Store>,
    informers: Vec<Arc<Informers>>,
) {
    let mut stores = Vec::new();
    let mut changes = Vec::new();
    for scope in &informers {
        let (store, stream) = scope.catalog_sources.subscribe_touched();
        stores.push(store);
        changes.push(stream.boxed());
    }
    let mut changes = futures::stream::select_all(changes);
    let sources = move || -> BTreeMap<CatalogRef, CatalogInfo> {
        stores
            .iter()
            .flat_map(kube::runtime::reflector::Store::state)
            .filter_map(|guarded| guarded.0.as_ref().ok().and_then(catalog_info))
            .collect()
    };
    let mut snapshot_changes = snapshots.changes();
    loop {
        let current = sources();
        tracing::debug!(
            catalog_sources = current.len(),
            snapshots = snapshots.digests().len(),
            "syncing packagemanifests"
        );
        let (snapshots2, store2) = (Arc::clone(&snapshots), Arc::clone(&store));
        // Building manifests decodes CSVs: keep it off the async workers.
        let _ = tokio::task::spawn_blocking(move || store2.sync(&snapshots2, &current)).await;
        tokio::select! {
            change = changes.next() => if change.is_none() { return },
            r = snapshot_changes.changed() => if r.is_err() { return },
        }
    }
}
