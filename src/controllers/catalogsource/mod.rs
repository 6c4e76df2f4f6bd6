//! The CatalogSource controller: reads each catalog's content (from a registry gRPC server
//! at `spec.address`, or from an upstream-format ConfigMap) into a snapshot the resolver
//! uses, and keeps `status.connectionState` and the conditions truthful.
//!
//! Every round health-checks the source; content is re-read only when it may have changed
//! (first sight, a new address or ConfigMap version, a reconnect, the `registryPoll`
//! interval), and a load that finds the same digest changes nothing. Status is written only
//! when it differs, so a steady state costs no etcd writes (upstream writes on every poll).

mod config_map;
mod context;
mod grpc;
mod image;
mod load;
pub mod status;
pub mod template;

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::kit::guard::Panicked;
use super::kit::{self, KitState, Reconciler, apply_status};
use crate::api::{CatalogSource, CatalogSourceReason, CatalogSourceStatus, SourceType};
use crate::controllers::kit::Shutdown;
use crate::resolver::input::CatalogRef;
use context::{CatalogSourceContext, CatalogSourceState, Error};
use status::{Observation, announcements, desired_status, owned_fields, panicked_status};

pub const CONTROLLER: &str = "catalogsource";

/// Lets the cluster tests prove that a panic in a reconcile is contained: debug builds only,
/// and only with `OLM_FAULT_INJECTION=1` in the process environment.
mod fault_injection {
    use kube::ResourceExt;

    use crate::api::CatalogSource;

    pub const ANNOTATION: &str = "olm.rs/fault-injection";

    pub fn maybe_panic(source: &CatalogSource) {
        if cfg!(debug_assertions)
            && std::env::var_os("OLM_FAULT_INJECTION").is_some_and(|v| v == "1")
            && source.annotations().get(ANNOTATION).map(String::as_str) == Some("panic")
        {
            panic!("fault injected by the {ANNOTATION} annotation");
        }
    }
}
/// Server-side apply field manager of this controller's status writes.
pub const FIELD_MANAGER: &str = "olm-catalogsource";

impl Reconciler for CatalogSourceContext {
    /// As upstream says of a spec it cannot use.
    fn invalid_status(message: &str) -> Option<serde_json::Value> {
        Some(serde_json::json!({
            "reason": CatalogSourceReason::SpecInvalidError.as_str(),
            "message": message,
        }))
    }

    type Object = CatalogSource;
    type Key = CatalogRef;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!();

    fn key(meta: &ObjectMeta) -> CatalogRef {
        CatalogRef::new(
            meta.name.clone().unwrap_or_default(),
            meta.namespace.clone().unwrap_or_default(),
        )
    }

    async fn sync(&self, source: &CatalogSource) -> Result<Action, Error> {
        sync(source, &Self::key(&source.metadata), self).await
    }

    /// The object says so too (leader only), until a good round removes it.
    async fn after_panic(&self, source: &CatalogSource, panic: &Panicked) -> Result<(), Error> {
        if self.shared.is_leader() {
            let message = format!("reconcile {panic}; other CatalogSources are unaffected");
            let status = panicked_status(
                source.status.as_ref(),
                message,
                source.metadata.generation,
                kit::now(),
            );
            write_status(source, &status, self).await?;
        }
        Ok(())
    }
}

