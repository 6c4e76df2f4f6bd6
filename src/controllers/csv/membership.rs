//! A CSV's OperatorGroup and what it means for the CSV: the phase machine's and the
//! copier's one reading of membership.

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;

use super::conflicts;
use super::phase::GroupState;
use crate::api::{ClusterServiceVersion, OperatorGroup, check_install_modes};
use crate::controllers::context::Context;

/// The CSV's OperatorGroup (of those in `groups`) and its state for this CSV.
pub(super) fn group_of(
    csv: &ClusterServiceVersion,
    namespace: &str,
    groups: &Store<DeserializeGuard<OperatorGroup>>,
    shared: &Context,
) -> (Option<OperatorGroup>, GroupState) {
    let groups: Vec<OperatorGroup> = groups
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|g| g.metadata.namespace.as_deref() == Some(namespace))
        .cloned()
        .collect();
    match groups.as_slice() {
        [] => (None, GroupState::NoGroup),
        [group] => (Some(group.clone()), state(csv, namespace, group, shared)),
        many => (None, GroupState::TooMany(many.len())),
    }
}

fn state(
    csv: &ClusterServiceVersion,
    namespace: &str,
    group: &OperatorGroup,
    shared: &Context,
) -> GroupState {
    let Some(status) = &group.status else {
        return GroupState::Waiting;
    };
    if status.namespaces.is_empty() {
        return match status.last_updated {
            None => GroupState::Waiting,
            Some(_) => GroupState::NoTargets,
        };
    }
    let member = || GroupState::Member {
        group: group.name_any(),
        targets: status.namespaces.clone(),
    };
    match check_install_modes(&csv.spec.install_modes, namespace, &status.namespaces) {
        Err(why) => GroupState::Unsupported(why.to_string()),
        // A copy only mirrors its source: its APIs are the source's.
        Ok(()) if csv.is_copy() => member(),
        Ok(()) => match owner_conflict(csv, namespace, &status.namespaces, shared) {
            Some(message) => GroupState::OwnerConflict(message),
            None if conflicts::static_group_refuses(csv, group) => GroupState::StaticApis,
            None => member(),
        },
    }
}

/// Another group meeting this CSV's targets that provides one of its APIs first.
fn owner_conflict(
    csv: &ClusterServiceVersion,
    namespace: &str,
    targets: &[String],
    shared: &Context,
) -> Option<String> {
    // Every watched namespace counts, not only this scope's.
    let scopes = shared.informers.cluster.scopes();
    let groups: Vec<_> = scopes
        .iter()
        .flat_map(|s| s.operator_groups.store().state())
        .collect();
    let csvs: Vec<_> = scopes.iter().flat_map(|s| s.csvs.store().state()).collect();
    conflicts::owner_conflict(
        csv,
        namespace,
        targets,
        groups.iter().filter_map(|g| g.0.as_ref().ok()),
        csvs.iter().filter_map(|c| c.0.as_ref().ok()),
    )
}
