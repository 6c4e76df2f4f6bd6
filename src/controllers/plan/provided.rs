//! The APIs a group's member CSVs provide and the aggregated ClusterRoles upstream makes for
//! them (pure): per provided API version `<name>-<version>-<admin|edit|view>` (and
//! `-crdview` for a CRD), and per OperatorGroup `olm.og.<group>.<admin|edit|view>-<hash>`
//! aggregating them. Named here once: the OperatorGroup controller writes them, the
//! InstallPlan preview lists them.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::cluster::ownership::{
    self, MANAGED_LABEL, PERMISSIONS_HASH_LABEL, owner_labels, short_hash,
};

/// One API a CSV provides through an owned CRD or an owned APIService.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProvidedApi {
    pub kind: String,
    pub version: String,
    pub group: String,
    pub plural: String,
    /// What defines it, and owns its roles.
    pub source: ApiSource,
}

/// What defines a provided API, by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiSource {
    /// The CRD `<plural>.<group>`.
    Crd(String),
    /// The APIService `<version>.<group>`.
    ApiService(String),
}

impl ApiSource {
    pub fn name(&self) -> &str {
        match self {
            ApiSource::Crd(name) | ApiSource::ApiService(name) => name,
        }
    }
}

impl ProvidedApi {
    /// `Kind.version.group`, the form of `olm.providedAPIs`.
    pub fn key(&self) -> String {
        format!("{}.{}.{}", self.kind, self.version, self.group)
    }

    /// The hash in the aggregation label shared by the per-API and per-group roles.
    pub fn hash(&self) -> String {
        short_hash(&[self.key().as_bytes()])
    }
}

/// The APIs the (non-copied) member CSVs provide, sorted and deduplicated; not those of a
/// CSV that lost them to another group (InterOperatorGroupOwnerConflict), as upstream.
pub fn provided_apis<'a>(
    csvs: impl IntoIterator<Item = &'a ClusterServiceVersion>,
) -> Vec<ProvidedApi> {
    let mut apis: Vec<ProvidedApi> = csvs
        .into_iter()
        .filter(|csv| !csv.is_copy() && !csv.lost_its_apis())
        .flat_map(|csv| {
            let crds = csv.spec.customresourcedefinitions.iter();
            let crds = crds.flat_map(|crds| crds.owned.iter()).filter_map(|owned| {
                let (plural, group) = owned.name.split_once('.')?;
                Some(ProvidedApi {
                    kind: owned.kind.clone(),
                    version: owned.version.clone(),
                    group: group.into(),
                    plural: plural.into(),
                    source: ApiSource::Crd(owned.name.clone()),
                })
            });
            let services = csv.spec.apiservicedefinitions.iter();
            let services = services
                .flat_map(|d| d.owned.iter())
                .map(|owned| ProvidedApi {
                    kind: owned.kind.clone(),
                    version: owned.version.clone(),
                    group: owned.group.clone(),
                    // Upstream's roles name the description's `name` as the resource.
                    plural: owned.name.clone(),
                    source: ApiSource::ApiService(format!("{}.{}", owned.version, owned.group)),
                });
            crds.chain(services).collect::<Vec<_>>()
        })
        .collect();
    apis.sort();
    apis.dedup();
    apis
}

pub fn provided_apis_annotation(apis: &[ProvidedApi]) -> String {
    let mut keys: Vec<String> = apis.iter().map(ProvidedApi::key).collect();
    keys.sort();
    keys.dedup();
    keys.join(",")
}

pub const SUFFIXES: [(&str, &[&str]); 3] = [
    ("admin", &["*"]),
    ("edit", &["create", "update", "patch", "delete"]),
    ("view", &["get", "list", "watch"]),
];

fn aggregation_label(api: &ProvidedApi, suffix: &str) -> String {
    format!(
        "olm.opgroup.permissions/aggregate-to-{}-{suffix}",
        api.hash()
    )
}

fn with_hash(mut role: ClusterRole) -> ClusterRole {
    let hash = ownership::hash_json(&(
        &role.rules,
        &role.aggregation_rule,
        &role.metadata.labels,
        &role.metadata.owner_references,
    ));
    role.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(PERMISSIONS_HASH_LABEL.into(), hash);
    role
}

