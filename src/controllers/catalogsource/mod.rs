//! The CatalogSource controller: reads each catalog's content (from a registry gRPC server
//! at `spec.address`, or from an upstream-format ConfigMap) into a snapshot the resolver
//! uses, and keeps `status.connectionState` and the conditions truthful.
//!
//! Every round health-checks the source; content is re-read only when it may have changed
//! (first sight, a new address or ConfigMap version, a reconnect, the `registryPoll`
//! interval), and a load that finds the same digest changes nothing. Status is written only
//! when it differs, so a steady state costs no etcd writes (upstream writes on every poll).

mod load;
pub mod status;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::{Context, FIELD_MANAGER};
use crate::api::{CatalogSource, CatalogSourceStatus, SourceType};
use crate::registry::client::RegistryClient;
use crate::resolver::input::CatalogRef;
use status::{Observation, announcements, desired_status};

pub const CONTROLLER: &str = "catalogsource";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CatalogSource {source_ref}: reading ConfigMap {config_map}: {error}")]
    ReadConfigMap {
        source_ref: CatalogRef,
        config_map: String,
        #[source]
        error: kube::Error,
    },
    #[error("CatalogSource {source_ref}: writing status: {error}")]
    WriteStatus {
        source_ref: CatalogRef,
        #[source]
        error: kube::Error,
    },
}

impl Error {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ReadConfigMap { .. } => "read_configmap",
            Error::WriteStatus { .. } => "write_status",
        }
    }
}

/// What the controller remembers per CatalogSource between rounds (in memory only).
#[derive(Default)]
pub struct CatalogSourceState {
    sources: Mutex<HashMap<CatalogRef, SourceState>>,
}

#[derive(Default)]
struct SourceState {
    client: Option<Arc<RegistryClient>>,
    last_load: Option<LoadRecord>,
}

/// The last attempt to read a catalog's content.
#[derive(Clone, Debug)]
pub(crate) struct LoadRecord {
    /// What was read: the address, or the ConfigMap name and resourceVersion.
    pub origin: String,
    pub at: Instant,
    /// `(reason, message)` when it failed; the snapshot (if any) is then older.
    pub failure: Option<(&'static str, String)>,
}

impl CatalogSourceState {
    fn with<T>(&self, source: &CatalogRef, f: impl FnOnce(&mut SourceState) -> T) -> T {
        let mut map = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        f(map.entry(source.clone()).or_default())
    }

    /// The client for `address`, reusing its connection while the address stays the same.
    fn client(
        &self,
        source: &CatalogRef,
        address: &str,
        timeout: Duration,
    ) -> Result<Arc<RegistryClient>, String> {
        self.with(source, |state| {
            if let Some(client) = &state.client
                && client.address() == address
            {
                return Ok(Arc::clone(client));
            }
            let client =
                Arc::new(RegistryClient::new(address, timeout).map_err(|e| e.to_string())?);
            state.client = Some(Arc::clone(&client));
            Ok(client)
        })
    }

    pub(crate) fn last_load(&self, source: &CatalogRef) -> Option<LoadRecord> {
        self.with(source, |state| state.last_load.clone())
    }

    pub(crate) fn record_load(&self, source: &CatalogRef, record: LoadRecord) {
        self.with(source, |state| state.last_load = Some(record));
    }

    fn retain(&self, live: &HashSet<CatalogRef>) {
        let mut map = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|source, _| live.contains(source));
    }
}

