//! APIServices whose owning CSV is gone, deleted as upstream deletes them: an APIService
//! labelled as a CSV's (`olm.owner.kind=ClusterServiceVersion`, `olm.owner`,
//! `olm.owner.namespace`) whose CSV does not exist — its namespace gone, or the CSV never
//! there — is removed when it appears or changes. Cluster-scoped, so no owner reference
//! can do it; the CSV finalizer covers the CSV that is deleted while OLM runs.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::ObjectRef;

use super::context::CsvContext;
use crate::api::ClusterServiceVersion;
use crate::cluster::informers::Change;
use crate::cluster::ownership::{OWNER_LABEL, OWNER_NAMESPACE_LABEL};

/// Runs until the watch ends (the controller aborts it on shutdown).
pub(super) async fn prune_api_services(ctx: Arc<CsvContext>) {
    if !crate::controllers::kit::cache_ready::listed(&ctx.csvs).await {
        return;
    }
    let informer = &ctx.shared.informers.cluster.owned_api_services;
    let applied = informer.subscribe().1.filter_map(|change| async move {
        match change {
            Change::Applied(service) => Some(service),
            Change::Deleted(_) => None,
        }
    });
    let mut services = std::pin::pin!(applied);
    while let Some(service) = services.next().await {
        let labels = service.labels();
        let (Some(csv), Some(namespace)) =
            (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL))
        else {
            continue;
        };
        let in_scope = ctx
            .shared
            .settings
            .watch_namespace
            .as_ref()
            .is_none_or(|scope| scope == namespace);
        if !in_scope || !ctx.shared.is_leader() {
            continue;
        }
        if ctx
            .csvs
            .get(&ObjectRef::new(csv).within(namespace))
            .is_some()
        {
            continue;
        }
        // The cache may be behind a CSV just created: only a live 404 makes it an orphan.
        let csvs: Api<ClusterServiceVersion> =
            Api::namespaced(ctx.shared.client.clone(), namespace);
        match csvs.get_metadata_opt(csv).await {
            Ok(None) => {}
            Ok(Some(_)) => continue,
            Err(error) => {
                tracing::warn!(%error, csv, namespace, "could not check the owner of an APIService");
                continue;
            }
        }
        let name = service.name_any();
        let services: Api<APIService> = Api::all(ctx.shared.client.clone());
        match services.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(apiservice = %name, csv, namespace, "deleted an APIService whose CSV does not exist");
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(error) => {
                tracing::warn!(%error, apiservice = %name, "could not delete an orphaned APIService");
            }
        }
    }
}
