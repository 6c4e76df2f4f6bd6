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

pub mod decide;
mod indexes;
mod triggers;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::kit::{
    self, ConditionStatus, KitState, PanicError, ReconcileError, Reconciler, apply_status,
};
use crate::api::{
    Approval, CatalogSource, ClusterServiceVersion, InstallPlan, InstallPlanSpec, OperatorGroup,
    Subscription, SubscriptionReason, SubscriptionStatus, operator_label, operator_name,
};
use crate::controllers::kit::Shutdown;
use crate::controllers::plan;
use crate::resolver::{CatalogRef, InstalledCsv, Namespace};
use crate::snapshots::CatalogSnapshot;
use decide::{
    CatalogHealth, Existing, Failure, PlanGroup, Resolution, Round, existing_plan, installed_csvs,
    names_exactly, next_generation, pinned_plan, resolve_namespace, resolver_subscription, split,
};

pub const CONTROLLER: &str = "subscription";
/// Server-side apply field manager of this controller's writes.
pub const FIELD_MANAGER: &str = "olm-subscription";
/// Upstream keeps at most this many InstallPlans per namespace.
pub const MAX_PLANS_PER_NAMESPACE: usize = 5;

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

fn kube_error(namespace: &str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let namespace = namespace.to_string();
    let action = action.into();
    move |error| Error::Kube {
        namespace,
        action,
        error,
    }
}

/// This controller's context: the shared one, the caches it reads, and per-namespace state.
pub struct SubscriptionContext {
    pub shared: Arc<Context>,
    subscriptions: Store<DeserializeGuard<Subscription>>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    plans: Store<DeserializeGuard<InstallPlan>>,
    groups: Store<DeserializeGuard<OperatorGroup>>,
    catalogs: Store<DeserializeGuard<CatalogSource>>,
    /// One lock per namespace: resolutions of a namespace never overlap.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The fingerprint of the inputs of each namespace's last completed resolution.
    resolved: Mutex<HashMap<String, u64>>,
    /// Plans this controller created that the plan cache may not hold yet, per namespace:
    /// with the cache they are every plan a round must know of (no duplicates), without
    /// listing a namespace's plans (their inline manifests weigh megabytes) every round.
    created_plans: Mutex<HashMap<String, Vec<InstallPlan>>>,
    /// Failures back off per namespace: a round resolves a whole namespace.
    kit: KitState<String>,
    /// Resolver indexes shared by every namespace that sees the same catalogs.
    indexes: indexes::Indexes,
}

fn ok<K: Clone>(guarded: &Arc<DeserializeGuard<K>>) -> Option<&K> {
    guarded.0.as_ref().ok()
}

/// What one round of a namespace reads, from the caches.
struct Gathered {
    subscriptions: Vec<Subscription>,
    csvs: Vec<ClusterServiceVersion>,
    groups: Vec<OperatorGroup>,
    catalogs: Vec<CatalogSource>,
    snapshots: Vec<Arc<CatalogSnapshot>>,
    cached_plans: Vec<InstallPlan>,
}

impl SubscriptionContext {
    /// `cached` plus the plans created here that the cache has not seen yet (forgotten
    /// once it has them, or after two minutes: deleted meanwhile).
    fn known_plans(&self, namespace: &str, mut plans: Vec<InstallPlan>) -> Vec<InstallPlan> {
        let mut created = self
            .created_plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(recent) = created.get_mut(namespace) else {
            return plans;
        };
        let now = kit::now();
        recent.retain(|p| {
            let fresh = p
                .metadata
                .creation_timestamp
                .as_ref()
                .is_none_or(|t| now.duration_since(t.0).as_secs() < 120);
            fresh && !plans.iter().any(|c| c.uid() == p.uid())
        });
        plans.extend(recent.iter().cloned());
        if recent.is_empty() {
            created.remove(namespace);
        }
        plans
    }

    fn remember_created(&self, plan: &InstallPlan) {
        self.created_plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(plan.namespace().unwrap_or_default())
            .or_default()
            .push(plan.clone());
    }

