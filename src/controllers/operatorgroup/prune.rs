//! Clean-up after deleted groups, which are never reconciled again (a group has no
//! finalizer, so a deletion while OLM was down is caught here too): their ClusterRoles
//! (cluster-scoped, so not owned by the namespaced group but labelled with it) and their
//! namespace labels.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::context::OperatorGroupContext;
use crate::cluster::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

/// Deletes the ClusterRoles of groups that no longer exist (a group has no finalizer, so a
/// deletion while OLM was down is caught here too). Only groups in the watched scope count.
pub(super) async fn prune_group_roles(ctx: Arc<OperatorGroupContext>) {
    if !crate::controllers::kit::cache_ready::listed(&ctx.groups).await
        || !crate::controllers::kit::cache_ready::listed(&ctx.cluster_roles).await
    {
        return;
    }
    let scope = ctx.shared.settings.watch_namespace.clone();
    let api: Api<ClusterRole> = Api::all(ctx.shared.client.clone());
    let mut tick = tokio::time::interval(Duration::from_secs(15));
    loop {
        tick.tick().await;
        let live = crate::controllers::kit::cache_ready::live_keys(&ctx.groups);
        if scope.is_none() {
            unlabel_deleted_groups(&ctx).await;
        }
        for role in ctx.cluster_roles.state() {
            let labels: &BTreeMap<String, String> = role.labels();
            if labels.get(OWNER_KIND_LABEL).map(String::as_str) != Some("OperatorGroup") {
                continue;
            }
            let owner = (
                labels
                    .get(OWNER_NAMESPACE_LABEL)
                    .cloned()
                    .unwrap_or_default(),
                labels.get(OWNER_LABEL).cloned().unwrap_or_default(),
            );
            if scope.as_ref().is_some_and(|ns| *ns != owner.0) || live.contains(&owner) {
                continue;
            }
            let name = role.name_any();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(clusterrole = %name, group = ?owner, "deleted the ClusterRole of a deleted OperatorGroup");
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    tracing::warn!(%error, clusterrole = %name, "could not delete ClusterRole");
                }
            }
        }
    }
}

/// Removes the `olm.operatorgroup.uid/<uid>` labels of groups that no longer exist, as
/// upstream's namespace sync does (a deleted group is never reconciled again). Cluster-wide
/// runs only: a scoped one sees one namespace's groups.
async fn unlabel_deleted_groups(ctx: &OperatorGroupContext) {
    let prefix = crate::cluster::ownership::operator_group_namespace_label("");
    let live: std::collections::HashSet<String> = ctx
        .groups
        .state()
        .iter()
        .filter_map(|g| match &g.0 {
            Ok(group) => group.metadata.uid.clone(),
            Err(invalid) => invalid.metadata.uid.clone(),
        })
        .collect();
    let api: Api<Namespace> = Api::all(ctx.shared.client.clone());
    for namespace in ctx.namespaces.state() {
        let stale: Vec<&String> = namespace
            .labels()
            .keys()
            .filter(|k| {
                k.strip_prefix(&prefix)
                    .is_some_and(|uid| !live.contains(uid))
            })
            .collect();
        if stale.is_empty() {
            continue;
        }
        let labels: serde_json::Map<String, serde_json::Value> = stale
            .iter()
            .map(|k| ((*k).clone(), serde_json::Value::Null))
            .collect();
        let patch = json!({"metadata": {"labels": labels}});
        let name = namespace.name_any();
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(namespace = %name, labels = ?stale, "removed the labels of deleted OperatorGroups");
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                tracing::warn!(%error, namespace = %name, "could not remove the labels of deleted OperatorGroups");
            }
        }
    }
}
