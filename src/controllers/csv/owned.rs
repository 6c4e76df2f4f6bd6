//! What a CSV's objects share: their owner, and the shape of one object to apply.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cluster::ownership::owner_labels;

/// What every Deployment of one CSV shares.
#[derive(Clone, Debug, Default)]
pub struct Owner {
    pub csv: String,
    pub namespace: String,
    pub uid: String,
    /// Merged into every pod template: the CSV's annotations and the group's.
    pub annotations: BTreeMap<String, String>,
    /// The CSV's Operator component labels, carried by everything made for it.
    pub operator_labels: BTreeMap<String, String>,
}

impl Owner {
    /// The owner reference every namespaced object OLM creates for the CSV carries.
    pub fn reference(&self) -> Value {
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "name": self.csv,
            "uid": self.uid,
            "controller": false,
            "blockOwnerDeletion": false,
        })
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = owner_labels("ClusterServiceVersion", &self.csv, &self.namespace);
        labels.extend(self.operator_labels.clone());
        labels
    }
}

/// One object to apply: its kind, namespace (None: cluster-scoped), name and body; the
/// same shape the preview predicts them in.
pub use crate::controllers::plan::serving::Made as Planned;
