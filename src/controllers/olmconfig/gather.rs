//! What a round reads, all from caches: the operators installed in AllNamespaces mode in
//! every namespace this process watches, and their copies as the copier knows them.

use std::collections::HashMap;

use kube::ResourceExt;

use super::context::OlmConfigContext;
use super::decide::{Observed, Source};
use crate::api::{ClusterServiceVersion, CsvPhase, CsvReason, OlmConfig, OperatorGroup};
use crate::controllers::copied_csvs::CopiesView;
use crate::controllers::kit::cache_ready::listed;

/// The round's findings; None while a cache has not listed or the copier's names are not
/// known yet (look again shortly).
pub(super) async fn gather(config: &OlmConfig, ctx: &OlmConfigContext) -> Option<Observed> {
    let view = ctx.shared.copied_csvs.view()?;
    if !listed(&ctx.namespaces).await {
        return None;
    }
    let mut groups = Vec::new();
    let mut csvs = Vec::new();
    for scope in ctx.shared.informers.cluster.scopes() {
        let (scope_groups, scope_csvs) = (scope.operator_groups.store(), scope.csvs.store());
        if !listed(&scope_groups).await || !listed(&scope_csvs).await {
            return None;
        }
        groups.extend(scope_groups.state());
        csvs.extend(scope_csvs.state());
    }
    let active: Vec<String> = ctx
        .namespaces
        .state()
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .map(|n| n.name_any())
        .collect();
    let groups: Vec<&OperatorGroup> = groups.iter().filter_map(|g| g.0.as_ref().ok()).collect();
    let csvs = csvs.iter().filter_map(|c| c.0.as_ref().ok());
    Some(Observed {
        spec: config.spec.clone(),
        flag: ctx.shared.settings.disable_copied_csvs,
        sources: sources(&groups, csvs, &active, view.as_ref()),
    })
}

/// The CSVs of namespaces whose one OperatorGroup targets all namespaces (the copier's
/// reading: a namespace with several groups has no members), with their copies.
fn sources<'a>(
    groups: &[&OperatorGroup],
    csvs: impl Iterator<Item = &'a ClusterServiceVersion>,
    active: &[String],
    view: &dyn CopiesView,
) -> Vec<Source> {
    let mut per_namespace: HashMap<&str, Vec<&OperatorGroup>> = HashMap::new();
    for group in groups {
        per_namespace
            .entry(group.metadata.namespace.as_deref().unwrap_or_default())
            .or_default()
            .push(group);
    }
    let all_namespaces = |namespace: &str| match per_namespace.get(namespace).map(Vec::as_slice) {
        Some([group]) => group
            .status
            .as_ref()
            .is_some_and(|s| s.namespaces.len() == 1 && s.namespaces[0].is_empty()),
        _ => false,
    };
    csvs.filter(|csv| csv.metadata.deletion_timestamp.is_none() && !csv.is_copy())
        .filter_map(|csv| {
            let namespace = csv.metadata.namespace.clone()?;
            if !all_namespaces(&namespace) {
                return None;
            }
            let name = csv.name_any();
            let uncovered = active
                .iter()
                .filter(|ns| **ns != namespace && !view.holds(ns, &name))
                .count();
            Some(Source {
                copies: view.copies_of(&namespace, &name).len(),
                copied: copied(csv),
                uncovered,
                namespace,
                name,
            })
        })
        .collect()
}

/// Whether the copier copies this CSV: settled (Succeeded, or Failed for a reason that is not
/// its group's: a CSV its group cannot take is no member).
fn copied(csv: &ClusterServiceVersion) -> bool {
    let status = csv.status.as_ref();
    match status.and_then(|s| s.phase) {
        Some(CsvPhase::Succeeded) => true,
        Some(CsvPhase::Failed) => !CsvReason::read_back(status.and_then(|s| s.reason.as_deref()))
            .is_operator_group_problem(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ClusterServiceVersionStatus;

    struct Names(Vec<(&'static str, &'static str, Option<&'static str>)>);

    impl CopiesView for Names {
        fn copies_of(&self, source_namespace: &str, name: &str) -> Vec<String> {
            self.0
                .iter()
                .filter(|(_, n, from)| *n == name && *from == Some(source_namespace))
                .map(|(ns, _, _)| (*ns).to_string())
                .collect()
        }
        fn holds(&self, namespace: &str, name: &str) -> bool {
            self.0
                .iter()
                .any(|(ns, n, _)| *ns == namespace && *n == name)
        }
    }

    fn group(namespace: &str, targets: &[&str]) -> OperatorGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": namespace},
            "spec": {},
            "status": {"namespaces": targets},
        }))
        .unwrap()
    }

    fn csv(namespace: &str, name: &str, phase: CsvPhase, reason: &str) -> ClusterServiceVersion {
        let mut csv = ClusterServiceVersion::new(name, Default::default());
        csv.metadata.namespace = Some(namespace.into());
        csv.status = Some(ClusterServiceVersionStatus {
            phase: Some(phase),
            reason: Some(reason.into()),
            ..Default::default()
        });
        csv
    }

    #[test]
    fn only_operators_of_all_namespaces_groups_count_with_their_copies() {
        let all = group("ops", &[""]);
        let own = group("team", &["team"]);
        let (twin_a, twin_b) = (group("twins", &[""]), group("twins", &[""]));
        let csvs = [
            csv("ops", "a.v1", CsvPhase::Succeeded, "InstallSucceeded"),
            csv("ops", "b.v1", CsvPhase::Installing, "InstallWaiting"),
            csv("ops", "c.v1", CsvPhase::Failed, "UnsupportedOperatorGroup"),
            csv("ops", "d.v1", CsvPhase::Failed, "ComponentUnhealthy"),
            csv("team", "e.v1", CsvPhase::Succeeded, "InstallSucceeded"),
            csv("twins", "f.v1", CsvPhase::Succeeded, "InstallSucceeded"),
        ];
        // a.v1 is copied into x; y holds its own CSV of that name.
        let names = Names(vec![
            ("x", "a.v1", Some("ops")),
            ("y", "a.v1", None),
            ("x", "e.v1", Some("team")),
        ]);
        let active = ["ops", "x", "y", "z"].map(String::from);
        let found = sources(
            &[&all, &own, &twin_a, &twin_b],
            csvs.iter(),
            &active,
            &names,
        );
        let summary: Vec<(&str, bool, usize, usize)> = found
            .iter()
            .map(|s| (s.name.as_str(), s.copied, s.copies, s.uncovered))
            .collect();
        assert_eq!(
            summary,
            [
                ("a.v1", true, 1, 1),
                ("b.v1", false, 0, 3),
                ("c.v1", false, 0, 3),
                ("d.v1", true, 0, 3),
            ]
        );
    }
}
