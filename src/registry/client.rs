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
//! channel when its manifests are known.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use serde_json::{Value, json};
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::generated as api;
use super::generated::registry_client::RegistryClient as GrpcClient;
use crate::catalog::csv::{bundle_csv, package_display};
use crate::catalog::fbc::{
    self, DeclarativeConfig, PROP_BUNDLE_OBJECT, PROP_CONSTRAINT, PROP_GVK, PROP_GVK_REQUIRED,
    PROP_PACKAGE, PROP_PACKAGE_REQUIRED, Property, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};
use crate::catalog::render::related_images;

/// Concurrent `GetPackage`/`GetBundle` calls during a load.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// The largest message accepted (a bundle with many large CRDs can pass gRPC's 4 MiB default).
const MAX_MESSAGE_BYTES: usize = 256 << 20;
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
    #[error("registry {address}: {rpc}: package {package:?}, bundle {bundle:?}: {reason}")]
    InvalidBundle {
        address: String,
        rpc: String,
        package: String,
        bundle: String,
        reason: String,
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
}

#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub manifests: Manifests,
    /// Concurrent `GetPackage`/`GetBundle` calls (at least 1).
    pub concurrency: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            manifests: Manifests::Fetch,
            concurrency: DEFAULT_CONCURRENCY,
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
            .keep_alive_timeout(timeout.max(Duration::from_secs(10)));
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
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    fn load_timeout(&self) -> Duration {
        self.timeout.max(MIN_LOAD_TIMEOUT)
    }

    fn rpc_error(&self, rpc: &str, status: &tonic::Status) -> ClientError {
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

    /// The whole catalog, manifests included ([`LoadOptions::default`]).
    pub async fn load_catalog(&self) -> Result<DeclarativeConfig, ClientError> {
        self.load_catalog_with(&LoadOptions::default()).await
    }

    /// The whole catalog, with the manifests and concurrency `options` ask for.
    pub async fn load_catalog_with(
        &self,
        options: &LoadOptions,
    ) -> Result<DeclarativeConfig, ClientError> {
        let concurrency = options.concurrency.max(1);
        let timeout = self.load_timeout();
        let mut assembly = Assembly::default();

        // ListBundles, one message at a time.
        let rpc = "ListBundles";
        let mut stream = self
            .unary(
                rpc,
                timeout,
                self.grpc().list_bundles(api::ListBundlesRequest {}),
            )
            .await?;
        loop {
            match tokio::time::timeout(timeout, stream.message()).await {
                Err(_) => return Err(self.timeout_error(rpc, timeout)),
                Ok(Err(status)) => return Err(self.rpc_error(rpc, &status)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(message))) => assembly.add(message),
            }
        }

        // GetPackage for every package with bundles.
        let names: Vec<String> = assembly.package_names();
        let answers: Vec<(String, Result<api::Package, ClientError>)> =
            futures::stream::iter(names)
                .map(|name| async move {
                    let rpc = format!("GetPackage({name})");
                    let request = api::GetPackageRequest { name: name.clone() };
                    let answer = self
                        .unary(&rpc, timeout, self.grpc().get_package(request))
                        .await;
                    (name, answer)
                })
                .buffer_unordered(concurrency)
                .collect()
                .await;
        let mut packages: BTreeMap<String, api::Package> = BTreeMap::new();
        for (name, answer) in answers {
            match answer {
                Ok(package) => {
                    packages.insert(name, package);
                }
                Err(ClientError::Rpc {
                    code: tonic::Code::Unknown | tonic::Code::NotFound,
                    message,
                    ..
                }) => {
                    tracing::warn!(address = %self.address, package = %name, error = %message,
                        "registry cannot describe the package; leaving it and its bundles out");
                }
                Err(e) => return Err(e),
            }
        }

        // GetBundle for the manifests ListBundles left out.
        if options.manifests == Manifests::Fetch {
            let wanted: Vec<usize> = assembly
                .bundles
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    packages.contains_key(&b.bundle.package)
                        && !b.has_objects
                        && !b.bundle.image.is_empty()
                })
                .map(|(i, _)| i)
                .collect();
            let fetched: Vec<(usize, Result<api::Bundle, ClientError>)> =
                futures::stream::iter(wanted)
                    .map(|i| {
                        let b = &assembly.bundles[i];
                        let request = api::GetBundleRequest {
                            pkg_name: b.bundle.package.clone(),
                            channel_name: b.channel.clone(),
                            csv_name: b.bundle.name.clone(),
                        };
                        async move {
                            let rpc = format!(
                                "GetBundle({}/{}/{})",
                                request.pkg_name, request.channel_name, request.csv_name
                            );
                            let answer = self
                                .unary(&rpc, timeout, self.grpc().get_bundle(request))
                                .await;
                            (i, answer)
                        }
                    })
                    .buffer_unordered(concurrency)
                    .collect()
                    .await;
            for (i, answer) in fetched {
                let full = answer?;
                let pending = &mut assembly.bundles[i];
                let bundle =
                    bundle_from_api(&full).map_err(|reason| ClientError::InvalidBundle {
                        address: self.address.clone(),
                        rpc: format!(
                            "GetBundle({}/{}/{})",
                            pending.bundle.package, pending.channel, pending.bundle.name
                        ),
                        package: pending.bundle.package.clone(),
                        bundle: pending.bundle.name.clone(),
                        reason,
                    })?;
                pending.has_objects = bundle
                    .properties
                    .iter()
                    .any(|p| p.type_ == PROP_BUNDLE_OBJECT);
                pending.bundle = bundle;
            }
        }

        for ((package, bundle), reason) in &assembly.skipped {
            tracing::warn!(address = %self.address, package = %package, bundle = %bundle,
                error = %reason, "registry sent a bundle that cannot be read; leaving it out");
        }
        Ok(assembly.finish(&packages))
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
            reason,
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

