//! The catalog snapshots the CatalogSource controller keeps and the resolver reads: one per
//! CatalogSource, replaced only when a load finds different content, kept when a later load
//! fails (the last good snapshot stays in use).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use tokio::sync::watch;

use crate::catalog::model::fbc::{Bundle, DeclarativeConfig};
use crate::resolver::input::CatalogRef;

mod packed;

pub use packed::{HeadText, PackedBundles, PackedOthers, SnapshotCatalog, SnapshotContent};

/// A catalog's content as last loaded, and where it came from.
#[derive(Debug)]
pub struct CatalogSnapshot {
    /// Bundles packed ([`SnapshotContent`]); [`SnapshotCatalog::unpack`] decodes them.
    pub catalog: SnapshotCatalog,
    /// [`crate::catalog::content_digest`] of the content: equal digests mean no update.
    pub digest: String,
    /// What the content was read from: the gRPC address, or the ConfigMap's resourceVersion.
    pub origin: String,
    pub loaded_at: Timestamp,
    /// What packagemanifests show of each channel head's CSV (empty when this process does
    /// not serve them).
    pub channel_heads: ChannelHeadTexts,
}

/// What packagemanifests show of each channel head's CSV, by (package, bundle), as JSON
/// text (`packageserver::manifest::HeadCsv`): kept beside the content rather than in it, so
/// that the served manifests' JSON shares each description instead of copying it.
pub type ChannelHeadTexts = BTreeMap<(String, String), Arc<HeadText>>;

/// What a reader of the snapshots other than the resolver keeps of each catalog load,
/// beside its content (the packageserver: its channel heads' CSVs). `runtime/` registers
/// one on the snapshots when the process serves that reader; without one a load keeps
/// nothing more. The loaders call it; nothing below its owner names it.
pub trait LoadProjection: Send + Sync {
    /// Condenses a channel head's bundle as a registry load fetches it, so that a load
    /// never holds every head's manifests at once.
    fn condense_fetched(&self) -> fn(&mut Bundle);
    /// A projection of a catalog read blob by blob.
    fn streaming(&self) -> Box<dyn StreamingProjection>;
    /// The projection of a catalog read whole; what it keeps leaves `content`.
    fn keep(&self, content: &mut DeclarativeConfig) -> ChannelHeadTexts;
}

/// [`LoadProjection::keep`] for a catalog read blob by blob.
pub trait StreamingProjection: Send {
    fn add(&mut self, blob: &DeclarativeConfig);
    fn finish(self: Box<Self>, content: &mut DeclarativeConfig) -> ChannelHeadTexts;
}

/// All snapshots of this process, shared by the controllers and the packageserver.
pub struct CatalogSnapshots {
    by_ref: RwLock<BTreeMap<CatalogRef, Arc<CatalogSnapshot>>>,
    projection: OnceLock<Arc<dyn LoadProjection>>,
    /// Bumped whenever a snapshot is added, replaced or dropped (not on priority changes):
    /// readers compare digests to learn which catalogs changed.
    changes: watch::Sender<u64>,
}

impl Default for CatalogSnapshots {
    fn default() -> Self {
        CatalogSnapshots {
            by_ref: RwLock::default(),
            projection: OnceLock::new(),
            changes: watch::Sender::new(0),
        }
    }
}

/// What `/debug/catalogs` shows of one snapshot.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSummary {
    pub namespace: String,
    pub name: String,
    pub priority: i32,
    pub digest: String,
    pub origin: String,
    pub loaded_at: String,
    pub packages: Vec<String>,
    pub bundles: usize,
    /// What the snapshot holds, in bytes: its bundles packed, the channel heads' CSV
    /// descriptions (packagemanifests), and the other blobs (the packagemanifests' icons).
    pub held_bytes: HeldBytes,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldBytes {
    pub bundles_packed: usize,
    pub channel_heads: usize,
    pub others: usize,
}

impl CatalogSnapshots {
    /// Registers what loads keep beside the content (once, before the first load).
    pub fn set_projection(&self, projection: Arc<dyn LoadProjection>) {
        let _ = self.projection.set(projection);
    }

    pub fn projection(&self) -> Option<&Arc<dyn LoadProjection>> {
        self.projection.get()
    }

    pub fn get(&self, source: &CatalogRef) -> Option<Arc<CatalogSnapshot>> {
        self.read().get(source).cloned()
    }

    pub fn insert(&self, snapshot: CatalogSnapshot) -> Arc<CatalogSnapshot> {
        let source = CatalogRef::new(&snapshot.catalog.name, &snapshot.catalog.namespace);
        let snapshot = Arc::new(snapshot);
        self.write().insert(source, Arc::clone(&snapshot));
        self.changes.send_modify(|n| *n += 1);
        snapshot
    }

    /// Wakes on every content change (insert or removal); compare [`Self::digests`] to see
    /// which catalogs changed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The content digest of every snapshot held.
    pub fn digests(&self) -> BTreeMap<CatalogRef, String> {
        self.read()
            .iter()
            .map(|(source, snapshot)| (source.clone(), snapshot.digest.clone()))
            .collect()
    }

    /// Keeps the content but records a new priority (a spec change that needs no reload).
    pub fn set_priority(&self, source: &CatalogRef, priority: i32) {
        let mut map = self.write();
        if let Some(current) = map.get(source)
            && current.catalog.priority != priority
        {
            let mut catalog = current.catalog.clone();
            catalog.priority = priority;
            let updated = CatalogSnapshot {
                catalog,
                digest: current.digest.clone(),
                origin: current.origin.clone(),
                loaded_at: current.loaded_at,
                channel_heads: current.channel_heads.clone(),
            };
            map.insert(source.clone(), Arc::new(updated));
        }
    }

