//! A CSV's requirements, judged (pure) from what the round found: owned and required CRDs
//! (present, Established and NamesAccepted, the version served), `nativeAPIs`,
//! `minKubeVersion`, and the ServiceAccounts with their rules. The result is upstream's
//! `status.requirementStatus` plus the unmet items, each named for the CSV's message.
//!
//! As upstream, a CSV's ServiceAccounts must exist and already hold every rule it declares
//! (its plan made them, or an admin did): the CSV controller grants nothing, so a CSV
//! applied by hand waits Pending until someone allowed to grant its rules has.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::api::{ClusterServiceVersion, CsvPhase, DependentStatus, RequirementStatus};
use crate::controllers::kit::parse_kube_version;

pub const PRESENT: &str = "Present";
pub const NOT_PRESENT: &str = "NotPresent";
pub const PRESENT_NOT_SATISFIED: &str = "PresentNotSatisfied";
pub const NOT_AVAILABLE: &str = "NotAvailable";

/// What the round found about one CRD.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrdState {
    pub uid: String,
    pub established: bool,
    pub names_accepted: bool,
    pub served_versions: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Found {
    /// Per owned then required CRD (in spec order): its state, None when absent.
    pub owned: Vec<Option<CrdState>>,
    pub required: Vec<Option<CrdState>>,
    /// Per `nativeAPIs` entry: whether discovery serves it.
    pub native: Vec<bool>,
    /// The API server's version (`major.minor.patch`, leading `v` allowed).
    pub server_version: Option<String>,
    /// Per ServiceAccount named in the strategy (sorted): whether it exists and which of
    /// its rules it holds.
    pub service_accounts: Vec<AccountFound>,
    /// Per required API service (in spec order): its APIService's uid when it exists and
    /// is Available.
    pub required_api_services: Vec<Option<String>>,
    /// Required CRDs owned by another CSV of the namespace that has not Succeeded yet, with
    /// that CSV (looked at only before a CSV's first install: see [`providers_pending`]).
    pub providers_pending: Vec<(String, String)>,
}

/// The required CRDs of `csv` that another CSV of its namespace owns and that none of their
/// owners there has made good yet (Succeeded, or Replacing: it succeeded and a newer one
/// takes over). A dependency resolved into the same plan as its dependent is then installed
/// first, as a user reading the plan expects (the dependent's operator finds its
/// dependency's operator running). `others` are the namespace's other CSVs, not copies.
pub fn providers_pending<'a>(
    csv: &ClusterServiceVersion,
    others: impl Iterator<Item = &'a ClusterServiceVersion> + Clone,
) -> Vec<(String, String)> {
    let required = csv
        .spec
        .customresourcedefinitions
        .as_ref()
        .map(|c| c.required.clone())
        .unwrap_or_default();
    let mut pending = Vec::new();
    for crd in required {
        let owners: Vec<&ClusterServiceVersion> = others
            .clone()
            .filter(|other| {
                other
                    .spec
                    .customresourcedefinitions
                    .as_ref()
                    .is_some_and(|c| c.owned.iter().any(|d| d.name == crd.name))
            })
            .collect();
        let made_good = owners.iter().any(|o| {
            matches!(
                o.status.as_ref().and_then(|s| s.phase),
                Some(CsvPhase::Succeeded | CsvPhase::Replacing)
            )
        });
        if let (Some(owner), false) = (owners.first(), made_good) {
            pending.push((
                crd.name.clone(),
                owner.metadata.name.clone().unwrap_or_default(),
            ));
        }
    }
    pending
}

/// What the round found about one ServiceAccount of the strategy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccountFound {
    pub name: String,
    pub exists: bool,
    /// Per rule the strategy's `permissions` declare for this account (in spec order):
    /// whether the account holds it in the CSV's namespace.
    pub namespaced: Vec<bool>,
    /// The same for `clusterPermissions`, held cluster-wide.
    pub cluster: Vec<bool>,
}

