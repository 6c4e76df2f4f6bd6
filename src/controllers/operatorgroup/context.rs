//! What every round of the OperatorGroup controller shares: its context (caches, its own
//! writes in flight), its error and its constants. A leaf of the controller: the other
//! files read these, and this file reads none of them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::Store;

use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::controllers::context::Context;
use crate::controllers::kit::own_writes::OwnWrites;
use crate::controllers::kit::{KitState, ObjectKey, PanicError, ReconcileError};

pub const CONTROLLER: &str = "operatorgroup";
pub const FIELD_MANAGER: &str = "olm-operatorgroup";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OperatorGroup {namespace}/{name}: {step}: {error}")]
    Kube {
        namespace: String,
        name: String,
        step: &'static str,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { step, .. } => step,
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct OperatorGroupContext {
    pub shared: Arc<Context>,
    pub(super) kit: KitState<ObjectKey>,
    pub(super) groups: Store<DeserializeGuard<OperatorGroup>>,
    pub(super) namespaces: Store<PartialObjectMeta<Namespace>>,
    pub(super) csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    pub(super) cluster_roles: Store<ClusterRole>,
    /// The resourceVersion each role write returned: a round that finds the cache behind
    /// its own write does not write the role again (many rounds run while a write is on
    /// its way back through the watch).
    pub(super) role_writes: OwnWrites<String>,
}

/// A group's namespace and name.
pub(super) fn key(group: &OperatorGroup) -> (String, String) {
    (group.namespace().unwrap_or_default(), group.name_any())
}

impl OperatorGroupContext {
    /// Every cache has been listed once: until then an absent namespace or CSV is only not
    /// yet seen.
    pub(super) async fn caches_listed(&self) -> bool {
        use crate::controllers::kit::cache_ready::listed;
        listed(&self.groups).await
            && listed(&self.namespaces).await
            && listed(&self.csvs).await
            && listed(&self.cluster_roles).await
    }
}

/// A `map_err` for a failed API call of `group`'s round, named by its step (the metric
/// label of the failure).
pub(super) fn kube_error(
    group: &OperatorGroup,
    step: &'static str,
) -> impl FnOnce(kube::Error) -> Error {
    let (namespace, name) = key(group);
    move |error| Error::Kube {
        namespace,
        name,
        step,
        error,
    }
}
