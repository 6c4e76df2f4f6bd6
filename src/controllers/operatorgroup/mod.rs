//! The OperatorGroup controller: works out which namespaces each group targets and keeps
//! `status.namespaces` current as namespaces come and go; annotates member CSVs with the
//! group (`olm.operatorGroup`, `olm.operatorNamespace`, `olm.targetNamespaces`) and the
//! group with the APIs its members provide (`olm.providedAPIs`); and maintains upstream's
//! aggregated ClusterRoles (per group, and per provided API).
//!
//! Everything it writes is compared with the cache first: a steady state costs no writes.
//! The group's ClusterRoles carry owner labels (cluster-scoped objects cannot be owned by a
//! namespaced group); a pruner deletes those whose group is gone.

pub mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::kit::own_writes::OwnWrites;
use super::kit::{self, KitState, ObjectKey, PanicError, ReconcileError, Reconciler, apply_status};
use crate::api::{ClusterServiceVersion, OperatorGroup, OperatorGroupReason};
use crate::cluster::ownership::{
    OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL, PERMISSIONS_HASH_LABEL,
};
use crate::controllers::kit::Shutdown;
use status::{Gathered, NamespaceInfo, Plan};

pub const CONTROLLER: &str = "operatorgroup";
pub const FIELD_MANAGER: &str = "olm-operatorgroup";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OperatorGroup {namespace}/{name}: {step}: {error}")]
    Kube {
        namespace: String,
        name: String,
        step: &'static str,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { step, .. } => step,
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct OperatorGroupContext {
    pub shared: Arc<Context>,
    kit: KitState<ObjectKey>,
    groups: Store<DeserializeGuard<OperatorGroup>>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    cluster_roles: Store<ClusterRole>,
    /// The resourceVersion each role write returned: a round that finds the cache behind
    /// its own write does not write the role again (many rounds run while a write is on
    /// its way back through the watch).
    role_writes: OwnWrites<String>,
}

fn key(group: &OperatorGroup) -> (String, String) {
    (group.namespace().unwrap_or_default(), group.name_any())
}

impl Reconciler for OperatorGroupContext {
    type Object = OperatorGroup;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!(object_key);

    async fn sync(&self, group: &OperatorGroup) -> Result<Action, Error> {
        sync(group, self).await
    }
}

async fn sync(group: &OperatorGroup, ctx: &OperatorGroupContext) -> Result<Action, Error> {
    // Until every cache is listed, an absent namespace or CSV is only not yet seen.
    let ready = crate::controllers::kit::cache_ready::listed(&ctx.groups).await
        && crate::controllers::kit::cache_ready::listed(&ctx.namespaces).await
        && crate::controllers::kit::cache_ready::listed(&ctx.csvs).await
        && crate::controllers::kit::cache_ready::listed(&ctx.cluster_roles).await;
    if !ready {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let observed = gather(group, ctx).await?;
    let plan = status::decide(group, &observed, kit::now());
    let roles_in_flight = apply(group, &plan, ctx).await?;
    // A named ServiceAccount that does not exist yet: look again later (no SA watch).
    Ok(if roles_in_flight {
        // Roles skipped while our own write of them is on its way: look again once
        // the cache has it.
        Action::requeue(Duration::from_secs(2))
    } else if group.spec.service_account_name.is_some() && observed.service_account_uid.is_none() {
        Action::requeue(Duration::from_secs(30))
    } else {
        Action::await_change()
    })
}

fn kube_error(group: &OperatorGroup, step: &'static str) -> impl FnOnce(kube::Error) -> Error {
    let (namespace, name) = key(group);
    move |error| Error::Kube {
        namespace,
        name,
        step,
        error,
    }
}

/// What a round reads: the caches, the group's ServiceAccount and the provided APIs' CRDs.
async fn gather(group: &OperatorGroup, ctx: &OperatorGroupContext) -> Result<Gathered, Error> {
    let (namespace, _) = key(group);
    let client = &ctx.shared.client;
    let namespaces: Vec<NamespaceInfo> = ctx
        .namespaces
        .state()
        .iter()
        .map(|ns| NamespaceInfo {
            name: ns.name_any(),
            labels: ns.labels().clone(),
        })
        .collect();
    let groups_in_namespace = ctx
        .groups
        .state()
        .iter()
        .filter(|g| g.meta().namespace.as_deref() == Some(namespace.as_str()))
        .count();
    let service_account_uid = match group.spec.service_account_name.as_deref() {
        Some(sa) if !sa.is_empty() => Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
            .get_opt(sa)
            .await
            .map_err(kube_error(group, "read_service_account"))?
            .and_then(|sa| sa.metadata.uid),
        _ => None,
    };
    let members: Vec<ClusterServiceVersion> = ctx
        .csvs
        .state()
        .iter()
        .filter(|csv| csv.meta().namespace.as_deref() == Some(namespace.as_str()))
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|csv| !csv.is_copy())
        .cloned()
        .collect();
    // Roles per API only once its CRD exists (they are owned by it). Its UID comes from
    // the shared CRD cache, read from the API server only when the cache has not seen it:
    // a CRD that many installs share was read once per group round, thousands of times.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let cached = ctx.shared.informers.cluster.crds.store();
    let mut crd_uids = BTreeMap::new();
    for api in status::provided_apis(&members) {
        let uid = match cached
            .get(&ObjectRef::new(&api.crd))
            .and_then(|crd| crd.metadata.uid.clone())
        {
            Some(uid) => Some(uid),
            None => crds
                .get_metadata_opt(&api.crd)
                .await
                .map_err(kube_error(group, "read_crd"))?
                .and_then(|crd| crd.metadata.uid),
        };
        if let Some(uid) = uid {
            crd_uids.insert(api.crd, uid);
        }
    }
    Ok(Gathered {
        namespaces,
        groups_in_namespace,
        service_account_uid,
        members,
        crd_uids,
    })
}

/// Writes what `decide` found out of date: status (and its Event), the group's annotation,
/// the members' annotations, the ClusterRoles.
/// Writes the plan; true when a role was left for a later round (see
/// [`apply_cluster_roles`]).
async fn apply(
    group: &OperatorGroup,
    plan: &Plan,
    ctx: &OperatorGroupContext,
) -> Result<bool, Error> {
    let (namespace, name) = key(group);
    let client = &ctx.shared.client;
    if let Some(desired) = &plan.status {
        apply_status(ctx, group, desired)
            .await
            .map_err(kube_error(group, "write_status"))?;
        if let Some(targets) = &plan.targets_changed {
            ctx.shared.event(
                &group.object_ref(&()),
                EventType::Normal,
                OperatorGroupReason::TargetNamespacesChanged.as_str(),
                "Sync",
                format!("target namespaces: {}", describe_targets(targets)),
            );
        }
    }
    if let Some(provided) = &plan.provided_apis {
        let patch = json!({
            "apiVersion": OperatorGroup::api_version(&()),
            "kind": OperatorGroup::kind(&()),
            "metadata": { "name": name, "annotations": { status::PROVIDED_APIS_ANNOTATION: provided } },
        });
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(kube_error(group, "annotate_group"))?;
    }
    let csv_api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
    for csv in &plan.annotate_members {
        let patch = json!({
            "apiVersion": ClusterServiceVersion::api_version(&()),
            "kind": ClusterServiceVersion::kind(&()),
            "metadata": { "name": csv, "annotations": plan.member_annotations },
        });
        match csv_api
            .patch(
                csv,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
        {
            Ok(_) => {}
            // Deleted since the cache saw it.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(kube_error(group, "annotate_csv")(error)),
        }
    }
    label_namespaces(group, &plan.namespace_labels, ctx).await?;
    apply_cluster_roles(&plan.cluster_roles, ctx)
        .await
        .map_err(kube_error(group, "apply_cluster_role"))
}

/// Labels (or unlabels) namespaces with the group's `olm.operatorgroup.uid/<uid>`.
async fn label_namespaces(
    group: &OperatorGroup,
    changes: &[(String, bool)],
    ctx: &OperatorGroupContext,
) -> Result<(), Error> {
    let Some(label) = status::namespace_label(group) else {
        return Ok(());
    };
    let namespaces: Api<Namespace> = Api::all(ctx.shared.client.clone());
    for (namespace, add) in changes {
        let value = if *add {
            json!("")
        } else {
            serde_json::Value::Null
        };
        let patch = json!({"metadata": {"labels": {label.as_str(): value}}});
        match namespaces
            .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // Deleted since the cache saw it.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(kube_error(group, "label_namespace")(error)),
        }
    }
    Ok(())
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

fn describe_targets(targets: &[String]) -> String {
    if targets.len() == 1 && targets[0].is_empty() {
        "all namespaces".into()
    } else if targets.is_empty() {
        "none".into()
    } else {
        targets.join(", ")
    }
}

/// Applies the roles whose hash label differs from the cached copy (or that are missing),
/// except those whose last write by this process the cache has not seen yet; true when
/// such a role differed (to be looked at again).
async fn apply_cluster_roles(
    roles: &[ClusterRole],
    ctx: &OperatorGroupContext,
) -> Result<bool, kube::Error> {
    let mut in_flight = false;
    let api: Api<ClusterRole> = Api::all(ctx.shared.client.clone());
    for role in roles {
        let name = role.metadata.name.clone().unwrap_or_default();
        let wanted = role
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PERMISSIONS_HASH_LABEL));
        let cached = ctx.cluster_roles.get(&ObjectRef::new(&name));
        let cached_hash = cached
            .as_ref()
            .and_then(|r| r.labels().get(PERMISSIONS_HASH_LABEL).cloned());
        if cached_hash.as_ref() == wanted {
            continue;
        }
        let behind = match &cached {
            Some(role) => ctx
                .role_writes
                .is_behind(&name, role.metadata.resource_version.as_deref()),
            None => ctx.role_writes.in_flight(&name),
        };
        if behind {
            in_flight = true;
            continue;
        }
        let mut body = serde_json::to_value(role).unwrap_or_default();
        body["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
        body["kind"] = json!("ClusterRole");
        let written = api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await?;
        ctx.role_writes
            .wrote(name, written.metadata.resource_version.as_deref());
    }
    Ok(in_flight)
}

/// Whether a change of the namespace `namespace` (created, relabelled, deleted) can change
/// what `group` holds: its own namespace, a namespace it names as a target, and any
/// namespace for a group that selects them by label or spans all of them. Waking every
/// group on every namespace change made a thousand OwnNamespace groups a million wake-ups,
/// each reading its CRDs (68,884 reconciles for 1,000 installs).
fn woken_by_namespace(group: &OperatorGroup, namespace: &str) -> bool {
    if group.metadata.namespace.as_deref() == Some(namespace) {
        return true;
    }
    match group.spec.target_namespaces.as_deref() {
        Some(targets) if !targets.is_empty() => targets.iter().any(|t| t == namespace),
        // A selector, or neither (every namespace).
        _ => true,
    }
}

/// The groups a change of `namespace` concerns (see [`woken_by_namespace`]).
fn groups_for_namespace(
    groups: &Store<DeserializeGuard<OperatorGroup>>,
    namespace: &str,
) -> Vec<ObjectRef<DeserializeGuard<OperatorGroup>>> {
    groups
        .state()
        .iter()
        .filter(|g| match &g.0 {
            Ok(group) => woken_by_namespace(group, namespace),
            // Unreadable: its own namespace only (its error is reported there).
            Err(_) => g.meta().namespace.as_deref() == Some(namespace),
        })
        .map(|g| ObjectRef::from_obj(g.as_ref()))
        .collect()
}

/// Every OperatorGroup in `namespace` (None: all of them).
fn groups_in(
    groups: &Store<DeserializeGuard<OperatorGroup>>,
    namespace: Option<&str>,
) -> Vec<ObjectRef<DeserializeGuard<OperatorGroup>>> {
    groups
        .state()
        .iter()
        .filter(|g| namespace.is_none() || g.meta().namespace.as_deref() == namespace)
        .map(|g| ObjectRef::from_obj(g.as_ref()))
        .collect()
}

pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let (namespaces, namespace_changes) = shared.informers.cluster.namespaces.subscribe_touched();
    let (csvs, csv_changes) = shared.informers.csvs.subscribe_touched();
    // The shared ClusterRole cache (the CSV controller reads it too); its changes are not
    // this controller's triggers.
    let (cluster_roles, _) = shared.informers.cluster.rbac.cluster_roles.subscribe();

    let (groups, group_changes) = shared.informers.operator_groups.subscribe_touched();
    let controller = Controller::for_shared_stream(group_changes, groups.clone());
    let ctx = Arc::new(OperatorGroupContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        groups: groups.clone(),
        namespaces,
        csvs,
        cluster_roles,
        role_writes: OwnWrites::default(),
    });
    let pruner = tokio::spawn(prune_group_roles(Arc::clone(&ctx)));
    let for_namespaces = groups.clone();
    let for_csvs = groups.clone();
    let controller = controller
        .watches_shared_stream(namespace_changes, move |namespace| {
            groups_for_namespace(&for_namespaces, &namespace.name_any())
        })
        .watches_shared_stream(csv_changes, move |csv| {
            groups_in(&for_csvs, csv.meta().namespace.as_deref())
        });
    kit::run(controller, ctx, shutdown).await;
    pruner.abort();
}

