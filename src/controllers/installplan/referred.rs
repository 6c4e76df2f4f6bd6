//! The objects of the last bundles read back from their catalogs for plans that carry them
//! by reference, newest last: a plan waiting for its CRDs looks again every few seconds,
//! and reading a multi-MiB bundle each time kept catalog servers too busy to answer.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::api::PlannedBundle;
use crate::controllers::context::Context;
use crate::controllers::plan::manifests::{self, FetchError, Fetched};

/// How many bundles are kept.
const KEPT: usize = 8;

#[derive(Default)]
pub struct ReferredBundles(Mutex<Vec<(String, Arc<Vec<Value>>)>>);

impl ReferredBundles {
    /// The objects of `bundle` read back from its catalog, from those kept when it is among
    /// them.
    pub async fn objects(
        &self,
        bundle: &PlannedBundle,
        shared: &Context,
    ) -> Result<Arc<Vec<Value>>, FetchError> {
        let key = format!(
            "{}/{}/{}",
            bundle.catalog_namespace, bundle.catalog, bundle.name
        );
        if let Some(objects) = self.kept(&key) {
            return Ok(objects);
        }
        let objects = match manifests::fetch(bundle, shared).await? {
            Fetched::Objects { objects, .. } => objects,
            Fetched::NeedsUnpack { .. } => Vec::new(),
        };
        let objects = Arc::new(objects);
        self.keep(key, Arc::clone(&objects));
        Ok(objects)
    }

    fn kept(&self, key: &str) -> Option<Arc<Vec<Value>>> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let at = kept.iter().position(|(k, _)| k == key)?;
        let entry = kept.remove(at);
        let objects = Arc::clone(&entry.1);
        kept.push(entry);
        Some(objects)
    }

    fn keep(&self, key: String, objects: Arc<Vec<Value>>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|(k, _)| *k != key);
        kept.push((key, objects));
        let excess = kept.len().saturating_sub(KEPT);
        kept.drain(..excess);
    }
}
