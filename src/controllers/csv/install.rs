//! The install: a CSV's RBAC spread, Deployments and serving objects applied, and what it
//! made before and no longer lists swept.

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::api::ClusterServiceVersion;
use crate::cluster::ownership::owner_selector;

use super::context::{FIELD_MANAGER, Round};
use super::install_error::InstallError;
use super::{owned, rbac, serving, webhooks};

pub(super) fn resource_of(kind: &str) -> ApiResource {
    match kind {
        "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
        "Role" => ApiResource::erase::<Role>(&()),
        "RoleBinding" => ApiResource::erase::<RoleBinding>(&()),
        "ClusterRole" => ApiResource::erase::<ClusterRole>(&()),
        "ClusterRoleBinding" => ApiResource::erase::<ClusterRoleBinding>(&()),
        "ClusterServiceVersion" => ApiResource::erase::<ClusterServiceVersion>(&()),
        "OperatorCondition" => ApiResource::erase::<crate::api::OperatorCondition>(&()),
        "APIService" => ApiResource::erase::<
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        >(&()),
        "Secret" => ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
        "Service" => ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
        "CustomResourceDefinition" => ApiResource::erase::<CustomResourceDefinition>(&()),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => ApiResource::from_gvk(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        ),
        _ => ApiResource::erase::<Deployment>(&()),
    }
}

pub(super) fn dynamic_api(
    client: kube::Client,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource = resource_of(kind);
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    }
}

pub(super) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Applies the RBAC, then the Deployments, then (with `sweep`) deletes what this CSV made
/// before and no longer lists. A scoped group's install is written as its account, every
/// object of it (upstream's attenuated install strategy): the group's admin bounds what its
/// operators get.
pub(super) async fn install(
    round: &Round<'_>,
    rbac: &[owned::Planned],
    deployments: &[(String, Value)],
    serving: &serving::ServingPlan,
    scoped_account: Option<&str>,
    sweep: bool,
) -> Result<(), InstallError> {
    let client = match scoped_account {
        Some(account) => {
            let scoped = &round.ctx.scoped;
            scoped.acting_as(&round.namespace, account).await?
        }
        None => round.client(),
    };
    apply_all(round, &client, rbac, deployments, serving).await?;
    if !sweep {
        return Ok(());
    }
    let mut desired: HashSet<Key> = rbac
        .iter()
        .chain(&serving.before)
        .chain(&serving.after)
        .map(|p| (p.kind.into(), p.namespace.clone(), p.name.clone()))
        .collect();
    desired.extend(deployments.iter().map(|(name, _)| {
        let namespace = Some(round.namespace.clone());
        ("Deployment".to_string(), namespace, name.clone())
    }));
    sweep_unlisted(round, &desired).await
}

/// An object by kind, namespace and name.
type Key = (String, Option<String>, String);

/// Each group's requests go out together: they do not depend on each other (a binding may
/// name a Role that is still being written). Objects OLM made from the CSV are the CSV's:
/// fields are taken over from anyone else.
async fn apply_all(
    round: &Round<'_>,
    client: &kube::Client,
    rbac: &[owned::Planned],
    deployments: &[(String, Value)],
    serving: &serving::ServingPlan,
) -> Result<(), InstallError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // The serving certificate, its Service and RBAC before the pods that mount it.
    apply_planned(client, &params, &serving.before).await?;
    apply_planned(client, &params, rbac).await?;
    futures::future::try_join_all(deployments.iter().map(|(name, body)| {
        let api = dynamic_api(client.clone(), "Deployment", Some(&round.namespace));
        let params = &params;
        async move {
            let written = api.patch(name, params, &Patch::Apply(body)).await;
            written.map_err(|e| InstallError::write("Deployment", name, &e))
        }
    }))
    .await?;
    apply_planned(client, &params, &serving.after).await?;
    futures::future::try_join_all(serving.conversions.iter().map(|(crd, conversion)| {
        let api = dynamic_api(client.clone(), "CustomResourceDefinition", None);
        let params = &params;
        let body = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": crd },
            "spec": { "conversion": conversion },
        });
        async move {
            let written = api.patch(crd, params, &Patch::Apply(&body)).await;
            written.map_err(|e| InstallError::Conversion {
                crd: crd.clone(),
                message: api_message(&e),
            })
        }
    }))
    .await?;
    Ok(())
}

