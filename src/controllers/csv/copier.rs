//! The copier: writes the copied CSVs of settled source CSVs, off the install path.
//!
//! Copies cost two writes per target namespace (the object, then its status): for an
//! AllNamespaces operator on a large cluster that is hundreds of writes. Done inside the
//! phase machine's round they delayed every other install behind them; here they run on
//! their own queue, a few sources at a time, fed by the phase machine's rounds, by changes
//! to the copies themselves and by namespaces coming and going.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{self, Action, applier};
use std::collections::HashSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::context::{CsvContext, CsvRef, Error, FIELD_MANAGER, Round};
use super::copies;
use super::gather::group_of;
use super::index::CsvIndex;
use super::names::CsvNames;
use super::phase::GroupState;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::controllers::context::Context;
use crate::controllers::kit::Shutdown;
use crate::controllers::kit::{self, KitState, ObjectKey, Reconciler};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Source CSVs whose copies are written at the same time.
const SOURCES_AT_ONCE: u16 = 4;
/// Copy writes in flight for one source.
const COPY_WRITERS: usize = 16;

/// Runs until shutdown: one round per source CSV asked for on `requests`.
pub(super) async fn run(
    ctx: Arc<CsvContext>,
    requests: impl Stream<Item = CsvRef> + Send + 'static,
    shutdown: Shutdown,
) {
    let queue = requests
        .map(Ok::<_, std::convert::Infallible>)
        .take_until(shutdown.requested());
    let csvs = ctx.csvs.clone();
    let copier = Arc::new(Copier {
        csv: ctx,
        kit: KitState::default(),
    });
    applier(
        |source, copier| Box::pin(kit::reconcile::<Copier>(source, copier)),
        kit::error_policy::<Copier>,
        copier,
        csvs,
        queue,
        controller::Config::default().concurrency(SOURCES_AT_ONCE),
    )
    .for_each(|result| async move {
        if let Err(error) = result {
            match error {
                // A source deleted before its turn: nothing to copy.
                controller::Error::ObjectNotFound(_) => {}
                error => tracing::warn!(%error, "copied CSVs"),
            }
        }
    })
    .await;
}

/// The copier's own queue state; the phase machine's context is shared.
struct Copier {
    csv: Arc<CsvContext>,
    kit: KitState<ObjectKey>,
}

impl Reconciler for Copier {
    type Object = ClusterServiceVersion;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = "csv-copies";
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    /// The phase machine reports unreadable CSVs already.
    const REPORTS_INVALID: bool = false;

    fn shared(&self) -> &Context {
        &self.csv.shared
    }

    fn kit(&self) -> &KitState<ObjectKey> {
        &self.kit
    }

    fn key(meta: &ObjectMeta) -> ObjectKey {
        ObjectKey::of(meta)
    }

