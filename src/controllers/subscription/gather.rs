//! What one round of a namespace reads, from the caches alone (no API call), and its
//! fingerprint: a round whose inputs hash as the last resolution's did stops there, so a
//! steady state neither resolves nor writes.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube::ResourceExt;

use super::context::{SubscriptionContext, ok};
use super::decide::{self, CatalogHealth};
use crate::api::{CatalogSource, ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::resolver::CatalogRef;
use crate::snapshots::CatalogSnapshot;

/// What one round of a namespace reads, from the caches.
pub(super) struct Gathered {
    pub(super) subscriptions: Vec<Subscription>,
    pub(super) csvs: Vec<ClusterServiceVersion>,
    pub(super) groups: Vec<OperatorGroup>,
    /// The catalogs the namespace sees, highest priority first.
    pub(super) catalogs: Vec<CatalogSource>,
    pub(super) snapshots: Vec<Arc<CatalogSnapshot>>,
    pub(super) cached_plans: Vec<InstallPlan>,
}

impl SubscriptionContext {
    /// The namespace's objects from the caches, and the catalogs (with their snapshots) it
    /// sees: its own, and the global namespace's unless its one OperatorGroup excludes them.
    pub(super) fn gather(&self, namespace: &str) -> Gathered {
        let in_ns = |meta_ns: Option<String>| meta_ns.as_deref() == Some(namespace);
        let subscriptions: Vec<Subscription> = self
            .subscriptions
            .state()
            .iter()
            .filter_map(ok)
            .filter(|s| in_ns(s.namespace()) && s.metadata.deletion_timestamp.is_none())
            .cloned()
            .collect();
        let csvs = in_namespace(&self.csvs, namespace);
        let groups = in_namespace(&self.groups, namespace);
        let cached_plans = in_namespace(&self.plans, namespace);
        let global = self.shared.settings.global_catalog_namespace.as_str();
        let exclude_global = groups.len() == 1
            && groups[0]
                .annotations()
                .get(decide::ANNOTATION_EXCLUDE_GLOBAL)
                .is_some_and(|v| v == "true");
        let visible_ns = |ns: &str| ns == namespace || (!exclude_global && ns == global);
        let mut catalogs: Vec<CatalogSource> = self
            .catalogs
            .state()
            .iter()
            .filter_map(ok)
            .filter(|c| c.namespace().is_some_and(|ns| visible_ns(&ns)))
            .cloned()
            .collect();
        catalogs.sort_by(|a, b| {
            b.spec
                .priority
                .unwrap_or(0)
                .cmp(&a.spec.priority.unwrap_or(0))
                .then_with(|| a.namespace().cmp(&b.namespace()))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let snapshots = self
            .shared
            .snapshots
            .visible_from(namespace, global)
            .into_iter()
            .filter(|s| visible_ns(&s.catalog.namespace))
            .collect();
        Gathered {
            subscriptions,
            csvs,
            groups,
            catalogs,
            snapshots,
            cached_plans,
        }
    }
}

/// The readable objects of a cache that are in `namespace`.
fn in_namespace<K>(
    store: &kube::runtime::reflector::Store<kube::core::DeserializeGuard<K>>,
    namespace: &str,
) -> Vec<K>
where
    K: kube::Resource<DynamicType = ()> + Clone,
{
    store
        .state()
        .iter()
        .filter_map(ok)
        .filter(|k| k.meta().namespace.as_deref() == Some(namespace))
        .cloned()
        .collect()
}

impl Gathered {
    /// Everything resolution and status depend on, hashed: equal fingerprints mean the
    /// round would decide the same and write nothing.
    pub(super) fn fingerprint(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for s in &self.subscriptions {
            (s.name_any(), s.uid()).hash(&mut hasher);
            hash_json(&s.spec, &mut hasher);
            hash_json(&s.status, &mut hasher);
        }
        for c in &self.csvs {
            (c.name_any(), c.uid(), &c.spec.replaces, &c.spec.version).hash(&mut hasher);
            c.annotations()
                .get(decide::ANNOTATION_PROPERTIES)
                .hash(&mut hasher);
            c.labels().get(decide::LABEL_COPIED_FROM).hash(&mut hasher);
            hash_json(&c.status.as_ref().and_then(|s| s.phase), &mut hasher);
        }
        for p in &self.cached_plans {
            (p.name_any(), p.uid()).hash(&mut hasher);
            hash_json(&p.spec, &mut hasher);
            hash_json(&p.phase(), &mut hasher);
            // What a Subscription relays of its plan: the conditions and message (a client
            // may change only the Installed reason), and the bundle lookups' conditions.
            if let Some(status) = &p.status {
                hash_json(&(&status.conditions, &status.message), &mut hasher);
                // What an upgrade policy reads of its preview (UpgradeHeld follows it).
                let impact = status.impact.as_ref();
                hash_json(&impact.map(|i| (i.escalates(), &i.blockers)), &mut hasher);
                for lookup in &status.bundle_lookups {
                    hash_json(&lookup.conditions, &mut hasher);
                }
            }
        }
        for g in &self.groups {
            (
                g.name_any(),
                g.annotations().get(decide::ANNOTATION_EXCLUDE_GLOBAL),
            )
                .hash(&mut hasher);
        }
        for c in &self.catalogs {
            (c.namespace(), c.name_any(), c.uid(), healthy(c, None)).hash(&mut hasher);
            c.status
                .as_ref()
                .and_then(|s| s.message.clone())
                .hash(&mut hasher);
        }
        for s in &self.snapshots {
            (
                &s.catalog.namespace,
                &s.catalog.name,
                &s.digest,
                s.catalog.priority,
            )
                .hash(&mut hasher);
        }
        hasher.finish()
    }

    /// The health of every catalog the namespace sees, as its Subscriptions report it.
    pub(super) fn catalog_health(&self) -> Vec<CatalogHealth> {
        self.catalogs
            .iter()
            .map(|c| {
                let source = CatalogRef::new(c.name_any(), c.namespace().unwrap_or_default());
                let snapshot = self.snapshot_of(&source);
                CatalogHealth {
                    healthy: healthy(c, snapshot.map(AsRef::as_ref)),
                    uid: c.uid(),
                    source,
                }
            })
            .collect()
    }

    /// The snapshot of the catalog `source`, when its content is loaded.
    pub(super) fn snapshot_of(&self, source: &CatalogRef) -> Option<&Arc<CatalogSnapshot>> {
        self.snapshots
            .iter()
            .find(|s| s.catalog.name == source.name && s.catalog.namespace == source.namespace)
    }
}

/// Hashes a value's JSON (the API types do not implement `Hash`); a value that does not
/// serialize hashes as the empty string.
fn hash_json(value: &impl serde::Serialize, hasher: &mut impl Hasher) {
    serde_json::to_string(value)
        .unwrap_or_default()
        .hash(hasher);
}

/// READY, or (a source with no connection state) content loaded.
fn healthy(source: &CatalogSource, snapshot: Option<&CatalogSnapshot>) -> bool {
    match source
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
    {
        Some(state) => state.last_observed_state == "READY",
        None => snapshot.is_some(),
    }
}