/// The rules `list` declares for `account`, in spec order.
pub fn rules_of<'a>(
    list: &'a [crate::api::StrategyDeploymentPermissions],
    account: &'a str,
) -> impl Iterator<Item = &'a PolicyRule> {
    list.iter()
        .filter(move |p| p.service_account_name == account)
        .flat_map(|p| p.rules.iter())
}

pub struct Judged {
    pub statuses: Vec<RequirementStatus>,
    pub unmet: Vec<String>,
}

fn crd_status(
    name: &str,
    version: &str,
    found: Option<&CrdState>,
) -> (RequirementStatus, Option<String>) {
    let (status, message, unmet) = match found {
        None => (
            NOT_PRESENT,
            "CRD is not present".to_string(),
            Some(format!("CRD {name} not present")),
        ),
        // Upstream's statuses and words, which its tests and consoles read.
        Some(crd) if !crd.served_versions.iter().any(|v| v == version) => (
            NOT_PRESENT,
            "CRD version not served".to_string(),
            Some(format!("CRD {name} does not serve version {version}")),
        ),
        Some(crd) if !crd.established || !crd.names_accepted => (
            NOT_AVAILABLE,
            "CRD is present but the Established condition is False (not available)".to_string(),
            Some(format!("CRD {name} not Established")),
        ),
        Some(_) => (
            PRESENT,
            "CRD is present and Established condition is true".to_string(),
            None,
        ),
    };
    (
        RequirementStatus {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            kind: "CustomResourceDefinition".into(),
            name: name.into(),
            status: status.into(),
            message,
            // As upstream: the CRD's UID only when it is Present.
            uuid: found
                .filter(|_| status == PRESENT)
                .map(|c| c.uid.clone())
                .filter(|u| !u.is_empty()),
            dependents: vec![],
        },
        unmet,
    )
}

pub fn judge(csv: &ClusterServiceVersion, found: &Found) -> Judged {
    let mut judged = Judged {
        statuses: Vec::new(),
        unmet: Vec::new(),
    };
    kube_version(csv, found, &mut judged);
    crds(csv, found, &mut judged);
    for (crd, owner) in &found.providers_pending {
        judged.unmet.push(format!(
            "CRD {crd} is provided by ClusterServiceVersion {owner}, which has not Succeeded yet"
        ));
    }
    native_apis(csv, found, &mut judged);
    let strategy = csv.spec.install.spec.clone().unwrap_or_default();
    let api_services = csv.spec.apiservicedefinitions.clone().unwrap_or_default();
    owned_api_services(&api_services, &strategy, &mut judged);
    required_api_services(&api_services, found, &mut judged);
    for account in &found.service_accounts {
        let (status, problems) = account_status(&strategy, account);
        judged.statuses.push(status);
        judged.unmet.extend(problems);
    }
    judged
}

/// The server's version against `minKubeVersion`.
fn kube_version(csv: &ClusterServiceVersion, found: &Found, judged: &mut Judged) {
    let name = csv.metadata.name.clone().unwrap_or_default();
    if let Some(min) = csv
        .spec
        .min_kube_version
        .as_deref()
        .filter(|m| !m.trim().is_empty())
    {
        let server = found.server_version.as_deref().and_then(parse_kube_version);
        match (parse_kube_version(min), server) {
            (Some(min_v), Some(server_v)) if server_v < min_v => {
                let message = format!(
                    "CSV version requirement not met: minKubeVersion ({min}) > server version ({})",
                    found.server_version.clone().unwrap_or_default()
                );
                judged.unmet.push(message.clone());
                judged.statuses.push(RequirementStatus {
                    group: "operators.coreos.com".into(),
                    version: "v1alpha1".into(),
                    kind: "ClusterServiceVersion".into(),
                    name,
                    status: PRESENT_NOT_SATISFIED.into(),
                    message,
                    uuid: None,
                    dependents: vec![],
                });
            }
            (None, _) => judged
                .unmet
                .push(format!("minKubeVersion {min:?} is not a version")),
            _ => {}
        }
    }
}

