//! The ClusterServiceVersion controller: the phase machine that turns a CSV into a running,
//! correctly privileged operator, upgrades it by replacement, copies it into its target
//! namespaces, and cleans up after it.
//!
//! Each round gathers (caches: CSVs, OperatorGroups, the Deployments OLM made, namespaces,
//! copies, Subscriptions; reads: CRDs and ServiceAccounts by name, the pods of a Deployment
//! that is not ready by its selector), decides (pure: [`phase`], [`requirements`],
//! [`deployment`], [`pods`], [`rbac`], [`copies`]) and applies
//! (server-side apply under `olm-csv`; Deployments and RBAC only on install or drift,
//! copies only when their source changed, status only when it differs).

pub mod certs;
mod cleanup;
pub mod condition;
mod conflicts;
mod context;
mod copier;
pub mod deployment;
mod error;
mod found;
mod gather;
mod index;
mod install;
mod install_error;
mod legacy;
mod membership;
mod mount;
mod orphans;
pub mod owned;
pub mod phase;
mod pods;
pub mod rbac;
mod rbac_cache;
pub mod requirements;
pub mod serving;
mod status;
mod triggers;
pub mod webhooks;

pub use context::{CONTROLLER, FIELD_MANAGER, FINALIZER};

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{OnceCell, mpsc};

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, Reconciler};
use crate::api::{ClusterServiceVersion, CsvPhase};
use crate::controllers::kit::Shutdown;
use cleanup::{cleanup, delete_replaced, ensure_finalizer};
use context::{CsvContext, Error, Round, key, now};
use futures::StreamExt;
use gather::{drifted, gather};
use index::CsvIndex;
use install::install;
use phase::GroupState;
use rbac_cache::spread_missing;
use status::write_status;
use triggers::{Wakes, rbac_watch};

impl Reconciler for CsvContext {
    /// Failed, with the reason in `status.reason`/`message` as for any CSV that cannot install.
    fn invalid_status(message: &str) -> Option<serde_json::Value> {
        let now = crate::controllers::kit::now().to_string();
        Some(serde_json::json!({
            "phase": "Failed",
            "reason": crate::api::CsvReason::SpecInvalidError.as_str(),
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        }))
    }

    type Object = ClusterServiceVersion;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    // Clients apply whole CSVs, status included (upstream's tests do, forced); upstream's
    // status updates never conflict with them, so ours take those fields over.
    const FORCE_STATUS: bool = true;

    crate::kit_accessors!(object_key);

    async fn sync(&self, csv: &ClusterServiceVersion) -> Result<Action, Error> {
        sync(csv, self).await
    }
}

async fn sync(csv: &ClusterServiceVersion, ctx: &CsvContext) -> Result<Action, Error> {
    if !ctx.caches_ready().await {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let (namespace, name) = key(csv);
    let round = Round {
        csv,
        ctx,
        namespace,
        name,
    };
    if csv.metadata.deletion_timestamp.is_some() {
        cleanup(&round).await?;
        return Ok(Action::await_change());
    }
    ensure_finalizer(&round).await?;
    let gathered = gather(&round).await?;

    // Decide (through the phases that wait for nothing), apply.
    let (passed, from) = phase::pass_through(
        csv.status.as_ref(),
        &gathered.observed,
        &gathered.judged.statuses,
        now(),
    );
    let current = from.as_ref().or(csv.status.as_ref());
    let mut step = phase::decide(current, &gathered.observed);
    // The certificates in the Secrets; a fresh one only once it was applied.
    let mut certs = (!gathered.serving.rotating())
        .then(|| gathered.serving.status_times())
        .flatten();
    if step.install && gathered.observed.strategy_problem.is_none() {
        let first = current.and_then(|s| s.phase) == Some(CsvPhase::InstallReady);
        // Waiting for an APIService to turn Available is no reason to apply again.
        let serving_drift = gathered.serving.rotating()
            || matches!(gathered.shortfall, Some(serving::Shortfall::Absent(_)));
        if first
            || serving_drift
            || drifted(&round, &gathered.built)
            || spread_missing(&ctx.rbac, &gathered.spread)
        {
            let strategy = csv.spec.install.spec.clone().unwrap_or_default();
            let mut rbac = gathered.spread.clone();
            rbac.extend(condition::plan(&gathered.owner, &strategy));
            let applied = install(
                &round,
                &rbac,
                &gathered.built,
                &gathered.serving_plan,
                gathered.scoped_account.as_deref(),
                !phase::never_installed(csv.status.as_ref()),
            )
            .await;
            // The objects of the old APIService naming go with OLM's own identity, as the
            // sweep's: they were never the group account's to write.
            let applied = match applied {
                Ok(()) => legacy::remove(&round, webhooks::owned_api_services(csv)).await,
                failed => failed,
            };
            if applied.is_ok() {
                certs = gathered.serving.status_times();
            }
            step = phase::after_install(step, applied.as_ref().map(|_| ()));
        }
    }
    write_status(
        &round,
        current,
        &passed,
        &step,
        gathered.judged.statuses,
        certs,
    )
    .await?;
    if let GroupState::Member { .. } = &gathered.observed.group {
        // The copier reads the status back from the cache once the watch delivers it.
        let _ = ctx
            .copies
            .requests
            .send(ObjectRef::new(&round.name).within(&round.namespace));
    }
    if step.delete {
        delete_replaced(&round).await?;
    }
    Ok(step
        .requeue_after
        .map_or_else(Action::await_change, Action::requeue))
}

pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let (ctx, wakes, copier) = start(&shared);
    let api_service_pruner = tokio::spawn(orphans::prune_api_services(Arc::clone(&ctx)));
    let copier = tokio::spawn(copier.run(shutdown.clone()));
    let controller = triggers::controller(&shared, &ctx, wakes);
    kit::run(controller, ctx, shutdown).await;
    let _ = copier.await;
    api_service_pruner.abort();
}

