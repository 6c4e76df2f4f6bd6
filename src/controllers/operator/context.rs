//! What both reconcilers of the Operator controller share: the constants, the error, and
//! the status reconciler's context (the caches its rounds read). A leaf of the controller:
//! the other files read these, and this file reads none of them but [`super::labelled`].

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;

use super::labelled::Labelled;
use crate::api::{ClusterServiceVersion, InstallPlan, OperatorCondition, Subscription};
use crate::controllers::context::Context;
use crate::controllers::kit::{KitState, ObjectKey, PanicError, ReconcileError};

pub const CONTROLLER: &str = "operator";
/// Field manager of the Operators' status and of the labels adoption sets.
pub const FIELD_MANAGER: &str = "olm-operator";
/// Bursts of component changes (an install writes a CSV's status several times, its CRDs
/// turn Established one by one) make one round.
pub(super) const DEBOUNCE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Operator {name}: {action}: {error}")]
    Kube {
        name: String,
        action: String,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Panicked(_) => "panic",
        }
    }
}

/// A `map_err` for a failed API call of the Operator `name`'s round, saying what it did.
pub(super) fn kube_error(
    name: &str,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> Error {
    let (name, action) = (name.to_string(), action.into());
    move |error| Error::Kube {
        name,
        action,
        error,
    }
}

/// Whether the Operator `name` is this process's to look after. Operators are
/// cluster-scoped, but a scoped context sees only its namespace's components: it keeps only
/// its own namespace's Operators (`<package>.<namespace>`; namespaces have no dots), or
/// scopes would overwrite each other's lists.
pub(super) fn in_scope(scope: Option<&str>, name: &str) -> bool {
    scope.is_none_or(|scope| name.rsplit_once('.').map(|(_, namespace)| namespace) == Some(scope))
}

/// The object behind a guard, unless it could not be read.
pub(super) fn ok<K>(guarded: &Arc<DeserializeGuard<K>>) -> Option<&K> {
    guarded.0.as_ref().ok()
}

/// The metadata of an object, readable or not.
pub(super) fn guarded_meta<K: Resource>(guarded: &DeserializeGuard<K>) -> &ObjectMeta {
    match &guarded.0 {
        Ok(object) => object.meta(),
        Err(invalid) => &invalid.metadata,
    }
}

/// The Operators' status.
pub struct OperatorContext {
    pub(super) shared: Arc<Context>,
    pub(super) kit: KitState<ObjectKey>,
    pub(super) csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    pub(super) subscriptions: Store<DeserializeGuard<Subscription>>,
    pub(super) plans: Store<DeserializeGuard<InstallPlan>>,
    pub(super) operator_conditions: Store<DeserializeGuard<OperatorCondition>>,
    /// Components of the other kinds (Deployments, RBAC, CRDs, …).
    pub(super) labelled: Labelled,
}
