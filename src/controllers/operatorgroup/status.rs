//! The decide step of the OperatorGroup controller, pure: which namespaces a group targets,
//! the status it should have, the annotations its member CSVs and the group itself carry,
//! and the aggregated ClusterRoles upstream creates per group and per provided API.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::{ClusterServiceVersion, OperatorGroup, OperatorGroupReason, OperatorGroupStatus};
use crate::cluster::ownership::{selector_is_empty, selector_matches};
use crate::controllers::kit::{Cond, ConditionStatus};
pub use crate::controllers::plan::provided::{
    ApiSource, ProvidedApi, api_cluster_roles, group_cluster_roles, provided_apis,
    provided_apis_annotation,
};

pub const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
pub use crate::api::PROVIDED_APIS_ANNOTATION;

pub const CONDITION_MULTIPLE_GROUPS: &str = "MultipleOperatorGroup";
pub const CONDITION_SERVICE_ACCOUNT: &str = "OperatorGroupServiceAccount";
/// The condition types this controller writes.
pub const OWN_CONDITIONS: [&str; 2] = [CONDITION_MULTIPLE_GROUPS, CONDITION_SERVICE_ACCOUNT];

/// A namespace as the group's selector sees it.
#[derive(Clone, Debug)]
pub struct NamespaceInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// The target namespaces, sorted: `spec.targetNamespaces` (those that exist), else the
/// namespaces `spec.selector` matches, else `[""]` (all namespaces).
pub fn target_namespaces(group: &OperatorGroup, namespaces: &[NamespaceInfo]) -> Vec<String> {
    let spec = &group.spec;
    let mut targets: Vec<String> = if let Some(listed) = spec
        .target_namespaces
        .as_ref()
        .filter(|listed| !listed.is_empty())
    {
        listed
            .iter()
            .map(|ns| ns.trim().to_string())
            .filter(|ns| namespaces.iter().any(|known| &known.name == ns))
            .collect()
    } else if let Some(selector) = spec.selector.as_ref().filter(|s| !selector_is_empty(s)) {
        namespaces
            .iter()
            .filter(|ns| selector_matches(selector, &ns.labels))
            .map(|ns| ns.name.clone())
            .collect()
    } else {
        vec![String::new()]
    };
    targets.sort();
    targets.dedup();
    targets
}

/// `olm.targetNamespaces` as upstream writes it: sorted, comma-joined, "" for all.
pub fn targets_annotation(targets: &[String]) -> String {
    targets.join(",")
}

#[derive(Clone, Debug)]
pub struct Observation {
    pub targets: Vec<String>,
    /// OperatorGroups in the group's namespace, this one included.
    pub groups_in_namespace: usize,
    /// `spec.serviceAccountName`'s ServiceAccount, when it exists (its uid).
    pub service_account_uid: Option<String>,
    pub now: Timestamp,
}

/// The status the group should have. `lastUpdated` moves only when the namespace set does.
pub fn desired_status(group: &OperatorGroup, observed: &Observation) -> OperatorGroupStatus {
    let current = group.status.clone().unwrap_or_default();
    let last_updated = if current.namespaces == observed.targets && current.last_updated.is_some() {
        current.last_updated.clone()
    } else {
        Some(Time(observed.now))
    };
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let sa_name = group
        .spec
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty());
    let service_account_ref = match (sa_name, &observed.service_account_uid) {
        (Some(name), Some(uid)) => Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ServiceAccount".into()),
            name: Some(name.into()),
            namespace: Some(namespace.clone()),
            uid: Some(uid.clone()),
            ..ObjectReference::default()
        }),
        _ => None,
    };
    let mut conditions = Vec::new();
    if observed.groups_in_namespace > 1 {
        conditions.push(condition(
            &current,
            CONDITION_MULTIPLE_GROUPS,
            OperatorGroupReason::MultipleOperatorGroupsFound,
            "Multiple OperatorGroup found in the same namespace".into(),
            observed.now,
        ));
    }
    if let (Some(name), None) = (sa_name, &observed.service_account_uid) {
        conditions.push(condition(
            &current,
            CONDITION_SERVICE_ACCOUNT,
            OperatorGroupReason::ServiceAccountNotFound,
            format!("ServiceAccount {name} not found in namespace {namespace}"),
            observed.now,
        ));
    }
    OperatorGroupStatus {
        namespaces: observed.targets.clone(),
        service_account_ref,
        last_updated,
        conditions,
    }
}

