//! The serving side of a CSV round (gather, then plan): per Deployment that serves
//! webhooks, the certificate to use (the Secret's while it is good, else a new one), and
//! whether the webhook configurations and CRD conversions in the cluster are the planned
//! ones. Only CSVs with webhook definitions make any request here.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

use super::certs::{self, CA_KEY, CERT_KEY, Material, PRIVATE_KEY_KEY};
use super::mount::Mount;
use super::owned::Owner;
use super::owned::Planned;
use super::webhooks;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::cluster::ownership::{operator_group_namespace_label, owner_selector};
use crate::controllers::plan::serving::{self as plan, DESCRIPTION_HASH_LABEL};

/// One Deployment that serves webhooks, and its certificate this round.
#[derive(Clone, Debug)]
pub struct ServedDeployment {
    pub name: String,
    pub ports: Vec<(i32, Value)>,
    pub material: Material,
    /// Issued this round (no usable Secret): applying it rotates the certificate.
    pub fresh: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Serving {
    pub deployments: Vec<ServedDeployment>,
    /// Why the webhook definitions cannot be installed (InvalidWebhookDescription).
    pub problem: Option<String>,
    /// An owned APIService that another CSV owns (OwnerConflict).
    pub owner_conflict: Option<String>,
}

impl Serving {
    /// Some Deployment's certificate is new this round (missing, due or unusable).
    pub fn rotating(&self) -> bool {
        self.deployments.iter().any(|d| d.fresh)
    }

    /// The status times of the certificates in use (`certsLastUpdated`: the latest issue;
    /// `certsRotateAt`: the earliest due), taken from the certificates themselves so that a
    /// status write lost after a rotation is made good by any later round.
    pub fn status_times(&self) -> Option<(Timestamp, Timestamp)> {
        let issued = self
            .deployments
            .iter()
            .map(|d| d.material.not_before)
            .max()?;
        Some((issued, self.rotate_at()?))
    }

    /// When the earliest certificate is due.
    pub fn rotate_at(&self) -> Option<Timestamp> {
        self.deployments
            .iter()
            .map(|d| d.material.rotate_at())
            .min()
    }

    pub fn mounts(&self) -> BTreeMap<String, Mount> {
        self.deployments
            .iter()
            .map(|d| {
                let mount = Mount {
                    secret: plan::secret_name(&d.name),
                    ca_hash: d.material.ca_hash(),
                };
                (d.name.clone(), mount)
            })
            .collect()
    }

    fn ca_of(&self) -> BTreeMap<String, String> {
        self.deployments
            .iter()
            .map(|d| (d.name.clone(), d.material.ca_pem.clone()))
            .collect()
    }

