//! A whole-catalog load: `ListBundles`, then `GetPackage` per package and `GetBundle` per
//! bundle without manifests, each with bounded concurrency, as upstream's registry source
//! reads a catalog.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use prost::Message;

use super::assembly::Assembly;
use super::{ClientError, LoadOptions, Manifests, RegistryClient, api, bundle_from_api};
use crate::catalog::model::fbc::{self, DeclarativeConfig, PROP_BUNDLE_OBJECT};
use crate::registry::limits::{
    ENTRY_OVERHEAD_BYTES, MAX_LIST_BYTES, MAX_LIST_ENTRIES, MAX_LOADING_BYTES, mib,
};

/// Estimated memory of the catalog loads in flight in this process.
static LOADING_BYTES: AtomicUsize = AtomicUsize::new(0);

/// One load's share of [`LOADING_BYTES`], given back when the load ends, however it ends.
#[derive(Default)]
struct Reservation(usize);

impl Reservation {
    /// Adds `bytes`, unless that would take all loads past [`MAX_LOADING_BYTES`].
    fn grow(&mut self, bytes: usize) -> Result<(), usize> {
        let mut current = LOADING_BYTES.load(Ordering::Relaxed);
        loop {
            let next = current.saturating_add(bytes);
            if next > MAX_LOADING_BYTES {
                return Err(current);
            }
            match LOADING_BYTES.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.0 += bytes;
                    return Ok(());
                }
                Err(actual) => current = actual,
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        LOADING_BYTES.fetch_sub(self.0, Ordering::AcqRel);
    }
}

impl RegistryClient {
    /// The whole catalog, manifests included ([`LoadOptions::default`]).
    pub async fn load_catalog(&self) -> Result<DeclarativeConfig, ClientError> {
        self.load_catalog_with(&LoadOptions::default()).await
    }

    /// The whole catalog, with the manifests, concurrency and deadline `options` ask for.
    /// A load that passes `options.timeout` or a limit of [`crate::registry::limits`]
    /// fails, naming the RPC it was in.
    pub async fn load_catalog_with(
        &self,
        options: &LoadOptions,
    ) -> Result<DeclarativeConfig, ClientError> {
        let phase = Mutex::new("ListBundles");
        match tokio::time::timeout(options.timeout, self.load_phases(options, &phase)).await {
            Ok(result) => result,
            Err(_) => {
                let rpc = *phase
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                Err(ClientError::Timeout {
                    address: self.address.clone(),
                    rpc: format!("{rpc} (the whole catalog load)"),
                    timeout: options.timeout,
                })
            }
        }
    }

