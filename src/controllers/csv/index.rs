//! The CSVs by namespace and by the CRDs they own or require, for the mappers that wake
//! CSVs and for the copier.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::ClusterServiceVersion;
use crate::cluster::informers::Change;

pub type Guarded = DeserializeGuard<ClusterServiceVersion>;
pub type CsvRef = ObjectRef<Guarded>;

/// The CSVs by namespace and by the CRDs they own or require, kept from the CSV informer's
/// changes: a mapper looks up the few CSVs an event concerns instead of scanning every CSV
/// of the cluster per event (a thousand installs made that a million checks).
#[derive(Default)]
pub(super) struct CsvIndex(Mutex<IndexState>);

#[derive(Default)]
struct IndexState {
    by_namespace: HashMap<String, BTreeSet<String>>,
    by_crd: HashMap<String, BTreeSet<(String, String)>>,
    /// What each CSV was indexed under, to take it out again.
    crds_of: HashMap<(String, String), Vec<String>>,
}

impl CsvIndex {
    /// Keeps the index current until `changes` ends.
    pub(super) async fn follow(self: Arc<Self>, changes: impl Stream<Item = Change<Guarded>>) {
        let mut changes = std::pin::pin!(changes);
        while let Some(change) = changes.next().await {
            self.apply(&change);
        }
    }

    fn apply(&self, change: &Change<Guarded>) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (csv, present) = match change {
            Change::Applied(csv) => (csv, true),
            Change::Deleted(csv) => (csv, false),
        };
        let meta = match &csv.0 {
            Ok(csv) => &csv.metadata,
            Err(invalid) => &invalid.metadata,
        };
        let key = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        state.remove(&key);
        if present {
            let crds = csv.0.as_ref().map(crds_of).unwrap_or_default();
            state.insert(key, crds);
        }
    }

    /// The CSVs of `namespace` that `keep` accepts.
    pub(super) fn in_namespace(
        &self,
        store: &Store<Guarded>,
        namespace: Option<&str>,
        keep: impl Fn(&ClusterServiceVersion) -> bool,
    ) -> Vec<CsvRef> {
        let namespace = namespace.unwrap_or_default();
        let names: Vec<String> = {
            let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let names = state.by_namespace.get(namespace).into_iter().flatten();
            names.cloned().collect()
        };
        let refs = names
            .iter()
            .map(|name| ObjectRef::new(name).within(namespace));
        accepted(store, refs, keep)
    }

    /// The CSVs that own or require the CRD `crd` and that `keep` accepts.
    pub(super) fn with_crd(
        &self,
        store: &Store<Guarded>,
        crd: &str,
        keep: impl Fn(&ClusterServiceVersion) -> bool,
    ) -> Vec<CsvRef> {
        let keys: Vec<(String, String)> = {
            let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            state
                .by_crd
                .get(crd)
                .into_iter()
                .flatten()
                .cloned()
                .collect()
        };
        let refs = keys
            .iter()
            .map(|(ns, name)| ObjectRef::new(name).within(ns));
        accepted(store, refs, keep)
    }
}

impl IndexState {
    fn remove(&mut self, key: &(String, String)) {
        if let Some(names) = self.by_namespace.get_mut(&key.0) {
            names.remove(&key.1);
            if names.is_empty() {
                self.by_namespace.remove(&key.0);
            }
        }
        for crd in self.crds_of.remove(key).unwrap_or_default() {
            if let Some(csvs) = self.by_crd.get_mut(&crd) {
                csvs.remove(key);
                if csvs.is_empty() {
                    self.by_crd.remove(&crd);
                }
            }
        }
    }

    fn insert(&mut self, key: (String, String), crds: Vec<String>) {
        let names = self.by_namespace.entry(key.0.clone()).or_default();
        names.insert(key.1.clone());
        for crd in &crds {
            self.by_crd
                .entry(crd.clone())
                .or_default()
                .insert(key.clone());
        }
        self.crds_of.insert(key, crds);
    }
}

/// The CRDs a CSV owns or requires.
fn crds_of(csv: &ClusterServiceVersion) -> Vec<String> {
    let descriptions = csv.spec.customresourcedefinitions.as_ref();
    let all = descriptions
        .into_iter()
        .flat_map(|c| c.owned.iter().chain(&c.required));
    all.map(|d| d.name.clone()).collect()
}

/// The CSVs of `refs` in `store` that `keep` accepts.
fn accepted(
    store: &Store<Guarded>,
    refs: impl Iterator<Item = CsvRef>,
    keep: impl Fn(&ClusterServiceVersion) -> bool,
) -> Vec<CsvRef> {
    refs.filter(|at| store.get(at).is_some_and(|g| g.0.as_ref().is_ok_and(&keep)))
        .collect()
}
