//! The PackageManifests this process serves, kept current from the catalog snapshots and
//! the CatalogSources: each catalog's manifests are rebuilt only when its content digest or
//! its CatalogSource's shown fields change, and a manifest's resourceVersion moves only when
//! its content does. Every change is an event (ADDED/MODIFIED/DELETED) with a revision;
//! the last [`HISTORY`] are kept so that a watch may resume from a recent resourceVersion.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::description::Icon;
use super::icon::DefaultIcons;
use super::listed::{ListedJson, Visible};
use super::manifest::{self, CatalogInfo, PackageManifest};
use crate::resolver::input::CatalogRef;
use crate::snapshots::{CatalogSnapshot, CatalogSnapshots};

/// Events kept for watches that resume from a resourceVersion.
pub const HISTORY: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

#[derive(Clone)]
pub struct Event {
    pub revision: u64,
    pub type_: EventType,
    /// With its resourceVersion set (for DELETED, the last state), without channels, as
    /// [`Served::manifest`]; `listed` has them.
    pub manifest: Arc<PackageManifest>,
    pub listed: Arc<ListedJson>,
}

struct Served {
    /// The manifest without its channels, which only whole objects show (from `listed`):
    /// their CSV descriptions and entries are most of a manifest, and kept twice otherwise.
    /// Selectors, Tables and metadata read the rest.
    manifest: Arc<PackageManifest>,
    listed: Arc<ListedJson>,
    /// The default channel's head CSV, for the icon's ETag.
    default_head: String,
    /// SHA-256 of the manifest serialized without resourceVersion, and of its icon: equal
    /// means unchanged.
    fingerprint: [u8; 32],
}

/// A manifest as built outside the lock, before it is given a resourceVersion: what is
/// kept of it, and its JSON without resourceVersion.
struct Prepared {
    /// Without channels, as [`Served::manifest`].
    manifest: PackageManifest,
    listed: ListedJson,
    default_head: String,
    fingerprint: [u8; 32],
}

impl Prepared {
    /// Built one at a time as each manifest comes, so a rebuild holds one whole manifest.
    fn of(
        mut manifest: PackageManifest,
        icon: Option<&Icon>,
        heads: &manifest::ChannelHeadTexts,
    ) -> Prepared {
        let listed = ListedJson::sharing(&manifest, heads);
        let default_head = manifest
            .status
            .channels
            .iter()
            .find(|c| c.name == manifest.status.default_channel)
            .map(|c| c.current_csv.clone())
            .unwrap_or_default();
        manifest.status.channels = Vec::new();
        Prepared {
            manifest,
            fingerprint: fingerprint(&listed, icon),
            listed,
            default_head,
        }
    }

    /// What is served from now on, as of resourceVersion `rv`.
    fn serve(self, rv: u64) -> Served {
        let Prepared {
            mut manifest,
            listed,
            default_head,
            fingerprint,
        } = self;
        manifest.metadata.resource_version = rv.to_string();
        let listed = listed.with_resource_version(&manifest.metadata.resource_version);
        Served {
            manifest: Arc::new(manifest),
            listed: Arc::new(listed),
            default_head,
            fingerprint,
        }
    }
}

/// Of the JSON without resourceVersion (the whole manifest but for its namespace, the
/// catalog's) and of the icon.
fn fingerprint(listed: &ListedJson, icon: Option<&Icon>) -> [u8; 32] {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    listed.for_each_part(|part| hash.update(part));
    // A new icon is a change too, though only the icon subresource shows it.
    hash.update(serde_json::to_vec(&icon).unwrap_or_default());
    hash.finalize().into()
}

struct CatalogEntry {
    digest: String,
    /// The CatalogSource's priority: higher is listed (and found by `get`) first.
    priority: i32,
    info: CatalogInfo,
    packages: BTreeMap<String, Served>,
    /// The snapshot the packages were built from: the icon subresource reads icons from it.
    snapshot: Option<Arc<CatalogSnapshot>>,
}

#[derive(Default)]
struct State {
    revision: u64,
    catalogs: BTreeMap<CatalogRef, CatalogEntry>,
    history: VecDeque<Event>,
}

/// A package's icon as the icon subresource shows it.
pub struct ShownIcon {
    pub default_channel: String,
    /// The default channel's head CSV (empty: no such channel).
    pub head: String,
    /// None: the package has no icon.
    pub icon: Option<Icon>,
}

