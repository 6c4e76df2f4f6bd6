//! Adoption, per Subscription, as upstream's adoption controller does: the Operator of its
//! package and namespace exists, and the Subscription, its installed CSV and its newest
//! plan carry the Operator's label (installs made before the label existed). An Operator
//! deleted while labelled components remain is made again by [`super::recreate`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::{Error, FIELD_MANAGER, kube_error};
use crate::api::{
    ClusterServiceVersion, InstallPlan, Operator, OperatorSpec, Subscription, operator_label,
    operator_name,
};
use crate::controllers::context::Context;
use crate::controllers::kit::{KitState, ObjectKey, Reconciler};

/// Adoption, per Subscription: its Operator exists, and the Subscription, its installed CSV
/// and its newest plan carry the Operator's label.
pub struct AdoptionContext {
    pub(super) shared: Arc<Context>,
    pub(super) kit: KitState<ObjectKey>,
    pub(super) operators: Store<DeserializeGuard<Operator>>,
    pub(super) csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    pub(super) plans: Store<DeserializeGuard<InstallPlan>>,
    /// Operators this controller or the recreation queue created that the cache may not
    /// show yet.
    pub(super) created: Arc<RecentCreates>,
}

impl Reconciler for AdoptionContext {
    type Object = Subscription;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = "operator-adoption";
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    // The Subscription controller reports unreadable Subscriptions.
    const REPORTS_INVALID: bool = false;

    crate::kit_accessors!(object_key);

    async fn sync(&self, sub: &Subscription) -> Result<Action, Error> {
        if sub.spec.name.is_empty() || sub.meta().deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let namespace = sub.namespace().unwrap_or_default();
        let name = operator_name(&sub.spec.name, &namespace);
        let label = operator_label(&name);
        adopt(&self.shared, sub, &label, &name).await?;
        let status = sub.status.as_ref();
        if let Some(csv) = status
            .and_then(|s| s.installed_csv.as_deref())
            .and_then(|csv| self.csvs.get(&ObjectRef::new(csv).within(&namespace)))
            && let Ok(csv) = &csv.0
        {
            adopt(&self.shared, csv, &label, &name).await?;
        }
        if let Some(plan) = status
            .and_then(|s| s.install_plan_ref.as_ref())
            .and_then(|r| r.name.as_deref())
            .and_then(|plan| self.plans.get(&ObjectRef::new(plan).within(&namespace)))
            && let Ok(plan) = &plan.0
        {
            adopt(&self.shared, plan, &label, &name).await?;
        }
        if self.operators.get(&ObjectRef::new(&name)).is_some() {
            self.created.seen(&name);
        } else if self.created.claim(&name) {
            create_operator(&self.shared, &name)
                .await
                .inspect_err(|_| self.created.seen(&name))?;
        }
        Ok(Action::await_change())
    }
}

/// Puts the Operator's label on `object` unless it has it.
async fn adopt<K>(ctx: &Context, object: &K, label: &str, name: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    if object.labels().contains_key(label) {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(
        ctx.client.clone(),
        object.meta().namespace.as_deref().unwrap_or_default(),
    );
    let patch = json!({"metadata": {"labels": {label: ""}}});
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(kube_error(
        name,
        format!("labelling {} {}", K::kind(&()), object.name_any()),
    ))?;
    tracing::debug!(operator = name, kind = %K::kind(&()), object = %object.name_any(), "component adopted");
    Ok(())
}

/// Names created a moment ago, or being created. A Subscription's status changes several
/// times during an install, and each change is a round; until the Operator's watch event
/// arrives, each round would create it again and be refused (at 1,000 installs at once,
/// 2,158 creates for 1,000 Operators). A name is claimed before its create is sent, so that
/// adoption and recreation never both send one; it is forgotten once the cache shows it,
/// when the create fails, or after `CREATE_SETTLE` in case it was deleted before the cache
/// ever did.
#[derive(Default)]
pub(super) struct RecentCreates(std::sync::Mutex<HashMap<String, std::time::Instant>>);

const CREATE_SETTLE: Duration = Duration::from_secs(30);

impl RecentCreates {
    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<String, std::time::Instant>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Claims `name` for one create: false while another create of it is in flight or
    /// landed a moment ago.
    pub(super) fn claim(&self, name: &str) -> bool {
        let mut names = self.names();
        names.retain(|_, at| at.elapsed() < CREATE_SETTLE);
        if names.contains_key(name) {
            return false;
        }
        names.insert(name.to_string(), std::time::Instant::now());
        true
    }

    pub(super) fn in_flight(&self, name: &str) -> bool {
        self.names()
            .get(name)
            .is_some_and(|at| at.elapsed() < CREATE_SETTLE)
    }

    pub(super) fn seen(&self, name: &str) {
        self.names().remove(name);
    }
}

/// Creates the Operator `name`; one that exists already (created by another round, or
/// by a user) is no error.
pub(super) async fn create_operator(ctx: &Context, name: &str) -> Result<(), Error> {
    let api: Api<Operator> = Api::all(ctx.client.clone());
    let operator = Operator::new(name, OperatorSpec::default());
    match api.create(&PostParams::default(), &operator).await {
        Ok(_) => {
            tracing::info!(operator = name, "Operator created");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(error) => Err(kube_error(name, "creating the Operator")(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_just_created_is_not_created_again_until_the_cache_shows_it() {
        let created = RecentCreates::default();
        assert!(!created.in_flight("a.ns"));
        assert!(created.claim("a.ns"));
        assert!(created.in_flight("a.ns"));
        assert!(
            !created.claim("a.ns"),
            "one create at a time, from adoption or recreation"
        );
        assert!(!created.in_flight("b.ns"));
        created.seen("a.ns");
        assert!(
            !created.in_flight("a.ns"),
            "once the cache shows it, it is forgotten"
        );
    }
}