/// A bundle as `ListBundles` or `GetBundle` sent it, before channels are known.
struct PendingBundle {
    bundle: fbc::Bundle,
    /// The first channel it was listed in (for `GetBundle`).
    channel: String,
    has_objects: bool,
}

/// The catalog being put together from `ListBundles` messages.
#[derive(Default)]
struct Assembly {
    bundles: Vec<PendingBundle>,
    bundle_ix: HashMap<(String, String), usize>,
    /// (package, channel) in first-seen order, with their entries.
    channels: Vec<((String, String), Vec<fbc::ChannelEntry>)>,
    channel_ix: HashMap<(String, String), usize>,
    /// (package, channel, bundle) of every entry so far.
    entry_ix: HashSet<(String, String, String)>,
    /// (package, bundle) → deprecation message, in first-seen order.
    bundle_deprecations: Vec<((String, String), String)>,
    /// Bundles that could not be read, and why.
    skipped: Vec<((String, String), String)>,
    skipped_ix: HashSet<(String, String)>,
}

impl Assembly {
    fn add(&mut self, b: api::Bundle) {
        let key = (b.package_name.clone(), b.csv_name.clone());
        if self.skipped_ix.contains(&key) {
            return;
        }
        if !self.bundle_ix.contains_key(&key) {
            match bundle_from_api(&b) {
                Ok(bundle) => {
                    self.bundle_ix.insert(key.clone(), self.bundles.len());
                    self.bundles.push(PendingBundle {
                        has_objects: bundle
                            .properties
                            .iter()
                            .any(|p| p.type_ == PROP_BUNDLE_OBJECT),
                        bundle,
                        channel: b.channel_name.clone(),
                    });
                    if let Some(d) = &b.deprecation {
                        self.bundle_deprecations
                            .push((key.clone(), d.message.clone()));
                    }
                }
                Err(reason) => {
                    self.skipped_ix.insert(key.clone());
                    self.skipped.push((key, reason));
                    return;
                }
            }
        }
        let channel_key = (b.package_name.clone(), b.channel_name.clone());
        let at = *self
            .channel_ix
            .entry(channel_key.clone())
            .or_insert_with(|| {
                self.channels.push((channel_key, Vec::new()));
                self.channels.len() - 1
            });
        let entry_key = (b.package_name, b.channel_name, b.csv_name.clone());
        if self.entry_ix.insert(entry_key) {
            self.channels[at].1.push(fbc::ChannelEntry {
                name: b.csv_name,
                replaces: b.replaces,
                skips: b.skips,
                skip_range: b.skip_range,
            });
        }
    }