    fn lock(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(namespace.to_string()).or_default())
    }

    fn gather(&self, namespace: &str) -> Gathered {
        let in_ns = |meta_ns: Option<String>| meta_ns.as_deref() == Some(namespace);
        let subscriptions: Vec<Subscription> = self
            .subscriptions
            .state()
            .iter()
            .filter_map(ok)
            .filter(|s| in_ns(s.namespace()) && s.metadata.deletion_timestamp.is_none())
            .cloned()
            .collect();
        let csvs: Vec<ClusterServiceVersion> = self
            .csvs
            .state()
            .iter()
            .filter_map(ok)
            .filter(|c| in_ns(c.namespace()))
            .cloned()
            .collect();
        let groups: Vec<OperatorGroup> = self
            .groups
            .state()
            .iter()
            .filter_map(ok)
            .filter(|g| in_ns(g.namespace()))
            .cloned()
            .collect();
        let cached_plans: Vec<InstallPlan> = self
            .plans
            .state()
            .iter()
            .filter_map(ok)
            .filter(|p| in_ns(p.namespace()))
            .cloned()
            .collect();
        let global = self.shared.settings.global_catalog_namespace.as_str();
        let exclude_global = groups.len() == 1
            && groups[0]
                .annotations()
                .get(decide::ANNOTATION_EXCLUDE_GLOBAL)
                .is_some_and(|v| v == "true");
        let visible_ns = |ns: &str| ns == namespace || (!exclude_global && ns == global);
        let mut catalogs: Vec<CatalogSource> = self
            .catalogs
            .state()
            .iter()
            .filter_map(ok)
            .filter(|c| c.namespace().is_some_and(|ns| visible_ns(&ns)))
            .cloned()
            .collect();
        catalogs.sort_by(|a, b| {
            b.spec
                .priority
                .unwrap_or(0)
                .cmp(&a.spec.priority.unwrap_or(0))
                .then_with(|| a.namespace().cmp(&b.namespace()))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let snapshots = self
            .shared
            .snapshots
            .visible_from(namespace, global)
            .into_iter()
            .filter(|s| visible_ns(&s.catalog.namespace))
            .collect();
        Gathered {
            subscriptions,
            csvs,
            groups,
            catalogs,
            snapshots,
            cached_plans,
        }
    }
}

impl Gathered {
    /// Everything resolution and status depend on, hashed: equal fingerprints mean the
    /// round would decide the same and write nothing.
    fn fingerprint(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for s in &self.subscriptions {
            (s.name_any(), s.uid()).hash(&mut hasher);
            serde_json::to_string(&s.spec)
                .unwrap_or_default()
                .hash(&mut hasher);
            serde_json::to_string(&s.status)
                .unwrap_or_default()
                .hash(&mut hasher);
        }
        for c in &self.csvs {
            (c.name_any(), c.uid(), &c.spec.replaces, &c.spec.version).hash(&mut hasher);
            c.annotations()
                .get(decide::ANNOTATION_PROPERTIES)
                .hash(&mut hasher);
            c.labels().get(decide::LABEL_COPIED_FROM).hash(&mut hasher);
            serde_json::to_string(&c.status.as_ref().and_then(|s| s.phase))
                .unwrap_or_default()
                .hash(&mut hasher);
        }
        for p in &self.cached_plans {
            (p.name_any(), p.uid()).hash(&mut hasher);
            serde_json::to_string(&p.spec)
                .unwrap_or_default()
                .hash(&mut hasher);
            serde_json::to_string(&p.phase())
                .unwrap_or_default()
                .hash(&mut hasher);
            // What a Subscription relays of its plan: the conditions and message (a client
            // may change only the Installed reason), and the bundle lookups' conditions.
            if let Some(status) = &p.status {
                serde_json::to_string(&(&status.conditions, &status.message))
                    .unwrap_or_default()
                    .hash(&mut hasher);
                for lookup in &status.bundle_lookups {
                    serde_json::to_string(&lookup.conditions)
                        .unwrap_or_default()
                        .hash(&mut hasher);
                }
            }
        }
        for g in &self.groups {
            (
                g.name_any(),
                g.annotations().get(decide::ANNOTATION_EXCLUDE_GLOBAL),
            )
                .hash(&mut hasher);
        }
        for c in &self.catalogs {
            (c.namespace(), c.name_any(), c.uid(), healthy(c, None)).hash(&mut hasher);
            c.status
                .as_ref()
                .and_then(|s| s.message.clone())
                .hash(&mut hasher);
        }
        for s in &self.snapshots {
            (
                &s.catalog.namespace,
                &s.catalog.name,
                &s.digest,
                s.catalog.priority,
            )
                .hash(&mut hasher);
        }
        hasher.finish()
    }
}

/// READY, or (a source with no connection state) content loaded.
fn healthy(source: &CatalogSource, snapshot: Option<&CatalogSnapshot>) -> bool {
    match source
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
    {
        Some(state) => state.last_observed_state == "READY",
        None => snapshot.is_some(),
    }
}

fn now() -> Time {
    Time(kit::now())
}

impl SubscriptionContext {
    /// Every cache has been listed once (false only when the process is stopping).
    async fn caches_listed(&self) -> bool {
        use crate::controllers::kit::cache_ready::listed;
        listed(&self.subscriptions).await
            && listed(&self.csvs).await
            && listed(&self.plans).await
            && listed(&self.groups).await
            && listed(&self.catalogs).await
    }
}

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
        if self.caches_listed().await {
            sync_namespace(&Self::key(&sub.metadata), self).await?;
        }
        Ok(Action::await_change())
    }
}

