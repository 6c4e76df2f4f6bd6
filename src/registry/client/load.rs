//! A whole-catalog load: `ListBundles`, then `GetPackage` per package and `GetBundle` per
//! bundle without manifests, each with bounded concurrency, as upstream's registry source
//! reads a catalog.

use std::collections::BTreeMap;

use futures::StreamExt;

use super::assembly::Assembly;
use super::{ClientError, LoadOptions, Manifests, RegistryClient, api, bundle_from_api};
use crate::catalog::fbc::{self, DeclarativeConfig, PROP_BUNDLE_OBJECT};

impl RegistryClient {
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
        if options.manifests != Manifests::AsListed {
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
}
