//! Every CSV's name, cluster-wide, kept compactly for the copier: per namespace and name,
//! whose copy it is (`olm.copiedFrom`) and the copy's hash. An AllNamespaces operator has a
//! copy in every namespace, so this holds one entry per operator and namespace (21,400
//! for 100 operators over 214 namespaces): an entry is a few dozen bytes (namespaces and
//! sources interned), where a cached object's metadata, with its label and annotation maps,
//! was about 1.9 KiB.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::api::{COPIED_FROM_LABEL, ClusterServiceVersion};

/// What the metadata watch of CSVs delivers.
pub type CsvMeta = PartialObjectMeta<ClusterServiceVersion>;

/// What the copier knows of one CSV.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The operator namespace whose copy this is; None for a namespace's own CSV.
    pub copied_from: Option<Arc<str>>,
    /// The `olm.copiedHash` annotation.
    pub hash: Option<Box<str>>,
    /// Another writer changed the copy's status since ours (it is written again).
    pub drifted: bool,
}

type Key = (Arc<str>, Box<str>);

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Namespaces, shared by the keys and the sources.
    interned: HashSet<Arc<str>>,
    /// A (re)list in progress: its entries replace `entries` when it is done.
    listing: Option<HashMap<Key, Entry>>,
}

impl State {
    fn intern(&mut self, namespace: &str) -> Arc<str> {
        if let Some(found) = self.interned.get(namespace) {
            return Arc::clone(found);
        }
        let new: Arc<str> = Arc::from(namespace);
        self.interned.insert(Arc::clone(&new));
        new
    }

    /// The key and entry of a CSV's metadata (None without a name).
    fn entry_of(&mut self, meta: &ObjectMeta, ours: &str) -> Option<(Key, Entry)> {
        let name = meta.name.as_deref()?;
        let namespace = self.intern(meta.namespace.as_deref().unwrap_or_default());
        let copied_from = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(COPIED_FROM_LABEL))
            .map(|source| self.intern(source));
        let entry = Entry {
            hash: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(COPIED_HASH_ANNOTATION))
                .map(|h| h.as_str().into()),
            drifted: copied_from.as_deref().is_some_and(|source| {
                meta.managed_fields
                    .as_deref()
                    .is_some_and(|managed| status_drifted(managed, ours))
                    || names_another_operator_namespace(meta, source)
            }),
            copied_from,
        };
        Some(((namespace, name.into()), entry))
    }

    /// The key of a known CSV (None when its namespace was never seen), interning nothing.
    fn known_key(&self, namespace: &str, name: &str) -> Option<Key> {
        let namespace = self.interned.get(namespace)?;
        Some((Arc::clone(namespace), name.into()))
    }

    /// Drops interned namespaces nothing refers to any more (after a relist).
    fn forget_unused(&mut self) {
        self.interned.retain(|ns| Arc::strong_count(ns) > 1);
    }
}

/// The names, shared by the copier, the phase machine's cleanup and the orphan pruner;
/// written only by the watch (`apply`).
#[derive(Clone)]
pub struct CsvNames {
    state: Arc<RwLock<State>>,
    listed: watch::Sender<bool>,
    /// The field manager whose status writes are ours (anything newer is drift).
    ours: &'static str,
}

/// A copy: where it is and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copy {
    pub namespace: String,
    pub name: String,
    pub copied_from: String,
}

impl CsvNames {
    pub fn new(ours: &'static str) -> Self {
        CsvNames {
            state: Arc::default(),
            listed: watch::Sender::new(false),
            ours,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one watch event; returns the source (namespace, name) of a copy it touched.
    pub fn apply(&self, event: watcher::Event<CsvMeta>) -> Option<(String, String)> {
        let mut state = self.write();
        let touched = |key: &Key, entry: &Entry| {
            entry
                .copied_from
                .as_ref()
                .map(|source| (source.to_string(), key.1.to_string()))
        };
        match event {
            watcher::Event::Init => {
                state.listing = Some(HashMap::new());
                None
            }
            watcher::Event::InitApply(csv) => {
                let (key, entry) = state.entry_of(&csv.metadata, self.ours)?;
                let source = touched(&key, &entry);
                state.listing.get_or_insert_default().insert(key, entry);
                source
            }
            watcher::Event::InitDone => {
                if let Some(listed) = state.listing.take() {
                    state.entries = listed;
                    state.forget_unused();
                }
                drop(state);
                self.listed.send_replace(true);
                None
            }
            watcher::Event::Apply(csv) => {
                let (key, entry) = state.entry_of(&csv.metadata, self.ours)?;
                let source = touched(&key, &entry);
                state.entries.insert(key, entry);
                source
            }
            watcher::Event::Delete(csv) => {
                let key = state.known_key(
                    csv.metadata.namespace.as_deref().unwrap_or_default(),
                    csv.metadata.name.as_deref()?,
                )?;
                let removed = state.entries.remove(&key)?;
                touched(&key, &removed)
            }
        }
    }

    /// Waits until the first list is in (false: the watch is gone for good).
    pub async fn listed(&self) -> bool {
        self.listed.subscribe().wait_for(|done| *done).await.is_ok()
    }

    /// What is known of the CSV `name` in `namespace`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Entry> {
        let state = self.read();
        state
            .entries
            .get(&state.known_key(namespace, name)?)
            .cloned()
    }

    /// Every copy, optionally only those of `name` from `copied_from`.
    pub fn copies(&self, of: Option<(&str, &str)>) -> Vec<Copy> {
        let state = self.read();
        state
            .entries
            .iter()
            .filter_map(|((namespace, name), entry)| {
                let source = entry.copied_from.as_deref()?;
                if of.is_some_and(|(from, of_name)| from != source || of_name != &**name) {
                    return None;
                }
                Some(Copy {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    copied_from: source.to_string(),
                })
            })
            .collect()
    }
}

/// A copy whose `olm.operatorNamespace` names another namespace than the one it was copied
/// from (OLM 0.14.1 and older wrote such copies, or someone edited it): set back, as
/// upstream garbage-collects it.
fn names_another_operator_namespace(meta: &ObjectMeta, source: &str) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get("olm.operatorNamespace"))
        .is_some_and(|named| named != source)
}