/// One round for a namespace: gather → (unchanged? stop) → resolve → plans → statuses.
async fn sync_namespace(namespace: &str, ctx: &SubscriptionContext) -> Result<(), Error> {
    let lock = ctx.lock(namespace);
    let _held = lock.lock().await;
    let mut gathered = ctx.gather(namespace);
    if gathered.subscriptions.is_empty() {
        return Ok(());
    }
    let fingerprint = gathered.fingerprint();
    let unchanged = ctx
        .resolved
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(namespace)
        == Some(&fingerprint);
    if unchanged {
        return Ok(());
    }
    tracing::debug!(%namespace, "resolving");
    let subs: Vec<&Subscription> = gathered.subscriptions.iter().collect();

    // Plans: the cache, plus those earlier rounds created that it does not hold yet, so
    // that nothing planned before is missed (rounds of a namespace never overlap). On a
    // restart the cache starts from a fresh list.
    let mut plans = ctx.known_plans(namespace, std::mem::take(&mut gathered.cached_plans));

    // What is installed, once: the resolver's input and the statuses' `installedCSV`.
    let csv_refs: Vec<&ClusterServiceVersion> = gathered.csvs.iter().collect();
    let installed = installed_csvs(&csv_refs, &subs);
    let installed_by_package: BTreeMap<String, String> = installed
        .iter()
        .map(|csv| (csv.package.clone(), csv.name.clone()))
        .collect();
    let resolution = resolve(namespace, &subs, installed, &gathered, &ctx.indexes).await;
    let plan_of = ensure_plans(namespace, &resolution, &subs, &mut plans, ctx).await?;

    // Decide every status (pure), then write what changed and prune old plans.
    let csv_names: BTreeSet<String> = gathered
        .csvs
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    let round = Round {
        resolution: &resolution,
        installed_by_package: &installed_by_package,
        plans: &plans.iter().collect::<Vec<_>>(),
        plan_of: &plan_of,
        csvs: &csv_names,
        catalogs: &catalog_health(&gathered),
        now: now(),
    };
    let statuses = decide::statuses(&subs, &round, MAX_PLANS_PER_NAMESPACE);
    for (sub, desired) in subs.iter().zip(&statuses.desired) {
        if sub.status.as_ref() != Some(desired) {
            write_status(sub, desired, ctx).await?;
            announce(sub, desired, &ctx.shared);
        }
    }
    let plan_api: Api<InstallPlan> = Api::namespaced(ctx.shared.client.clone(), namespace);
    for name in &statuses.prune {
        tracing::info!(%namespace, plan = %name, "deleting an old InstallPlan (at most {MAX_PLANS_PER_NAMESPACE} are kept)");
        match plan_api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(error) => {
                return Err(kube_error(
                    namespace,
                    format!("deleting InstallPlan {name}"),
                )(error));
            }
        }
    }

    ctx.resolved
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(namespace.to_string(), fingerprint);
    Ok(())
}

/// The health of every catalog the namespace sees, as its Subscriptions report it.
fn catalog_health(gathered: &Gathered) -> Vec<CatalogHealth> {
    gathered
        .catalogs
        .iter()
        .map(|c| {
            let source = CatalogRef::new(c.name_any(), c.namespace().unwrap_or_default());
            let snapshot = gathered
                .snapshots
                .iter()
                .find(|s| s.catalog.name == source.name && s.catalog.namespace == source.namespace);
            CatalogHealth {
                healthy: healthy(c, snapshot.map(std::convert::AsRef::as_ref)),
                uid: c.uid(),
                source,
            }
        })
        .collect()
}

