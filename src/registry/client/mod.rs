//! A client of the registry gRPC API (`api.Registry`, as `opm serve`, `olm catalog serve` and
//! upstream's older registry servers speak it) that reads a whole catalog back into a
//! [`DeclarativeConfig`], the inverse of [`super::convert`].
//!
//! What it asks, following upstream OLM's registry source (`resolver/source_registry.go`),
//! which builds its resolver cache from `ListBundles` plus one `GetPackage` per package:
//! - `ListBundles` gives one message per (channel, bundle): the channel entries (replaces,
//!   skips, skipRange) and the bundle's properties, provided/required APIs, dependencies and
//!   deprecation. It leaves out the manifests (`csvJson`, `object`) of bundles with an image.
//! - `GetPackage` per package gives the default channel and the package and channel
//!   deprecations. A package the server cannot describe (an UNKNOWN or NOT_FOUND answer) is
//!   left out with its bundles, as upstream skips them; any other failure fails the load.
//! - `GetBundle`, once per bundle (not per channel entry) with bounded concurrency, fetches
//!   the manifests `ListBundles` left out, unless [`Manifests::AsListed`] is asked for. A
//!   bundle whose catalog entry has only `olm.csv.metadata` gets from the server a CSV made
//!   up from it, which cannot install anything: such a bundle keeps no manifests.
//!
//! Bundles become FBC bundles as upstream's `ConvertAPIBundleToModelBundle` and OLM's
//! `newOperatorFromBundle` read them (see [`bundle_from_api`]). Package icons and
//! descriptions, which the API does not carry, come from the CSV at the head of the default
//! channel when its manifests are known.//!
//! Files: this one holds the client and its errors; `load.rs` runs a whole-catalog load,
//! `assembly.rs` puts the answers together into a catalog, `from_api.rs` turns one
//! `api.Bundle` into an FBC bundle, `tests.rs` tests them against our server.

use std::sync::OnceLock;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::generated as api;
use super::generated::registry_client::RegistryClient as GrpcClient;
use super::limits::{self, MAX_CLIENT_STREAMS, MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES};
use crate::catalog::model::fbc;

pub use from_api::{BundleFromApiError, bundle_from_api};

mod assembly;
mod from_api;
mod load;
#[cfg(test)]
mod tests;

/// Concurrent `GetPackage`/`GetBundle` calls during a load.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// The least time a load waits for any one answer or stream message, whatever the
/// (health-check) timeout the client was made with.
const MIN_LOAD_TIMEOUT: Duration = Duration::from_secs(30);

const HEALTH_CHECK: &str = "grpc.health.v1.Health/Check";

/// A failure talking to a registry. Every variant names the address, and the RPC (with
/// the package, channel and bundle it asked about) where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("registry address {address:?} is not host:port: {reason}")]
    InvalidAddress { address: String, reason: String },
    #[error("registry {address}: {rpc}: {message} (gRPC code {code:?})")]
    Rpc {
        address: String,
        /// The RPC and its arguments, e.g. `GetBundle(etcd/alpha/etcdoperator.v0.9.2)`.
        rpc: String,
        code: tonic::Code,
        message: String,
    },
    #[error("registry {address}: {rpc}: no answer within {timeout:?}")]
    Timeout {
        address: String,
        rpc: String,
        timeout: Duration,
    },
    #[error("registry {address}: {rpc}: the server is {status}, not SERVING")]
    NotServing {
        address: String,
        rpc: &'static str,
        status: String,
    },
    /// The server sent more than a limit of [`super::limits`] allows.
    #[error("registry {address}: {rpc}: {what}")]
    LimitExceeded {
        address: String,
        rpc: String,
        what: String,
    },
    #[error("registry {address}: {rpc}: package {package:?}, bundle {bundle:?}: {reason}")]
    InvalidBundle {
        address: String,
        rpc: String,
        package: String,
        bundle: String,
        #[source]
        reason: Box<BundleFromApiError>,
    },
}

impl ClientError {
    /// The server could not be reached or did not answer in time (as opposed to answering
    /// something wrong).
    pub fn is_unreachable(&self) -> bool {
        match self {
            ClientError::Rpc { code, .. } => *code == tonic::Code::Unavailable,
            ClientError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// Which manifests a load brings in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Manifests {
    /// Every bundle's manifests (`olm.bundle.object`): those `ListBundles` leaves out are
    /// fetched with `GetBundle`.
    #[default]
    Fetch,
    /// Only what `ListBundles` sends: bundles with an image carry no `olm.bundle.object`
    /// (enough to resolve; [`RegistryClient::get_bundle`] fetches one bundle's later).
    AsListed,
    /// As listed, plus the manifests of each channel's head (as `GetPackage` names them):
    /// what packagemanifests show, as upstream's package-server fetches them.
    ChannelHeads,
}

#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub manifests: Manifests,
    /// Concurrent `GetPackage`/`GetBundle` calls (at least 1; at most
    /// [`limits::MAX_CLIENT_STREAMS`] run at once on the connection).
    pub concurrency: usize,
    /// The longest the whole load may take: a server that trickles answers fails the load
    /// rather than holding it (and the memory it has read so far) forever.
    pub timeout: Duration,
    /// Called on each bundle `GetBundle` brought in, as it arrives: a caller that needs
    /// only part of the manifests (a description) keeps that part, and the load never
    /// holds every fetched manifest at once.
    pub condense_fetched: Option<fn(&mut fbc::Bundle)>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            manifests: Manifests::Fetch,
            concurrency: DEFAULT_CONCURRENCY,
            timeout: limits::DEFAULT_LOAD_TIMEOUT,
            condense_fetched: None,
        }
    }
}

