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
mod reconciler;
mod shutdown;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;

use super::context::Context;
use guard::catch_panic;

pub use conditions::{Cond, ConditionStatus};
pub use reconciler::{KitState, ObjectKey, PanicError, ReconcileError, Reconciler};
pub use shutdown::Shutdown;
pub use status::apply_status;

/// The reconcile function of every controller.
/// How soon a round that found its cache behind its own write looks again (the write's
/// watch event usually brings a round sooner).
const CACHE_BEHIND_RECHECK: Duration = Duration::from_secs(1);

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
            guard::report_panic(
                shared,
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
    crate::cluster::api::api_in(&ctx.client, ctx.settings.watch_namespace.as_deref())
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
