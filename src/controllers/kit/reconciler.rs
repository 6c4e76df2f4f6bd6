//! What a controller implements to be run by the kit ([`Reconciler`]), and the state the
//! kit keeps for it.

use super::backoff::Backoff;
use super::guard::Panicked;
use super::own_writes::OwnWrites;
use crate::controllers::context::Context;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::controller::Action;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;

/// `namespace/name` of an object: the key of backoffs, own writes and logs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn of(meta: &ObjectMeta) -> Self {
        ObjectKey {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A reconcile that panicked, as every controller's error type carries it.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {key}: reconcile {panic}")]
pub struct PanicError {
    pub kind: String,
    pub key: String,
    pub panic: String,
}

/// What a controller's error type tells the kit (and a caught panic becomes one of it).
pub trait ReconcileError: std::error::Error + From<PanicError> + Send + Sync + 'static {
    /// The `error` label of the reconcile-failure counter.
    fn metric_label(&self) -> &'static str;
}

/// An object's uid and generation: one version of it, as far as its spec goes.
type SeenVersion = (Option<String>, Option<i64>);

/// The per-controller state the kit keeps: backoff per key, own writes per object, and the
/// unreadable objects already reported (by uid and generation, so that the status write of
/// the report does not bring another report).
pub struct KitState<Key> {
    pub backoff: Backoff<Key>,
    pub own_writes: OwnWrites<ObjectKey>,
    reported_invalid: std::sync::Mutex<HashMap<ObjectKey, SeenVersion>>,
}

impl<Key: Eq + Hash + Clone> Default for KitState<Key> {
    fn default() -> Self {
        KitState {
            backoff: Backoff::default(),
            own_writes: OwnWrites::default(),
            reported_invalid: std::sync::Mutex::default(),
        }
    }
}

impl<Key> KitState<Key> {
    /// Whether this version of an unreadable object is new to the controller.
    pub(super) fn first_report(&self, meta: &ObjectMeta) -> bool {
        let seen = (meta.uid.clone(), meta.generation);
        let mut reported = self
            .reported_invalid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        reported.insert(ObjectKey::of(meta), seen.clone()) != Some(seen)
    }

    /// The object reads again: a later unreadable version is reported afresh.
    pub(super) fn readable(&self, meta: &ObjectMeta) {
        let mut reported = self
            .reported_invalid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !reported.is_empty() {
            reported.remove(&ObjectKey::of(meta));
        }
    }
}

/// The accessors every [`Reconciler`] whose context has `shared` and `kit` fields writes the
/// same way; `object_key` adds the `key` of controllers keyed by object.
#[macro_export]
macro_rules! kit_accessors {
    () => {
        fn shared(&self) -> &$crate::controllers::context::Context {
            &self.shared
        }

        fn kit(&self) -> &$crate::controllers::kit::KitState<Self::Key> {
            &self.kit
        }
    };
    (object_key) => {
        $crate::kit_accessors!();

        fn key(
            meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        ) -> $crate::controllers::kit::ObjectKey {
            $crate::controllers::kit::ObjectKey::of(meta)
        }
    };
}

/// One controller: the kind it reconciles and the one step that is its own.
pub trait Reconciler: Send + Sync + Sized + 'static {
    type Object: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static;
    /// What failures back off by: usually the object, the namespace where a round covers one.
    type Key: Eq + Hash + Clone + Display + Send + Sync + 'static;
    type Error: ReconcileError;

    /// The controller's name in metrics and logs.
    const CONTROLLER: &'static str;
    /// The server-side apply field manager of everything it writes.
    const FIELD_MANAGER: &'static str;
    /// Whether an unreadable object gets a Warning Event from this controller (off for a
    /// second queue over the same kind).
    const REPORTS_INVALID: bool = true;
    /// Whether status writes take over fields another manager set (InstallPlans: clients,
    /// upstream's tests among them, write `status.plan` and `phase` for the controller to
    /// carry out, and every later write must not conflict with theirs; Subscriptions and CSVs:
    /// clients apply whole objects, status included).
    const FORCE_STATUS: bool = false;

    fn shared(&self) -> &Context;
    fn kit(&self) -> &KitState<Self::Key>;
    fn key(meta: &ObjectMeta) -> Self::Key;

    /// One round for `object`: gather, decide, apply.
    fn sync(
        &self,
        object: &Self::Object,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// The status that says why an object of this kind cannot be read (`message`), in the
    /// kind's own fields; None (the default) leaves the status alone.
    fn invalid_status(_message: &str) -> Option<serde_json::Value> {
        None
    }

    /// After a panic was reported: say so on the object too, where the kind has a place for
    /// it (nothing by default).
    fn after_panic(
        &self,
        _object: &Self::Object,
        _panic: &Panicked,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        async { Ok(()) }
    }
}