/// The CRDs the CSV owns and requires.
fn crds(csv: &ClusterServiceVersion, found: &Found, judged: &mut Judged) {
    let crds = csv
        .spec
        .customresourcedefinitions
        .clone()
        .unwrap_or_default();
    for (description, state) in crds
        .owned
        .iter()
        .zip(found.owned.iter())
        .chain(crds.required.iter().zip(found.required.iter()))
    {
        let (status, problem) = crd_status(&description.name, &description.version, state.as_ref());
        judged.statuses.push(status);
        judged.unmet.extend(problem);
    }
}

/// The native APIs the CSV needs served.
fn native_apis(csv: &ClusterServiceVersion, found: &Found, judged: &mut Judged) {
    for (gvk, present) in csv.spec.native_apis.iter().zip(found.native.iter()) {
        judged.statuses.push(RequirementStatus {
            group: gvk.group.clone(),
            version: gvk.version.clone(),
            kind: gvk.kind.clone(),
            name: String::new(),
            status: if *present { PRESENT } else { NOT_PRESENT }.into(),
            message: if *present {
                "native API present"
            } else {
                "native API not served"
            }
            .into(),
            uuid: None,
            dependents: vec![],
        });
        if !present {
            judged.unmet.push(format!(
                "native API {}/{} {} not served",
                gvk.group, gvk.version, gvk.kind
            ));
        }
    }
}

/// Owned APIServices: served by a Deployment of the strategy (upstream's DeploymentFound).
fn owned_api_services(
    api_services: &crate::api::ApiServiceDefinitions,
    strategy: &crate::api::StrategyDetailsDeployment,
    judged: &mut Judged,
) {
    for description in &api_services.owned {
        let name = format!("{}.{}", description.version, description.group);
        let found = description
            .deployment_name
            .as_deref()
            .is_some_and(|d| strategy.deployments.iter().any(|s| s.name == d));
        judged.statuses.push(RequirementStatus {
            group: description.group.clone(),
            version: description.version.clone(),
            kind: description.kind.clone(),
            name: name.clone(),
            status: if found {
                "DeploymentFound"
            } else {
                "DeploymentNotFound"
            }
            .into(),
            message: String::new(),
            uuid: None,
            dependents: vec![],
        });
        if !found {
            judged.unmet.push(format!(
                "owned APIService {name}: deployment {} is not in the install strategy",
                description.deployment_name.as_deref().unwrap_or_default()
            ));
        }
    }
}

/// Required APIServices: each exists and is Available.
fn required_api_services(
    api_services: &crate::api::ApiServiceDefinitions,
    found: &Found,
    judged: &mut Judged,
) {
    for (description, state) in api_services
        .required
        .iter()
        .zip(found.required_api_services.iter())
    {
        let name = format!("{}.{}", description.version, description.group);
        judged.statuses.push(RequirementStatus {
            group: "apiregistration.k8s.io".into(),
            version: "v1".into(),
            kind: "APIService".into(),
            name: name.clone(),
            status: if state.is_some() {
                PRESENT
            } else {
                NOT_PRESENT
            }
            .into(),
            message: if state.is_some() {
                "APIService is present and Available"
            } else {
                "APIService is not present or not Available"
            }
            .into(),
            uuid: state.clone(),
            dependents: vec![],
        });
        if state.is_none() {
            judged
                .unmet
                .push(format!("APIService {name} not available"));
        }
    }
}

