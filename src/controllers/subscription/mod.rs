//! The Subscription controller: resolves each namespace's Subscriptions against the catalog
//! snapshots it can see, creates the InstallPlans that carry the result out, generates
//! nothing else (dependency Subscriptions are steps of those plans, as upstream), and keeps
//! every Subscription's status as upstream shows it.
//!
//! Resolution is per namespace (one lock per namespace; any Subscription's event resolves
//! its whole namespace). What triggers it: a Subscription, a CSV, an InstallPlan or an
//! OperatorGroup of the namespace changing, a CatalogSource's health changing, or the
//! content digest of a catalog the namespace sees changing. Each round first fingerprints
//! its inputs; a round whose inputs did not change since the last resolution of that
//! namespace does nothing, so a steady state neither resolves nor writes.
//!
//! No duplicate plans: plans are created under the namespace lock, after a fresh LIST of the
//! namespace's plans (not the cache) finds none for the same CSVs; a Complete plan for them
//! makes the round check the CSVs with fresh GETs first. A restart between creating a plan
//! and writing the Subscription's status finds the plan and adopts it.

mod apply;
mod context;
pub mod decide;
mod gather;
mod indexes;
mod plans;
mod policy;
mod release;
mod resolve;
mod triggers;
mod under_policy;
mod windows;

pub use context::{CONTROLLER, FIELD_MANAGER, MAX_PLANS_PER_NAMESPACE, SubscriptionContext};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};

use super::context::Context;
use super::kit::{self, KitState, Reconciler};
use crate::api::{ClusterServiceVersion, InstallPlan, Subscription};
use crate::controllers::kit::Shutdown;
use context::{Error, now};
use decide::{Round, installed_csvs, staying_csvs};
use triggers::{for_catalog, namespace_of, snapshot_changes, subscriptions_in};

impl Reconciler for SubscriptionContext {
    /// ResolutionFailed, where clients look for why a Subscription does not install.
    fn invalid_status(message: &str) -> Option<serde_json::Value> {
        let now = crate::controllers::kit::now().to_string();
        Some(serde_json::json!({
            "lastUpdated": now,
            "conditions": [{
                "type": "ResolutionFailed",
                "status": "True",
                "reason": crate::api::SubscriptionReason::SpecInvalidError.as_str(),
                "message": message,
                "lastTransitionTime": now,
            }],
        }))
    }

    type Object = Subscription;
    type Key = String;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    // Clients apply whole Subscriptions, status included, under their own field manager
    // (upstream's tests do, forced): upstream's status writes are updates that never
    // conflict, so ours take the fields over.
    const FORCE_STATUS: bool = true;

    crate::kit_accessors!();

    fn key(meta: &ObjectMeta) -> String {
        meta.namespace.clone().unwrap_or_default()
    }

    async fn sync(&self, sub: &Subscription) -> Result<Action, Error> {
        // Before every cache has listed, an absent CSV or plan is only not yet seen:
        // resolving then could plan an install that exists already.
        if self.caches_listed().await
            && let Some(wake) = sync_namespace(&Self::key(&sub.metadata), self).await?
        {
            // A plan waits for a maintenance window: look again when it opens.
            return Ok(Action::requeue(wake));
        }
        Ok(Action::await_change())
    }
}