/// Deletes the ClusterRoles of groups that no longer exist (a group has no finalizer, so a
/// deletion while OLM was down is caught here too). Only groups in the watched scope count.
async fn prune_group_roles(ctx: Arc<OperatorGroupContext>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn group(namespace: &str, spec: serde_json::Value) -> OperatorGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": namespace},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_namespace_change_wakes_only_the_groups_it_concerns() {
        let own = group(
            "team-a",
            serde_json::json!({"targetNamespaces": ["team-a"]}),
        );
        assert!(woken_by_namespace(&own, "team-a"));
        assert!(
            !woken_by_namespace(&own, "team-b"),
            "another tenant's namespace"
        );
        let multi = group("ops", serde_json::json!({"targetNamespaces": ["a", "b"]}));
        assert!(woken_by_namespace(&multi, "ops"));
        assert!(woken_by_namespace(&multi, "b"));
        assert!(!woken_by_namespace(&multi, "c"));
        // By label, or every namespace: any namespace may join or leave.
        let selected = group(
            "ops",
            serde_json::json!({"selector": {"matchLabels": {"team": "x"}}}),
        );
        assert!(woken_by_namespace(&selected, "c"));
        let all = group("ops", serde_json::json!({}));
        assert!(woken_by_namespace(&all, "c"));
        let empty_targets = group("ops", serde_json::json!({"targetNamespaces": []}));
        assert!(woken_by_namespace(&empty_targets, "c"));
    }
}