pub async fn reconcile(
    guarded: Arc<DeserializeGuard<CatalogSource>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    let source = match &guarded.0 {
        Ok(source) => source,
        Err(invalid) => {
            report_invalid(invalid, &ctx).await;
            return Ok(Action::await_change());
        }
    };
    let source_ref = CatalogRef::new(source.name_any(), source.namespace().unwrap_or_default());
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH);

    let round = match source.spec.source_type {
        SourceType::Grpc => load::sync_grpc(source, &source_ref, &ctx).await,
        SourceType::Configmap | SourceType::Internal => {
            load::sync_config_map(source, &source_ref, &ctx, now).await?
        }
    };
    ctx.snapshots
        .set_priority(&source_ref, source.spec.priority.unwrap_or(0));

    let observed = Observation {
        connection: round.connection,
        content: load::content_of(&source_ref, &ctx),
        config_map: round.config_map,
        generation: source.metadata.generation,
        now,
    };
    let desired = desired_status(source.status.as_ref(), &observed);
    if source.status.as_ref() != Some(&desired) {
        write_status(source, &source_ref, &desired, &ctx).await?;
        let regarding = source.object_ref(&());
        for announcement in announcements(source.status.as_ref(), &desired) {
            let type_ = if announcement.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            ctx.event(
                &regarding,
                type_,
                &announcement.reason,
                "Sync",
                truncate(announcement.note),
            )
            .await;
        }
    }
    Ok(Action::requeue(round.requeue_after))
}

pub fn error_policy(
    _source: Arc<DeserializeGuard<CatalogSource>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    tracing::warn!(%error, "CatalogSource reconcile failed");
    ctx.metrics
        .reconcile_failed(CONTROLLER, error.metric_label());
    Action::requeue(Duration::from_secs(5))
}

async fn write_status(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    status: &CatalogSourceStatus,
    ctx: &Context,
) -> Result<(), Error> {
    let api: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &source_ref.namespace);
    let patch = json!({
        "apiVersion": CatalogSource::api_version(&()),
        "kind": CatalogSource::kind(&()),
        "status": status,
    });
    api.patch_status(
        &source.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|error| Error::WriteStatus {
        source_ref: source_ref.clone(),
        error,
    })?;
    ctx.metrics.status_written(CONTROLLER);
    Ok(())
}

/// An object our types cannot read: say why on the object, and wait for it to change.
/// No status is written (a write would trigger another round of the same failure).
async fn report_invalid(invalid: &InvalidObject, ctx: &Context) {
    let name = invalid.metadata.name.clone().unwrap_or_default();
    let namespace = invalid.metadata.namespace.clone().unwrap_or_default();
    tracing::warn!(%namespace, %name, error = %invalid.error, "cannot read CatalogSource; skipping it");
    let regarding = ObjectReference {
        api_version: Some(CatalogSource::api_version(&()).into_owned()),
        kind: Some(CatalogSource::kind(&()).into_owned()),
        name: Some(name),
        namespace: Some(namespace),
        uid: invalid.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    ctx.event(
        &regarding,
        EventType::Warning,
        "InvalidObject",
        "Read",
        truncate(format!("cannot read this CatalogSource: {}", invalid.error)),
    )
    .await;
}

/// Event notes are capped at 1 kB by the API server.
fn truncate(mut note: String) -> String {
    const LIMIT: usize = 1000;
    if note.len() > LIMIT {
        let mut end = LIMIT;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}

/// Runs the controller until `shutdown` resolves; in-flight rounds finish first.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<DeserializeGuard<CatalogSource>> = match &namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let controller = Controller::new(api, watcher::Config::default().any_semantic())
        .graceful_shutdown_on(shutdown);
    let pruner = tokio::spawn(prune_deleted(controller.store(), Arc::clone(&ctx)));
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(catalogsource = %object, "reconciled"),
                // Watch errors are retried with backoff by the controller; log them only.
                Err(error) => tracing::warn!(%error, "CatalogSource controller"),
            }
        })
        .await;
    pruner.abort();
}

/// Deleted CatalogSources lose their snapshot. Deletions are not reconciled (there is no
/// finalizer to remove, which keeps deletes instant), so the cache is compared instead.
async fn prune_deleted(store: Store<DeserializeGuard<CatalogSource>>, ctx: Arc<Context>) {
    if store.wait_until_ready().await.is_err() {
        return;
    }
    let mut tick = tokio::time::interval(ctx.settings.catalog_check_interval);
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
        for gone in ctx.snapshots.retain(|source| live.contains(source)) {
            tracing::info!(catalogsource = %gone, "CatalogSource deleted; dropped its snapshot");
            load::forget_metrics(&gone, &ctx);
        }
        ctx.catalog_sources.retain(&live);
    }
}