/// Deletes the garbage: what carries this CSV's owner labels, was written by this
/// controller, and is not `desired`. What this CSV made is OLM's to find and remove,
/// whoever it was written as.
async fn sweep_unlisted(round: &Round<'_>, desired: &HashSet<Key>) -> Result<(), InstallError> {
    let selector = owner_selector("ClusterServiceVersion", &round.name, &round.namespace);
    let client = round.client();
    let listed = futures::future::try_join_all(swept_kinds(round).into_iter().map(|kind| {
        let scope =
            matches!(kind, "Deployment" | "Service" | "Secret").then_some(round.namespace.as_str());
        let api = dynamic_api(client.clone(), kind, scope);
        let params = ListParams::default().labels(&selector);
        async move {
            let list = api.list_metadata(&params).await;
            let list = list.map_err(|e| InstallError::List {
                kind,
                message: api_message(&e),
            });
            list.map(|list| (kind, list.items))
        }
    }))
    .await?;
    for (kind, items) in listed {
        for object in items {
            let key = (
                kind.to_string(),
                object.metadata.namespace.clone(),
                object.name_any(),
            );
            // Only what this controller wrote: a user's object that carries the CSV's owner
            // labels (upstream's tests label their own Roles so) is not ours to delete.
            let managers = object.metadata.managed_fields.iter().flatten();
            let written_by_us = managers
                .into_iter()
                .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER));
            if desired.contains(&key) || !written_by_us || adopted_grant(&object.metadata) {
                continue;
            }
            delete(round, &client, kind, &object.metadata).await?;
        }
    }
    Ok(())
}

/// The kinds a CSV's objects are of: Services, Secrets, webhook configurations and
/// APIServices only for CSVs that serve webhooks or API services (now or before an update).
fn swept_kinds(round: &Round<'_>) -> Vec<&'static str> {
    let mut kinds = vec![
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ];
    let served_before = round
        .csv
        .status
        .as_ref()
        .is_some_and(|s| s.certs_last_updated.is_some());
    if webhooks::serves_anything(round.csv) || served_before {
        kinds.extend([
            "Service",
            "Secret",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "APIService",
        ]);
    }
    kinds
}

async fn delete(
    round: &Round<'_>,
    client: &kube::Client,
    kind: &'static str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<(), InstallError> {
    let name = meta.name.clone().unwrap_or_default();
    let api = dynamic_api(client.clone(), kind, meta.namespace.as_deref());
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(kind, %name, csv = %round.name, "deleted what the CSV no longer lists");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(InstallError::Delete {
            kind,
            name,
            message: api_message(&e),
        }),
    }
}

/// RBAC of a CSV's permissions that this controller made when it still made it (before
/// plans did): kept as it stands, the account's grant, until the CSV goes. Its copies and
/// lifts are this controller's to remove.
pub(super) fn adopted_grant(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    let labels = meta.labels.as_ref();
    let has = |key: &str| labels.is_some_and(|l| l.contains_key(key));
    has(crate::cluster::ownership::PERMISSIONS_HASH_LABEL)
        && !has(crate::api::COPIED_FROM_LABEL)
        && !has(rbac::LIFTED_LABEL)
}

/// Applies `planned` all at once: they do not depend on each other (a binding may name a
/// Role that is still being written). `Err` carries the API server's message.
pub(super) async fn apply_planned(
    client: &kube::Client,
    params: &PatchParams,
    planned: &[owned::Planned],
) -> Result<(), InstallError> {
    futures::future::try_join_all(planned.iter().map(|planned| {
        let api = dynamic_api(client.clone(), planned.kind, planned.namespace.as_deref());
        async move {
            api.patch(&planned.name, params, &Patch::Apply(&planned.body))
                .await
                .map_err(|e| InstallError::write(planned.kind, &planned.name, &e))
        }
    }))
    .await
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rbac_made_before_plans_made_it_is_kept_and_only_copies_and_lifts_are_swept() {
        let meta =
            |labels: &[(&str, &str)]| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            };
        let hash = (crate::cluster::ownership::PERMISSIONS_HASH_LABEL, "h");
        // The account's grant, made by this controller before plans made RBAC: adopted.
        assert!(adopted_grant(&meta(&[hash])));
        // Its copies and lifts, and the serving certificate's RBAC (no hash): this
        // controller's to remove when no longer planned.
        assert!(!adopted_grant(&meta(&[
            hash,
            (crate::api::COPIED_FROM_LABEL, "op")
        ])));
        assert!(!adopted_grant(&meta(&[hash, (rbac::LIFTED_LABEL, "true")])));
        assert!(!adopted_grant(&meta(&[])));
    }
}