    /// What to apply: the Services, Secrets and RBAC before the Deployments; the webhook
    /// configurations after them; and the conversions of CRDs (by name).
    pub fn plan(
        &self,
        csv: &ClusterServiceVersion,
        owner: &Owner,
        group: Option<&OperatorGroup>,
    ) -> ServingPlan {
        let mut before = Vec::new();
        for served in &self.deployments {
            let (selector, account) = plan::pods(csv, &served.name);
            before.extend(webhooks::serving_objects(
                owner,
                &served.name,
                &served.ports,
                &selector,
                account,
                &served.material,
            ));
        }
        let ca_of = self.ca_of();
        let namespaces = group.and_then(namespace_selector);
        let mut after = webhooks::admission_configurations(csv, owner, namespaces.as_ref(), &ca_of);
        after.extend(webhooks::api_services(csv, owner, &ca_of));
        ServingPlan {
            before,
            after,
            conversions: plan::conversions(csv, &owner.namespace, &ca_of),
        }
    }
}

/// The serving objects of one install, in the order they are applied.
pub struct ServingPlan {
    pub before: Vec<Planned>,
    pub after: Vec<Planned>,
    pub conversions: Vec<(String, Value)>,
}

/// The namespaces a group's webhooks see (upstream's `NamespaceLabelSelector`): its target
/// namespaces by their label, its selector, or every namespace (None).
fn namespace_selector(group: &OperatorGroup) -> Option<Value> {
    let targets = group.spec.target_namespaces.as_ref();
    if targets.is_some_and(|t| !t.is_empty()) {
        let uid = group.metadata.uid.as_deref().unwrap_or_default();
        return Some(json!({"matchLabels": {operator_group_namespace_label(uid): ""}}));
    }
    group
        .spec
        .selector
        .as_ref()
        .filter(|s| !crate::cluster::ownership::selector_is_empty(s))
        .map(|s| json!(s))
}

/// The certificates of the CSV's served Deployments (reused or issued at `now`).
pub async fn gather(
    client: &kube::Client,
    csv: &ClusterServiceVersion,
    namespace: &str,
    validity: Duration,
    now: Timestamp,
) -> Result<Serving, kube::Error> {
    if !plan::serves_anything(csv) {
        return Ok(Serving::default());
    }
    if let Some(problem) = webhooks::problem(csv) {
        return Ok(Serving {
            problem: Some(problem),
            ..Serving::default()
        });
    }
    let owner_conflict = api_service_conflict(client, csv, namespace).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut deployments = Vec::new();
    for (name, ports) in plan::served(csv) {
        let hosts = webhooks::hosts(&name, namespace);
        let secret = secrets.get_opt(&plan::secret_name(&name)).await?;
        let text = |key: &str| {
            secret
                .as_ref()
                .and_then(|s| s.data.as_ref())
                .and_then(|d| d.get(key))
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
        };
        let reused = certs::reusable(
            text(CA_KEY).as_deref(),
            text(CERT_KEY).as_deref(),
            text(PRIVATE_KEY_KEY).as_deref(),
            &hosts,
            now,
        );
        let (material, fresh) = match reused {
            Some(material) => (material, false),
            None => match certs::issue(&hosts, now, validity) {
                Ok(material) => (material, true),
                Err(problem) => {
                    return Ok(Serving {
                        problem: Some(problem.to_string()),
                        ..Serving::default()
                    });
                }
            },
        };
        deployments.push(ServedDeployment {
            name,
            ports,
            material,
            fresh,
        });
    }
    Ok(Serving {
        deployments,
        problem: None,
        owner_conflict,
    })
}

/// The first owned APIService that exists and may not be adopted: upstream adopts one that
/// this CSV, the CSV it replaces, or a CSV on its way out owns (here also one whose owner
/// CSV is gone).
async fn api_service_conflict(
    client: &kube::Client,
    csv: &ClusterServiceVersion,
    namespace: &str,
) -> Result<Option<String>, kube::Error> {
    use crate::cluster::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
    let api_services: Api<APIService> = Api::all(client.clone());
    let name = csv.metadata.name.as_deref().unwrap_or_default();
    for description in plan::owned_api_services(csv) {
        let service = plan::api_service_name(description);
        let Some(existing) = api_services.get_opt(&service).await? else {
            continue;
        };
        let labels = existing.metadata.labels.unwrap_or_default();
        let label = |key: &str| labels.get(key).map(String::as_str).unwrap_or_default();
        let adoptable = if label(OWNER_KIND_LABEL) != "ClusterServiceVersion"
            || label(OWNER_LABEL).is_empty()
            || label(OWNER_NAMESPACE_LABEL) != namespace
        {
            false
        } else if label(OWNER_LABEL) == name
            || csv.spec.replaces.as_deref() == Some(label(OWNER_LABEL))
        {
            true
        } else {
            let owner_csv = Api::<ClusterServiceVersion>::namespaced(
                client.clone(),
                label(OWNER_NAMESPACE_LABEL),
            )
            .get_opt(label(OWNER_LABEL))
            .await?;
            owner_csv.is_none_or(|o| {
                matches!(
                    o.status.and_then(|s| s.phase),
                    Some(crate::api::CsvPhase::Replacing | crate::api::CsvPhase::Deleting)
                )
            })
        };
        if !adoptable {
            return Ok(Some(format!("unable to adopt APIService {service}")));
        }
    }
    Ok(None)
}

/// What the cluster lacks of the planned serving objects.
#[derive(Clone, Debug, PartialEq)]
pub enum Shortfall {
    /// A configuration, conversion or APIService is missing or not as planned: applying
    /// again mends it.
    Absent(String),
    /// Everything is as planned; an APIService is not Available yet (its server is the
    /// operator's): only waiting helps.
    Unavailable(String),
}

impl Shortfall {
    pub fn message(&self) -> &str {
        match self {
            Shortfall::Absent(m) | Shortfall::Unavailable(m) => m,
        }
    }
}

pub async fn missing(
    client: &kube::Client,
    csv_name: &str,
    namespace: &str,
    planned: &ServingPlan,
) -> Result<Option<Shortfall>, kube::Error> {
    let selector = owner_selector("ClusterServiceVersion", csv_name, namespace);
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let wanted: Vec<&Planned> = planned.after.iter().filter(|p| p.kind == kind).collect();
        if wanted.is_empty() {
            continue;
        }
        let resource = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ));
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let found = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await?;
        for want in wanted {
            let hash = &want.body["metadata"]["labels"][DESCRIPTION_HASH_LABEL];
            let present = found.items.iter().any(|o| {
                o.metadata.name.as_deref() == Some(want.name.as_str())
                    && o.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(DESCRIPTION_HASH_LABEL))
                        .is_some_and(|h| *hash == *h)
            });
            if !present {
                return Ok(Some(Shortfall::Absent(format!(
                    "webhooks not installed: {kind} {}",
                    want.name
                ))));
            }
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (crd, conversion) in &planned.conversions {
        let found = crds.get_opt(crd).await?;
        let current = found
            .and_then(|c| c.spec.conversion)
            .map(|c| serde_json::to_value(c).unwrap_or_default());
        let ready = current.is_some_and(|c| {
            c["strategy"] == "Webhook"
                && c["webhook"]["clientConfig"]["caBundle"]
                    == conversion["webhook"]["clientConfig"]["caBundle"]
                && c["webhook"]["clientConfig"]["service"]
                    == conversion["webhook"]["clientConfig"]["service"]
        });
        if !ready {
            return Ok(Some(Shortfall::Absent(format!(
                "conversionWebhook not ready: CRD {crd}"
            ))));
        }
    }
    let api_services: Api<APIService> = Api::all(client.clone());
    for want in planned.after.iter().filter(|p| p.kind == "APIService") {
        let Some(found) = api_services.get_opt(&want.name).await? else {
            return Ok(Some(Shortfall::Absent(format!(
                "apiServices not installed: {} missing",
                want.name
            ))));
        };
        let available = found.status.and_then(|s| s.conditions).is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        });
        if !available {
            return Ok(Some(Shortfall::Unavailable(format!(
                "apiServices not installed: {} not Available",
                want.name
            ))));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(name: &str, issued: i64, validity_secs: u64, fresh: bool) -> ServedDeployment {
        let at = Timestamp::from_second(issued).unwrap();
        let hosts = certs::hosts(name, "ns");
        ServedDeployment {
            name: name.into(),
            ports: Vec::new(),
            material: certs::issue(&hosts, at, Duration::from_secs(validity_secs)).unwrap(),
            fresh,
        }
    }

    #[test]
    fn status_times_come_from_the_certificates_in_use() {
        assert_eq!(Serving::default().status_times(), None);
        // Reused certificates (no round issued them) still give the times: a status write
        // lost after a rotation is made good later.
        let serving = Serving {
            deployments: vec![
                served("a", 1_000, 100, false),
                served("b", 1_020, 40, false),
            ],
            ..Serving::default()
        };
        assert!(!serving.rotating());
        let (issued, rotate_at) = serving.status_times().unwrap();
        assert_eq!(
            issued,
            Timestamp::from_second(1_020).unwrap(),
            "the latest issue"
        );
        assert_eq!(
            rotate_at,
            Timestamp::from_second(1_040).unwrap(),
            "the earliest due"
        );
    }
}