/// The context of the controller's rounds, what wakes them, and the copier.
fn start(shared: &Arc<Context>) -> (Arc<CsvContext>, Wakes, copier::Copier) {
    let informers = &shared.informers;
    let (groups, group_changes) = informers.operator_groups.subscribe_touched();
    let (deployments, deployment_changes) = informers.owned_deployments.subscribe_touched();
    let (service_accounts, account_changes) = informers.owned_service_accounts.subscribe_touched();
    let (_, secret_changes) = informers.owned_secrets.subscribe_touched();
    let (namespaces, _) = informers.cluster.namespaces.subscribe();
    let (subscriptions, subscription_changes) = informers.subscriptions.subscribe_touched();
    let (plans, plan_changes) = informers.install_plans.subscribe_touched();
    let (crd_meta, crd_changes) = informers.cluster.crds.subscribe_touched();
    // The shared CSV informer leaves copies out (the copier watches every CSV's name).
    let (csvs, csv_changes) = informers.csvs.subscribe_touched();
    let index = Arc::new(CsvIndex::default());
    tokio::spawn(Arc::clone(&index).follow(informers.csvs.subscribe().1));
    let (copies, copier) = copier::start(shared, Arc::clone(&index));
    let (rbac, rbac_wakes) = rbac_watch(&informers.cluster.rbac);
    let (related_tx, related_rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(CsvContext {
        shared: Arc::clone(shared),
        kit: KitState::default(),
        csvs,
        index,
        groups,
        deployments,
        service_accounts,
        namespaces,
        copies,
        subscriptions,
        plans,
        crd_meta,
        crd_states: std::sync::Mutex::default(),
        server_version: OnceCell::new(),
        rbac,
        scoped: crate::cluster::scoped::ScopedClients::default(),
        related: related_tx,
    });
    // A replaced CSV moves on when its replacement's phase does, and a CSV waiting for the
    // CSV that provides a CRD it requires when that one moves: each its own subscription.
    let wakes = Wakes {
        csvs: csv_changes.boxed(),
        replacements: informers.csvs.subscribe_touched().1.boxed(),
        providers: informers.csvs.subscribe_touched().1.boxed(),
        groups: group_changes.boxed(),
        deployments: deployment_changes.boxed(),
        accounts: account_changes.boxed(),
        secrets: secret_changes.boxed(),
        subscriptions: subscription_changes.boxed(),
        plans: plan_changes.boxed(),
        crds: crd_changes.boxed(),
        rbac: rbac_wakes.boxed(),
        related: tokio_stream::wrappers::UnboundedReceiverStream::new(related_rx).boxed(),
    };
    (ctx, wakes, copier)
}