/// Upstream's requirement status of one account (a dependent per rule), and what is unmet.
fn account_status(
    strategy: &crate::api::StrategyDetailsDeployment,
    account: &AccountFound,
) -> (RequirementStatus, Vec<String>) {
    let name = &account.name;
    let mut unmet = Vec::new();
    let mut dependents = Vec::new();
    for (scope, list, held) in [
        ("namespaced", &strategy.permissions, &account.namespaced),
        ("cluster", &strategy.cluster_permissions, &account.cluster),
    ] {
        for (i, rule) in rules_of(list, name).enumerate() {
            let satisfied = account.exists && held.get(i).copied().unwrap_or(false);
            let text = crate::controllers::authz::describe(rule);
            if account.exists && !satisfied {
                unmet.push(format!(
                    "ServiceAccount {name} does not hold {scope} rule {text}"
                ));
            }
            dependents.push(DependentStatus {
                group: "rbac.authorization.k8s.io".into(),
                version: "v1".into(),
                kind: "PolicyRule".into(),
                status: if satisfied {
                    "Satisfied"
                } else {
                    "NotSatisfied"
                }
                .into(),
                uuid: None,
                message: Some(format!("{scope} rule:{text}")),
            });
        }
    }
    let (status, message) = if !account.exists {
        unmet.push(format!("ServiceAccount {name} does not exist"));
        (NOT_PRESENT, "Service account does not exist")
    } else if unmet.is_empty() {
        (PRESENT, "")
    } else {
        (
            PRESENT_NOT_SATISFIED,
            "Policy rule not satisfied for service account",
        )
    };
    let status = RequirementStatus {
        group: String::new(),
        version: "v1".into(),
        kind: "ServiceAccount".into(),
        name: name.clone(),
        status: status.into(),
        message: message.into(),
        uuid: None,
        // Upstream lists no rules for an account that does not exist.
        dependents: if account.exists { dependents } else { vec![] },
    };
    (status, unmet)
}

/// Which version of a CRD a [`CrdState`] was read from.
#[derive(Debug, PartialEq)]
pub struct CrdReadAt {
    pub resource_version: String,
    pub uid: Option<String>,
    pub generation: Option<i64>,
}

