//! The writes of a round, each only where `decide` found the cluster out of date: the
//! group's status (with an Event when its targets change), its provided-APIs annotation,
//! the members' annotations, the namespaces' group labels and the ClusterRoles.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::{Error, FIELD_MANAGER, OperatorGroupContext, key, kube_error};
use super::status::{self, Plan};
use crate::api::{ClusterServiceVersion, OperatorGroup, OperatorGroupReason};
use crate::cluster::ownership::PERMISSIONS_HASH_LABEL;
use crate::controllers::kit::apply_status;
use crate::controllers::plan::provided::cluster_role_body;

/// Writes what `decide` found out of date: status (and its Event), the group's annotation,
/// the members' annotations, the namespaces' labels, the ClusterRoles; true when a role was
/// left for a later round (see [`apply_cluster_roles`]).
pub(super) async fn apply(
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

/// How the Event of a change of targets names them.
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
        let body = cluster_role_body(role);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_described_as_the_event_names_them() {
        assert_eq!(describe_targets(&[String::new()]), "all namespaces");
        assert_eq!(describe_targets(&[]), "none");
        assert_eq!(describe_targets(&["a".into(), "b".into()]), "a, b");
    }
}