/// A catalog's manifests as built outside the lock, each with its fingerprint.
struct Rebuilt {
    digest: String,
    info: CatalogInfo,
    manifests: Vec<(String, Prepared)>,
    snapshot: Option<Arc<CatalogSnapshot>>,
}

impl Rebuilt {
    /// Builds the manifests of `snapshot`, `source`'s, one at a time.
    fn build(&mut self, source: &CatalogRef, snapshot: Arc<CatalogSnapshot>) {
        let content = &snapshot.catalog.content.unpack();
        let heads = &snapshot.channel_heads;
        let icons = DefaultIcons::of(content, heads);
        // By name, the last of a name winning, as a map of the manifests would.
        let mut prepared = BTreeMap::new();
        manifest::for_each_manifest(content, heads, &self.info, |m| {
            let icon = icons.get(&m.metadata.name);
            prepared.insert(
                m.metadata.name.clone(),
                Prepared::of(m, icon.as_ref(), heads),
            );
        });
        self.manifests = prepared.into_iter().collect();
        tracing::debug!(catalog = %source, packages = self.manifests.len(), "built packagemanifests");
        self.snapshot = Some(snapshot);
    }
}

/// Takes each served catalog's priority from its snapshot, and the snapshot itself when its
/// content is the one served.
fn refresh_snapshots(state: &mut State, snapshots: &CatalogSnapshots) {
    for (source, entry) in &mut state.catalogs {
        if let Some(snapshot) = snapshots.get(source) {
            entry.priority = snapshot.catalog.priority;
            // A priority change replaces the snapshot (same content): hold the current
            // one, not a copy the snapshots no longer keep.
            if entry.digest == snapshot.digest {
                entry.snapshot = Some(snapshot);
            }
        }
    }
}

pub struct Store {
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
    pub global_namespace: String,
}

/// Where a watch starts: the events after a revision, or (too old) nothing.
pub enum Resume {
    Events(Vec<Event>),
    Expired { oldest: u64 },
}

