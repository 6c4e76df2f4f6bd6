//! The cleanup finalizer: added once, and on deletion what owner references cannot reach
//! is removed before it is released.

use std::collections::BTreeMap;

use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::ClusterServiceVersion;
use crate::cluster::ownership::owner_selector;
use crate::controllers::kit::ObjectKey;

use super::context::{Error, FIELD_MANAGER, FINALIZER, Round, csv_api};
use super::install::dynamic_api;
use super::{copier, webhooks};

/// The cleanup finalizer, added once (as an own write: the next round must see it).
pub(super) async fn ensure_finalizer(round: &Round<'_>) -> Result<(), Error> {
    if round.csv.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": ClusterServiceVersion::api_version(&()),
        "kind": ClusterServiceVersion::kind(&()),
        "metadata": { "name": round.name, "finalizers": [FINALIZER] },
    });
    let written = csv_api(round)
        .patch(
            &round.name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(round.fail("add_finalizer"))?;
    round.ctx.kit.own_writes.wrote(
        ObjectKey::of(&round.csv.metadata),
        written.metadata.resource_version.as_deref(),
    );
    Ok(())
}

/// A replaced CSV whose replacement succeeded goes.
pub(super) async fn delete_replaced(round: &Round<'_>) -> Result<(), Error> {
    match csv_api(round)
        .delete(&round.name, &DeleteParams::default())
        .await
    {
        Ok(_) => {
            tracing::info!(csv = %round.name, namespace = %round.namespace, "deleted the replaced ClusterServiceVersion");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(round.fail("delete_replaced")(error)),
    }
}

/// Deletes what owner references cannot: cluster-scoped RBAC, RBAC in other namespaces, and
/// the copies; then releases the finalizer. CRDs and custom resources are never touched.
pub(super) async fn cleanup(round: &Round<'_>) -> Result<(), Error> {
    if !round.csv.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let client = round.client();
    let selector = owner_selector("ClusterServiceVersion", &round.name, &round.namespace);
    for kind in [
        "ClusterRoleBinding",
        "ClusterRole",
        "RoleBinding",
        "Role",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
    ] {
        let api = dynamic_api(client.clone(), kind, None);
        let listed = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(round.fail("list_for_cleanup"))?;
        for object in listed.items {
            let api = dynamic_api(client.clone(), kind, object.metadata.namespace.as_deref());
            match api
                .delete(&object.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(error) => return Err(round.fail("cleanup")(error)),
            }
        }
    }
    // Conversion goes back to None, unless a CSV replacing this one serves it now.
    let replaced = round.ctx.csvs.state().iter().any(|g| {
        g.0.as_ref().is_ok_and(|other| {
            other.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                && other.replaces_now(round.csv)
        })
    });
    if !replaced {
        let crds = dynamic_api(client.clone(), "CustomResourceDefinition", None);
        for (crd, _) in webhooks::conversions(round.csv, &round.namespace, &BTreeMap::new()) {
            // A merge patch drops the whole webhook (other managers own parts of it too,
            // and None with any webhook field left is invalid).
            let patch = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
            if let Err(error) = crds
                .patch(&crd, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!(%error, crd, "cannot set the conversion of a deleted CSV's CRD to None");
            }
        }
    }
    for copy in round
        .ctx
        .copies
        .names
        .copies(Some((&round.namespace, &round.name)))
    {
        copier::delete_copy(client.clone(), &copy.namespace, &round.name)
            .await
            .map_err(round.fail("delete_copy"))?;
    }
    // Only ours goes; the resourceVersion makes a concurrent change a conflict, not a loss.
    let remaining: Vec<&String> = round
        .csv
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .collect();
    let patch = json!({
        "metadata": {
            "finalizers": remaining,
            "resourceVersion": round.csv.resource_version(),
        }
    });
    match csv_api(round)
        .patch(&round.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => return Err(round.fail("remove_finalizer")(error)),
    }
    tracing::info!(csv = %round.name, namespace = %round.namespace, "cleaned up after a deleted ClusterServiceVersion");
    Ok(())
}
