//! The ClusterServiceVersion controller: the phase machine that turns a CSV into a running,
//! correctly privileged operator, upgrades it by replacement, copies it into its target
//! namespaces, and cleans up after it.
//!
//! Each round gathers (caches: CSVs, OperatorGroups, the Deployments OLM made, namespaces,
//! copies, Subscriptions; reads: CRDs and ServiceAccounts by name), decides (pure:
//! [`phase`], [`requirements`], [`deployment`], [`rbac`], [`copies`]) and applies
//! (server-side apply under `olm-csv`; Deployments and RBAC only on install or drift,
//! copies only when their source changed, status only when it differs).

pub mod certs;
mod cleanup;
pub mod condition;
mod conflicts;
mod context;
pub mod copier;
pub mod copies;
pub mod deployment;
mod found;
mod gather;
mod install;
mod mount;
mod names;
mod orphans;
pub mod owned;
pub mod phase;
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

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use tokio::sync::{OnceCell, mpsc};

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, Reconciler};
use super::ownership::OWNER_KIND_LABEL;
use crate::api::{ClusterServiceVersion, CsvPhase};
use crate::controllers::host::Shutdown;
use cleanup::{cleanup, delete_replaced, ensure_finalizer};
use context::{CsvContext, Error, Round, key, now};
use gather::{drifted, gather};
use install::install;
use phase::GroupState;
use rbac_cache::spread_missing;
use status::write_status;
use triggers::{CrdTriggers, CrdWake, csvs_where, owner_csv, rbac_watch, watch_owned};

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
            if applied.is_ok() {
                certs = gathered.serving.status_times();
            }
            step = phase::after_install(step, applied);
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
            .copy_requests
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
    let informers = &shared.informers;
    let (groups, group_changes) = informers.operator_groups.subscribe_touched();
    let (deployments, deployment_changes) = watch_owned::<Deployment>(kit::scoped_api(&shared));
    let (service_accounts, account_changes) =
        watch_owned::<PartialObjectMeta<ServiceAccount>>(kit::scoped_api(&shared));
    let (namespaces, namespace_changes) = informers.cluster.namespaces.subscribe_touched();
    let (csv_names, changed_copies) = copier::watch_csv_names(shared.client.clone());
    let (subscriptions, subscription_changes) = informers.subscriptions.subscribe_touched();
    let (crd_meta, crd_changes) = informers.cluster.crds.subscribe_touched();
    // The shared CSV informer leaves copies out (the copier watches every CSV's name above).
    let (csvs, csv_changes) = informers.csvs.subscribe_touched();
    // A replaced CSV moves on when its replacement's phase does. Its round must read the
    // replacement from the cache, so the cache's own change triggers it: a wake-up sent
    // right after the replacement's status write could find the cache a step behind, and
    // leave the old CSV Replacing until something else moved.
    let (_, replacement_changes) = informers.csvs.subscribe_touched();
    // A CSV waiting for the CSV that provides a CRD it requires goes on when that one moves.
    let (_, provider_changes) = informers.csvs.subscribe_touched();
    let (rbac, rbac_wakes) = rbac_watch(&informers.cluster.rbac);
    let (related_tx, related_rx) = mpsc::unbounded_channel();
    let (copy_tx, copy_rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(CsvContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        csvs: csvs.clone(),
        groups: groups.clone(),
        deployments,
        service_accounts,
        namespaces,
        csv_names,
        subscriptions,
        crd_meta,
        crd_states: std::sync::Mutex::default(),
        server_version: OnceCell::new(),
        rbac,
        scoped: crate::controllers::scoped::ScopedClients::default(),
        related: related_tx,
        copy_requests: copy_tx,
    });
    let pruner = tokio::spawn(copier::prune_orphans(Arc::clone(&ctx)));
    let api_service_pruner = tokio::spawn(orphans::prune_api_services(Arc::clone(&ctx)));

    // The copier's queue: the phase machine's rounds, changes to copies, namespaces that
    // come or go (they change the copies of AllNamespaces operators).
    let copy_requests = futures::stream::select(
        tokio_stream::wrappers::UnboundedReceiverStream::new(copy_rx),
        futures::stream::select(
            changed_copies,
            copier::all_namespaces_sources(namespace_changes, groups, csvs.clone()),
        ),
    );
    let copier = tokio::spawn(copier::run(
        Arc::clone(&ctx),
        copy_requests,
        shutdown.clone(),
    ));

    let crd_triggers = CrdTriggers {
        ctx: Arc::clone(&ctx),
        generations: std::sync::Mutex::default(),
    };
    let (for_groups, for_crds, for_subs, for_replaced, for_conditions, for_dependents) = (
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
    );
    let controller = Controller::for_shared_stream(csv_changes, csvs)
        .watches_shared_stream(group_changes, move |group| {
            let ns = group.meta().namespace.clone();
            csvs_where(&for_groups, |csv| csv.metadata.namespace == ns)
        })
        .watches_stream(deployment_changes, |deployment: Deployment| {
            owner_csv(deployment.labels())
        })
        .reconcile_on(rbac_wakes)
        // An account of the CSV's that goes (or comes back) is a requirement that changed.
        .watches_stream(
            account_changes,
            |account: PartialObjectMeta<ServiceAccount>| owner_csv(account.labels()),
        )
        .watches_shared_stream(replacement_changes, move |csv| {
            let csv = csv.0.as_ref().ok()?;
            let replaces = csv.spec.replaces.as_deref().filter(|r| !r.is_empty())?;
            let old = ObjectRef::new(replaces).within(csv.metadata.namespace.as_deref()?);
            // Only a CSV that is there: the first of a chain replaces one long gone.
            for_replaced.get(&old).map(|_| old)
        })
        .watches_shared_stream(provider_changes, move |provider| {
            let Ok(provider) = provider.0.as_ref() else {
                return Vec::new();
            };
            let owned: Vec<&str> = provider
                .spec
                .customresourcedefinitions
                .iter()
                .flat_map(|c| c.owned.iter().map(|d| d.name.as_str()))
                .collect();
            if owned.is_empty() {
                return Vec::new();
            }
            let ns = provider.metadata.namespace.clone();
            csvs_where(&for_dependents, |csv| {
                csv.metadata.namespace == ns
                    && phase::never_installed(csv.status.as_ref())
                    && csv
                        .spec
                        .customresourcedefinitions
                        .as_ref()
                        .is_some_and(|c| {
                            c.required.iter().any(|d| owned.contains(&d.name.as_str()))
                        })
            })
        })
        // An owned APIService that becomes Available (or stops being) moves its CSV.
        .watches(
            Api::<
                PartialObjectMeta<
                    k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
                >,
            >::all(shared.client.clone()),
            watcher::Config::default()
                .labels(&format!("{OWNER_KIND_LABEL}=ClusterServiceVersion"))
                .any_semantic(),
            |service| owner_csv(service.labels()),
        )
        // An OperatorCondition that changes may release the CSV that replaces its own.
        .watches(
            kit::scoped_api::<DeserializeGuard<crate::api::OperatorCondition>>(&shared),
            watcher::Config::default().any_semantic(),
            move |condition| {
                let (name, ns) = (condition.name_any(), condition.namespace());
                csvs_where(&for_conditions, |csv| {
                    csv.metadata.namespace == ns && csv.spec.replaces.as_deref() == Some(&name)
                })
            },
        )
        .watches_shared_stream(subscription_changes, move |sub| {
            let ns = sub.meta().namespace.clone();
            csvs_where(&for_subs, |csv| csv.metadata.namespace == ns)
        })
        .watches_shared_stream(crd_changes, move |crd| {
            let name = crd.name_any();
            let wake = crd_triggers.wake(&crd);
            csvs_where(&for_crds, |csv| {
                let woken = match wake {
                    CrdWake::Everyone => true,
                    CrdWake::Unsettled => csv
                        .status
                        .as_ref()
                        .is_none_or(|s| s.phase != Some(CsvPhase::Succeeded)),
                    CrdWake::No => false,
                };
                woken
                    && csv
                        .spec
                        .customresourcedefinitions
                        .as_ref()
                        .is_some_and(|c| c.owned.iter().chain(&c.required).any(|d| d.name == name))
            })
        })
        .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(
            related_rx,
        ));
    kit::run(controller, ctx, shutdown).await;
    let _ = copier.await;
    pruner.abort();
    api_service_pruner.abort();
}
