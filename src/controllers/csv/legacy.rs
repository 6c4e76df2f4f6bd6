//! What an older OLM made for an owned APIService under the names it used before: a Service
//! named after the APIService, the `<apiservice>-cert` Secret, Role and RoleBinding, the
//! `<apiservice>-system:auth-delegator` ClusterRoleBinding and the
//! `<apiservice>-auth-reader` RoleBinding in kube-system. At install they are removed when
//! their owner labels name this CSV, as upstream migrates them; one whose labels name no
//! one, or someone else, stays.

use std::collections::BTreeMap;

use kube::api::DeleteParams;

use crate::api::ApiServiceDescription;
use crate::cluster::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

use super::context::Round;
use super::install::{api_message, dynamic_api};
use super::install_error::InstallError;
use super::webhooks;

/// One object of the old naming.
#[derive(Debug, PartialEq)]
pub struct Legacy {
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
}

/// The old names of the objects of each owned APIService of a CSV in `namespace`. None for
/// a description whose old Service name is the new one (its group is the Deployment's name
/// and its version `service`): what OLM writes now has that name.
pub fn objects(namespace: &str, owned: &[ApiServiceDescription]) -> Vec<Legacy> {
    let mut objects = Vec::new();
    for description in owned {
        let api_service = format!("{}.{}", description.version, description.group);
        let service = api_service.replace('.', "-");
        let deployment = description.deployment_name.as_deref().unwrap_or_default();
        if service == webhooks::service_name(deployment) {
            continue;
        }
        let here = Some(namespace.to_string());
        let cert = format!("{api_service}-cert");
        objects.extend([
            ("Service", here.clone(), service),
            ("Secret", here.clone(), cert.clone()),
            ("Role", here.clone(), cert.clone()),
            ("RoleBinding", here, cert),
            (
                "ClusterRoleBinding",
                None,
                format!("{api_service}-system:auth-delegator"),
            ),
            (
                "RoleBinding",
                Some("kube-system".to_string()),
                format!("{api_service}-auth-reader"),
            ),
        ]);
    }
    objects
        .into_iter()
        .map(|(kind, namespace, name)| Legacy {
            kind,
            namespace,
            name,
        })
        .collect()
}

/// Upstream's "adoptable": the owner labels name this CSV (kind, namespace and name).
pub fn adoptable(labels: Option<&BTreeMap<String, String>>, csv: &str, namespace: &str) -> bool {
    let get = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    get(OWNER_KIND_LABEL) == Some("ClusterServiceVersion")
        && get(OWNER_NAMESPACE_LABEL) == Some(namespace)
        && get(OWNER_LABEL) == Some(csv)
}

/// Deletes each object of the old naming of `owned` that exists and is adoptable.
pub async fn remove(
    round: &Round<'_>,
    owned: &[ApiServiceDescription],
) -> Result<(), InstallError> {
    let client = round.client();
    for object in objects(&round.namespace, owned) {
        let api = dynamic_api(client.clone(), object.kind, object.namespace.as_deref());
        let failed = |e: &kube::Error| InstallError::Delete {
            kind: object.kind,
            name: object.name.clone(),
            message: api_message(e),
        };
        let found = api.get_metadata_opt(&object.name).await;
        let Some(found) = found.map_err(|e| failed(&e))? else {
            continue;
        };
        if !adoptable(
            found.metadata.labels.as_ref(),
            &round.name,
            &round.namespace,
        ) {
            continue;
        }
        match api.delete(&object.name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(kind = object.kind, name = %object.name, csv = %round.name, "deleted an object of the old APIService naming");
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(failed(&e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description(group: &str, version: &str, deployment: &str) -> ApiServiceDescription {
        serde_json::from_value(serde_json::json!({
            "name": "fedoras", "group": group, "version": version, "kind": "Fedora",
            "deploymentName": deployment,
        }))
        .unwrap()
    }

    #[test]
    fn the_old_names_of_an_api_service() {
        let found = objects("ns", &[description("hats.redhat.com", "v1alpha1", "hat")]);
        let names: Vec<_> = found
            .iter()
            .map(|o| (o.kind, o.namespace.as_deref(), o.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("Service", Some("ns"), "v1alpha1-hats-redhat-com"),
                ("Secret", Some("ns"), "v1alpha1.hats.redhat.com-cert"),
                ("Role", Some("ns"), "v1alpha1.hats.redhat.com-cert"),
                ("RoleBinding", Some("ns"), "v1alpha1.hats.redhat.com-cert"),
                (
                    "ClusterRoleBinding",
                    None,
                    "v1alpha1.hats.redhat.com-system:auth-delegator"
                ),
                (
                    "RoleBinding",
                    Some("kube-system"),
                    "v1alpha1.hats.redhat.com-auth-reader"
                ),
            ]
        );
        // The old Service name is today's (version `hat`, group `service`, Deployment `hat`):
        // nothing to migrate.
        assert!(objects("ns", &[description("service", "hat", "hat")]).is_empty());
    }

    #[test]
    fn only_objects_labelled_as_this_csvs_are_adoptable() {
        let labels = |kind: &str, ns: &str, name: &str| {
            BTreeMap::from([
                (OWNER_KIND_LABEL.to_string(), kind.to_string()),
                (OWNER_NAMESPACE_LABEL.to_string(), ns.to_string()),
                (OWNER_LABEL.to_string(), name.to_string()),
            ])
        };
        let ours = labels("ClusterServiceVersion", "ns", "csv");
        assert!(adoptable(Some(&ours), "csv", "ns"));
        assert!(!adoptable(None, "csv", "ns"));
        let other = labels("ClusterServiceVersion", "other", "csv");
        assert!(!adoptable(Some(&other), "csv", "ns"));
        let group = labels("OperatorGroup", "ns", "csv");
        assert!(!adoptable(Some(&group), "csv", "ns"));
    }
}
