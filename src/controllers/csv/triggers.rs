//! What wakes a CSV's round: the mappers from other objects' changes to the CSVs they
//! concern.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use crate::api::ClusterServiceVersion;
use crate::controllers::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

use super::context::{CsvContext, CsvRef};
use super::rbac_cache::RbacStores;

pub(super) fn csvs_where(
    csvs: &Store<DeserializeGuard<ClusterServiceVersion>>,
    keep: impl Fn(&ClusterServiceVersion) -> bool,
) -> Vec<CsvRef> {
    csvs.state()
        .iter()
        .filter(|g| g.0.as_ref().is_ok_and(&keep))
        .map(|g| ObjectRef::from_obj(g.as_ref()))
        .collect()
}

/// The shared RBAC caches, and the CSVs their changes wake: RBAC labelled as a CSV's (its
/// plan's steps, its copies) wakes that CSV; a grant made otherwise is seen by the
/// unmet-requirements backstop.
pub(super) fn rbac_watch(
    informers: &crate::controllers::informers::RbacInformers,
) -> (
    RbacStores,
    impl futures::Stream<Item = ObjectRef<DeserializeGuard<ClusterServiceVersion>>> + Send + 'static,
) {
    use futures::StreamExt;
    fn wakes<K: kube::Resource + Send + Sync + 'static>(
        changes: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    ) -> futures::stream::BoxStream<'static, ObjectRef<DeserializeGuard<ClusterServiceVersion>>>
    {
        changes
            .flat_map(|o| {
                futures::stream::iter(owner_csv(
                    o.meta().labels.as_ref().unwrap_or(&BTreeMap::new()),
                ))
            })
            .boxed()
    }
    let (roles, role_changes) = informers.roles.subscribe_touched();
    let (role_bindings, role_binding_changes) = informers.role_bindings.subscribe_touched();
    let (cluster_roles, cluster_role_changes) = informers.cluster_roles.subscribe_touched();
    let (cluster_role_bindings, cluster_role_binding_changes) =
        informers.cluster_role_bindings.subscribe_touched();
    let stores = RbacStores {
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
    };
    let all = futures::stream::select_all([
        wakes(role_changes),
        wakes(role_binding_changes),
        wakes(cluster_role_changes),
        wakes(cluster_role_binding_changes),
    ]);
    (stores, all)
}

/// Which CSVs a CRD's change wakes. Every install annotates the CRDs it brings
/// (`installed-alongside`), so a CRD that a hundred operators own changes a hundred times in
/// a burst of installs; waking every owner each time re-ran every CSV's round (a GET of the
/// CRD and of its ServiceAccounts) dozens of times per install. The watch sees metadata
/// only, so what changed is told apart by what the CSVs last read of the CRD
/// ([`CsvContext::crd_states`]): every owner wakes when the CRD comes, goes or its spec
/// changes (its generation); the owners not yet Succeeded also wake on any other change
/// until a round has read the CRD Established with its names accepted (what they wait for);
/// after that, annotation and status churn wakes no one.
#[derive(Debug, PartialEq)]
pub(super) enum CrdWake {
    Everyone,
    Unsettled,
    No,
}

pub(super) struct CrdTriggers {
    pub(super) ctx: Arc<CsvContext>,
    pub(super) generations: std::sync::Mutex<HashMap<String, i64>>,
}

impl CrdTriggers {
    pub(super) fn wake(&self, crd: &PartialObjectMeta<CustomResourceDefinition>) -> CrdWake {
        let name = crd.name_any();
        let mut generations = self
            .generations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.ctx.crd_meta.get(&ObjectRef::new(&name)).is_none() {
            generations.remove(&name);
            return crd_wake(false, false, false);
        }
        let generation = crd.metadata.generation.unwrap_or_default();
        let spec_changed = generations.insert(name.clone(), generation) != Some(generation);
        let read_ready = self
            .ctx
            .crd_states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&name)
            .is_some_and(|(_, state)| state.established && state.names_accepted);
        crd_wake(true, spec_changed, read_ready)
    }
}

/// [`CrdTriggers`]' decision: `present` in the watch, its generation new to us, and last
/// read Established with its names accepted.
pub(super) fn crd_wake(present: bool, spec_changed: bool, read_ready: bool) -> CrdWake {
    match (present, spec_changed, read_ready) {
        (false, _, _) | (true, true, _) => CrdWake::Everyone,
        (true, false, false) => CrdWake::Unsettled,
        (true, false, true) => CrdWake::No,
    }
}

/// The CSV that `labels` name as their owner.
pub(super) fn owner_csv(
    labels: &BTreeMap<String, String>,
) -> Vec<ObjectRef<DeserializeGuard<ClusterServiceVersion>>> {
    match (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL)) {
        (Some(name), Some(ns)) => vec![ObjectRef::new(name).within(ns)],
        _ => vec![],
    }
}

/// The objects of kind `K` that OLM made for CSVs (labelled as a CSV's), without their
/// managed fields (a Deployment's are a few KiB, and only this controller reads them).
pub(super) fn watch_owned<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let config = watcher::Config::default()
        .any_semantic()
        .labels(&format!("{OWNER_KIND_LABEL}=ClusterServiceVersion"));
    let objects = watcher(api, config).modify(|o: &mut K| o.meta_mut().managed_fields = None);
    let changes = reflector::reflector(writer, objects)
        .default_backoff()
        .touched_objects();
    (store, changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_churn_wakes_no_one_once_the_crd_was_read_ready() {
        // Gone, or a new spec: every owner re-checks.
        assert_eq!(crd_wake(false, false, true), CrdWake::Everyone);
        assert_eq!(crd_wake(true, true, true), CrdWake::Everyone);
        // Another change before any round saw it Established: those still waiting.
        assert_eq!(crd_wake(true, false, false), CrdWake::Unsettled);
        // After: an annotation or status write wakes no one.
        assert_eq!(crd_wake(true, false, true), CrdWake::No);
    }
}