    fn package_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .channels
            .iter()
            .map(|((package, _), _)| package.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn finish(mut self, packages: &BTreeMap<String, api::Package>) -> DeclarativeConfig {
        let mut out = DeclarativeConfig::default();
        for (name, p) in packages {
            // Icon and description from the default channel's head, when its CSV is known.
            let head = p
                .channels
                .iter()
                .find(|c| c.name == p.default_channel_name)
                .and_then(|c| self.bundle_ix.get(&(name.clone(), c.csv_name.clone())))
                .and_then(|&i| bundle_csv(&self.bundles[i].bundle));
            let (icon, description) = head.as_ref().map(package_display).unwrap_or_default();
            out.packages.push(fbc::Package {
                schema: SCHEMA_PACKAGE.into(),
                name: name.clone(),
                default_channel: p.default_channel_name.clone(),
                icon,
                description,
                properties: Vec::new(),
            });

            // Channels in the package's order, then any it did not name.
            let mut order: Vec<usize> = p
                .channels
                .iter()
                .filter_map(|c| {
                    self.channel_ix
                        .get(&(name.clone(), c.name.clone()))
                        .copied()
                })
                .collect();
            for (i, ((package, _), _)) in self.channels.iter().enumerate() {
                if package == name && !order.contains(&i) {
                    order.push(i);
                }
            }
            for i in order {
                let ((package, channel), entries) = &mut self.channels[i];
                out.channels.push(fbc::Channel {
                    schema: SCHEMA_CHANNEL.into(),
                    name: channel.clone(),
                    package: package.clone(),
                    entries: std::mem::take(entries),
                    properties: Vec::new(),
                });
            }

            let mut entries = Vec::new();
            if let Some(d) = &p.deprecation {
                entries.push(deprecation_entry(SCHEMA_PACKAGE, "", &d.message));
            }
            for c in &p.channels {
                if let Some(d) = &c.deprecation {
                    entries.push(deprecation_entry(SCHEMA_CHANNEL, &c.name, &d.message));
                }
            }
            for ((package, bundle), message) in &self.bundle_deprecations {
                if package == name {
                    entries.push(deprecation_entry(SCHEMA_BUNDLE, bundle, message));
                }
            }
            if !entries.is_empty() {
                out.deprecations.push(fbc::Deprecation {
                    schema: SCHEMA_DEPRECATIONS.into(),
                    package: name.clone(),
                    entries,
                });
            }
        }
        out.bundles = self
            .bundles
            .into_iter()
            .map(|b| b.bundle)
            .filter(|b| packages.contains_key(&b.package))
            .collect();
        out
    }
}

/// Whether a bundle's only manifest is the CSV a server makes up from `olm.csv.metadata`
/// (no install deployments, a `status.cleanup`).
fn synthesized_csv_only(b: &api::Bundle) -> bool {
    match b.object.as_slice() {
        [] => {}
        [only] if *only == b.csv_json => {}
        _ => return false,
    }
    let Ok(csv) = serde_json::from_str::<Value>(&b.csv_json) else {
        return false;
    };
    csv["spec"]["install"]["spec"]["deployments"].is_null() && csv["status"]["cleanup"].is_object()
}

fn deprecation_entry(schema: &str, name: &str, message: &str) -> fbc::DeprecationEntry {
    fbc::DeprecationEntry {
        reference: fbc::DeprecationReference {
            schema: schema.to_string(),
            name: name.to_string(),
        },
        message: message.to_string(),
    }
}

fn gvk_value(g: &api::GroupVersionKind) -> Value {
    json!({ "group": g.group, "kind": g.kind, "version": g.version })
}

fn parse_value(type_: &str, value: &str) -> Result<Value, String> {
    if value.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(value).map_err(|e| format!("{type_} value {value:?} is not JSON: {e}"))
}

/// An `api.Bundle` → an FBC bundle, as upstream reads one:
/// - properties as sent (the server leaves out `olm.bundle.object` and `olm.csv.metadata`);
/// - `olm.package` from `packageName` and `version` when no property names it;
/// - `olm.gvk` for each provided API, `olm.gvk.required` for each required API;
/// - dependencies as OLM translates them: `olm.gvk` → `olm.gvk.required`, `olm.package` →
///   `olm.package.required` (its `version` is the range), `olm.label` →
///   `olm.label.required`, `olm.constraint` as is;
/// - each of `object` (else `csvJson`) as an `olm.bundle.object`, unless the bundle has an
///   image and its only manifest is the CSV a server makes up from `olm.csv.metadata`
///   (which cannot install anything; the image has the manifests);
/// - related images as `opm render` lists them for the CSV and bundle image.
///
/// Properties are kept once each (servers send required GVKs both as properties and as
/// dependencies). Channel fields (replaces, skips, skipRange) belong to channel entries.
pub fn bundle_from_api(b: &api::Bundle) -> Result<fbc::Bundle, String> {
    let mut properties: Vec<Property> = Vec::new();
    let mut push = |type_: &str, value: Value| {
        if !properties
            .iter()
            .any(|p| p.type_ == type_ && p.value == value)
        {
            properties.push(Property::new(type_, value));
        }
    };
    for p in &b.properties {
        push(&p.r#type, parse_value(&p.r#type, &p.value)?);
    }
    if !b.properties.iter().any(|p| p.r#type == PROP_PACKAGE) {
        push(
            PROP_PACKAGE,
            json!({ "packageName": b.package_name, "version": b.version }),
        );
    }
    for g in &b.provided_apis {
        push(PROP_GVK, gvk_value(g));
    }
    for g in &b.required_apis {
        push(PROP_GVK_REQUIRED, gvk_value(g));
    }
    for d in &b.dependencies {
        let value = parse_value(&d.r#type, &d.value)?;
        let s = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default();
        match d.r#type.as_str() {
            PROP_GVK => push(
                PROP_GVK_REQUIRED,
                json!({ "group": s("group"), "kind": s("kind"), "version": s("version") }),
            ),
            PROP_PACKAGE => push(
                PROP_PACKAGE_REQUIRED,
                json!({ "packageName": s("packageName"), "versionRange": s("version") }),
            ),
            "olm.label" => push("olm.label.required", value),
            PROP_CONSTRAINT => push(PROP_CONSTRAINT, value),
            _ => {}
        }
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let objects: Vec<&String> = if !b.bundle_path.is_empty() && synthesized_csv_only(b) {
        Vec::new()
    } else if b.object.is_empty() && !b.csv_json.is_empty() {
        vec![&b.csv_json]
    } else {
        b.object.iter().collect()
    };
    for object in objects {
        push(PROP_BUNDLE_OBJECT, json!({ "data": engine.encode(object) }));
    }
    let csv: Value = if b.csv_json.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&b.csv_json).map_err(|e| format!("csvJson is not JSON: {e}"))?
    };
    Ok(fbc::Bundle {
        schema: SCHEMA_BUNDLE.into(),
        name: b.csv_name.clone(),
        package: b.package_name.clone(),
        image: b.bundle_path.clone(),
        properties,
        related_images: related_images(&csv, &b.bundle_path),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::catalog::content_digest;
    use crate::catalog::load::load_path;
    use crate::catalog::validate::validate;
    use crate::registry::{Index, router};

    fn repo() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    /// Serves `index` on an ephemeral loopback port until the handle is aborted.
    async fn serve(index: Index) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let routes = router(Arc::new(index)).unwrap();
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_routes(routes)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
        });
        (address, server)
    }