pub const COPIED_HASH_ANNOTATION: &str = "olm.copiedHash";

/// Whether a writer other than `ours` changed the copy's status after (or in the same second
/// as) our last status write, by the copy's managed fields: upstream sets such a status
/// back. Once our write is the newest the copy is judged clean, so a writer that keeps
/// fields of its own costs one no-op write, not a loop.
pub fn status_drifted(
    managed: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry],
    ours: &str,
) -> bool {
    let on_status = |e: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        e.subresource.as_deref() == Some("status")
    };
    let our_time = managed
        .iter()
        .filter(on_status)
        .filter(|e| e.manager.as_deref() == Some(ours))
        .filter_map(|e| e.time.as_ref().map(|t| t.0))
        .max();
    managed
        .iter()
        .filter(on_status)
        .filter(|e| e.manager.as_deref() != Some(ours))
        .any(|e| match (&e.time, our_time) {
            (Some(theirs), Some(our_time)) => theirs.0 >= our_time,
            (_, None) => true,
            (None, Some(_)) => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    fn meta(namespace: &str, name: &str, source: Option<&str>, hash: Option<&str>) -> CsvMeta {
        use kube::core::PartialObjectMetaExt;
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: source.map(|s| [(COPIED_FROM_LABEL.to_string(), s.to_string())].into()),
            annotations: hash.map(|h| [(COPIED_HASH_ANNOTATION.to_string(), h.to_string())].into()),
            ..ObjectMeta::default()
        }
        .into_request_partial()
    }

    #[test]
    fn a_copy_naming_another_operator_namespace_is_stale() {
        let names = CsvNames::new("olm");
        names.apply(watcher::Event::Init);
        let annotated = |named: &str| {
            let mut copy = meta("a", "op.v1", Some("ops"), Some("h1"));
            copy.metadata
                .annotations
                .get_or_insert_default()
                .insert("olm.operatorNamespace".into(), named.into());
            copy
        };
        names.apply(watcher::Event::InitApply(annotated("ops")));
        names.apply(watcher::Event::InitDone);
        assert!(!names.get("a", "op.v1").unwrap().drifted);
        names.apply(watcher::Event::Apply(annotated("a")));
        assert!(names.get("a", "op.v1").unwrap().drifted);
    }

    #[test]
    fn the_watch_keeps_copies_and_own_csvs_and_names_the_sources_it_touches() {
        let names = CsvNames::new("olm");
        assert_eq!(names.apply(watcher::Event::Init), None);
        let touched = names.apply(watcher::Event::InitApply(meta(
            "a",
            "op.v1",
            Some("ops"),
            Some("h1"),
        )));
        assert_eq!(touched, Some(("ops".into(), "op.v1".into())));
        assert_eq!(
            names.apply(watcher::Event::InitApply(meta("b", "op.v1", None, None))),
            None,
            "a namespace's own CSV has no source to wake"
        );
        // Not readable before the list is done; then the list replaces what was there.
        assert_eq!(names.get("a", "op.v1"), None);
        names.apply(watcher::Event::InitDone);
        let copy = names.get("a", "op.v1").unwrap();
        assert_eq!(copy.copied_from.as_deref(), Some("ops"));
        assert_eq!(copy.hash.as_deref(), Some("h1"));
        assert_eq!(names.get("b", "op.v1").unwrap().copied_from, None);
        assert_eq!(
            names.copies(Some(("ops", "op.v1"))),
            [Copy {
                namespace: "a".into(),
                name: "op.v1".into(),
                copied_from: "ops".into()
            }]
        );
        assert!(names.copies(Some(("elsewhere", "op.v1"))).is_empty());

        // Changes, drift by another writer's status, deletion.
        let mut changed = meta("a", "op.v1", Some("ops"), Some("h2"));
        changed.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("someone".into()),
            subresource: Some("status".into()),
            ..ManagedFieldsEntry::default()
        }]);
        names.apply(watcher::Event::Apply(changed));
        let copy = names.get("a", "op.v1").unwrap();
        assert_eq!((copy.hash.as_deref(), copy.drifted), (Some("h2"), true));
        let deleted = names.apply(watcher::Event::Delete(meta("a", "op.v1", None, None)));
        assert_eq!(deleted, Some(("ops".into(), "op.v1".into())));
        assert_eq!(names.get("a", "op.v1"), None);

        // A relist drops what it no longer finds, interned namespaces included.
        names.apply(watcher::Event::Init);
        names.apply(watcher::Event::InitDone);
        assert_eq!(names.get("b", "op.v1"), None);
        let interned = &names.read().interned;
        assert!(
            !interned.contains("a") && !interned.contains("b"),
            "{interned:?}"
        );
    }
}