/// One round for a namespace: gather → waiting plans judged → (unchanged? stop) →
/// resolve → plans → statuses. Returns when to look again, when time alone can change a
/// waiting plan's verdict.
async fn sync_namespace(
    namespace: &str,
    ctx: &SubscriptionContext,
) -> Result<Option<std::time::Duration>, Error> {
    let lock = ctx.lock(namespace);
    let _held = lock.lock().await;
    let mut gathered = ctx.gather(namespace);
    if gathered.subscriptions.is_empty() {
        return Ok(None);
    }
    let subs: Vec<&Subscription> = gathered.subscriptions.iter().collect();
    let released = release::release(namespace, &subs, &gathered.cached_plans, ctx).await?;
    let fingerprint = gathered.fingerprint();
    if !released.changed && ctx.resolved_from(namespace, fingerprint) {
        return Ok(released.wake);
    }
    tracing::debug!(%namespace, "resolving");

    // Plans: the cache, plus those earlier rounds created that it does not hold yet, so
    // that nothing planned before is missed (rounds of a namespace never overlap). On a
    // restart the cache starts from a fresh list.
    let mut plans = ctx.known_plans(namespace, std::mem::take(&mut gathered.cached_plans));
    plans.retain(|p| !released.withdrawn.contains(&p.name_any()));

    // What is installed, once: the resolver's input and the statuses' `installedCSV`.
    let csv_refs: Vec<&ClusterServiceVersion> = gathered.csvs.iter().collect();
    let installed = installed_csvs(&csv_refs, &subs);
    let installed_by_package: BTreeMap<String, String> = installed
        .iter()
        .map(|csv| (csv.package.clone(), csv.name.clone()))
        .collect();
    let resolution = resolve::resolve(namespace, &subs, installed, &gathered, &ctx.indexes).await;
    let plan_of = plans::ensure_plans(namespace, &resolution, &subs, &mut plans, ctx).await?;

    // Decide every status (pure), then write what changed and prune old plans.
    let csv_names = staying_csvs(&csv_refs);
    let round = Round {
        resolution: &resolution,
        installed_by_package: &installed_by_package,
        plans: &plans.iter().collect::<Vec<&InstallPlan>>(),
        plan_of: &plan_of,
        csvs: &csv_names,
        catalogs: &gathered.catalog_health(),
        withdrawn: &released.withdrawn,
        now: now(),
    };
    let statuses = decide::statuses(&subs, &round, MAX_PLANS_PER_NAMESPACE);
    apply::apply(namespace, &subs, &statuses, ctx).await?;
    ctx.record_resolved(namespace, fingerprint);
    Ok(released.wake)
}

/// Runs the controller until `shutdown` (leader only).
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let informers = &shared.informers;
    // Copied CSVs are never installed CSVs to the resolver, and there may be one per
    // operator and namespace: the shared CSV informer leaves them out.
    let (csvs, csv_changes) = informers.csvs.subscribe();
    let csv_changes = triggers::phase_changes(csv_changes);
    let (plans, plan_changes) = informers.install_plans.subscribe_touched();
    let (groups, group_changes) = informers.operator_groups.subscribe_touched();
    let (catalogs, catalog_changes) = informers.catalog_sources.subscribe_touched();
    let (subscriptions, subscription_changes) = informers.subscriptions.subscribe_touched();
    let controller = Controller::for_shared_stream(subscription_changes, subscriptions.clone());
    let ctx = Arc::new(SubscriptionContext {
        shared: Arc::clone(&shared),
        subscriptions: subscriptions.clone(),
        csvs,
        plans,
        groups,
        catalogs,
        locks: Mutex::default(),
        resolved: Mutex::default(),
        created_plans: Mutex::default(),
        kit: KitState::default(),
        indexes: indexes::Indexes::default(),
    });
    let global = shared.settings.global_catalog_namespace.clone();
    let (s1, s2, s3, s4) = (
        subscriptions.clone(),
        subscriptions.clone(),
        subscriptions.clone(),
        subscriptions.clone(),
    );
    let controller = controller
        .watches_shared_stream(csv_changes, move |csv| {
            subscriptions_in(&s1, namespace_of(&csv).as_deref())
        })
        .watches_shared_stream(plan_changes, move |plan| {
            subscriptions_in(&s2, namespace_of(&plan).as_deref())
        })
        .watches_shared_stream(group_changes, move |group| {
            subscriptions_in(&s3, namespace_of(&group).as_deref())
        })
        .watches_shared_stream(catalog_changes, move |catalog| {
            for_catalog(&s4, &global, &catalog)
        })
        .reconcile_on(snapshot_changes(Arc::clone(&shared), subscriptions.clone()));
    kit::run(controller, ctx, shutdown).await;
}