fn condition(
    current: &OperatorGroupStatus,
    type_: &str,
    reason: OperatorGroupReason,
    message: String,
    now: Timestamp,
) -> Condition {
    let previous = current.conditions.iter().find(|c| c.type_ == type_);
    Cond::new(type_, ConditionStatus::True, reason, message).into_meta(previous, None, now)
}

/// What the OperatorGroup controller reads for one group.
#[derive(Clone, Debug, Default)]
pub struct Gathered {
    pub namespaces: Vec<NamespaceInfo>,
    /// OperatorGroups in the group's namespace, this one included.
    pub groups_in_namespace: usize,
    /// `spec.serviceAccountName`'s ServiceAccount, when it exists (its uid).
    pub service_account_uid: Option<String>,
    /// The CSVs of the group's namespace (no copies).
    pub members: Vec<ClusterServiceVersion>,
    /// The uid of each provided API's CRD that exists, by CRD name.
    /// The UID of each provided API's CRD or APIService that exists (it owns the roles).
    pub source_uids: BTreeMap<ApiSource, String>,
}

/// What a round writes; each part only when the object differs from it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The status fields this controller owns.
    pub status: Option<OperatorGroupStatus>,
    /// New target namespaces, for the Event (with `status`).
    pub targets_changed: Option<Vec<String>>,
    /// The `olm.providedAPIs` annotation.
    pub provided_apis: Option<String>,
    /// Member CSVs whose annotations lack `member_annotations`.
    pub annotate_members: Vec<String>,
    pub member_annotations: BTreeMap<String, String>,
    /// Every ClusterRole of the group (applied when its hash label differs from the cache).
    pub cluster_roles: Vec<ClusterRole>,
    /// Namespaces to label with [`namespace_label`] (true) or to unlabel (false).
    pub namespace_labels: Vec<(String, bool)>,
}

/// The label upstream puts on each target namespace of a group: `olm.operatorgroup.uid/<uid>`.
pub fn namespace_label(group: &OperatorGroup) -> Option<String> {
    group
        .metadata
        .uid
        .as_deref()
        .filter(|uid| !uid.is_empty())
        .map(crate::cluster::ownership::operator_group_namespace_label)
}

/// Target namespaces lacking the group's label, and labelled namespaces no longer targeted
/// (all namespaces, `[""]`, label none).
fn namespace_labels(
    group: &OperatorGroup,
    targets: &[String],
    namespaces: &[NamespaceInfo],
) -> Vec<(String, bool)> {
    let Some(label) = namespace_label(group) else {
        return Vec::new();
    };
    namespaces
        .iter()
        .filter_map(|ns| {
            let targeted = targets.iter().any(|t| !t.is_empty() && *t == ns.name);
            let labelled = ns.labels.contains_key(&label);
            (targeted != labelled).then(|| (ns.name.clone(), targeted))
        })
        .collect()
}

/// The decide step: from what was gathered to what must be written.
pub fn decide(group: &OperatorGroup, gathered: &Gathered, now: Timestamp) -> Plan {
    let targets = target_namespaces(group, &gathered.namespaces);
    let observed = Observation {
        targets: targets.clone(),
        groups_in_namespace: gathered.groups_in_namespace,
        service_account_uid: gathered.service_account_uid.clone(),
        now,
    };
    let desired = owned_fields(&desired_status(group, &observed));
    let current = group.status.as_ref().map(owned_fields);
    let status = (current.as_ref() != Some(&desired)).then(|| desired.clone());
    let targets_changed = status
        .as_ref()
        .filter(|d| current.as_ref().map(|c| &c.namespaces) != Some(&d.namespaces))
        .map(|d| d.namespaces.clone());
    // As upstream, a CSV's APIs are the group's once its own checks ran (it has a phase):
    // one that loses an owner conflict on its first round never shows in the annotation.
    let apis = provided_apis(
        gathered
            .members
            .iter()
            .filter(|csv| csv.status.as_ref().is_some_and(|s| s.phase.is_some())),
    );
    let provided = provided_apis_annotation(&apis);
    // A static group's annotation is the admin's.
    let is_static = group.spec.static_provided_apis == Some(true);
    // As upstream, a missing annotation is the empty set: a group that never provided an
    // API gets none written (clients wait for it to have no annotations at all).
    let current_apis = group
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVIDED_APIS_ANNOTATION))
        .map_or("", String::as_str);
    let provided_apis = (!is_static && current_apis != provided).then_some(provided);
    // With two groups in the namespace no CSV is a member of either (TooManyOperatorGroups).
    let member_annotations = member_annotations(group, &targets);
    let annotate_members = if gathered.groups_in_namespace == 1 {
        gathered
            .members
            .iter()
            .filter(|csv| !has_annotations(csv, &member_annotations))
            .map(|csv| csv.metadata.name.clone().unwrap_or_default())
            .collect()
    } else {
        Vec::new()
    };
    let namespace_labels = namespace_labels(group, &targets, &gathered.namespaces);
    let mut cluster_roles = group_cluster_roles(group, &apis);
    for api in &apis {
        if let Some(uid) = gathered.source_uids.get(&api.source) {
            cluster_roles.extend(api_cluster_roles(api, uid));
        }
    }
    Plan {
        status,
        targets_changed,
        provided_apis,
        annotate_members,
        member_annotations,
        cluster_roles,
        namespace_labels,
    }
}

