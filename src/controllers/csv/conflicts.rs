//! Upstream's InterOperatorGroupOwnerConflict: two OperatorGroups whose target namespaces
//! meet must not both provide the same API, or two operators would reconcile the same
//! custom resources. Upstream decides by which group wrote the API into its
//! `olm.providedAPIs` annotation first; ours derives that annotation from the members, so
//! the first claim is the older CSV (creation time, then namespace and name). A CSV that
//! already failed this way stays failed while any claimant it lost to remains, so a newer
//! claimant (an upgrade of the winner) never turns the outcome around.

use std::collections::BTreeSet;

use kube::ResourceExt;

use crate::api::{ClusterServiceVersion, OperatorGroup, PROVIDED_APIS_ANNOTATION};

/// Whether two target sets meet (`""` is every namespace).
fn meet(a: &[String], b: &[String]) -> bool {
    let all = |t: &[String]| t.iter().any(String::is_empty);
    all(a) || all(b) || a.iter().any(|n| b.contains(n))
}

/// Creation time, namespace and name: the earlier claims first.
fn claim_order(csv: &ClusterServiceVersion) -> (i64, String, String) {
    let created = csv
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(i64::MAX, |t| t.0.as_second());
    (created, csv.namespace().unwrap_or_default(), csv.name_any())
}

/// Why `csv` (of `namespace`, its group targeting `targets`) may not provide its APIs: the
/// CSV of another group meeting its targets that claimed one of them first. `groups` and
/// `csvs` are every OperatorGroup and CSV OLM sees.
pub fn owner_conflict<'a>(
    csv: &ClusterServiceVersion,
    namespace: &str,
    targets: &[String],
    groups: impl IntoIterator<Item = &'a OperatorGroup>,
    csvs: impl IntoIterator<Item = &'a ClusterServiceVersion>,
) -> Option<String> {
    let mine = csv.provided_api_keys();
    if mine.is_empty() {
        return None;
    }
    let meeting_groups: Vec<&OperatorGroup> = groups
        .into_iter()
        .filter(|g| g.namespace().as_deref() != Some(namespace))
        .filter(|g| {
            g.status
                .as_ref()
                .is_some_and(|s| meet(targets, &s.namespaces))
        })
        .collect();
    // A static group's annotation is its claim (an admin's, with no CSV behind it), and
    // comes before any CSV's, as upstream reads every group's provided APIs.
    for group in meeting_groups
        .iter()
        .filter(|g| g.spec.static_provided_apis == Some(true))
    {
        let shared: Vec<String> = group
            .annotations()
            .get(PROVIDED_APIS_ANNOTATION)
            .into_iter()
            .flat_map(|a| a.split(','))
            .map(str::trim)
            .filter(|k| mine.contains(*k))
            .map(String::from)
            .collect();
        if !shared.is_empty() {
            return Some(format!(
                "intersecting operatorgroups provide the same apis: {} (OperatorGroup {}/{})",
                shared.join(","),
                group.namespace().unwrap_or_default(),
                group.name_any()
            ));
        }
    }
    let meeting: BTreeSet<String> = meeting_groups
        .iter()
        .filter_map(|g| g.namespace())
        .collect();
    let already_lost = csv.lost_its_apis();
    let order = claim_order(csv);
    csvs.into_iter()
        .filter(|other| other.namespace().is_some_and(|ns| meeting.contains(&ns)))
        .filter(|other| !other.is_copy() && other.metadata.deletion_timestamp.is_none())
        .filter(|other| !other.lost_its_apis())
        .filter(|other| already_lost || claim_order(other) < order)
        .find_map(|other| {
            let shared: Vec<String> = other
                .provided_api_keys()
                .intersection(&mine)
                .cloned()
                .collect();
            (!shared.is_empty()).then(|| {
                format!(
                    "intersecting operatorgroups provide the same apis: {} (ClusterServiceVersion {}/{})",
                    shared.join(","),
                    other.namespace().unwrap_or_default(),
                    other.name_any()
                )
            })
        })
}

