//! What wakes a namespace's round, beyond its Subscriptions: changes of the namespace's
//! CSVs (only those that appear, go, or change phase), InstallPlans and OperatorGroups, of
//! a CatalogSource it sees, and of the content digest of a catalog it sees. Any
//! Subscription of the namespace stands for the whole round.
//!
//! Of the CSV changes, every update but a phase change (annotations, conditions,
//! requirement status, the many writes of an install) leaves resolution's input as it was,
//! so it must not cost a resolution.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::{Stream, StreamExt, future};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::api::{CatalogSource, ClusterServiceVersion, Subscription};
use crate::cluster::informers::Change;
use crate::controllers::context::Context;
use crate::resolver::CatalogRef;

type Guarded = DeserializeGuard<ClusterServiceVersion>;

fn key(csv: &Guarded) -> (Option<String>, Option<String>) {
    let meta = match &csv.0 {
        Ok(csv) => &csv.metadata,
        Err(invalid) => &invalid.metadata,
    };
    (meta.namespace.clone(), meta.name.clone())
}

fn phase(csv: &Guarded) -> Option<String> {
    let phase = csv.0.as_ref().ok()?.status.as_ref()?.phase?;
    Some(format!("{phase:?}"))
}

/// The CSVs of an informer's changes whose phase changed since last seen (or that are new
/// or deleted); a relist of unchanged CSVs passes nothing.
pub fn phase_changes<S>(changes: S) -> impl Stream<Item = Arc<Guarded>>
where
    S: Stream<Item = Change<Guarded>>,
{
    let mut seen: HashMap<(Option<String>, Option<String>), Option<String>> = HashMap::new();
    changes.filter_map(move |change| {
        let passed = match change {
            Change::Applied(csv) => {
                let phase = phase(&csv);
                (seen.insert(key(&csv), phase.clone()) != Some(phase)).then_some(csv)
            }
            Change::Deleted(csv) => {
                seen.remove(&key(&csv));
                Some(csv)
            }
        };
        future::ready(passed)
    })
}

type SubRef = ObjectRef<DeserializeGuard<Subscription>>;

/// Every Subscription of `namespace`.
pub(super) fn subscriptions_in(
    store: &Store<DeserializeGuard<Subscription>>,
    namespace: Option<&str>,
) -> Vec<SubRef> {
    store
        .state()
        .iter()
        .filter_map(|g| {
            let meta = match &g.0 {
                Ok(s) => &s.metadata,
                Err(invalid) => &invalid.metadata,
            };
            (meta.namespace.as_deref() == namespace).then(|| {
                ObjectRef::new(meta.name.as_deref().unwrap_or_default())
                    .within(meta.namespace.as_deref().unwrap_or_default())
            })
        })
        .collect()
}

/// The namespace of an object, readable or not.
pub(super) fn namespace_of<K>(guarded: &DeserializeGuard<K>) -> Option<String>
where
    K: Resource<DynamicType = ()>,
{
    match &guarded.0 {
        Ok(k) => k.meta().namespace.clone(),
        Err(invalid) => invalid.metadata.namespace.clone(),
    }
}

/// Every readable Subscription, of any namespace.
fn every_subscription(store: &Store<DeserializeGuard<Subscription>>) -> Vec<SubRef> {
    store
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .map(|s| ObjectRef::new(&s.name_any()).within(&s.namespace().unwrap_or_default()))
        .collect()
}

/// The Subscriptions a CatalogSource's change concerns: those of its namespace, or, for a
/// catalog of the global namespace (which every namespace may see), all of them.
pub(super) fn for_catalog(
    store: &Store<DeserializeGuard<Subscription>>,
    global: &str,
    catalog: &DeserializeGuard<CatalogSource>,
) -> Vec<SubRef> {
    let ns = namespace_of(catalog);
    if ns.as_deref() == Some(global) {
        every_subscription(store)
    } else {
        subscriptions_in(store, ns.as_deref())
    }
}