/// The status fields this controller owns, for comparison and for the apply patch.
pub fn owned_fields(status: &OperatorGroupStatus) -> OperatorGroupStatus {
    OperatorGroupStatus {
        namespaces: status.namespaces.clone(),
        service_account_ref: status.service_account_ref.clone(),
        last_updated: status.last_updated.clone(),
        conditions: status
            .conditions
            .iter()
            .filter(|c| OWN_CONDITIONS.contains(&c.type_.as_str()))
            .cloned()
            .collect(),
    }
}

/// The annotations a member CSV carries.
pub fn member_annotations(group: &OperatorGroup, targets: &[String]) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            OPERATOR_GROUP_ANNOTATION.to_string(),
            group.metadata.name.clone().unwrap_or_default(),
        ),
        (
            OPERATOR_NAMESPACE_ANNOTATION.to_string(),
            group.metadata.namespace.clone().unwrap_or_default(),
        ),
        (
            TARGET_NAMESPACES_ANNOTATION.to_string(),
            targets_annotation(targets),
        ),
    ])
}

/// Whether `csv` already carries every annotation in `wanted`.
pub fn has_annotations(csv: &ClusterServiceVersion, wanted: &BTreeMap<String, String>) -> bool {
    let current = csv.metadata.annotations.as_ref();
    wanted
        .iter()
        .all(|(k, v)| current.and_then(|a| a.get(k)) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CrdDescription, CustomResourceDefinitions, OperatorGroupSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn group(spec: OperatorGroupSpec) -> OperatorGroup {
        let mut og = OperatorGroup::new("og", spec);
        og.metadata.namespace = Some("op".into());
        og
    }

    /// A CSV in the group's namespace that owns one CRD.
    fn reverse_words_csv() -> ClusterServiceVersion {
        let mut csv = ClusterServiceVersion::new("rw.v1", Default::default());
        csv.metadata.namespace = Some("op".into());
        csv.spec.customresourcedefinitions = Some(CustomResourceDefinitions {
            owned: vec![CrdDescription {
                name: "reversewordsapps.apps.linuxera.org".into(),
                version: "v1alpha1".into(),
                kind: "ReverseWordsApp".into(),
                ..CrdDescription::default()
            }],
            required: vec![],
        });
        csv.status = Some(crate::api::ClusterServiceVersionStatus {
            phase: Some(crate::api::CsvPhase::Succeeded),
            ..Default::default()
        });
        csv
    }

    fn namespaces() -> Vec<NamespaceInfo> {
        ["op", "a", "b"]
            .iter()
            .map(|name| NamespaceInfo {
                name: name.to_string(),
                labels: BTreeMap::from([(
                    "team".to_string(),
                    if *name == "b" { "blue" } else { "red" }.to_string(),
                )]),
            })
            .collect()
    }

    #[test]
    fn targets_come_from_the_list_the_selector_or_all() {
        let listed = group(OperatorGroupSpec {
            target_namespaces: Some(vec!["b".into(), "op".into(), "missing".into()]),
            ..OperatorGroupSpec::default()
        });
        assert_eq!(target_namespaces(&listed, &namespaces()), ["b", "op"]);
        let selected = group(OperatorGroupSpec {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("team".into(), "red".into())])),
                match_expressions: None,
            }),
            ..OperatorGroupSpec::default()
        });
        assert_eq!(target_namespaces(&selected, &namespaces()), ["a", "op"]);
        let all = group(OperatorGroupSpec {
            selector: Some(LabelSelector::default()),
            ..OperatorGroupSpec::default()
        });
        assert_eq!(target_namespaces(&all, &namespaces()), [""]);
        assert_eq!(targets_annotation(&["a".into(), "op".into()]), "a,op");
    }

    #[test]
    fn last_updated_moves_only_when_the_set_changes() {
        let mut og = group(OperatorGroupSpec::default());
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let observed = Observation {
            targets: vec!["a".into()],
            groups_in_namespace: 1,
            service_account_uid: None,
            now: t0,
        };
        let first = desired_status(&og, &observed);
        assert_eq!(first.last_updated, Some(Time(t0)));
        og.status = Some(first.clone());
        let same = desired_status(
            &og,
            &Observation {
                now: t1,
                ..observed.clone()
            },
        );
        assert_eq!(same, first, "no change, no write");
        let moved = desired_status(
            &og,
            &Observation {
                targets: vec!["a".into(), "b".into()],
                now: t1,
                ..observed
            },
        );
        assert_eq!(moved.last_updated, Some(Time(t1)));
    }

    #[test]
    fn two_groups_and_a_missing_service_account_show_as_conditions() {
        let og = group(OperatorGroupSpec {
            service_account_name: Some("installer".into()),
            ..OperatorGroupSpec::default()
        });
        let status = desired_status(
            &og,
            &Observation {
                targets: vec!["op".into()],
                groups_in_namespace: 2,
                service_account_uid: None,
                now: Timestamp::UNIX_EPOCH,
            },
        );
        let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            [CONDITION_MULTIPLE_GROUPS, CONDITION_SERVICE_ACCOUNT]
        );
        assert!(status.service_account_ref.is_none());
        let found = desired_status(
            &og,
            &Observation {
                targets: vec!["op".into()],
                groups_in_namespace: 1,
                service_account_uid: Some("u1".into()),
                now: Timestamp::UNIX_EPOCH,
            },
        );
        assert!(found.conditions.is_empty());
        assert_eq!(
            found.service_account_ref.unwrap().name.as_deref(),
            Some("installer")
        );
    }

    /// The decide step over a whole round: a first round writes status, the provided-APIs
    /// annotation, member annotations and every role (per-API roles only once the CRD
    /// exists); a round over what it wrote writes nothing; a second group in the namespace
    /// stops member annotations.
    #[test]
    fn a_round_writes_only_what_differs_and_nothing_at_steady_state() {
        let mut og = group(OperatorGroupSpec {
            target_namespaces: Some(vec!["a".into()]),
            ..OperatorGroupSpec::default()
        });
        let mut csv = reverse_words_csv();
        let mut gathered = Gathered {
            namespaces: namespaces(),
            groups_in_namespace: 1,
            members: vec![csv.clone()],
            ..Gathered::default()
        };
        let now = Timestamp::from_second(1_000).unwrap();
        let first = decide(&og, &gathered, now);
        assert_eq!(first.status.as_ref().unwrap().namespaces, ["a"]);
        assert_eq!(
            first.targets_changed.as_deref(),
            Some(&["a".to_string()][..])
        );
        assert_eq!(
            first.provided_apis.as_deref(),
            Some("ReverseWordsApp.v1alpha1.apps.linuxera.org")
        );
        assert_eq!(first.annotate_members, ["rw.v1"]);
        assert_eq!(first.member_annotations["olm.targetNamespaces"], "a");
        let group_roles = first.cluster_roles.len();
        gathered.source_uids.insert(
            ApiSource::Crd("reversewordsapps.apps.linuxera.org".into()),
            "uid".into(),
        );
        assert_eq!(
            decide(&og, &gathered, now).cluster_roles.len(),
            group_roles + 4,
            "admin, edit, view and crdview once the CRD exists"
        );

        // What the first round wrote, as the next round reads it.
        og.status = first.status.clone();
        og.metadata.annotations = Some(BTreeMap::from([(
            PROVIDED_APIS_ANNOTATION.to_string(),
            first.provided_apis.clone().unwrap(),
        )]));
        csv.metadata.annotations = Some(first.member_annotations);
        gathered.members = vec![csv];
        let later = Timestamp::from_second(2_000).unwrap();
        let steady = decide(&og, &gathered, later);
        assert_eq!(
            (
                steady.status,
                steady.provided_apis,
                steady.annotate_members.len()
            ),
            (None, None, 0)
        );

        // The members leave: the annotation is emptied, not removed (upstream's `""`).
        let mut left = gathered.clone();
        left.members.clear();
        assert_eq!(decide(&og, &left, later).provided_apis.as_deref(), Some(""));
        // A group that never provided anything gets no annotation at all.
        let mut fresh = og.clone();
        fresh.metadata.annotations = None;
        assert_eq!(decide(&fresh, &left, later).provided_apis, None);

        gathered.groups_in_namespace = 2;
        gathered.members[0].metadata.annotations = None;
        let crowded = decide(&og, &gathered, later);
        assert!(crowded.annotate_members.is_empty());
        assert!(
            crowded.status.is_some(),
            "TooManyOperatorGroups is reported"
        );
    }

    fn role_names(roles: &[ClusterRole]) -> Vec<&str> {
        roles
            .iter()
            .filter_map(|r| r.metadata.name.as_deref())
            .collect()
    }

    #[test]
    fn an_owned_api_service_is_provided_with_roles_owned_by_the_api_service() {
        let mut csv = reverse_words_csv();
        csv.spec.customresourcedefinitions = None;
        csv.spec.apiservicedefinitions = serde_json::from_value(serde_json::json!({
            "owned": [{"name": "fedoras", "group": "hats.redhat.com", "version": "v1alpha1",
                       "kind": "Fedora", "deploymentName": "hat"}],
        }))
        .unwrap();
        let apis = provided_apis([&csv]);
        assert_eq!(
            provided_apis_annotation(&apis),
            "Fedora.v1alpha1.hats.redhat.com"
        );
        let roles = api_cluster_roles(&apis[0], "uid");
        let names = role_names(&roles);
        assert_eq!(
            names,
            [
                "fedoras-v1alpha1-admin",
                "fedoras-v1alpha1-edit",
                "fedoras-v1alpha1-view"
            ]
        );
        let owner = &roles[0].metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("APIService", "v1alpha1.hats.redhat.com")
        );
        let rule = &roles[0].rules.as_ref().unwrap()[0];
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["fedoras".to_string()][..])
        );
    }

    #[test]
    fn provided_apis_and_their_roles_are_named_as_upstream() {
        let csv = reverse_words_csv();
        let apis = provided_apis([&csv]);
        assert_eq!(
            provided_apis_annotation(&apis),
            "ReverseWordsApp.v1alpha1.apps.linuxera.org"
        );
        let roles = api_cluster_roles(&apis[0], "uid");
        let names = role_names(&roles);
        assert_eq!(
            names,
            [
                "reversewordsapps.apps.linuxera.org-v1alpha1-admin",
                "reversewordsapps.apps.linuxera.org-v1alpha1-edit",
                "reversewordsapps.apps.linuxera.org-v1alpha1-view",
                "reversewordsapps.apps.linuxera.org-v1alpha1-crdview",
            ]
        );
        let admin_labels = roles[0].metadata.labels.as_ref().unwrap();
        assert_eq!(
            admin_labels.get("rbac.authorization.k8s.io/aggregate-to-admin"),
            Some(&"true".to_string())
        );
        let og = group(OperatorGroupSpec::default());
        let group_roles = group_cluster_roles(&og, &apis);
        let name = group_roles[0].metadata.name.clone().unwrap();
        assert!(name.starts_with("olm.og.og.admin-"), "{name}");
        // The group role selects the per-API role through the shared aggregation label.
        let selector = &group_roles[0]
            .aggregation_rule
            .as_ref()
            .unwrap()
            .cluster_role_selectors
            .as_ref()
            .unwrap()[0];
        assert!(selector_matches(selector, admin_labels));
    }

    #[test]
    fn a_group_without_provided_apis_gets_empty_roles_not_an_empty_aggregation() {
        let group: OperatorGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "empty", "namespace": "ns"},
            "spec": {}
        }))
        .unwrap();
        for role in group_cluster_roles(&group, &[]) {
            assert!(role.aggregation_rule.is_none(), "{role:?}");
            assert_eq!(role.rules, Some(vec![]));
        }
    }

    #[test]
    fn target_namespaces_carry_the_groups_uid_label_and_lose_it_when_untargeted() {
        let mut og = group(OperatorGroupSpec::default());
        og.metadata.uid = Some("u-1".into());
        let label = namespace_label(&og).unwrap();
        assert_eq!(label, "olm.operatorgroup.uid/u-1");
        let ns = |name: &str, labelled: bool| NamespaceInfo {
            name: name.into(),
            labels: if labelled {
                BTreeMap::from([(label.clone(), String::new())])
            } else {
                BTreeMap::new()
            },
        };
        let namespaces = [ns("a", false), ns("b", true), ns("c", true)];
        let changes = namespace_labels(&og, &["a".into(), "b".into()], &namespaces);
        assert_eq!(changes, [("a".to_string(), true), ("c".to_string(), false)]);
        // All namespaces: none is labelled.
        let all = namespace_labels(&og, &[String::new()], &namespaces);
        assert_eq!(all, [("b".to_string(), false), ("c".to_string(), false)]);
    }
}