/// Resolves the namespace (on a blocking thread: the solver is synchronous), or fails every
/// Subscription when the namespace has not exactly one OperatorGroup.
async fn resolve(
    namespace: &str,
    subs: &[&Subscription],
    installed: Vec<InstalledCsv>,
    gathered: &Gathered,
    indexes: &indexes::Indexes,
) -> Resolution {
    if gathered.groups.len() != 1 {
        let failure = Failure {
            reason: SubscriptionReason::ErrorPreventedResolution,
            message: format!(
                "expected 1 OperatorGroup in the namespace, found {}",
                gathered.groups.len()
            ),
        };
        return Resolution {
            failures: subs
                .iter()
                .map(|s| (s.name_any(), failure.clone()))
                .collect(),
            ..Resolution::default()
        };
    }
    let input = Namespace {
        name: namespace.to_string(),
        installed,
        subscriptions: subs.iter().map(|s| resolver_subscription(s)).collect(),
    };
    let index = indexes.index_of(&gathered.snapshots).await;
    let mut resolution = indexes.run(move || resolve_namespace(&index, input)).await;
    explain_failures(&mut resolution.failures, subs, gathered);
    resolution
}

/// One InstallPlan per group of the resolution, unless one exists or a Subscription of the
/// group is held by its plan; returns the plan of each Subscription that has a new or
/// adopted one, with every such plan added to `plans`.
async fn ensure_plans(
    namespace: &str,
    resolution: &Resolution,
    subs: &[&Subscription],
    plans: &mut Vec<InstallPlan>,
    ctx: &SubscriptionContext,
) -> Result<BTreeMap<String, String>, Error> {
    let shared = &ctx.shared;
    let mut plan_of: BTreeMap<String, String> = BTreeMap::new();
    for group in split(&resolution.plan) {
        let plan_refs: Vec<&InstallPlan> = plans.iter().collect();
        let held = subs.iter().any(|s| {
            group.subscriptions.contains(&s.name_any()) && pinned_plan(s, &plan_refs).is_some()
        });
        if held {
            continue;
        }
        let name = match existing_plan(&group.csv_names(), &plan_refs) {
            Existing::Reuse(name) => {
                // A plan without a status yet is filled here, only from a group of
                // exactly its CSVs.
                let csv_names = group.csv_names();
                if let Some(at) = plans.iter().position(|p| {
                    p.name_any() == name && p.status_is_empty() && names_exactly(p, &csv_names)
                }) {
                    plans[at] = fill_plan(&plans[at], &group, shared).await?;
                }
                name
            }
            Existing::Completed(name)
                if csvs_exist(namespace, &group.csv_names(), shared).await? =>
            {
                // Installed already; the CSV cache has not caught up yet.
                tracing::debug!(%namespace, plan = %name, "CSVs of a Complete plan exist; not planning them again");
                continue;
            }
            Existing::Completed(_) | Existing::None => {
                let created = create_plan(namespace, &group, subs, &plan_refs, shared).await?;
                let name = created.name_any();
                ctx.remember_created(&created);
                plans.push(created);
                name
            }
        };
        for sub in &group.subscriptions {
            plan_of.insert(sub.clone(), name.clone());
        }
    }
    Ok(plan_of)
}

/// Says which catalogs were searched, and why a catalog that exists has no content yet.
fn explain_failures(
    failures: &mut BTreeMap<String, Failure>,
    subs: &[&Subscription],
    gathered: &Gathered,
) {
    let searched: Vec<String> = gathered
        .snapshots
        .iter()
        .map(|s| format!("{}/{}", s.catalog.namespace, s.catalog.name))
        .collect();
    for sub in subs {
        let Some(failure) = failures.get_mut(&sub.name_any()) else {
            continue;
        };
        let source = CatalogRef::new(&sub.spec.source, &sub.spec.source_namespace);
        let has_snapshot = gathered
            .snapshots
            .iter()
            .any(|s| s.catalog.name == source.name && s.catalog.namespace == source.namespace);
        if !has_snapshot
            && let Some(catalog) = gathered.catalogs.iter().find(|c| {
                c.name_any() == source.name && c.namespace().as_deref() == Some(&source.namespace)
            })
        {
            let why = catalog
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_else(|| "its content has not been loaded yet".into());
            failure.reason = SubscriptionReason::ErrorPreventedResolution;
            failure.message =
                format!("error using catalogsource {source}: catalog is unavailable: {why}",);
        }
        failure.message = format!(
            "{} (catalogs searched: {})",
            failure.message,
            if searched.is_empty() {
                "none".to_string()
            } else {
                searched.join(", ")
            }
        );
    }
}