    async fn sync(&self, csv: &ClusterServiceVersion) -> Result<Action, Error> {
        let ctx = &self.csv;
        if csv.metadata.deletion_timestamp.is_some() {
            // The phase machine's cleanup deletes the copies.
            return Ok(Action::await_change());
        }
        // Until every cache is listed, a namespace or copy not seen is not missing.
        if !ctx.caches_ready().await {
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        let round = Round {
            csv,
            ctx,
            namespace: csv.namespace().unwrap_or_default(),
            name: csv.name_any(),
        };
        if let (_, GroupState::Member { targets, .. }) = group_of(&round) {
            sync(&round, &targets).await?;
        }
        Ok(Action::await_change())
    }
}

/// Every CSV's name (compactly, see [`CsvNames`]), from a metadata watch of its own (copies
/// live in target namespaces, also outside a watched namespace; a namespace's own CSV of the
/// same name keeps the copy out), and the source of each copy that changed or went.
pub(super) fn watch_csv_names(
    client: kube::Client,
) -> (CsvNames, impl Stream<Item = CsvRef> + Send + 'static) {
    let names = CsvNames::new(FIELD_MANAGER);
    let writer = names.clone();
    let sources = watcher(
        Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .filter_map(move |event| {
        let source = event.ok().and_then(|event| writer.apply(event));
        futures::future::ready(
            source.map(|(namespace, name)| ObjectRef::new(&name).within(&namespace)),
        )
    });
    (names, sources)
}

/// The CSVs of AllNamespaces groups, each time a namespace comes or goes (their copies
/// follow the namespaces).
pub(super) fn all_namespaces_sources(
    namespace_changes: impl Stream<Item = Arc<PartialObjectMeta<Namespace>>> + Send + 'static,
    groups: Store<DeserializeGuard<OperatorGroup>>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    index: Arc<CsvIndex>,
) -> impl Stream<Item = CsvRef> + Send + 'static {
    namespace_changes.flat_map(move |_namespace| {
        let global: HashSet<String> = groups
            .state()
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .filter(|g| {
                g.status
                    .as_ref()
                    .is_some_and(|s| s.namespaces.len() == 1 && s.namespaces[0].is_empty())
            })
            .filter_map(|g| g.metadata.namespace.clone())
            .collect();
        let sources = global
            .iter()
            .flat_map(|ns| index.in_namespace(&csvs, Some(ns), |_| true));
        futures::stream::iter(sources.collect::<Vec<_>>())
    })
}

/// Creates or updates the copies whose source changed; deletes those no longer targeted.
/// Copies follow settled phases only (Succeeded, Failed): an install's passage through
/// Pending, InstallReady and Installing would otherwise cost two writes per namespace each.
async fn sync(round: &Round<'_>, targets: &[String]) -> Result<(), Error> {
    let ctx = round.ctx;
    let all: Vec<String> = ctx
        .namespaces
        .state()
        .iter()
        .map(|n| n.name_any())
        .collect();
    let wanted = copies::copy_namespaces(
        targets,
        &round.namespace,
        &all,
        ctx.shared.settings.disable_copied_csvs,
    );
    let phase = round.csv.status.as_ref().and_then(|s| s.phase);
    if copies::settled(phase) {
        let (object, copy_status, hash) = copies::build(round.csv, "");
        let mut stale = Vec::new();
        for namespace in &wanted {
            let existing = ctx.csv_names.get(namespace, &round.name);
            match copies::existing_copy(existing.as_ref(), &round.namespace, &hash) {
                copies::Existing::Current => {}
                copies::Existing::Stale => stale.push(namespace.clone()),
                copies::Existing::NotOurs => tracing::info!(
                    csv = %round.name,
                    source = %round.namespace,
                    %namespace,
                    "not copied: the namespace has a CSV of that name that is not this one's copy"
                ),
            }
        }
        let results: Vec<Result<(), Error>> = futures::stream::iter(stale)
            .map(|namespace: String| {
                let mut body = object.clone();
                body["metadata"]["namespace"] = json!(namespace);
                write_copy(round, namespace, body, &copy_status)
            })
            .buffer_unordered(COPY_WRITERS)
            .collect()
            .await;
        results.into_iter().collect::<Result<(), Error>>()?;
    }
    for copy in ctx.csv_names.copies(Some((&round.namespace, &round.name))) {
        if wanted.contains(&copy.namespace) {
            continue;
        }
        delete_copy(round.client(), &copy.namespace, &round.name)
            .await
            .map_err(round.fail("delete_copy"))?;
    }
    Ok(())
}

/// One copy: the object, then its status (a subresource: ignored on create).
async fn write_copy(
    round: &Round<'_>,
    namespace: String,
    body: Value,
    status: &Value,
) -> Result<(), Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let api: Api<ClusterServiceVersion> = Api::namespaced(round.client(), &namespace);
    match api.patch(&round.name, &params, &Patch::Apply(&body)).await {
        Ok(_) => {}
        // The namespace is going away.
        Err(kube::Error::Api(s))
            if s.code == 404
                || s.code == 403
                    && s.reason == "Forbidden"
                    && s.message.contains("being terminated") =>
        {
            return Ok(());
        }
        Err(error) => return Err(round.fail("apply_copy")(error)),
    }
    let copy = ClusterServiceVersion {
        metadata: kube::api::ObjectMeta {
            name: Some(round.name.clone()),
            namespace: Some(namespace),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    };
    crate::controllers::kit::status::write_status(
        &round.client(),
        &copy,
        FIELD_MANAGER,
        true,
        status,
    )
    .await
    .map_err(round.fail("apply_copy_status"))?;
    Ok(())
}

pub(super) async fn delete_copy(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(client, namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

/// Copies whose source CSV is gone (deleted while OLM was down, or never cleaned up by an
/// older OLM) are deleted. Only sources in the watched scope are judged.
pub(super) async fn prune_orphans(ctx: Arc<CsvContext>) {
    if !crate::controllers::kit::cache_ready::listed(&ctx.csvs).await
        || !ctx.csv_names.listed().await
    {
        return;
    }
    let scope = ctx.shared.settings.watch_namespace.clone();
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let live = crate::controllers::kit::cache_ready::live_keys(&ctx.csvs);
        for copy in ctx.csv_names.copies(None) {
            if scope.as_ref().is_some_and(|s| *s != copy.copied_from)
                || live.contains(&(copy.copied_from.clone(), copy.name.clone()))
            {
                continue;
            }
            if let Err(error) =
                delete_copy(ctx.shared.client.clone(), &copy.namespace, &copy.name).await
            {
                tracing::warn!(%error, copy = %copy.name, namespace = %copy.namespace, "could not delete an orphaned copied CSV");
            }
        }
    }
}