/// Subscriptions of the namespaces that see a catalog whose content digest changed.
pub(super) fn snapshot_changes(
    shared: Arc<Context>,
    subs: Store<DeserializeGuard<Subscription>>,
) -> impl Stream<Item = SubRef> + Send + 'static {
    let changes = shared.snapshots.changes();
    let initial = shared.snapshots.digests();
    futures::stream::unfold(
        (changes, initial),
        move |(mut changes, mut last): (tokio::sync::watch::Receiver<u64>, BTreeMap<CatalogRef, String>)| {
            let shared = Arc::clone(&shared);
            let subs = subs.clone();
            async move {
                changes.changed().await.ok()?;
                let now = shared.snapshots.digests();
                let changed = changed_catalogs(&last, &now);
                last = now;
                let global = shared.settings.global_catalog_namespace.clone();
                let refs: Vec<_> = subs
                    .state()
                    .iter()
                    .filter_map(|g| g.0.as_ref().ok())
                    .filter(|s| {
                        let ns = s.namespace().unwrap_or_default();
                        changed.iter().any(|c| c.namespace == ns || c.namespace == global)
                    })
                    .map(|s| ObjectRef::new(&s.name_any()).within(&s.namespace().unwrap_or_default()))
                    .collect();
                if !refs.is_empty() {
                    tracing::debug!(catalogs = ?changed, subscriptions = refs.len(), "catalog content changed; re-resolving");
                }
                Some((futures::stream::iter(refs), (changes, last)))
            }
        },
    )
    .flatten()
}

/// The catalogs whose digest differs between `last` and `now`, or that are in one only.
fn changed_catalogs(
    last: &BTreeMap<CatalogRef, String>,
    now: &BTreeMap<CatalogRef, String>,
) -> BTreeSet<CatalogRef> {
    now.iter()
        .filter(|(r, d)| last.get(*r) != Some(*d))
        .map(|(r, _)| r.clone())
        .chain(last.keys().filter(|r| !now.contains_key(*r)).cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterServiceVersionStatus, CsvPhase};

    fn csv(name: &str, phase: Option<CsvPhase>, note: &str) -> Arc<Guarded> {
        let mut csv = ClusterServiceVersion::new(name, Default::default());
        csv.metadata.namespace = Some("ns".into());
        csv.metadata.annotations = Some([("note".to_string(), note.to_string())].into());
        csv.status = phase.map(|phase| ClusterServiceVersionStatus {
            phase: Some(phase),
            ..Default::default()
        });
        Arc::new(DeserializeGuard(Ok(csv)))
    }

    #[tokio::test]
    async fn only_new_gone_and_phase_changed_csvs_pass() {
        use Change::*;
        let changes = vec![
            // The first list.
            Applied(csv("a", Some(CsvPhase::Succeeded), "1")),
            Applied(csv("a", Some(CsvPhase::Succeeded), "2")),
            Applied(csv("b", None, "1")),
            Applied(csv("b", Some(CsvPhase::Pending), "1")),
            Applied(csv("b", Some(CsvPhase::Pending), "2")),
            // A relist of what is known passes nothing.
            Applied(csv("a", Some(CsvPhase::Succeeded), "2")),
            Deleted(csv("a", Some(CsvPhase::Succeeded), "2")),
            Applied(csv("a", Some(CsvPhase::Pending), "3")),
        ];
        let passed: Vec<(String, Option<String>)> = phase_changes(futures::stream::iter(changes))
            .map(|csv| (key(&csv).1.unwrap(), phase(&csv)))
            .collect()
            .await;
        let phase = |p: &str| Some(p.to_string());
        assert_eq!(
            passed,
            [
                ("a".to_string(), phase("Succeeded")),
                ("b".into(), None),
                ("b".into(), phase("Pending")),
                ("a".into(), phase("Succeeded")),
                ("a".into(), phase("Pending")),
            ]
        );
    }

    #[test]
    fn a_catalog_changes_when_its_digest_does_or_it_comes_or_goes() {
        let r = |name: &str| CatalogRef::new(name, "ns");
        let last: BTreeMap<CatalogRef, String> = [
            (r("same"), "1".to_string()),
            (r("newer"), "1".into()),
            (r("gone"), "1".into()),
        ]
        .into();
        let now: BTreeMap<CatalogRef, String> = [
            (r("same"), "1".to_string()),
            (r("newer"), "2".into()),
            (r("new"), "1".into()),
        ]
        .into();
        let changed: Vec<String> = changed_catalogs(&last, &now)
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(changed, ["gone", "new", "newer"]);
    }
}