    /// A catalog in a canonical order, manifests decoded, for comparing as data.
    fn normalized(mut c: DeclarativeConfig) -> DeclarativeConfig {
        c.packages.sort_by(|a, b| a.name.cmp(&b.name));
        c.channels
            .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
        for ch in &mut c.channels {
            ch.entries.sort_by(|a, b| a.name.cmp(&b.name));
        }
        c.bundles
            .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
        for b in &mut c.bundles {
            for p in &mut b.properties {
                if p.type_ == PROP_BUNDLE_OBJECT {
                    p.value = crate::catalog::csv::decode_bundle_object(&p.value).unwrap();
                }
            }
            b.properties
                .sort_by_key(|p| format!("{}{}", p.type_, p.value));
            b.related_images
                .sort_by(|x, y| (&x.name, &x.image).cmp(&(&y.name, &y.image)));
        }
        c
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn loads_our_catalog_as_the_files_have_it() {
        let dir = repo().join("catalog");
        let (address, server) = serve(Index::load(&dir).unwrap()).await;
        let client = RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
        assert_eq!(client.address(), address);
        client.check_health().await.unwrap();
        let loaded = client.load_catalog().await.unwrap();
        let files = load_path(&dir).unwrap();

        let problems = validate(&loaded);
        assert!(problems.is_empty(), "{problems:#?}");
        let (loaded_n, files_n) = (normalized(loaded.clone()), normalized(files.clone()));
        let defaults = |c: &DeclarativeConfig| -> Vec<(String, String)> {
            c.packages
                .iter()
                .map(|p| (p.name.clone(), p.default_channel.clone()))
                .collect()
        };
        assert_eq!(defaults(&loaded_n), defaults(&files_n));
        assert_eq!(loaded_n.channels, files_n.channels);
        assert_eq!(loaded_n.bundles.len(), files_n.bundles.len());
        for (l, f) in loaded_n.bundles.iter().zip(&files_n.bundles) {
            assert_eq!(l, f, "bundle {}", f.name);
        }
        // Icons and descriptions come from the default channel heads' CSVs, as rendered.
        assert_eq!(loaded_n.packages, files_n.packages);
        assert_eq!(content_digest(&loaded), content_digest(&files));

        // Without manifests: bundles with images carry none, everything else is there.
        let light = client
            .load_catalog_with(&LoadOptions {
                manifests: Manifests::AsListed,
                concurrency: 1,
            })
            .await
            .unwrap();
        assert_eq!(light.bundles.len(), files.bundles.len());
        assert!(light.bundles.iter().all(|b| {
            !b.image.is_empty() && b.properties_of(PROP_BUNDLE_OBJECT).next().is_none()
        }));
        let strip = |c: &DeclarativeConfig| -> Vec<Vec<Property>> {
            normalized(c.clone())
                .bundles
                .into_iter()
                .map(|b| {
                    b.properties
                        .into_iter()
                        .filter(|p| p.type_ != PROP_BUNDLE_OBJECT)
                        .collect()
                })
                .collect()
        };
        assert_eq!(strip(&light), strip(&files));

        // One bundle on demand.
        let b = client
            .get_bundle("at", "stable", "at.v0.2.0")
            .await
            .unwrap();
        let expected = files_n
            .bundles
            .iter()
            .find(|b| b.name == "at.v0.2.0")
            .unwrap();
        assert_eq!(
            &normalized(DeclarativeConfig {
                bundles: vec![b],
                ..Default::default()
            })
            .bundles[0],
            expected
        );
        let e = client
            .get_bundle("at", "stable", "at.v9")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("registry {address}: GetBundle(at/stable/at.v9): ")),
            "{e}"
        );
        server.abort();
    }

    /// Deprecations of every kind, and a bundle without an image whose manifests come
    /// inline in ListBundles.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deprecations_and_inline_manifests_round_trip() {
        let csv = r#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{"name":"p.v2"},"spec":{"version":"2.0.0","relatedImages":[{"name":"op","image":"quay.io/p/op:v2"}]}}"#;
        let data = base64::engine::general_purpose::STANDARD.encode(csv);
        let text = format!(
            r#"{{"schema":"olm.package","name":"p","defaultChannel":"stable"}}
{{"schema":"olm.channel","package":"p","name":"stable","entries":[{{"name":"p.v1"}},{{"name":"p.v2","replaces":"p.v1","skips":["p.v0"],"skipRange":"<2.0.0"}}]}}
{{"schema":"olm.channel","package":"p","name":"candidate","entries":[{{"name":"p.v2"}}]}}
{{"schema":"olm.bundle","package":"p","name":"p.v1","image":"quay.io/p/bundle:v1","properties":[
 {{"type":"olm.package","value":{{"packageName":"p","version":"1.0.0"}}}},
 {{"type":"olm.package.required","value":{{"packageName":"q","versionRange":">=1.0.0"}}}},
 {{"type":"olm.constraint","value":{{"failureMessage":"needs K","gvk":{{"group":"g.io","kind":"K","version":"v1"}}}}}}]}}
{{"schema":"olm.bundle","package":"p","name":"p.v2","properties":[
 {{"type":"olm.package","value":{{"packageName":"p","version":"2.0.0"}}}},
 {{"type":"olm.gvk","value":{{"group":"g.io","kind":"K","version":"v1"}}}},
 {{"type":"olm.gvk.required","value":{{"group":"h.io","kind":"R","version":"v1"}}}},
 {{"type":"olm.bundle.object","value":{{"data":"{data}"}}}}],
 "relatedImages":[{{"name":"op","image":"quay.io/p/op:v2"}}]}}
{{"schema":"olm.deprecations","package":"p","entries":[
 {{"reference":{{"schema":"olm.package"}},"message":"p is retired"}},
 {{"reference":{{"schema":"olm.channel","name":"candidate"}},"message":"use stable"}},
 {{"reference":{{"schema":"olm.bundle","name":"p.v1"}},"message":"p.v1 is broken"}}]}}
"#
        );
        let files = crate::catalog::load::load_str(Path::new("p.json"), &text).unwrap();
        let (address, server) = serve(Index::from_config(files.clone()).unwrap()).await;
        let client = RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
        let loaded = client.load_catalog().await.unwrap();
        server.abort();

        assert_eq!(
            normalized(loaded.clone()).channels,
            normalized(files.clone()).channels
        );
        let mut expected = normalized(files.clone()).bundles;
        // The bundle image is listed among related images, as `opm render` lists it.
        expected[0].related_images.push(fbc::RelatedImage {
            name: String::new(),
            image: "quay.io/p/bundle:v1".into(),
        });
        assert_eq!(normalized(loaded.clone()).bundles, expected);
        let entry_set = |d: &fbc::Deprecation| -> BTreeSet<(String, String, String)> {
            d.entries
                .iter()
                .map(|e| {
                    (
                        e.reference.schema.clone(),
                        e.reference.name.clone(),
                        e.message.clone(),
                    )
                })
                .collect()
        };
        let (entries, wanted) = (
            entry_set(&loaded.deprecations[0]),
            entry_set(&files.deprecations[0]),
        );
        assert_eq!(entries, wanted);
        assert!(validate(&loaded).is_empty(), "{:#?}", validate(&loaded));
    }

    /// A bundle with an image and only `olm.csv.metadata`: the CSV the server makes up for
    /// it is not taken for its manifests.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn csv_metadata_bundles_keep_no_made_up_manifests() {
        let text = r#"{"schema":"olm.package","name":"m","defaultChannel":"stable"}
{"schema":"olm.channel","package":"m","name":"stable","entries":[{"name":"m.v1"}]}
{"schema":"olm.bundle","package":"m","name":"m.v1","image":"quay.io/m/bundle:v1","properties":[
 {"type":"olm.package","value":{"packageName":"m","version":"1.0.0"}},
 {"type":"olm.csv.metadata","value":{"displayName":"M","installModes":[{"type":"AllNamespaces","supported":true}]}}]}
