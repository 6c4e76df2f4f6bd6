//! What every round of the Subscription controller shares: its context (caches, the
//! per-namespace locks and memory), its error and its constants. A leaf of the controller:
//! every other file of it reads these, and this file reads none of them but the indexes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;

use super::indexes::Indexes;
use crate::api::{CatalogSource, ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::controllers::context::Context;
use crate::controllers::kit::{self, KitState, PanicError, ReconcileError};
use crate::controllers::plan;

pub const CONTROLLER: &str = "subscription";
/// Server-side apply field manager of this controller's writes.
pub const FIELD_MANAGER: &str = "olm-subscription";
/// Upstream keeps at most this many InstallPlans per namespace.
pub const MAX_PLANS_PER_NAMESPACE: usize = 5;
/// How long a plan this controller created is remembered while the plan cache does not
/// show it: long enough for any watch to catch up, short enough that a plan deleted
/// meanwhile is soon forgotten.
const CREATED_PLAN_MEMORY_SECS: i64 = 120;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("namespace {namespace}: {action}: {error}")]
    Kube {
        namespace: String,
        action: String,
        #[source]
        error: kube::Error,
    },
    #[error("namespace {namespace}: InstallPlan {plan}: {error}")]
    Plan {
        namespace: String,
        plan: String,
        #[source]
        error: plan::GatherError,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Plan { .. } => "plan",
            Error::Panicked(_) => "panic",
        }
    }
}

/// A `map_err` for a failed API call of a round of `namespace`, saying what it was doing.
pub(super) fn kube_error(
    namespace: &str,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> Error {
    let namespace = namespace.to_string();
    let action = action.into();
    move |error| Error::Kube {
        namespace,
        action,
        error,
    }
}

/// The object behind a guard, unless it could not be read (the kit reports those).
pub(super) fn ok<K: Clone>(guarded: &Arc<DeserializeGuard<K>>) -> Option<&K> {
    guarded.0.as_ref().ok()
}

/// The kit's clock (which tests may set), as a status timestamp.
pub(super) fn now() -> Time {
    Time(kit::now())
}

/// This controller's context: the shared one, the caches it reads, and per-namespace state.
pub struct SubscriptionContext {
    pub shared: Arc<Context>,
    pub(super) subscriptions: Store<DeserializeGuard<Subscription>>,
    pub(super) csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    pub(super) plans: Store<DeserializeGuard<InstallPlan>>,
    pub(super) groups: Store<DeserializeGuard<OperatorGroup>>,
    pub(super) catalogs: Store<DeserializeGuard<CatalogSource>>,
    /// One lock per namespace: resolutions of a namespace never overlap.
    pub(super) locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The fingerprint of the inputs of each namespace's last completed resolution.
    pub(super) resolved: Mutex<HashMap<String, u64>>,
    /// Plans this controller created that the plan cache may not hold yet, per namespace:
    /// with the cache they are every plan a round must know of (no duplicates), without
    /// listing a namespace's plans (their inline manifests weigh megabytes) every round.
    pub(super) created_plans: Mutex<HashMap<String, Vec<InstallPlan>>>,
    /// Failures back off per namespace: a round resolves a whole namespace.
    pub(super) kit: KitState<String>,
    /// Resolver indexes shared by every namespace that sees the same catalogs.
    pub(super) indexes: Indexes,
}

impl SubscriptionContext {
    /// `cached` plus the plans created here that the cache has not seen yet (forgotten
    /// once it has them, or after two minutes: deleted meanwhile).
    pub(super) fn known_plans(
        &self,
        namespace: &str,
        mut plans: Vec<InstallPlan>,
    ) -> Vec<InstallPlan> {
        let mut created = self
            .created_plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(recent) = created.get_mut(namespace) else {
            return plans;
        };
        let now = kit::now();
        recent.retain(|p| {
            let fresh = p
                .metadata
                .creation_timestamp
                .as_ref()
                .is_none_or(|t| now.duration_since(t.0).as_secs() < CREATED_PLAN_MEMORY_SECS);
            fresh && !plans.iter().any(|c| c.uid() == p.uid())
        });
        plans.extend(recent.iter().cloned());
        if recent.is_empty() {
            created.remove(namespace);
        }
        plans
    }

    /// Remembers a plan just created, until the plan cache shows it (see `known_plans`).
    pub(super) fn remember_created(&self, plan: &InstallPlan) {
        self.created_plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(plan.namespace().unwrap_or_default())
            .or_default()
            .push(plan.clone());
    }

    /// The lock of `namespace`'s rounds.
    pub(super) fn lock(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(namespace.to_string()).or_default())
    }

    /// Whether `namespace` was last resolved from inputs of this fingerprint.
    pub(super) fn resolved_from(&self, namespace: &str, fingerprint: u64) -> bool {
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(namespace)
            == Some(&fingerprint)
    }

    /// Records a completed resolution of `namespace` from inputs of this fingerprint.
    pub(super) fn record_resolved(&self, namespace: &str, fingerprint: u64) {
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(namespace.to_string(), fingerprint);
    }

    /// Every cache has been listed once (false only when the process is stopping).
    pub(super) async fn caches_listed(&self) -> bool {
        use crate::controllers::kit::cache_ready::listed;
        listed(&self.subscriptions).await
            && listed(&self.csvs).await
            && listed(&self.plans).await
            && listed(&self.groups).await
            && listed(&self.catalogs).await
    }
}