/// The group's own roles, `olm.og.<group>.<admin|edit|view>-<hash>`, aggregating the per-API
/// roles of every API its members provide.
pub fn group_cluster_roles(group: &OperatorGroup, apis: &[ProvidedApi]) -> Vec<ClusterRole> {
    let name = group.metadata.name.clone().unwrap_or_default();
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let hash = short_hash(&[namespace.as_bytes(), name.as_bytes()]);
    SUFFIXES
        .iter()
        .map(|(suffix, _)| {
            let selectors: Vec<LabelSelector> = apis
                .iter()
                .map(|api| LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        aggregation_label(api, suffix),
                        "true".to_string(),
                    )])),
                    match_expressions: None,
                })
                .collect();
            with_hash(ClusterRole {
                metadata: ObjectMeta {
                    name: Some(format!("olm.og.{name}.{suffix}-{hash}")),
                    labels: Some(owner_labels("OperatorGroup", &name, &namespace)),
                    ..ObjectMeta::default()
                },
                // The API server refuses an aggregation rule without selectors: a group whose
                // members provide no API yet gets an empty role instead of a failing write.
                rules: selectors.is_empty().then(Vec::new),
                aggregation_rule: (!selectors.is_empty()).then_some(AggregationRule {
                    cluster_role_selectors: Some(selectors),
                }),
            })
        })
        .collect()
}

/// Per provided API: `<name>-<version>-<admin|edit|view>` (aggregated into the built-in
/// admin/edit/view roles and into the group roles), owned by what defines the API (`uid`),
/// so they live exactly as long as the API. `<name>` is the CRD's name, or for an APIService
/// the description's (the resource); a CRD's API also gets `<crd>-<version>-crdview` (get on
/// the CRD itself).
pub fn api_cluster_roles(api: &ProvidedApi, uid: &str) -> Vec<ClusterRole> {
    let (api_version, kind, prefix) = match &api.source {
        ApiSource::Crd(crd) => (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            format!("{crd}-{}-", api.version),
        ),
        ApiSource::ApiService(_) => (
            "apiregistration.k8s.io/v1",
            "APIService",
            format!("{}-{}-", api.plural, api.version),
        ),
    };
    let owner = OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: api.source.name().to_string(),
        uid: uid.into(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    };
    let role = |name: String, suffix: &str, rule: PolicyRule| {
        with_hash(ClusterRole {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(BTreeMap::from([
                    (
                        format!("rbac.authorization.k8s.io/aggregate-to-{suffix}"),
                        "true".to_string(),
                    ),
                    (aggregation_label(api, suffix), "true".to_string()),
                    (MANAGED_LABEL.to_string(), "true".to_string()),
                ])),
                owner_references: Some(vec![owner.clone()]),
                ..ObjectMeta::default()
            },
            rules: Some(vec![rule]),
            aggregation_rule: None,
        })
    };
    let mut roles: Vec<ClusterRole> = SUFFIXES
        .iter()
        .map(|(suffix, verbs)| {
            role(
                format!("{prefix}{suffix}"),
                suffix,
                PolicyRule {
                    api_groups: Some(vec![api.group.clone()]),
                    resources: Some(vec![api.plural.clone()]),
                    verbs: verbs.iter().map(std::string::ToString::to_string).collect(),
                    ..PolicyRule::default()
                },
            )
        })
        .collect();
    if let ApiSource::Crd(crd) = &api.source {
        roles.push(role(
            format!("{prefix}crdview"),
            "view",
            PolicyRule {
                api_groups: Some(vec!["apiextensions.k8s.io".into()]),
                resources: Some(vec!["customresourcedefinitions".into()]),
                resource_names: Some(vec![crd.clone()]),
                verbs: vec!["get".into()],
                ..PolicyRule::default()
            },
        ));
    }
    roles
}

/// A ClusterRole as written with server-side apply (and as the preview names it): with its
/// apiVersion and kind.
pub fn cluster_role_body(role: &ClusterRole) -> serde_json::Value {
    let mut body = serde_json::to_value(role).unwrap_or_default();
    body["apiVersion"] = serde_json::json!("rbac.authorization.k8s.io/v1");
    body["kind"] = serde_json::json!("ClusterRole");
    body
}