/// One round: gather (health check, content load), decide (pure), apply (status, Events).
async fn sync(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    ctx: &CatalogSourceContext,
) -> Result<Action, Error> {
    let now = kit::now();
    fault_injection::maybe_panic(source);
    if ctx.state.claim(source_ref, source.metadata.uid.as_deref()) {
        // Deleted and created again under this name: nothing of the old one is its content.
        ctx.shared.snapshots.retain(|r| r != source_ref);
        load::forget_metrics(source_ref, &ctx.shared);
    }
    let round = match &source.spec.source_type {
        SourceType::Grpc => grpc::sync_grpc(source, source_ref, ctx).await,
        SourceType::Unknown(other) => load::Round {
            connection: status::Connection::InvalidSpec {
                message: format!("unknown sourcetype: {other}"),
            },
            config_map: None,
            spec_problem: None,
            requeue_after: None,
        },
        SourceType::Configmap | SourceType::Internal => {
            config_map::sync_config_map(source, source_ref, ctx, now).await?
        }
    };
    let template = match source.annotations().get(template::ANNOTATION) {
        None => None,
        Some(text) => {
            let resolution = template::resolve(text, kube_version(ctx).await);
            if let template::Resolution::Image(image) = &resolution
                && source.spec.image.as_deref() != Some(image.as_str())
                && ctx.shared.is_leader()
            {
                set_image(source, source_ref, image, ctx).await?;
                // The new generation brings the next round, which reads the new image.
                return Ok(Action::await_change());
            }
            Some(resolution)
        }
    };
    ctx.shared
        .snapshots
        .set_priority(source_ref, source.spec.priority.unwrap_or(0));

    let observed = Observation {
        connection: round.connection,
        content: load::content_of(source_ref, ctx),
        config_map: round.config_map,
        spec_problem: round.spec_problem,
        generation: source.metadata.generation,
        now,
        image_pulled_at: ctx
            .shared
            .snapshots
            .get(source_ref)
            .filter(|s| crate::oci::catalog::parse_origin(&s.origin).is_some())
            .map(|s| s.loaded_at),
        registry_service: (!matches!(source.spec.source_type, SourceType::Unknown(_))).then(|| {
            let address = match source.spec.source_type {
                SourceType::Grpc => source.spec.address.as_deref(),
                _ => None,
            };
            status::registry_service(&source_ref.name, &source_ref.namespace, address)
        }),
        template,
    };
    let mut desired = desired_status(source.status.as_ref(), &observed);
    let connect_wait = status::connect_after_update(&mut desired, now);
    let current = source.status.as_ref().map(owned_fields);
    // Standbys load catalogs (their snapshots serve reads) but never write.
    if current.as_ref() != Some(&owned_fields(&desired)) && ctx.shared.is_leader() {
        write_status(source, &desired, ctx).await?;
        let regarding = source.object_ref(&());
        for announcement in announcements(source.status.as_ref(), &desired) {
            let type_ = if announcement.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            ctx.shared.event(
                &regarding,
                type_,
                &announcement.reason,
                "Sync",
                announcement.note,
            );
        }
    }
    Ok([round.requeue_after, connect_wait]
        .into_iter()
        .flatten()
        .min()
        .map_or_else(Action::await_change, Action::requeue))
}

/// The API server's version (major, minor, patch), read once; None while it cannot be read.
async fn kube_version(ctx: &CatalogSourceContext) -> Option<(u64, u64, u64)> {
    ctx.kube_version
        .get_or_try_init(|| async {
            let info = ctx.shared.client.apiserver_version().await.map_err(|e| {
                tracing::warn!(error = %e, "reading the API server's version for olm.catalogImageTemplate");
            })?;
            kit::parse_kube_version(&info.git_version).ok_or_else(|| {
                tracing::warn!(version = %info.git_version, "the API server's version is no semver");
            })
        })
        .await
        .ok()
        .copied()
}

/// Sets `spec.image` to what the catalog image template gives, as upstream does.
async fn set_image(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    image: &str,
    ctx: &CatalogSourceContext,
) -> Result<(), Error> {
    let api: Api<CatalogSource> = Api::namespaced(ctx.shared.client.clone(), &source_ref.namespace);
    let patch = serde_json::json!({"spec": {"image": image}});
    let params = kube::api::PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..kube::api::PatchParams::default()
    };
    api.patch(
        &source.name_any(),
        &params,
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map_err(|error| Error::WriteImage {
        source_ref: source_ref.clone(),
        image: image.to_string(),
        error,
    })?;
    tracing::info!(catalog = %source_ref, image, "catalog image set from olm.catalogImageTemplate");
    Ok(())
}