async fn csvs_exist(namespace: &str, names: &[String], ctx: &Context) -> Result<bool, Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    for name in names {
        let found = api
            .get_metadata_opt(name)
            .await
            .map_err(kube_error(namespace, format!("reading CSV {name}")))?;
        if found.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Creates the plan of `group` and fills it; returns it as written (no read-back needed).
async fn create_plan(
    namespace: &str,
    group: &PlanGroup,
    subs: &[&Subscription],
    plans: &[&InstallPlan],
    ctx: &Context,
) -> Result<InstallPlan, Error> {
    let approval = group.approval(subs);
    let owners: Vec<OwnerReference> = subs
        .iter()
        .filter(|s| group.subscriptions.contains(&s.name_any()))
        .map(|s| OwnerReference {
            api_version: Subscription::api_version(&()).into_owned(),
            kind: Subscription::kind(&()).into_owned(),
            name: s.name_any(),
            uid: s.uid().unwrap_or_default(),
            controller: Some(false),
            block_owner_deletion: Some(false),
        })
        .collect();
    let mut plan = InstallPlan::new(
        "",
        InstallPlanSpec {
            catalog_source: None,
            catalog_source_namespace: None,
            cluster_service_version_names: group.csv_names(),
            approval,
            approved: approval == Approval::Automatic,
            generation: Some(next_generation(plans)),
        },
    );
    plan.metadata.name = None;
    plan.metadata.generate_name = Some("install-".into());
    plan.metadata.namespace = Some(namespace.to_string());
    plan.metadata.owner_references = Some(owners);
    // The plan is a component of the Operator of each package it installs for a Subscription.
    plan.metadata.labels = Some(
        subs.iter()
            .filter(|s| group.subscriptions.contains(&s.name_any()))
            .map(|s| {
                let operator = operator_name(&s.spec.name, namespace);
                (operator_label(&operator), String::new())
            })
            .collect(),
    );
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    let created = api
        .create(&PostParams::default(), &plan)
        .await
        .map_err(kube_error(namespace, "creating an InstallPlan"))?;
    let name = created.name_any();
    tracing::info!(%namespace, plan = %name, csvs = ?group.csv_names(), ?approval, "InstallPlan created");
    let filled = fill_plan(&created, group, ctx).await?;
    for sub in subs
        .iter()
        .filter(|s| group.subscriptions.contains(&s.name_any()))
    {
        ctx.event(
            &sub.object_ref(&()),
            EventType::Normal,
            SubscriptionReason::InstallPlanCreated.as_str(),
            "Resolve",
            format!(
                "InstallPlan {name} ({approval:?}) installs {}",
                group.csv_names().join(", ")
            ),
        );
    }
    Ok(filled)
}

/// Gives a new plan its status: the steps of its bundles and the lookups of those to
/// unpack (see [`plan`]); returns the plan as written. A plan created but not filled (a
/// restart in between) is filled by the next round that finds it.
async fn fill_plan(
    created: &InstallPlan,
    group: &PlanGroup,
    ctx: &Context,
) -> Result<InstallPlan, Error> {
    let namespace = created.namespace().unwrap_or_default();
    let name = created.name_any();
    let gathered = plan::gather(group.planned_bundles(), ctx)
        .await
        .map_err(|error| Error::Plan {
            namespace: namespace.clone(),
            plan: name.clone(),
            error,
        })?;
    let waits = created.spec.approval == Approval::Manual && !created.spec.approved;
    let status = plan::initial_status(&namespace, gathered, waits, kit::now());
    let written = kit::status::write_status(
        &ctx.client,
        created,
        plan::STATUS_FIELD_MANAGER,
        true,
        &status,
    )
    .await
    .map_err(kube_error(
        &namespace,
        format!("writing the status of InstallPlan {name}"),
    ))?;
    ctx.metrics.status_written(CONTROLLER);
    plan::announce(&written, ctx);
    Ok(written)
}

async fn write_status(
    sub: &Subscription,
    status: &SubscriptionStatus,
    ctx: &SubscriptionContext,
) -> Result<(), Error> {
    apply_status(ctx, sub, status).await.map_err(kube_error(
        &sub.namespace().unwrap_or_default(),
        format!("writing the status of Subscription {}", sub.name_any()),
    ))?;
    Ok(())
}

/// A Warning Event when resolution newly fails (or fails differently).
fn announce(sub: &Subscription, desired: &SubscriptionStatus, ctx: &Context) {
    let failed = |s: Option<&SubscriptionStatus>| {
        s.and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "ResolutionFailed" && ConditionStatus::True.is(&c.status))
                .and_then(|c| c.message.clone())
        })
    };
    if let Some(message) = failed(Some(desired))
        && failed(sub.status.as_ref()).as_ref() != Some(&message)
    {
        ctx.event(
            &sub.object_ref(&()),
            EventType::Warning,
            SubscriptionReason::ResolutionFailed.as_str(),
            "Resolve",
            message,
        );
    }
}