    /// Drops the snapshots of CatalogSources that no longer exist.
    pub fn retain(&self, mut keep: impl FnMut(&CatalogRef) -> bool) -> Vec<CatalogRef> {
        let mut map = self.write();
        let gone: Vec<CatalogRef> = map.keys().filter(|r| !keep(r)).cloned().collect();
        for source in &gone {
            map.remove(source);
        }
        drop(map);
        if !gone.is_empty() {
            self.changes.send_modify(|n| *n += 1);
        }
        gone
    }

    /// The catalogs a namespace resolves against: its own plus those of the global catalog
    /// namespace, highest priority first, then by namespace and name (upstream's order).
    pub fn visible_from(
        &self,
        namespace: &str,
        global_namespace: &str,
    ) -> Vec<Arc<CatalogSnapshot>> {
        let mut visible: Vec<Arc<CatalogSnapshot>> = self
            .read()
            .iter()
            .filter(|(source, _)| {
                source.namespace == namespace || source.namespace == global_namespace
            })
            .map(|(_, snapshot)| Arc::clone(snapshot))
            .collect();
        visible.sort_by(|a, b| {
            b.catalog
                .priority
                .cmp(&a.catalog.priority)
                .then_with(|| a.catalog.namespace.cmp(&b.catalog.namespace))
                .then_with(|| a.catalog.name.cmp(&b.catalog.name))
        });
        visible
    }

    pub fn summaries(&self) -> Vec<SnapshotSummary> {
        self.read()
            .values()
            .map(|s| SnapshotSummary {
                namespace: s.catalog.namespace.clone(),
                name: s.catalog.name.clone(),
                priority: s.catalog.priority,
                digest: s.digest.clone(),
                origin: s.origin.clone(),
                loaded_at: s.loaded_at.to_string(),
                packages: package_names(&s.catalog.content.packages),
                bundles: s.catalog.content.bundles.len(),
                held_bytes: HeldBytes {
                    bundles_packed: s.catalog.content.bundles.packed_size(),
                    channel_heads: s.channel_heads.values().map(|t| t.packed_size()).sum(),
                    others: s.catalog.content.others.packed_size(),
                },
            })
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<CatalogRef, Arc<CatalogSnapshot>>> {
        // A panic while holding the lock cannot leave the map half-written (every write is a
        // single insert or remove), so a poisoned lock is still consistent.
        self.by_ref
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<CatalogRef, Arc<CatalogSnapshot>>> {
        self.by_ref
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn package_names(packages: &[crate::catalog::model::fbc::Package]) -> Vec<String> {
    let mut names: Vec<String> = packages.iter().map(|p| p.name.clone()).collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::fbc::Package;
    use crate::resolver::input::Catalog;

    fn snapshot(namespace: &str, name: &str, priority: i32, package: &str) -> CatalogSnapshot {
        CatalogSnapshot {
            catalog: SnapshotCatalog::pack(Catalog {
                name: name.into(),
                namespace: namespace.into(),
                priority,
                content: DeclarativeConfig {
                    packages: vec![Package {
                        name: package.into(),
                        ..Package::default()
                    }],
                    ..DeclarativeConfig::default()
                },
            }),
            digest: format!("{namespace}/{name}"),
            origin: "test".into(),
            channel_heads: ChannelHeadTexts::default(),
            loaded_at: Timestamp::UNIX_EPOCH,
        }
    }

    fn names(list: &[Arc<CatalogSnapshot>]) -> Vec<String> {
        list.iter()
            .map(|s| format!("{}/{}", s.catalog.namespace, s.catalog.name))
            .collect()
    }

    #[test]
    fn a_namespace_sees_its_own_and_the_global_catalogs_by_priority() {
        let snapshots = CatalogSnapshots::default();
        snapshots.insert(snapshot("olm", "community", 0, "a"));
        snapshots.insert(snapshot("olm", "certified", 10, "b"));
        snapshots.insert(snapshot("team-a", "mine", 0, "c"));
        snapshots.insert(snapshot("team-b", "theirs", 100, "d"));
        assert_eq!(
            names(&snapshots.visible_from("team-a", "olm")),
            ["olm/certified", "olm/community", "team-a/mine"]
        );
        assert_eq!(
            names(&snapshots.visible_from("olm", "olm")),
            ["olm/certified", "olm/community"]
        );
        // Another global namespace makes olm's catalogs private to olm.
        assert_eq!(
            names(&snapshots.visible_from("team-a", "operators")),
            ["team-a/mine"]
        );
    }

    #[test]
    fn retain_drops_deleted_sources_and_priority_updates_keep_content() {
        let snapshots = CatalogSnapshots::default();
        snapshots.insert(snapshot("olm", "a", 0, "a"));
        snapshots.insert(snapshot("olm", "b", 0, "b"));
        let gone = snapshots.retain(|r| r.name == "a");
        assert_eq!(gone, [CatalogRef::new("b", "olm")]);
        snapshots.set_priority(&CatalogRef::new("a", "olm"), 7);
        let a = snapshots.get(&CatalogRef::new("a", "olm")).unwrap();
        assert_eq!(a.catalog.priority, 7);
        assert_eq!(a.catalog.content.packages[0].name, "a");
        assert_eq!(snapshots.summaries()[0].packages, ["a"]);
    }

    #[test]
    fn content_changes_are_announced_priority_changes_are_not() {
        let snapshots = CatalogSnapshots::default();
        let mut changes = snapshots.changes();
        snapshots.insert(snapshot("olm", "a", 0, "a"));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        snapshots.set_priority(&CatalogRef::new("a", "olm"), 3);
        assert!(!changes.has_changed().unwrap());
        snapshots.retain(|_| false);
        assert!(changes.has_changed().unwrap());
        assert!(snapshots.digests().is_empty());
    }
}