"#;
        let files = crate::catalog::load::load_str(Path::new("m.json"), text).unwrap();
        let (address, server) = serve(Index::from_config(files).unwrap()).await;
        let client = RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
        let loaded = client.load_catalog().await.unwrap();
        let asked = client.get_bundle("m", "stable", "m.v1").await.unwrap();
        server.abort();
        assert_eq!(loaded.bundles, std::slice::from_ref(&asked));
        assert!(asked.properties_of(PROP_BUNDLE_OBJECT).next().is_none());
        assert_eq!(
            asked.related_images,
            [fbc::RelatedImage {
                name: String::new(),
                image: "quay.io/m/bundle:v1".into()
            }]
        );
    }

    #[tokio::test]
    async fn health_of_a_closed_port_fails_within_the_timeout() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The listener is dropped: nothing listens there now.
        let address = format!("127.0.0.1:{port}");
        let client = RegistryClient::new(&address, Duration::from_secs(2)).unwrap();
        let started = Instant::now();
        let e = client.check_health().await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(e.is_unreachable(), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "registry {address}: grpc.health.v1.Health/Check: "
            )),
            "{text}"
        );
        // Loading fails the same way, naming the RPC.
        let e = client.load_catalog().await.unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("registry {address}: ListBundles: ")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn health_of_an_unroutable_address_fails_within_the_timeout() {
        // TEST-NET-1: connecting either fails at once or hangs until the timeout.
        let client = RegistryClient::new("192.0.2.1:50051", Duration::from_millis(1500)).unwrap();
        let started = Instant::now();
        let e = client.check_health().await.unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(2500), "{e}");
        assert!(e.to_string().contains("192.0.2.1:50051"), "{e}");
    }

    #[test]
    fn addresses_must_be_host_and_port() {
        for bad in [
            "",
            "localhost",
            "http://localhost:50051",
            "a:1/x",
            ":50051",
            "a:b",
        ] {
            let e = RegistryClient::new(bad, Duration::from_secs(1)).unwrap_err();
            assert!(
                matches!(&e, ClientError::InvalidAddress { address, .. } if address == bad),
                "{bad}: {e}"
            );
        }
        for good in [
            "localhost:50051",
            "10.0.0.1:50051",
            "[::1]:50051",
            "catalog.olm.svc:50051",
        ] {
            RegistryClient::new(good, Duration::from_secs(1)).unwrap();
        }
    }

    #[test]
    fn legacy_bundles_get_properties_from_apis_and_dependencies() {
        let g = |group: &str, kind: &str| api::GroupVersionKind {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: "ignored".into(),
        };
        let b = api::Bundle {
            csv_name: "p.v1".into(),
            package_name: "p".into(),
            channel_name: "stable".into(),
            version: "1.0.0".into(),
            provided_apis: vec![g("g.io", "K")],
            required_apis: vec![g("h.io", "R")],
            dependencies: vec![
                api::Dependency {
                    r#type: "olm.gvk".into(),
                    value: r#"{"group":"h.io","kind":"R","version":"v1"}"#.into(),
                },
                api::Dependency {
                    r#type: "olm.package".into(),
                    value: r#"{"packageName":"q","version":">=1.0.0"}"#.into(),
                },
                api::Dependency {
                    r#type: "olm.label".into(),
                    value: r#"{"label":"beta"}"#.into(),
                },
                api::Dependency {
                    r#type: "olm.unknown".into(),
                    value: "{}".into(),
                },
            ],
            object: vec![r#"{"kind":"ClusterServiceVersion"}"#.into()],
            ..Default::default()
        };
        let f = bundle_from_api(&b).unwrap();
        let props: Vec<(String, Value)> = f
            .properties
            .iter()
            .map(|p| (p.type_.clone(), p.value.clone()))
            .collect();
        assert_eq!(
            props,
            [
                (
                    PROP_PACKAGE.to_string(),
                    json!({"packageName": "p", "version": "1.0.0"})
                ),
                (
                    PROP_GVK.to_string(),
                    json!({"group": "g.io", "kind": "K", "version": "v1"})
                ),
                (
                    PROP_GVK_REQUIRED.to_string(),
                    json!({"group": "h.io", "kind": "R", "version": "v1"})
                ),
                (
                    PROP_PACKAGE_REQUIRED.to_string(),
                    json!({"packageName": "q", "versionRange": ">=1.0.0"})
                ),
                ("olm.label.required".to_string(), json!({"label": "beta"})),
                (
                    PROP_BUNDLE_OBJECT.to_string(),
                    json!({"data": "eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0="})
                ),
            ]
        );
        assert!(f.image.is_empty() && f.related_images.is_empty());

        let mut broken = b.clone();
        broken.properties.push(api::Property {
            r#type: "olm.maxOpenShiftVersion".into(),
            value: "4.1{".into(),
        });
        assert!(
            bundle_from_api(&broken)
                .unwrap_err()
                .starts_with("olm.maxOpenShiftVersion value \"4.1{\" is not JSON")
        );
    }
}