impl CrdReadAt {
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        CrdReadAt {
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            generation: meta.generation,
        }
    }

    /// Whether `state`, read at `self`, still holds for the CRD now watched at `now`: the
    /// same version; or, once read Established with its names accepted, the same CRD and
    /// spec (generation). A CRD that many installs share changes with every install (its
    /// labels and alongside annotations), and reading it again each time was, for a
    /// thousand installs, thousands of GETs of an object grown to hundreds of KiB.
    pub fn still_holds(&self, state: &CrdState, now: &CrdReadAt) -> bool {
        self == now
            || (state.established
                && state.names_accepted
                && self.uid == now.uid
                && self.generation == now.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CrdDescription, CustomResourceDefinitions, GroupVersionKind};

    fn csv() -> ClusterServiceVersion {
        let mut csv = ClusterServiceVersion::new("op.v1", Default::default());
        csv.spec.min_kube_version = Some("1.27.0".into());
        csv.spec.customresourcedefinitions = Some(CustomResourceDefinitions {
            owned: vec![CrdDescription {
                name: "widgets.example.com".into(),
                version: "v1".into(),
                kind: "Widget".into(),
                ..CrdDescription::default()
            }],
            required: vec![CrdDescription {
                name: "gadgets.example.com".into(),
                version: "v1beta1".into(),
                kind: "Gadget".into(),
                ..CrdDescription::default()
            }],
        });
        csv
    }

    #[test]
    fn a_required_crd_waits_for_the_csv_of_the_namespace_that_owns_it() {
        let dependent = csv();
        let provider = |phase: Option<CsvPhase>| {
            let mut p = ClusterServiceVersion::new("dep.v1", Default::default());
            p.spec.customresourcedefinitions = Some(CustomResourceDefinitions {
                owned: vec![CrdDescription {
                    name: "gadgets.example.com".into(),
                    version: "v1beta1".into(),
                    kind: "Gadget".into(),
                    ..CrdDescription::default()
                }],
                required: vec![],
            });
            p.status = phase.map(|phase| crate::api::ClusterServiceVersionStatus {
                phase: Some(phase),
                ..Default::default()
            });
            p
        };
        let waiting = vec![("gadgets.example.com".to_string(), "dep.v1".to_string())];
        for (phase, expected) in [
            (None, waiting.clone()),
            (Some(CsvPhase::Installing), waiting.clone()),
            (Some(CsvPhase::Failed), waiting),
            (Some(CsvPhase::Succeeded), vec![]),
            (Some(CsvPhase::Replacing), vec![]),
        ] {
            let others = [provider(phase)];
            assert_eq!(
                providers_pending(&dependent, others.iter()),
                expected,
                "{phase:?}"
            );
        }
        // A CRD no CSV of the namespace owns (made by hand, or a global operator's): no wait.
        assert!(providers_pending(&dependent, [csv()].iter()).is_empty());
        let found = Found {
            providers_pending: providers_pending(&dependent, [provider(None)].iter()),
            ..Found::default()
        };
        assert!(
            judge(&dependent, &found)
                .unmet
                .iter()
                .any(|m| m.contains("provided by ClusterServiceVersion dep.v1")),
        );
    }

    fn good() -> CrdState {
        CrdState {
            uid: "u".into(),
            established: true,
            names_accepted: true,
            served_versions: vec!["v1".into(), "v1beta1".into()],
        }
    }

    #[test]
    fn all_present_is_met() {
        let found = Found {
            owned: vec![Some(good())],
            required: vec![Some(good())],
            server_version: Some("v1.37.0".into()),
            ..Found::default()
        };
        let judged = judge(&csv(), &found);
        assert!(judged.unmet.is_empty(), "{:?}", judged.unmet);
        assert_eq!(judged.statuses.len(), 2);
        assert!(judged.statuses.iter().all(|s| s.status == PRESENT));
    }

    #[test]
    fn a_missing_required_crd_is_named() {
        let found = Found {
            owned: vec![Some(good())],
            required: vec![None],
            server_version: Some("v1.37.0".into()),
            ..Found::default()
        };
        let judged = judge(&csv(), &found);
        assert_eq!(judged.unmet, ["CRD gadgets.example.com not present"]);
        assert_eq!(judged.statuses[1].status, NOT_PRESENT);
    }

    #[test]
    fn unserved_versions_unestablished_crds_old_servers_and_native_apis_are_unmet() {
        let mut csv = csv();
        csv.spec.native_apis = vec![GroupVersionKind {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
        }];
        let unestablished = CrdState {
            established: false,
            ..good()
        };
        let v2_only = CrdState {
            served_versions: vec!["v2".into()],
            ..good()
        };
        let found = Found {
            owned: vec![Some(unestablished)],
            required: vec![Some(v2_only)],
            native: vec![false],
            server_version: Some("v1.26.3+k3s1".into()),
            ..Found::default()
        };
        let judged = judge(&csv, &found);
        assert_eq!(judged.unmet.len(), 4, "{:?}", judged.unmet);
        assert!(judged.unmet[0].contains("minKubeVersion (1.27.0) > server version"));
        // requirementStatus in upstream's statuses and words.
        let of_kind = |status: &str| {
            judged
                .statuses
                .iter()
                .find(|s| s.kind == "CustomResourceDefinition" && s.status == status)
                .map(|s| s.message.clone())
        };
        assert_eq!(
            of_kind(NOT_AVAILABLE).as_deref(),
            Some("CRD is present but the Established condition is False (not available)")
        );
        assert_eq!(
            of_kind(NOT_PRESENT).as_deref(),
            Some("CRD version not served")
        );
    }

    fn with_account_rules() -> ClusterServiceVersion {
        let mut csv = csv();
        csv.spec.min_kube_version = None;
        csv.spec.customresourcedefinitions = None;
        let rule = |resource: &str| PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resource.into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        };
        csv.spec.install.spec = Some(crate::api::StrategyDetailsDeployment {
            permissions: vec![crate::api::StrategyDeploymentPermissions {
                service_account_name: "sa".into(),
                rules: vec![rule("pods"), rule("secrets")],
            }],
            cluster_permissions: vec![crate::api::StrategyDeploymentPermissions {
                service_account_name: "sa".into(),
                rules: vec![rule("nodes")],
            }],
            ..Default::default()
        });
        csv
    }

    #[test]
    fn an_account_that_does_not_exist_blocks_with_upstreams_words() {
        let found = Found {
            service_accounts: vec![AccountFound {
                name: "sa".into(),
                ..AccountFound::default()
            }],
            ..Found::default()
        };
        let judged = judge(&with_account_rules(), &found);
        assert_eq!(judged.unmet, ["ServiceAccount sa does not exist"]);
        assert_eq!(judged.statuses[0].status, NOT_PRESENT);
        assert_eq!(judged.statuses[0].message, "Service account does not exist");
        assert!(judged.statuses[0].dependents.is_empty());
        assert_eq!(parse_kube_version("v1.37.1"), Some((1, 37, 1)));
        assert_eq!(parse_kube_version("1.27"), Some((1, 27, 0)));
    }

    #[test]
    fn every_rule_the_account_lacks_is_listed_and_blocks() {
        let found = Found {
            service_accounts: vec![AccountFound {
                name: "sa".into(),
                exists: true,
                namespaced: vec![true, false],
                cluster: vec![false],
            }],
            ..Found::default()
        };
        let judged = judge(&with_account_rules(), &found);
        let status = &judged.statuses[0];
        assert_eq!(status.status, PRESENT_NOT_SATISFIED);
        let dependents: Vec<(&str, &str)> = status
            .dependents
            .iter()
            .map(|d| (d.status.as_str(), d.message.as_deref().unwrap_or_default()))
            .collect();
        assert_eq!(
            dependents,
            [
                (
                    "Satisfied",
                    r#"namespaced rule:{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}"#
                ),
                (
                    "NotSatisfied",
                    r#"namespaced rule:{"verbs":["get"],"apiGroups":[""],"resources":["secrets"]}"#
                ),
                (
                    "NotSatisfied",
                    r#"cluster rule:{"verbs":["get"],"apiGroups":[""],"resources":["nodes"]}"#
                ),
            ]
        );
        assert_eq!(judged.unmet.len(), 2);
        assert!(
            judged.unmet[1].contains("cluster rule"),
            "{:?}",
            judged.unmet
        );
    }

    #[test]
    fn an_account_holding_every_rule_is_present() {
        let found = Found {
            service_accounts: vec![AccountFound {
                name: "sa".into(),
                exists: true,
                namespaced: vec![true, true],
                cluster: vec![true],
            }],
            ..Found::default()
        };
        let judged = judge(&with_account_rules(), &found);
        assert!(judged.unmet.is_empty());
        assert_eq!(judged.statuses[0].status, PRESENT);
    }

    #[test]
    fn a_crd_read_ready_is_not_read_again_for_metadata_churn() {
        let at = |rv: &str, uid: &str, generation| CrdReadAt {
            resource_version: rv.into(),
            uid: Some(uid.into()),
            generation: Some(generation),
        };
        let state = |ready| CrdState {
            uid: "u".into(),
            established: ready,
            names_accepted: ready,
            served_versions: vec!["v1".into()],
        };
        let read = at("10", "u", 1);
        // The version read: holds, ready or not.
        assert!(read.still_holds(&state(false), &at("10", "u", 1)));
        // Labels or annotations written since: holds once it was read ready.
        assert!(read.still_holds(&state(true), &at("11", "u", 1)));
        assert!(!read.still_holds(&state(false), &at("11", "u", 1)));
        // A new spec, or another CRD of the same name: read again.
        assert!(!read.still_holds(&state(true), &at("12", "u", 2)));
        assert!(!read.still_holds(&state(true), &at("13", "other", 1)));
    }
}