impl Store {
    pub fn new(global_namespace: String) -> Self {
        Store {
            state: Mutex::default(),
            events: broadcast::channel(HISTORY).0,
            global_namespace,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Brings the served manifests up to date with the snapshots and the CatalogSources; a
    /// catalog shows packages only when both its snapshot and its CatalogSource are known.
    /// Returns how many catalogs' manifests were rebuilt.
    pub fn sync(
        &self,
        snapshots: &CatalogSnapshots,
        sources: &BTreeMap<CatalogRef, CatalogInfo>,
    ) -> usize {
        let digests = snapshots.digests();
        let mut rebuilt = self.outdated(&digests, sources);
        // Rebuild outside the lock: it decodes CSVs.
        for (source, rebuilt) in &mut rebuilt {
            if let Some(snapshot) = snapshots.get(source) {
                rebuilt.build(source, snapshot);
            }
        }
        let mut state = self.lock();
        refresh_snapshots(&mut state, snapshots);
        self.remove_gone(&mut state, |source| {
            digests.contains_key(source) && sources.contains_key(source)
        });
        let count = rebuilt.len();
        for (source, rebuilt) in rebuilt {
            self.replace(&mut state, source, rebuilt, snapshots);
        }
        count
    }

    /// The catalogs whose content digest or shown CatalogSource fields changed, still to be
    /// built; a catalog without its CatalogSource is not shown.
    fn outdated(
        &self,
        digests: &BTreeMap<CatalogRef, String>,
        sources: &BTreeMap<CatalogRef, CatalogInfo>,
    ) -> BTreeMap<CatalogRef, Rebuilt> {
        let state = self.lock();
        let mut outdated = BTreeMap::new();
        for (source, digest) in digests {
            let Some(info) = sources.get(source) else {
                continue;
            };
            let current = state.catalogs.get(source);
            if current.is_some_and(|c| &c.digest == digest && &c.info == info) {
                continue;
            }
            outdated.insert(
                source.clone(),
                Rebuilt {
                    digest: digest.clone(),
                    info: info.clone(),
                    manifests: Vec::new(),
                    snapshot: None,
                },
            );
        }
        outdated
    }

    /// Drops the catalogs `keep` says no, each package with a DELETED event.
    fn remove_gone(&self, state: &mut State, keep: impl Fn(&CatalogRef) -> bool) {
        let gone: Vec<CatalogRef> = state
            .catalogs
            .keys()
            .filter(|r| !keep(r))
            .cloned()
            .collect();
        for source in gone {
            if let Some(entry) = state.catalogs.remove(&source) {
                for served in entry.packages.into_values() {
                    self.emit(state, EventType::Deleted, &served);
                }
            }
        }
    }

    /// Serves `rebuilt` as `source`'s manifests: a package whose fingerprint is unchanged
    /// keeps what is served (and its resourceVersion); the others are ADDED or MODIFIED, and
    /// packages no longer there DELETED.
    fn replace(
        &self,
        state: &mut State,
        source: CatalogRef,
        rebuilt: Rebuilt,
        snapshots: &CatalogSnapshots,
    ) {
        let Rebuilt {
            digest,
            info,
            manifests,
            snapshot,
        } = rebuilt;
        let mut old = state
            .catalogs
            .remove(&source)
            .map(|e| e.packages)
            .unwrap_or_default();
        let mut packages = BTreeMap::new();
        for (name, prepared) in manifests {
            match old.remove(&name) {
                Some(previous) if previous.fingerprint == prepared.fingerprint => {
                    packages.insert(name, previous);
                }
                previous => {
                    let type_ = if previous.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    let served = prepared.serve(state.revision + 1);
                    self.emit(state, type_, &served);
                    packages.insert(name, served);
                }
            }
        }
        for served in old.into_values() {
            self.emit(state, EventType::Deleted, &served);
        }
        let priority = snapshots.get(&source).map_or(0, |s| s.catalog.priority);
        state.catalogs.insert(
            source,
            CatalogEntry {
                digest,
                priority,
                info,
                packages,
                snapshot,
            },
        );
    }

    fn emit(&self, state: &mut State, type_: EventType, served: &Served) {
        state.revision += 1;
        let mut manifest = Arc::clone(&served.manifest);
        if type_ == EventType::Deleted {
            Arc::make_mut(&mut manifest).metadata.resource_version = state.revision.to_string();
        }
        let event = Event {
            revision: state.revision,
            type_,
            manifest,
            listed: Arc::clone(&served.listed),
        };
        if state.history.len() == HISTORY {
            state.history.pop_front();
        }
        state.history.push_back(event.clone());
        // No receivers is fine: nobody watches.
        let _ = self.events.send(event);
    }

    /// Every manifest a request in `namespace` (None: all namespaces) sees, in serving order:
    /// the namespace's own catalogs first, then the global namespace's, each group by
    /// priority (highest first) then catalog name, packages by name. Global ones are
    /// rewritten into the namespace.
    pub fn list(&self, namespace: Option<&str>) -> (u64, Vec<Visible>) {
        let state = self.lock();
        let out = match namespace {
            None => state
                .catalogs
                .values()
                .flat_map(|entry| entry.packages.values())
                .map(|served| {
                    Visible::own(Arc::clone(&served.manifest), Arc::clone(&served.listed))
                })
                .collect(),
            Some(ns) => {
                let shown: Arc<str> = Arc::from(ns);
                self.catalogs_seen_from(&state, ns)
                    .into_iter()
                    .flat_map(|entry| entry.packages.values())
                    .map(|served| self.visible(served, &shown))
                    .collect()
            }
        };
        (state.revision, out)
    }

    /// The manifest `get NAME` returns in a namespace: the namespace's own catalogs first,
    /// then the global ones (each by priority, then catalog name).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Visible> {
        let state = self.lock();
        let shown: Arc<str> = Arc::from(namespace);
        self.catalogs_seen_from(&state, namespace)
            .into_iter()
            .find_map(|entry| entry.packages.get(name))
            .map(|served| self.visible(served, &shown))
    }

    /// What the icon subresource of `name` in `namespace` shows, of the manifest `get`
    /// finds.
    pub fn icon(&self, namespace: &str, name: &str) -> Option<ShownIcon> {
        let (mut shown, snapshot) = {
            let state = self.lock();
            self.catalogs_seen_from(&state, namespace)
                .into_iter()
                .find_map(|entry| {
                    let served = entry.packages.get(name)?;
                    let shown = ShownIcon {
                        default_channel: served.manifest.status.default_channel.clone(),
                        head: served.default_head.clone(),
                        icon: None,
                    };
                    Some((shown, entry.snapshot.clone()))
                })?
        };
        shown.icon = snapshot.and_then(|s| {
            if s.channel_heads.is_empty() {
                // Icons read from the bundles' CSVs (content loaded with its manifests).
                DefaultIcons::of(&s.catalog.content.unpack(), &s.channel_heads).get(name)
            } else {
                super::icon::kept_icon(&s.catalog.content.others, name)
            }
        });
        Some(shown)
    }

    /// The catalogs a namespace sees, in serving order: its own, then the global
    /// namespace's, each group by priority (highest first) then catalog name.
    fn catalogs_seen_from<'s>(&self, state: &'s State, ns: &str) -> Vec<&'s CatalogEntry> {
        fn by_priority(mut entries: Vec<&CatalogEntry>) -> Vec<&CatalogEntry> {
            entries.sort_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then(a.info.name.cmp(&b.info.name))
            });
            entries
        }
        let own = by_priority(
            state
                .catalogs
                .values()
                .filter(|e| e.info.namespace == ns)
                .collect(),
        );
        let global = by_priority(
            state
                .catalogs
                .values()
                .filter(|e| {
                    ns != self.global_namespace && e.info.namespace == self.global_namespace
                })
                .collect(),
        );
        own.into_iter().chain(global).collect()
    }

    fn visible(&self, served: &Served, shown: &Arc<str>) -> Visible {
        Visible::new(
            Arc::clone(&served.manifest),
            Arc::clone(&served.listed),
            shown,
        )
    }

    /// The events after `revision` and a receiver for those to come, taken together so that
    /// none is lost or repeated.
    pub fn resume(&self, revision: u64) -> (Resume, broadcast::Receiver<Event>) {
        let state = self.lock();
        let receiver = self.events.subscribe();
        let oldest = state
            .history
            .front()
            .map_or(state.revision + 1, |e| e.revision);
        if revision + 1 < oldest {
            return (Resume::Expired { oldest }, receiver);
        }
        let events = state
            .history
            .iter()
            .filter(|e| e.revision > revision)
            .cloned()
            .collect();
        (Resume::Events(events), receiver)
    }

    /// A snapshot of everything (with the revision it is current at) and a receiver for
    /// what comes after: a watch without resourceVersion starts with ADDED for each.
    pub fn snapshot_and_subscribe(
        &self,
        namespace: Option<&str>,
    ) -> (u64, Vec<Visible>, broadcast::Receiver<Event>) {
        // list() takes the lock itself; subscribe first so that nothing between is lost,
        // and drop events at or below the listed revision when they arrive.
        let receiver = self.events.subscribe();
        let (revision, items) = self.list(namespace);
        (revision, items, receiver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::fbc::DeclarativeConfig;
    use crate::resolver::input::Catalog;
    use crate::snapshots::CatalogSnapshot;
    use k8s_openapi::jiff::Timestamp;

    fn info(ns: &str, name: &str) -> CatalogInfo {
        CatalogInfo {
            name: name.into(),
            namespace: ns.into(),
            display_name: format!("{name} catalog"),
            ..Default::default()
        }
    }

    fn catalog_yaml(version: &str) -> DeclarativeConfig {
        let csv = serde_json::json!({"kind": "ClusterServiceVersion", "metadata": {"name": format!("p.v{version}")},
            "spec": {"displayName": "P", "provider": {"name": "Acme"}, "version": version}});
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(csv.to_string());
        let text = format!(
            r#"{{"schema":"olm.package","name":"p","defaultChannel":"stable"}}
{{"schema":"olm.channel","name":"stable","package":"p","entries":[{{"name":"p.v{version}"}}]}}
{{"schema":"olm.bundle","name":"p.v{version}","package":"p","image":"x","properties":[{{"type":"olm.package","value":{{"packageName":"p","version":"{version}"}}}},{{"type":"olm.bundle.object","value":{{"data":"{data}"}}}}]}}
"#
        );
        crate::catalog::reading::load::load_str(std::path::Path::new("catalog.json"), &text)
            .unwrap()
    }

    fn snapshot(ns: &str, name: &str, version: &str) -> CatalogSnapshot {
        CatalogSnapshot {
            catalog: crate::snapshots::SnapshotCatalog::pack(Catalog {
                name: name.into(),
                namespace: ns.into(),
                priority: 0,
                content: catalog_yaml(version),
            }),
            digest: version.into(),
            origin: "test".into(),
            loaded_at: Timestamp::UNIX_EPOCH,
            channel_heads: Default::default(),
        }
    }

    #[test]
    fn changes_become_events_with_rising_resource_versions() {
        let snapshots = CatalogSnapshots::default();
        let store = Store::new("olm".into());
        let mut sources = BTreeMap::new();
        snapshots.insert(snapshot("olm", "ops", "1.0.0"));
        // No CatalogSource known yet: nothing served.
        store.sync(&snapshots, &sources);
        assert!(store.list(Some("team")).1.is_empty());
        sources.insert(CatalogRef::new("ops", "olm"), info("olm", "ops"));
        store.sync(&snapshots, &sources);
        let (rev, items) = store.list(Some("team"));
        assert_eq!(rev, 1);
        assert_eq!(items[0].namespace(), "team");
        assert_eq!(items[0].manifest.metadata.resource_version, "1");
        let object = super::super::listed::object(&items[0].manifest, &items[0].listed);
        assert_eq!(object["status"]["channels"][0]["currentCSV"], "p.v1.0.0");
        assert!(
            items[0].manifest.status.channels.is_empty(),
            "kept once, in listed"
        );
        // Same content again: no event.
        store.sync(&snapshots, &sources);
        assert_eq!(store.revision(), 1);
        snapshots.insert(snapshot("olm", "ops", "1.1.0"));
        store.sync(&snapshots, &sources);
        let Resume::Events(events) = store.resume(1).0 else {
            panic!("expired")
        };
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].type_, EventType::Modified);
        assert_eq!(events[0].manifest.metadata.resource_version, "2");
        sources.clear();
        store.sync(&snapshots, &sources);
        let Resume::Events(events) = store.resume(2).0 else {
            panic!("expired")
        };
        assert_eq!(events[0].type_, EventType::Deleted);
        assert!(store.get("team", "p").is_none());
    }

    #[test]
    fn a_watch_from_before_the_kept_history_is_expired() {
        let snapshots = CatalogSnapshots::default();
        let store = Store::new("olm".into());
        let sources = [(CatalogRef::new("ops", "olm"), info("olm", "ops"))].into();
        for i in 0..=HISTORY {
            snapshots.insert(snapshot("olm", "ops", &format!("1.0.{i}")));
            store.sync(&snapshots, &sources);
        }
        assert_eq!(store.revision(), HISTORY as u64 + 1);
        assert!(matches!(store.resume(0).0, Resume::Expired { oldest: 2 }));
        assert!(matches!(store.resume(1).0, Resume::Events(e) if e.len() == HISTORY));
    }

    #[test]
    fn a_namespace_sees_its_own_catalog_before_the_global_one() {
        let snapshots = CatalogSnapshots::default();
        let store = Store::new("olm".into());
        let mut sources = BTreeMap::new();
        snapshots.insert(snapshot("olm", "global", "1.0.0"));
        snapshots.insert(snapshot("team", "mine", "2.0.0"));
        sources.insert(CatalogRef::new("global", "olm"), info("olm", "global"));
        sources.insert(CatalogRef::new("mine", "team"), info("team", "mine"));
        store.sync(&snapshots, &sources);
        assert_eq!(store.list(Some("team")).1.len(), 2);
        assert_eq!(store.list(Some("other")).1.len(), 1);
        assert_eq!(store.list(None).1.len(), 2);
        assert_eq!(
            store
                .get("team", "p")
                .unwrap()
                .manifest
                .status
                .catalog_source,
            "mine"
        );
        let global = store.get("other", "p").unwrap();
        assert_eq!(global.manifest.status.catalog_source, "global");
        assert_eq!(global.namespace(), "other");
        assert_eq!(global.in_namespace().metadata.namespace, "other");
        assert_eq!(
            global.manifest.metadata.namespace, "olm",
            "the served one is not copied"
        );
        assert!(matches!(store.resume(0).0, Resume::Events(e) if e.len() == 2));
    }
}