/// A client of one registry server. It holds one HTTP/2 channel, made on first use (inside
/// the Tokio runtime that first uses it) and reused by every call; the channel reconnects
/// by itself after the server goes away.
pub struct RegistryClient {
    address: String,
    endpoint: Endpoint,
    channel: OnceLock<Channel>,
    timeout: Duration,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("address", &self.address)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RegistryClient {
    /// A client for `address` ("host:port", as in a CatalogSource's `spec.address`).
    /// Nothing connects yet. `timeout` bounds connecting and the health check; a load waits
    /// at least 30 s for each answer.
    pub fn new(address: &str, timeout: Duration) -> Result<Self, ClientError> {
        let invalid = |reason: &str| ClientError::InvalidAddress {
            address: address.to_string(),
            reason: reason.to_string(),
        };
        if address.is_empty() {
            return Err(invalid("it is empty"));
        }
        if address.contains("://") || address.contains('/') {
            return Err(invalid("give host:port, without a scheme or path"));
        }
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| invalid(&e.to_string()))?;
        let uri = endpoint.uri();
        if uri.host().is_none_or(str::is_empty) {
            return Err(invalid("it has no host"));
        }
        if uri.port_u16().is_none() {
            return Err(invalid("it has no port"));
        }
        let endpoint = endpoint
            .connect_timeout(timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(timeout.max(Duration::from_secs(10)))
            .concurrency_limit(MAX_CLIENT_STREAMS);
        Ok(RegistryClient {
            address: address.to_string(),
            endpoint,
            channel: OnceLock::new(),
            timeout,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    fn channel(&self) -> Channel {
        self.channel
            .get_or_init(|| self.endpoint.connect_lazy())
            .clone()
    }

    fn grpc(&self) -> GrpcClient<Channel> {
        GrpcClient::new(self.channel())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_REQUEST_BYTES)
    }

    fn load_timeout(&self) -> Duration {
        self.timeout.max(MIN_LOAD_TIMEOUT)
    }

    fn rpc_error(&self, rpc: &str, status: &tonic::Status) -> ClientError {
        // tonic refuses a message over the decoding limit from its length prefix.
        if status.code() == tonic::Code::OutOfRange && status.message().contains("too large") {
            return ClientError::LimitExceeded {
                address: self.address.clone(),
                rpc: rpc.to_string(),
                what: format!(
                    "{} (the limit on one message is {})",
                    status.message(),
                    limits::mib(MAX_MESSAGE_BYTES)
                ),
            };
        }
        ClientError::Rpc {
            address: self.address.clone(),
            rpc: rpc.to_string(),
            code: status.code(),
            message: status_message(status),
        }
    }

    fn timeout_error(&self, rpc: &str, timeout: Duration) -> ClientError {
        ClientError::Timeout {
            address: self.address.clone(),
            rpc: rpc.to_string(),
            timeout,
        }
    }

    /// Awaits a unary call for at most `timeout`.
    async fn unary<T>(
        &self,
        rpc: &str,
        timeout: Duration,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ClientError> {
        match tokio::time::timeout(timeout, call).await {
            Err(_) => Err(self.timeout_error(rpc, timeout)),
            Ok(Err(status)) => Err(self.rpc_error(rpc, &status)),
            Ok(Ok(response)) => Ok(response.into_inner()),
        }
    }

    /// `grpc.health.v1.Health/Check` for the whole server (service ""): `Ok` when it answers
    /// SERVING within the timeout.
    pub async fn check_health(&self) -> Result<(), ClientError> {
        let mut client = HealthClient::new(self.channel());
        let request = HealthCheckRequest {
            service: String::new(),
        };
        let response = self
            .unary(HEALTH_CHECK, self.timeout, client.check(request))
            .await?;
        match ServingStatus::try_from(response.status) {
            Ok(ServingStatus::Serving) => Ok(()),
            other => Err(ClientError::NotServing {
                address: self.address.clone(),
                rpc: HEALTH_CHECK,
                status: other.map_or_else(
                    |_| format!("in unknown state {}", response.status),
                    |s| s.as_str_name().to_string(),
                ),
            }),
        }
    }

    /// One bundle with its manifests (`GetBundle`), as an FBC bundle.
    pub async fn get_bundle(
        &self,
        package: &str,
        channel: &str,
        bundle: &str,
    ) -> Result<fbc::Bundle, ClientError> {
        let rpc = format!("GetBundle({package}/{channel}/{bundle})");
        let request = api::GetBundleRequest {
            pkg_name: package.to_string(),
            channel_name: channel.to_string(),
            csv_name: bundle.to_string(),
        };
        let answer = self
            .unary(&rpc, self.load_timeout(), self.grpc().get_bundle(request))
            .await?;
        bundle_from_api(&answer).map_err(|reason| ClientError::InvalidBundle {
            address: self.address.clone(),
            rpc,
            package: package.to_string(),
            bundle: bundle.to_string(),
            reason: Box::new(reason),
        })
    }
}

/// A status's message and the errors under it (a refused connection says why only there).
fn status_message(status: &tonic::Status) -> String {
    let mut message = status.message().to_string();
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        let text = e.to_string();
        if !text.is_empty() && !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
        source = e.source();
    }
    message
}