/// Every Subscription of `namespace`.
fn subscriptions_in(
    store: &Store<DeserializeGuard<Subscription>>,
    namespace: Option<&str>,
) -> Vec<ObjectRef<DeserializeGuard<Subscription>>> {
    store
        .state()
        .iter()
        .filter_map(|g| {
            let meta = match &g.0 {
                Ok(s) => &s.metadata,
                Err(invalid) => &invalid.metadata,
            };
            (meta.namespace.as_deref() == namespace).then(|| {
                ObjectRef::new(meta.name.as_deref().unwrap_or_default())
                    .within(meta.namespace.as_deref().unwrap_or_default())
            })
        })
        .collect()
}

fn namespace_of<K>(guarded: &DeserializeGuard<K>) -> Option<String>
where
    K: Resource<DynamicType = ()>,
{
    match &guarded.0 {
        Ok(k) => k.meta().namespace.clone(),
        Err(invalid) => invalid.metadata.namespace.clone(),
    }
}

/// Subscriptions of the namespaces that see a catalog whose content digest changed.
fn snapshot_changes(
    shared: Arc<Context>,
    subs: Store<DeserializeGuard<Subscription>>,
) -> impl Stream<Item = ObjectRef<DeserializeGuard<Subscription>>> + Send + 'static {
    let changes = shared.snapshots.changes();
    let initial = shared.snapshots.digests();
    futures::stream::unfold(
        (changes, initial),
        move |(mut changes, mut last): (tokio::sync::watch::Receiver<u64>, BTreeMap<CatalogRef, String>)| {
            let shared = Arc::clone(&shared);
            let subs = subs.clone();
            async move {
                changes.changed().await.ok()?;
                let now = shared.snapshots.digests();
                let changed: BTreeSet<CatalogRef> = now
                    .iter()
                    .filter(|(r, d)| last.get(*r) != Some(*d))
                    .map(|(r, _)| r.clone())
                    .chain(last.keys().filter(|r| !now.contains_key(*r)).cloned())
                    .collect();
                last = now;
                let global = shared.settings.global_catalog_namespace.clone();
                let refs: Vec<_> = subs
                    .state()
                    .iter()
                    .filter_map(|g| g.0.as_ref().ok())
                    .filter(|s| {
                        let ns = s.namespace().unwrap_or_default();
                        changed.iter().any(|c| c.namespace == ns || c.namespace == global)
                    })
                    .map(|s| ObjectRef::new(&s.name_any()).within(&s.namespace().unwrap_or_default()))
                    .collect();
                if !refs.is_empty() {
                    tracing::debug!(catalogs = ?changed, subscriptions = refs.len(), "catalog content changed; re-resolving");
                }
                Some((futures::stream::iter(refs), (changes, last)))
            }
        },
    )
    .flatten()
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
        .watches_shared_stream(
            catalog_changes,
            move |catalog: Arc<DeserializeGuard<CatalogSource>>| {
                let ns = namespace_of(&catalog);
                if ns.as_deref() == Some(global.as_str()) {
                    s4.state()
                        .iter()
                        .filter_map(|g| g.0.as_ref().ok())
                        .map(|s| {
                            ObjectRef::new(&s.name_any()).within(&s.namespace().unwrap_or_default())
                        })
                        .collect()
                } else {
                    subscriptions_in(&s4, ns.as_deref())
                }
            },
        )
        .reconcile_on(snapshot_changes(Arc::clone(&shared), subscriptions.clone()));
    kit::run(controller, ctx, shutdown).await;
}