    async fn load_phases(
        &self,
        options: &LoadOptions,
        phase: &Mutex<&'static str>,
    ) -> Result<DeclarativeConfig, ClientError> {
        let enter = |name: &'static str| {
            *phase
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = name;
        };
        let concurrency = options.concurrency.max(1);
        let timeout = self.load_timeout();
        let mut assembly = Assembly::default();
        let mut reservation = Reservation::default();
        self.list_bundles(timeout, &mut assembly, &mut reservation)
            .await?;
        enter("GetPackage");
        let packages = self
            .get_packages(assembly.package_names(), timeout, concurrency)
            .await?;
        if options.manifests != Manifests::AsListed {
            enter("GetBundle");
            self.get_bundles(options, &packages, &mut assembly, &mut reservation)
                .await?;
        }
        for ((package, bundle), reason) in &assembly.skipped {
            tracing::warn!(address = %self.address, package = %package, bundle = %bundle,
                error = %reason, "registry sent a bundle that cannot be read; leaving it out");
        }
        Ok(assembly.finish(&packages))
    }

    /// ListBundles, one message at a time, within the entry and byte limits.
    async fn list_bundles(
        &self,
        timeout: Duration,
        assembly: &mut Assembly,
        reservation: &mut Reservation,
    ) -> Result<(), ClientError> {
        let rpc = "ListBundles";
        let (mut entries, mut bytes) = (0usize, 0usize);
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
                Ok(Ok(Some(message))) => {
                    entries += 1;
                    let size = message.encoded_len();
                    bytes = bytes.saturating_add(size);
                    let over = list_limit_passed(entries, bytes);
                    if let Some(over) = over {
                        return Err(ClientError::LimitExceeded {
                            address: self.address.clone(),
                            rpc: rpc.to_string(),
                            what: format!(
                                "the server sent {over}, the limit of one catalog load; \
                                 the load was stopped there"
                            ),
                        });
                    }
                    if let Err(others) = reservation.grow(size + ENTRY_OVERHEAD_BYTES) {
                        return Err(self.over_budget(rpc, others, reservation));
                    }
                    assembly.add(message);
                    // Decoding a long stream of buffered messages never waits: let the
                    // other tasks on this thread (the admin server, other loads) run.
                    if entries.is_multiple_of(64) {
                        tokio::task::yield_now().await;
                    }
                }
            }
        }
        Ok(())
    }

    /// GetPackage for every package with bundles; a package the registry cannot describe
    /// is left out (with its bundles), as upstream's client does.
    async fn get_packages(
        &self,
        names: Vec<String>,
        timeout: Duration,
        concurrency: usize,
    ) -> Result<BTreeMap<String, api::Package>, ClientError> {
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
        Ok(packages)
    }

    /// GetBundle for the manifests ListBundles left out (channel heads only, or all).
    async fn get_bundles(
        &self,
        options: &LoadOptions,
        packages: &BTreeMap<String, api::Package>,
        assembly: &mut Assembly,
        reservation: &mut Reservation,
    ) -> Result<(), ClientError> {
        let concurrency = options.concurrency.max(1);
        let timeout = self.load_timeout();
        let is_head = |b: &fbc::Bundle| {
            packages
                .get(&b.package)
                .is_some_and(|p| p.channels.iter().any(|c| c.csv_name == b.name))
        };
        let wanted: Vec<usize> = assembly
            .bundles
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                packages.contains_key(&b.bundle.package)
                    && !b.has_objects
                    && !b.bundle.image.is_empty()
                    && (options.manifests == Manifests::Fetch || is_head(&b.bundle))
            })
            .map(|(i, _)| i)
            .collect();
        let requests: Vec<(usize, api::GetBundleRequest)> = wanted
            .into_iter()
            .map(|i| {
                let b = &assembly.bundles[i];
                let request = api::GetBundleRequest {
                    pkg_name: b.bundle.package.clone(),
                    channel_name: b.channel.clone(),
                    csv_name: b.bundle.name.clone(),
                };
                (i, request)
            })
            .collect();
        // Each answer is counted against the budget as it comes, not all at the end.
        let mut fetched = futures::stream::iter(requests)
            .map(|(i, request)| async move {
                let rpc = format!(
                    "GetBundle({}/{}/{})",
                    request.pkg_name, request.channel_name, request.csv_name
                );
                let answer = self
                    .unary(&rpc, timeout, self.grpc().get_bundle(request))
                    .await;
                (i, rpc, answer)
            })
            .buffer_unordered(concurrency);
        while let Some((i, rpc, answer)) = fetched.next().await {
            let full = answer?;
            if let Err(others) = reservation.grow(full.encoded_len()) {
                return Err(self.over_budget(&rpc, others, reservation));
            }
            let pending = &mut assembly.bundles[i];
            let mut bundle =
                bundle_from_api(&full).map_err(|reason| ClientError::InvalidBundle {
                    address: self.address.clone(),
                    rpc,
                    package: pending.bundle.package.clone(),
                    bundle: pending.bundle.name.clone(),
                    reason: Box::new(reason),
                })?;
            drop(full);
            if let Some(condense) = options.condense_fetched {
                condense(&mut bundle);
            }
            pending.has_objects = bundle
                .properties
                .iter()
                .any(|p| p.type_ == PROP_BUNDLE_OBJECT);
            pending.bundle = bundle;
        }
        Ok(())
    }
}

impl RegistryClient {
    fn over_budget(&self, rpc: &str, total: usize, reservation: &Reservation) -> ClientError {
        ClientError::LimitExceeded {
            address: self.address.clone(),
            rpc: rpc.to_string(),
            what: format!(
                "catalog loads in flight in this process would pass {} (others hold {}, \
                 this one {}); the load is retried later",
                mib(MAX_LOADING_BYTES),
                mib_rounded(total.saturating_sub(reservation.0)),
                mib_rounded(reservation.0)
            ),
        }
    }
}

/// Which limit of one `ListBundles` read `entries` messages of `bytes` have passed.
fn list_limit_passed(entries: usize, bytes: usize) -> Option<String> {
    if entries > MAX_LIST_ENTRIES {
        Some(format!("more than {MAX_LIST_ENTRIES} channel entries"))
    } else if bytes > MAX_LIST_BYTES {
        Some(format!("more than {} of bundles", mib(MAX_LIST_BYTES)))
    } else {
        None
    }
}

fn mib_rounded(bytes: usize) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_limits_pass_just_over_not_at() {
        assert_eq!(list_limit_passed(MAX_LIST_ENTRIES, MAX_LIST_BYTES), None);
        let over = list_limit_passed(MAX_LIST_ENTRIES + 1, 0).unwrap();
        assert_eq!(over, "more than 50000 channel entries");
        let over = list_limit_passed(1, MAX_LIST_BYTES + 1).unwrap();
        assert_eq!(over, "more than 256 MiB of bundles");
    }

    #[test]
    fn the_load_budget_refuses_past_its_limit_and_is_given_back() {
        let mut refused = Reservation::default();
        assert!(refused.grow(MAX_LOADING_BYTES + 1).is_err());
        assert_eq!(refused.0, 0);
        let before = LOADING_BYTES.load(Ordering::Acquire);
        let mut held = Reservation::default();
        held.grow(1 << 20).unwrap();
        assert!(LOADING_BYTES.load(Ordering::Acquire) >= 1 << 20);
        drop(held);
        // Other tests' loads may run meanwhile; this one's share is gone.
        assert!(LOADING_BYTES.load(Ordering::Acquire) < before + (1 << 20));
    }
}