/// Whether `group` has static provided APIs (`spec.staticProvidedAPIs`: an admin keeps
/// `olm.providedAPIs` by hand) that do not include every API `csv` provides; upstream
/// fails such a CSV (CannotModifyStaticOperatorGroupProvidedAPIs).
pub fn static_group_refuses(csv: &ClusterServiceVersion, group: &OperatorGroup) -> bool {
    if group.spec.static_provided_apis != Some(true) {
        return false;
    }
    let advertised: BTreeSet<&str> = group
        .annotations()
        .get(PROVIDED_APIS_ANNOTATION)
        .map(|a| {
            a.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_default();
    csv.provided_api_keys()
        .iter()
        .any(|api| !advertised.contains(api.as_str()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;

    fn csv(namespace: &str, name: &str, created: i64, kind: &str) -> ClusterServiceVersion {
        let mut csv: ClusterServiceVersion = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"displayName": name, "install": {"strategy": "deployment"},
                "customresourcedefinitions": {"owned": [
                    {"name": format!("{}s.example.com", kind.to_lowercase()), "version": "v1", "kind": kind}]}},
        }))
        .unwrap();
        csv.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        csv
    }

    fn group(namespace: &str, targets: &[&str]) -> OperatorGroup {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": namespace},
            "spec": {},
            "status": {"namespaces": targets, "lastUpdated": "2026-01-01T00:00:00Z"},
        }))
        .unwrap()
    }

    #[test]
    fn the_later_of_two_meeting_groups_fails_naming_the_api_and_the_winner() {
        let groups = [group("a", &[""]), group("b", &["b"])];
        let first = csv("a", "first.v1", 100, "Widget");
        let second = csv("b", "second.v1", 200, "Widget");
        let all = [first.clone(), second.clone()];
        assert_eq!(
            owner_conflict(&first, "a", &[String::new()], &groups, &all),
            None
        );
        assert_eq!(
            owner_conflict(&second, "b", &["b".into()], &groups, &all).as_deref(),
            Some(
                "intersecting operatorgroups provide the same apis: Widget.v1.example.com (ClusterServiceVersion a/first.v1)"
            )
        );
    }

    #[test]
    fn a_static_groups_annotation_is_a_claim_without_any_csv() {
        // Upstream's "static provider": a static group claims Widget by its annotation alone.
        let mut claimed = group("a", &["d"]);
        claimed.spec.static_provided_apis = Some(true);
        claimed.metadata.annotations = Some(
            [(
                PROVIDED_APIS_ANNOTATION.to_string(),
                "Widget.v1.example.com".to_string(),
            )]
            .into(),
        );
        let groups = [claimed, group("b", &[""])];
        let newcomer = csv("b", "widget.v1", 100, "Widget");
        assert_eq!(
            owner_conflict(&newcomer, "b", &[String::new()], &groups, [&newcomer]).as_deref(),
            Some(
                "intersecting operatorgroups provide the same apis: Widget.v1.example.com (OperatorGroup a/og)"
            )
        );
        // A group that does not meet it is free to.
        let elsewhere = csv("c", "widget.v1", 100, "Widget");
        let groups = [groups[0].clone(), group("c", &["c"])];
        assert_eq!(
            owner_conflict(&elsewhere, "c", &["c".into()], &groups, [&elsewhere]),
            None
        );
    }

    #[test]
    fn groups_that_do_not_meet_or_apis_that_differ_do_not_conflict() {
        let groups = [group("a", &["a"]), group("b", &["b"])];
        let first = csv("a", "first.v1", 100, "Widget");
        let second = csv("b", "second.v1", 200, "Widget");
        assert_eq!(
            owner_conflict(&second, "b", &["b".into()], &groups, [&first, &second]),
            None
        );
        let all_groups = [group("a", &[""]), group("b", &["b"])];
        let gadget = csv("b", "gadget.v1", 200, "Gadget");
        assert_eq!(
            owner_conflict(&gadget, "b", &["b".into()], &all_groups, [&first, &gadget]),
            None
        );
    }

    #[test]
    fn a_loser_stays_lost_to_a_newer_upgrade_of_the_winner_and_copies_do_not_count() {
        let groups = [group("a", &[""]), group("b", &["b"])];
        let mut lost = csv("b", "second.v1", 200, "Widget");
        lost.status = Some(
            serde_json::from_value(
                json!({"phase": "Failed", "reason": "InterOperatorGroupOwnerConflict"}),
            )
            .unwrap(),
        );
        let upgrade = csv("a", "first.v2", 300, "Widget");
        assert!(owner_conflict(&lost, "b", &["b".into()], &groups, [&upgrade, &lost]).is_some());
        // The winner's upgrade does not lose to the failed one.
        assert_eq!(
            owner_conflict(&upgrade, "a", &[String::new()], &groups, [&upgrade, &lost]),
            None
        );
        let mut copy = csv("b", "first.v2", 50, "Widget");
        copy.metadata.labels = Some([("olm.copiedFrom".to_string(), "a".to_string())].into());
        assert_eq!(
            owner_conflict(&upgrade, "a", &[String::new()], &groups, [&upgrade, &copy]),
            None
        );
    }

    #[test]
    fn a_static_group_takes_only_the_apis_it_advertises() {
        let widget = csv("a", "widget.v1", 100, "Widget");
        let mut static_group = group("a", &["a"]);
        static_group.spec.static_provided_apis = Some(true);
        assert!(static_group_refuses(&widget, &static_group));
        static_group.metadata.annotations = Some(
            [(
                PROVIDED_APIS_ANNOTATION.to_string(),
                "Gadget.v1.example.com,Widget.v1.example.com".to_string(),
            )]
            .into(),
        );
        assert!(!static_group_refuses(&widget, &static_group));
        assert!(
            !static_group_refuses(&widget, &group("a", &["a"])),
            "not static"
        );
    }
}
