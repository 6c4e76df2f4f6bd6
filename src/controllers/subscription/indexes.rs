//! Resolver indexes shared by every namespace's resolution. Building one parses every
//! bundle's properties of the catalogs a namespace sees (tens of MiB for a public catalog);
//! built per round, a hundred namespaces resolving at once held a hundred copies (4 GiB
//! with the community catalog). An index is built once per set of catalog contents (their
//! digests and priorities), one build at a time, and handed out as an `Arc`; resolutions
//! run at most one per core.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{Mutex, Semaphore};

use crate::resolver::{CatalogIndex, CatalogRef};
use crate::snapshots::CatalogSnapshot;

/// Sets of catalogs kept: the global catalogs, and a few namespaces' own beside them.
const KEPT: usize = 4;

/// What an index was built from: each catalog's identity, content and priority.
type Key = Vec<(CatalogRef, String, i32)>;

pub struct Indexes {
    /// Most recently used first.
    built: Mutex<VecDeque<(Key, Arc<CatalogIndex>)>>,
    resolving: Semaphore,
}

impl Default for Indexes {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Indexes {
            built: Mutex::default(),
            resolving: Semaphore::new(cores),
        }
    }
}

fn key_of(snapshots: &[Arc<CatalogSnapshot>]) -> Key {
    snapshots
        .iter()
        .map(|s| {
            (
                CatalogRef::new(&s.catalog.name, &s.catalog.namespace),
                s.digest.clone(),
                s.catalog.priority,
            )
        })
        .collect()
}

impl Indexes {
    /// The index of `snapshots` (in their order), built unless already at hand.
    pub async fn index_of(&self, snapshots: &[Arc<CatalogSnapshot>]) -> Arc<CatalogIndex> {
        let key = key_of(snapshots);
        // Held across the build: rounds that need the same index wait for it rather than
        // build their own.
        let mut built = self.built.lock().await;
        if let Some(entry) = built
            .iter()
            .position(|(k, _)| *k == key)
            .and_then(|at| built.remove(at))
        {
            let index = Arc::clone(&entry.1);
            built.push_front(entry);
            return index;
        }
        let snapshots = snapshots.to_vec();
        let index = tokio::task::spawn_blocking(move || {
            // Decoded for the build only: the index keeps what it parsed, not the copies.
            let catalogs: Vec<_> = snapshots.iter().map(|s| s.catalog.unpack()).collect();
            let index = Arc::new(CatalogIndex::from_catalogs(&catalogs));
            drop(catalogs);
            index
        })
        .await
        .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()));
        built.push_front((key, Arc::clone(&index)));
        built.truncate(KEPT);
        index
    }

    /// Runs `resolve` on a blocking thread (the solver is synchronous), at most one per core.
    pub async fn run<T: Send + 'static>(&self, resolve: impl FnOnce() -> T + Send + 'static) -> T {
        let _turn = self.resolving.acquire().await;
        tokio::task::spawn_blocking(resolve)
            .await
            .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::fbc::DeclarativeConfig;
    use crate::resolver::Catalog;
    use crate::snapshots::SnapshotCatalog;

    fn snapshot(name: &str, digest: &str, priority: i32) -> Arc<CatalogSnapshot> {
        Arc::new(CatalogSnapshot {
            catalog: SnapshotCatalog::pack(Catalog {
                name: name.into(),
                namespace: "olm".into(),
                priority,
                content: DeclarativeConfig::default(),
            }),
            digest: digest.into(),
            origin: String::new(),
            loaded_at: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            channel_heads: Default::default(),
        })
    }

    #[tokio::test]
    async fn one_index_per_set_of_contents() {
        let indexes = Indexes::default();
        let a = [snapshot("a", "d1", 0)];
        let first = indexes.index_of(&a).await;
        // The same content (another snapshot object, e.g. another namespace's view): shared.
        assert!(Arc::ptr_eq(
            &first,
            &indexes.index_of(&[snapshot("a", "d1", 0)]).await
        ));
        // New content, or a new priority: built again.
        let newer = indexes.index_of(&[snapshot("a", "d2", 0)]).await;
        assert!(!Arc::ptr_eq(&first, &newer));
        let raised = indexes.index_of(&[snapshot("a", "d2", 5)]).await;
        assert!(!Arc::ptr_eq(&newer, &raised));
        // At most KEPT sets are kept; the most recently used stay.
        for i in 0..KEPT {
            indexes
                .index_of(&[snapshot(&format!("n{i}"), "d", 0)])
                .await;
        }
        assert_eq!(indexes.built.lock().await.len(), KEPT);
        assert!(!Arc::ptr_eq(
            &raised,
            &indexes.index_of(&[snapshot("a", "d2", 5)]).await
        ));
    }
}
