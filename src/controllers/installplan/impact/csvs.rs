//! What changes between a CSV the plan installs and the CSV it replaces: container images
//! of its Deployments, its webhooks and its owned APIServices.

use crate::controllers::plan::serving;
use std::collections::{BTreeMap, BTreeSet};

use crate::api::{
    ApiServiceDescription, ClusterServiceVersion, ImageChange, NamedChange, WebhookAdmissionType,
    WebhookDescription,
};

/// `NamedChange.change` values.
const ADDED: &str = "Added";
const REMOVED: &str = "Removed";
const CHANGED: &str = "Changed";

/// Each container whose image differs, per Deployment name and container name; a
/// Deployment or container on one side only has no image on the other.
pub fn images(
    new: &ClusterServiceVersion,
    old: Option<&ClusterServiceVersion>,
) -> Vec<ImageChange> {
    let (after, before) = (containers(Some(new)), containers(old));
    let keys: BTreeSet<&(String, String)> = after.keys().chain(before.keys()).collect();
    keys.into_iter()
        .filter(|key| after.get(*key) != before.get(*key))
        .map(|(deployment, container)| ImageChange {
            deployment: deployment.clone(),
            container: container.clone(),
            from: before
                .get(&(deployment.clone(), container.clone()))
                .cloned(),
            to: after.get(&(deployment.clone(), container.clone())).cloned(),
        })
        .collect()
}

/// The images of a CSV's Deployments by (deployment, container), init containers too.
fn containers(csv: Option<&ClusterServiceVersion>) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for deployment in deployments(csv) {
        let pod = &deployment.spec["template"]["spec"];
        let all = ["initContainers", "containers"]
            .into_iter()
            .flat_map(|list| pod[list].as_array().into_iter().flatten());
        for container in all {
            let name = container["name"].as_str().unwrap_or_default();
            let image = container["image"].as_str().unwrap_or_default();
            out.insert(
                (deployment.name.clone(), name.to_string()),
                image.to_string(),
            );
        }
    }
    out
}

/// The Deployments of a CSV's install strategy.
pub fn deployments(
    csv: Option<&ClusterServiceVersion>,
) -> impl Iterator<Item = &crate::api::StrategyDeploymentSpec> {
    csv.and_then(|c| c.spec.install.spec.as_ref())
        .into_iter()
        .flat_map(|s| &s.deployments)
}

/// Webhooks added, removed or changed, by type and `generateName`.
pub fn webhooks(
    new: &ClusterServiceVersion,
    old: Option<&ClusterServiceVersion>,
) -> Vec<NamedChange> {
    let by_key = |csv: Option<&ClusterServiceVersion>| -> BTreeMap<(&'static str, String), WebhookDescription> {
        csv.into_iter()
            .flat_map(|c| &c.spec.webhookdefinitions)
            .map(|w| ((webhook_kind(w.type_), w.generate_name.clone()), w.clone()))
            .collect()
    };
    named_changes(&by_key(Some(new)), &by_key(old))
}

fn webhook_kind(type_: WebhookAdmissionType) -> &'static str {
    match type_ {
        WebhookAdmissionType::ValidatingAdmissionWebhook => "ValidatingAdmissionWebhook",
        WebhookAdmissionType::MutatingAdmissionWebhook => "MutatingAdmissionWebhook",
        WebhookAdmissionType::ConversionWebhook => "ConversionWebhook",
    }
}

/// Owned APIServices added, removed or changed, by `version.group`.
pub fn api_services(
    new: &ClusterServiceVersion,
    old: Option<&ClusterServiceVersion>,
) -> Vec<NamedChange> {
    let by_key = |csv: Option<&ClusterServiceVersion>| -> BTreeMap<(&'static str, String), ApiServiceDescription> {
        csv.map(serving::owned_api_services)
            .unwrap_or_default()
            .iter()
            .map(|a| (("APIService", serving::api_service_name(a)), a.clone()))
            .collect()
    };
    named_changes(&by_key(Some(new)), &by_key(old))
}

fn named_changes<T: PartialEq>(
    after: &BTreeMap<(&'static str, String), T>,
    before: &BTreeMap<(&'static str, String), T>,
) -> Vec<NamedChange> {
    let keys: BTreeSet<&(&'static str, String)> = after.keys().chain(before.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let change = match (after.get(key), before.get(key)) {
                (Some(_), None) => ADDED,
                (None, Some(_)) => REMOVED,
                (Some(a), Some(b)) if a != b => CHANGED,
                _ => return None,
            };
            Some(NamedChange {
                kind: key.0.to_string(),
                name: key.1.clone(),
                change: change.to_string(),
            })
        })
        .collect()
}