/// Applies the fields this controller owns.
async fn write_status(
    source: &CatalogSource,
    status: &CatalogSourceStatus,
    ctx: &CatalogSourceContext,
) -> Result<(), Error> {
    apply_status(ctx, source, &owned_fields(status))
        .await
        .map_err(|error| Error::WriteStatus {
            source_ref: CatalogSourceContext::key(&source.metadata),
            error,
        })?;
    Ok(())
}

/// Runs the controller until `shutdown`; in-flight rounds finish first. It runs on every
/// replica (the snapshots serve reads everywhere); status and Events only on the leader,
/// which re-reconciles everything when it gains the Lease.
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    // A private watch: ConfigMap metadata is read by this controller alone (the catalogs
    // of `sourceType: configmap`), so it is not a shared informer.
    let config_map_api: Api<PartialObjectMeta<ConfigMap>> = kit::scoped_api(&shared);
    let (config_maps, writer) = reflector::store();
    let config_map_events = reflector::reflector(
        writer,
        watcher(config_map_api, watcher::Config::default().any_semantic()),
    )
    .default_backoff()
    .touched_objects();

    let (sources, source_changes) = shared.informers.catalog_sources.subscribe_touched();
    let controller = Controller::for_shared_stream(source_changes, sources.clone());
    let ctx = Arc::new(CatalogSourceContext {
        shared: Arc::clone(&shared),
        state: CatalogSourceState::default(),
        kube_version: tokio::sync::OnceCell::new(),
        kit: KitState::default(),
        config_maps,
    });
    let pruner = tokio::spawn(prune_deleted(sources.clone(), Arc::clone(&ctx)));
    let controller = controller
        .watches_stream(config_map_events, move |config_map| {
            sources_using(&sources, &config_map)
        })
        .reconcile_all_on(shared.leadership_gained());
    kit::run(controller, ctx, shutdown).await;
    pruner.abort();
}

/// The ConfigMap catalogs that read `config_map`.
fn sources_using(
    sources: &Store<DeserializeGuard<CatalogSource>>,
    config_map: &PartialObjectMeta<ConfigMap>,
) -> Vec<ObjectRef<DeserializeGuard<CatalogSource>>> {
    let name = config_map.metadata.name.as_deref();
    let namespace = config_map.metadata.namespace.as_deref();
    sources
        .state()
        .iter()
        .filter_map(|guarded| guarded.0.as_ref().ok())
        .filter(|source| {
            source.spec.config_map.as_deref().map(str::trim) == name
                && source.metadata.namespace.as_deref() == namespace
                && name.is_some()
        })
        .map(|source| {
            ObjectRef::new(&source.name_any()).within(&source.namespace().unwrap_or_default())
        })
        .collect()
}

/// Deleted CatalogSources lose their snapshot. Deletions are not reconciled (there is no
/// finalizer to remove, which keeps deletes instant), so the cache is compared instead.
async fn prune_deleted(
    store: Store<DeserializeGuard<CatalogSource>>,
    ctx: Arc<CatalogSourceContext>,
) {
    if !crate::controllers::kit::cache_ready::listed(&store).await {
        return;
    }
    let mut tick = tokio::time::interval(ctx.shared.settings.catalog_check_interval);
    loop {
        tick.tick().await;
        let live: HashSet<CatalogRef> = store
            .state()
            .iter()
            .map(|guarded| {
                let meta = match &guarded.0 {
                    Ok(source) => &source.metadata,
                    Err(invalid) => &invalid.metadata,
                };
                CatalogRef::new(
                    meta.name.clone().unwrap_or_default(),
                    meta.namespace.clone().unwrap_or_default(),
                )
            })
            .collect();
        // Snapshots of other namespaces belong to the controllers watching those.
        let scope = ctx.shared.settings.watch_namespace.as_deref();
        let in_scope = |source: &CatalogRef| scope.is_none_or(|ns| source.namespace == ns);
        for gone in ctx
            .shared
            .snapshots
            .retain(|source| !in_scope(source) || live.contains(source))
        {
            tracing::info!(catalogsource = %gone, "CatalogSource deleted; dropped its snapshot");
            load::forget_metrics(&gone, &ctx.shared);
        }
        ctx.state.retain(&live);
    }
}
