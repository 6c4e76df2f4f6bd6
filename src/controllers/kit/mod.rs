//! The controller kit: what every controller of `olm run` does the same way, written once.
//!
//! A controller implements [`Reconciler`] (its kind, names, error type and one `sync` step)
//! and hands [`reconcile`] and [`error_policy`] to kube-runtime. Around every `sync` the kit
//! does what a reader should never have to check controller by controller: an object that
//! does not deserialize gets a Warning Event and waits for a change; a panic is caught,
//! counted, logged and published on the object; a round whose cache predates this
//! controller's own last write waits for that write's watch event; failures back off per
//! object; successes reset the backoff; every round is timed.

pub mod backoff;
pub mod cache_ready;
pub mod conditions;
pub mod guard;
pub mod own_writes;
pub mod status;

use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use serde::de::DeserializeOwned;

use super::context::Context;
use super::host::Shutdown;
use backoff::Backoff;
use guard::{Panicked, catch_panic};
use own_writes::OwnWrites;

pub use conditions::{Cond, ConditionStatus};
pub use status::apply_status;

/// How soon a round that found its cache behind its own write looks again (the write's
/// watch event usually brings a round sooner).
const CACHE_BEHIND_RECHECK: Duration = Duration::from_secs(1);

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
    fn first_report(&self, meta: &ObjectMeta) -> bool {
        let seen = (meta.uid.clone(), meta.generation);
        let mut reported = self
            .reported_invalid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        reported.insert(ObjectKey::of(meta), seen.clone()) != Some(seen)
    }

    /// The object reads again: a later unreadable version is reported afresh.
    fn readable(&self, meta: &ObjectMeta) {
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

/// The reconcile function of every controller.
pub async fn reconcile<R: Reconciler>(
    guarded: Arc<DeserializeGuard<R::Object>>,
    ctx: Arc<R>,
) -> Result<Action, R::Error> {
    let shared = ctx.shared();
    let _timer = shared.metrics.reconcile_started(R::CONTROLLER);
    let object = match &guarded.0 {
        Ok(object) => object,
        Err(invalid) => {
            if R::REPORTS_INVALID && ctx.kit().first_report(&invalid.metadata) {
                report_invalid::<R>(invalid, shared).await;
            }
            return Ok(Action::await_change());
        }
    };
    ctx.kit().readable(object.meta());
    // The watch event of this controller's last write is on its way, with a round of its own.
    let written = ObjectKey::of(object.meta());
    if ctx
        .kit()
        .own_writes
        .is_behind(&written, object.meta().resource_version.as_deref())
    {
        return Ok(Action::requeue(CACHE_BEHIND_RECHECK));
    }
    let key = R::key(object.meta());
    match catch_panic(ctx.sync(object)).await {
        Ok(Ok(action)) => {
            ctx.kit().backoff.reset(&key);
            Ok(action)
        }
        Ok(Err(error)) => Err(error),
        Err(panic) => {
            shared.report_panic(
                R::CONTROLLER,
                &key.to_string(),
                Some(&object.object_ref(&())),
                &panic,
            );
            ctx.after_panic(object, &panic).await?;
            Err(PanicError {
                kind: R::Object::kind(&()).into_owned(),
                key: key.to_string(),
                panic: panic.to_string(),
            }
            .into())
        }
    }
}

/// The error policy of every controller: count, log, and retry after the key's backoff.
pub fn error_policy<R: Reconciler>(
    guarded: Arc<DeserializeGuard<R::Object>>,
    error: &R::Error,
    ctx: Arc<R>,
) -> Action {
    ctx.shared()
        .metrics
        .reconcile_failed(R::CONTROLLER, error.metric_label());
    let delay = ctx.kit().backoff.next_delay(&R::key(guarded.meta()));
    tracing::warn!(controller = R::CONTROLLER, %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Runs `controller` with the kit's reconcile and error policy until `shutdown`; in-flight
/// rounds finish first.
pub async fn run<R: Reconciler>(
    controller: Controller<DeserializeGuard<R::Object>>,
    ctx: Arc<R>,
    shutdown: Shutdown,
) {
    controller
        .graceful_shutdown_on(shutdown.requested())
        .run(reconcile::<R>, error_policy::<R>, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => {
                    tracing::trace!(controller = R::CONTROLLER, %object, "reconciled");
                }
                // Failures are logged by error_policy; these are the queue's own.
                Err(error) => tracing::debug!(controller = R::CONTROLLER, %error, "queue"),
            }
        })
        .await;
}

/// An object that does not deserialize: a Warning Event on it (its reference comes from the
/// metadata that did), the reason in its status where the kind has a place for it, and
/// nothing else until it changes.
async fn report_invalid<R: Reconciler>(invalid: &InvalidObject, ctx: &Context) {
    type K<R> = <R as Reconciler>::Object;
    let kind = K::<R>::kind(&());
    tracing::warn!(
        namespace = ?invalid.metadata.namespace,
        name = ?invalid.metadata.name,
        error = %invalid.error,
        "cannot read {kind}; skipping it until it changes"
    );
    let regarding = ObjectReference {
        api_version: Some(K::<R>::api_version(&()).into_owned()),
        kind: Some(kind.clone().into_owned()),
        name: invalid.metadata.name.clone(),
        namespace: invalid.metadata.namespace.clone(),
        uid: invalid.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    let message = format!("cannot read this {kind}: {}", invalid.error);
    if let (Some(status), Some(name)) = (R::invalid_status(&message), &invalid.metadata.name) {
        let resource = kube::api::ApiResource::erase::<K<R>>(&());
        let api: Api<kube::api::DynamicObject> = match &invalid.metadata.namespace {
            Some(namespace) => Api::namespaced_with(ctx.client.clone(), namespace, &resource),
            None => Api::all_with(ctx.client.clone(), &resource),
        };
        let patch = kube::api::Patch::Merge(serde_json::json!({ "status": status }));
        if let Err(error) = api
            .patch_status(name, &kube::api::PatchParams::default(), &patch)
            .await
        {
            tracing::warn!(%error, name, "cannot write why this {kind} is unreadable");
        }
    }
    ctx.event(
        &regarding,
        EventType::Warning,
        "InvalidObject",
        "Read",
        message,
    );
}

/// `(major, minor, patch)` of a Kubernetes version like `v1.37.0` or `1.27` (extra suffixes
/// such as `+k3s1` or `-rc.1` ignored).
pub fn parse_kube_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.trim().trim_start_matches('v');
    let core = core.split(['+', '-']).next()?;
    let mut parts = core.split('.').map(str::parse::<u64>);
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some((major, minor, patch))
}

/// Now, to the second: what every timestamp OLM writes carries (as upstream's metav1.Time).
pub fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// An API for namespaced `K` in the namespace this controller set watches (all when None).
pub fn scoped_api<K>(ctx: &Context) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    api_in(&ctx.client, ctx.settings.watch_namespace.as_deref())
}

/// An API for namespaced `K` in `scope` (all namespaces when None).
pub fn api_in<K>(client: &kube::Client, scope: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match scope {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_kube_version;

    #[test]
    fn kubernetes_versions_parse_with_their_suffixes_ignored() {
        assert_eq!(parse_kube_version("v1.37.1"), Some((1, 37, 1)));
        assert_eq!(parse_kube_version("v1.30.2+k3s1"), Some((1, 30, 2)));
        assert_eq!(parse_kube_version("1.27"), Some((1, 27, 0)));
        assert_eq!(parse_kube_version("garbage"), None);
    }
}
