//! The InstallPlan controller: carries out a plan's steps, in upstream's shape
//! (`status.plan`, see [`crate::controllers::plan`]), whoever wrote them: the Subscription
//! controller when it resolved the plan, or a client writing steps with inline manifests.
//!
//! - No status yet: left alone (its creator has not filled it in), as upstream.
//! - Steps only of upstream's supported kinds ([`admit`]), checked before any runs.
//! - `bundleLookups`: bundles the catalog has no inline objects for, pulled from their
//!   bundle image in-process ([`unpack`]) and turned into steps; while a pull fails the
//!   lookup names image and cause, and the plan fails (BundleLookupFailed) after the unpack
//!   timeout.
//! - RequiresApproval → Installing once `spec.approved` is true; a plan with no phase (or
//!   Planning) is not run.
//! - Installing: steps in order (CSVs, CRDs, the rest) with server-side apply under one field
//!   manager, `olm.managed=true`, owner references to the CSV for namespaced objects; CRDs
//!   checked for upgrade safety first and waited for until Established (`WaitingForApi`).
//!   Errors are retried until `--install-plan-retry-timeout` after `startTime`, then the plan
//!   is Failed naming the step (Forbidden never fails it, as upstream). When the namespace's
//!   OperatorGroup names a `serviceAccountName`, every step but CRDs runs as that account.
//!
//! Everything is idempotent and recorded on the object, so a restart at any point continues
//! where the last process stopped.

mod admit;
mod alongside;
mod crd_upgrade;
mod crd_write;
pub mod unpack;

use admit::step_gvk;
use crd_write::{CrdBatch, CrdWrite, SpecVerdicts};

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::core::DeserializeGuard;
use kube::discovery::{ApiCapabilities, Scope};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::Context;
use super::kit::PanicError;
use super::kit::{
    self, Cond, ConditionStatus, KitState, ObjectKey, ReconcileError, Reconciler, apply_status,
};
use super::scoped;
use crate::api::{
    ClusterServiceVersion, InstallPlan, InstallPlanCondition, InstallPlanPhase,
    InstallPlanReason as Reason, InstallPlanStatus, OperatorGroup, PlannedBundle, Step, StepStatus,
};
use crate::controllers::host::Shutdown;
use crate::controllers::plan::{
    self,
    steps::{KIND_CRD, KIND_CSV, KIND_SUBSCRIPTION, LABEL_MANAGED},
};

pub const CONTROLLER: &str = "installplan";
/// Server-side apply field manager of everything this controller writes (a plan's status
/// is one manager's, whichever controller writes it).
pub const FIELD_MANAGER: &str = plan::STATUS_FIELD_MANAGER;
/// How often an Installing plan is looked at again while it waits (CRDs, retries).
const RECHECK: Duration = Duration::from_secs(2);
/// How often a plan waiting for its namespace's OperatorGroup looks again.
const GROUP_RECHECK: Duration = Duration::from_secs(5);
/// How often a plan waiting for a bundle image tries the pull again (upstream: 5s).
const UNPACK_RECHECK: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("InstallPlan {namespace}/{name}: {action}: {error}")]
    Kube {
        namespace: String,
        name: String,
        action: String,
        #[source]
        error: kube::Error,
    },
    #[error("InstallPlan {namespace}/{name}: {message}")]
    Other {
        namespace: String,
        name: String,
        message: String,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Other { .. } => "other",
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct InstallPlanContext {
    pub shared: Arc<Context>,
    kit: KitState<ObjectKey>,
    /// Discovery results per group/version/kind.
    discovered: Mutex<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
    /// Clients that impersonate an OperatorGroup's service account, per account.
    impersonating: scoped::ScopedClients,
    /// The objects of the last bundles read back from their catalogs for plans that carry
    /// them by reference, newest last: a plan waiting for its CRDs looks again every few
    /// seconds, and reading a multi-MiB bundle each time kept catalog servers too busy to
    /// answer.
    referred_bundles: Mutex<Vec<(String, Arc<Vec<Value>>)>>,
    /// Per CRD name, the metadata its steps want written (see [`CrdBatch`]).
    crd_batches: Mutex<HashMap<String, Arc<CrdBatch>>>,
    /// Per CRD name, the step content it was last found to hold (see [`SpecVerdicts`]).
    crd_verdicts: SpecVerdicts,
}

/// How many bundles [`InstallPlanContext::referred_bundles`] keeps.
const REFERRED_BUNDLES_KEPT: usize = 8;

impl InstallPlanContext {
    /// The write batch of the CRD `name`.
    fn crd_batch(&self, name: &str) -> Arc<CrdBatch> {
        Arc::clone(
            self.crd_batches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(name.to_string())
                .or_default(),
        )
    }

    /// The objects of `bundle` read back from its catalog, from the last ones kept when it
    /// is among them.
    async fn referred_objects(&self, bundle: &PlannedBundle) -> Result<Arc<Vec<Value>>, String> {
        let key = format!(
            "{}/{}/{}",
            bundle.catalog_namespace, bundle.catalog, bundle.name
        );
        if let Some(objects) = self.referred_bundle(&key) {
            return Ok(objects);
        }
        let objects = match crate::controllers::plan::manifests::fetch(bundle, &self.shared).await?
        {
            crate::controllers::plan::manifests::Fetched::Objects { objects, .. } => objects,
            _ => Vec::new(),
        };
        let objects = Arc::new(objects);
        self.keep_referred_bundle(key, Arc::clone(&objects));
        Ok(objects)
    }

    fn referred_bundle(&self, key: &str) -> Option<Arc<Vec<Value>>> {
        let mut kept = self
            .referred_bundles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = kept.iter().position(|(k, _)| k == key)?;
        let entry = kept.remove(at);
        let objects = Arc::clone(&entry.1);
        kept.push(entry);
        Some(objects)
    }

    fn keep_referred_bundle(&self, key: String, objects: Arc<Vec<Value>>) {
        let mut kept = self
            .referred_bundles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|(k, _)| *k != key);
        kept.push((key, objects));
        let excess = kept.len().saturating_sub(REFERRED_BUNDLES_KEPT);
        kept.drain(..excess);
    }
}

fn now() -> Timestamp {
    kit::now()
}

impl Reconciler for InstallPlanContext {
    /// Failed, as a plan that cannot be carried out.
    fn invalid_status(message: &str) -> Option<serde_json::Value> {
        let now = crate::controllers::kit::now().to_string();
        Some(serde_json::json!({
            "phase": "Failed",
            "message": message,
            "conditions": [{
                "type": "Installed",
                "status": "False",
                "reason": crate::api::InstallPlanReason::SpecInvalidError.as_str(),
                "message": message,
                "lastTransitionTime": now,
                "lastUpdateTime": now,
            }],
        }))
    }

    type Object = InstallPlan;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FORCE_STATUS: bool = true;

    crate::kit_accessors!(object_key);

    async fn sync(&self, plan: &InstallPlan) -> Result<Action, Error> {
        sync(plan, self).await
    }
}

async fn sync(plan: &InstallPlan, ctx: &InstallPlanContext) -> Result<Action, Error> {
    let status = plan.status.clone().unwrap_or_default();
    match status.phase {
        InstallPlanPhase::Complete | InstallPlanPhase::Failed => Ok(Action::await_change()),
        // Not filled in yet by whoever created it: left alone, as upstream does. (Plans of
        // versions before the typed status listed their bundles in an annotation; anyone
        // allowed to create a plan could name any catalog there, so it is no longer read.)
        _ if plan.status_is_empty() => Ok(Action::await_change()),
        _ if !status.bundle_lookups.is_empty() => unpack_lookups(plan, status, ctx).await,
        InstallPlanPhase::RequiresApproval => {
            if plan.spec.approved {
                let mut next = status.clone();
                next.phase = InstallPlanPhase::Installing;
                next.start_time = Some(Time(now()));
                write_status(plan, &next, ctx).await?;
                event(
                    plan,
                    ctx,
                    EventType::Normal,
                    Reason::Approved,
                    "InstallPlan approved; installing".into(),
                );
            }
            Ok(Action::await_change())
        }
        InstallPlanPhase::Installing => match admit::admit(&status.plan) {
            Ok(()) => execute(plan, status, ctx).await,
            Err(refused) => refuse(plan, status, &refused, ctx).await,
        },
        // No phase or Planning: its writer has not handed it over yet; upstream leaves such
        // a plan alone too (its Subscription says InstallPlanNotYetReconciled).
        InstallPlanPhase::None | InstallPlanPhase::Planning => Ok(Action::await_change()),
    }
}

fn condition(type_: &str, status: ConditionStatus) -> InstallPlanCondition {
    let now = Time(now());
    Cond::without_reason(type_, status).into_install_plan(now.clone(), now)
}

/// Pulls the images of the plan's bundle lookups; each that arrives becomes steps, each that
/// fails keeps its lookup (with the cause) until the unpack timeout.
async fn unpack_lookups(
    plan: &InstallPlan,
    current: InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    let namespace = plan.namespace().unwrap_or_default();
    let timeout = namespace_unpack_timeout(&namespace, ctx)
        .await
        .map_err(|error| Error::Kube {
            namespace: namespace.clone(),
            name: plan.name_any(),
            action: "reading the OperatorGroup".into(),
            error,
        })?;
    let mut unpacked = Vec::new();
    let mut failed = Vec::new();
    for lookup in &current.bundle_lookups {
        let limit = unpack::remaining(lookup, now(), timeout);
        match unpack::pull_lookup(lookup, &ctx.shared, limit).await {
            Ok(objects) => unpacked.push((lookup.clone(), objects)),
            Err(failure) => failed.push((lookup.clone(), failure)),
        }
    }
    match unpack::decide_unpacked(&namespace, &current, unpacked, &failed, now(), timeout) {
        unpack::Unpacked::Fail {
            status,
            reason,
            message,
        } => fail(plan, status, reason, message, ctx).await,
        unpack::Unpacked::Next(next) => {
            if next != current {
                write_status(plan, &next, ctx).await?;
            }
            // Once the last lookup is resolved, the status write starts the next round.
            Ok(if next.bundle_lookups.is_empty() {
                Action::await_change()
            } else {
                Action::requeue(UNPACK_RECHECK)
            })
        }
    }
}

/// A plan with a step it may not carry fails before any step runs, the step marked.
async fn refuse(
    plan: &InstallPlan,
    mut status: InstallPlanStatus,
    refused: &admit::Inadmissible,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    status.plan[refused.index()].status = StepStatus::UnsupportedResource;
    let message = refused.to_string();
    fail(plan, status, Reason::InstallComponentFailed, message, ctx).await
}

async fn fail(
    plan: &InstallPlan,
    status: InstallPlanStatus,
    reason: Reason,
    message: String,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    tracing::warn!(plan = %plan.name_any(), reason = reason.as_str(), %message, "InstallPlan failed");
    let status = plan::failed(status, reason, message.clone(), now());
    write_status(plan, &status, ctx).await?;
    event(plan, ctx, EventType::Warning, reason, message);
    Ok(Action::await_change())
}

/// How one step went.
enum Applied {
    Done(StepStatus),
    /// Not an error: its API is not served yet (a CRD being established).
    Waiting,
}

enum StepError {
    /// Refused for good (CRD upgrade safety, an unknown kind).
    Refused(String),
    /// Worth another try, until the retry timeout; `forever`: not bounded by it (Forbidden,
    /// as upstream; a bundle its catalog could not hand over yet).
    Retry { message: String, forever: bool },
}

/// Lets the cluster tests SIGKILL the process mid-way through a plan's steps: debug builds
/// only, with `OLM_FAULT_INJECTION=1` and `OLM_FAULT_PAUSE_AFTER_STEPS=N`, the round that
/// applies a plan's Nth step says so in the log and never ends.
mod fault_injection {
    use kube::ResourceExt;

    use crate::api::InstallPlan;

    pub async fn maybe_pause(plan: &InstallPlan, applied: usize) {
        if !cfg!(debug_assertions)
            || std::env::var_os("OLM_FAULT_INJECTION").is_none_or(|v| v != "1")
        {
            return;
        }
        let pause_after = std::env::var("OLM_FAULT_PAUSE_AFTER_STEPS")
            .ok()
            .and_then(|n| n.parse::<usize>().ok());
        if pause_after == Some(applied) {
            tracing::warn!(plan = %plan.name_any(), applied, "fault injection: pausing mid-way through the steps");
            std::future::pending::<()>().await;
        }
    }
}

async fn execute(
    plan: &InstallPlan,
    mut status: InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    let namespace = plan.namespace().unwrap_or_default();
    let kube_err = |action: String| {
        let namespace = namespace.clone();
        let name = plan.name_any();
        move |error| Error::Kube {
            namespace,
            name,
            action,
            error,
        }
    };
    // From the shared cache: a waiting plan is looked at every few seconds, and a LIST per
    // look was one request per plan per round.
    let group_cache = ctx.shared.informers.operator_groups.store();
    crate::controllers::kit::cache_ready::listed(&group_cache).await;
    let groups: Vec<OperatorGroup> = group_cache
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|g| g.namespace().as_deref() == Some(namespace.as_str()))
        .cloned()
        .collect();
    // As upstream: a plan is carried out only in a namespace with exactly one group; until
    // then it stays Installing and says why (cleared once the group is there).
    if let Some(message) = group_problem(groups.len()) {
        let said = |status: &InstallPlanStatus| {
            status
                .conditions
                .iter()
                .find(|c| c.type_.as_deref() == Some("Installed"))
                .and_then(|c| c.message.clone())
        };
        if said(&status).as_deref() != Some(message.as_str()) {
            let time = Time(now());
            plan::set_installed(
                &mut status,
                Cond::new(
                    "Installed",
                    ConditionStatus::False,
                    Reason::InstallCheckFailed,
                    message,
                )
                .into_install_plan(time.clone(), time),
            );
            write_status(plan, &status, ctx).await?;
        }
        return Ok(Action::requeue(GROUP_RECHECK));
    }
    let scoped = scoped_client(&namespace, &groups, ctx)
        .await
        .map_err(|message| Error::Other {
            namespace: namespace.clone(),
            name: plan.name_any(),
            message,
        })?;
    let before = status.clone();
    // Whatever was said while the namespace had no single group no longer holds.
    status
        .conditions
        .retain(|c| c.reason.as_deref() != Some(Reason::InstallCheckFailed.as_str()));
    // A plan a client wrote may have no start: the retry clock starts now.
    status.start_time.get_or_insert_with(|| Time(now()));
    let mut csv_uids: BTreeMap<String, String> = BTreeMap::new();
    let mut applied = 0;
    let mut waiting = false;
    let mut retry: Option<(String, bool)> = None;
    for i in 0..status.plan.len() {
        if matches!(
            status.plan[i].status,
            StepStatus::Created | StepStatus::Present
        ) {
            continue;
        }
        let step = status.plan[i].clone();
        // A CRD already applied and waiting for its API is only looked at, never applied
        // again (as upstream): and once one is known to wait, the others wait for the next
        // round. On a busy API server (a thousand CRDs being established) re-applying them
        // every round was most of its load.
        if step.status == StepStatus::WaitingForApi && step.resource.kind == KIND_CRD {
            if waiting {
                continue;
            }
            match crd_established(&step.resource.name, ctx).await {
                Ok(Some(true)) => {
                    status.plan[i].status = StepStatus::Created;
                    continue;
                }
                Ok(Some(false)) => {
                    waiting = true;
                    continue;
                }
                // Gone meanwhile: applied again below.
                Ok(None) => {}
                Err(StepError::Retry { message, forever }) => {
                    retry = Some((
                        format!("step {} CRD {}: {message}", i + 1, step.resource.name),
                        forever,
                    ));
                    break;
                }
                Err(StepError::Refused(message)) => {
                    return fail(plan, status, Reason::InstallComponentFailed, message, ctx).await;
                }
            }
        }
        let client = match (&scoped, step.resource.kind.as_str()) {
            (Some(client), kind) if kind != KIND_CRD => client.clone(),
            _ => ctx.shared.client.clone(),
        };
        let (applied_step, warnings) = crate::runtime::warnings::collect(apply_step(
            &step,
            &namespace,
            &client,
            &mut csv_uids,
            ctx,
        ))
        .await;
        if !warnings.is_empty() {
            warned(plan, i, &step, &warnings, ctx);
        }
        match applied_step {
            Ok(Applied::Done(s)) => {
                status.plan[i].status = s;
                applied += 1;
                fault_injection::maybe_pause(plan, applied).await;
            }
            Ok(Applied::Waiting) => {
                status.plan[i].status = StepStatus::WaitingForApi;
                waiting = true;
            }
            Err(StepError::Refused(message)) => {
                return fail(plan, status, Reason::InstallComponentFailed, message, ctx).await;
            }
            Err(StepError::Retry { message, forever }) => {
                let described = format!(
                    "step {} {} {} of bundle {}: {message}",
                    i + 1,
                    step.resource.kind,
                    step.resource.name,
                    step.resolving
                );
                tracing::debug!(plan = %plan.name_any(), %described, "step failed; will retry");
                retry = Some((described, forever));
                // A CSV must exist before anything is owned by it; CRDs before their users.
                if matches!(step.resource.kind.as_str(), KIND_CSV | KIND_CRD) {
                    break;
                }
            }
        }
    }
    if let Some((message, forever)) = retry {
        let started = status.start_time.as_ref().map(|t| t.0).unwrap_or_else(now);
        let elapsed = now().duration_since(started).unsigned_abs();
        let timeout = ctx.shared.settings.install_plan_retry_timeout;
        if !forever && elapsed >= timeout {
            let message =
                format!("{message} (still failing after the retry timeout of {timeout:?})");
            return fail(plan, status, Reason::InstallComponentFailed, message, ctx).await;
        }
        // Say why it is not done yet (written only when the reason changes).
        status.message = Some(format!("retrying: {message}"));
        if status != before {
            write_status(plan, &status, ctx).await?;
        }
        return Ok(Action::requeue(RECHECK));
    }
    if waiting {
        if status != before {
            write_status(plan, &status, ctx).await?;
        }
        return Ok(Action::requeue(RECHECK));
    }
    status.phase = InstallPlanPhase::Complete;
    status.message = None;
    plan::set_installed(&mut status, condition("Installed", ConditionStatus::True));
    write_status(plan, &status, ctx).await?;
    event(
        plan,
        ctx,
        EventType::Normal,
        Reason::Installed,
        format!(
            "installed {}",
            plan.spec.cluster_service_version_names.join(", ")
        ),
    );
    let _ = kube_err;
    Ok(Action::await_change())
}

fn classify(error: kube::Error) -> StepError {
    match error {
        kube::Error::Api(e) => StepError::Retry {
            forever: e.code == 403,
            message: format!("{} ({})", e.message, e.reason),
        },
        other => StepError::Retry {
            message: other.to_string(),
            forever: false,
        },
    }
}

async fn discover(
    gvk: &GroupVersionKind,
    client: &Client,
    ctx: &InstallPlanContext,
) -> Result<Option<(ApiResource, ApiCapabilities)>, kube::Error> {
    if let Some(found) = ctx
        .discovered
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(gvk)
        .cloned()
    {
        return Ok(Some(found));
    }
    match kube::discovery::pinned_kind(client, gvk).await {
        Ok(found) => {
            ctx.discovered
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(gvk.clone(), found.clone());
            Ok(Some(found))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

async fn apply_step(
    step: &Step,
    namespace: &str,
    client: &Client,
    csv_uids: &mut BTreeMap<String, String>,
    ctx: &InstallPlanContext,
) -> Result<Applied, StepError> {
    let r = &step.resource;
    let mut object: Value =
        serde_json::from_str(r.manifest.as_deref().unwrap_or("null")).map_err(|e| {
            StepError::Refused(format!(
                "step {} {}: the manifest is not JSON: {e}",
                r.kind, r.name
            ))
        })?;
    if let Some(bundle) = crate::controllers::plan::steps::referred_bundle(&object) {
        // The plan is sound; its objects wait in the catalog (a plan too large for etcd
        // carries them by reference). A catalog busy or down is retried without failing the
        // plan, and the plan's message says so.
        let objects = ctx
            .referred_objects(&bundle)
            .await
            .map_err(|message| StepError::Retry {
                message: format!(
                    "step {} {}: reading bundle {} from catalog {}/{}: {message}",
                    r.kind, r.name, bundle.name, bundle.catalog_namespace, bundle.catalog
                ),
                forever: true,
            })?;
        object = crate::controllers::plan::steps::pick(
            &objects,
            &r.kind,
            &r.name,
            &bundle.package,
            namespace,
        )
        .ok_or_else(|| {
            StepError::Refused(format!(
                "step {} {}: bundle {} in catalog {}/{} has no such object",
                r.kind, r.name, bundle.name, bundle.catalog_namespace, bundle.catalog
            ))
        })?;
    }
    let gvk = step_gvk(r, &object);
    if let Some(refused) = admit::unsupported(r, &gvk) {
        return Err(StepError::Refused(refused));
    }
    object["apiVersion"] = json!(gvk.api_version());
    object["kind"] = json!(gvk.kind);
    let Some((resource, caps)) = discover(&gvk, &ctx.shared.client, ctx)
        .await
        .map_err(classify)?
    else {
        // Not served (yet): its CRD may be on its way; retried until the retry timeout.
        return Err(StepError::Retry {
            message: format!(
                "api-server resource not found installing {} {}: GroupVersionKind {}/{}, Kind={} not found on the cluster",
                r.kind, r.name, gvk.group, gvk.version, gvk.kind
            ),
            forever: false,
        });
    };
    let namespaced = caps.scope == Scope::Namespaced;
    let api_as = |client: &Client| -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        }
    };
    let api = api_as(client);
    if namespaced {
        object["metadata"]["namespace"] = json!(namespace);
    }
    if r.kind != KIND_SUBSCRIPTION && r.kind != KIND_CSV {
        if !object["metadata"]["labels"].is_object() {
            object["metadata"]["labels"] = json!({});
        }
        object["metadata"]["labels"][LABEL_MANAGED] = json!("true");
    }
    if namespaced && r.kind != KIND_CSV && r.kind != KIND_SUBSCRIPTION {
        let mut owners = owner_references(&mut object, &step.resolving);
        for owner in &mut owners {
            if owner["kind"] != KIND_CSV || owner["uid"].as_str().is_some_and(|u| !u.is_empty()) {
                continue;
            }
            let name = owner["name"].as_str().unwrap_or_default().to_string();
            owner["uid"] = json!(csv_uid(&name, namespace, csv_uids, ctx).await?);
        }
        if !owners.is_empty() {
            object["metadata"]["ownerReferences"] = Value::Array(owners);
        }
    }
    let crd_done = |established: bool| match established {
        false => Applied::Waiting,
        true if step.status == StepStatus::WaitingForApi => Applied::Done(StepStatus::Created),
        true => Applied::Done(StepStatus::Present),
    };
    // A CRD known to hold this step's content: decided from the shared metadata cache,
    // without reading the CRD (see `crd_write::SpecVerdicts`).
    if r.kind == KIND_CRD
        && let Some(cached) = ctx
            .shared
            .informers
            .cluster
            .crds
            .store()
            .get(&ObjectRef::new(&r.name))
        && ctx.crd_verdicts.holds(
            &r.name,
            cached.metadata.uid.as_deref(),
            cached.metadata.generation,
            &object,
        )
    {
        add_alongside(
            &mut object,
            cached.metadata.annotations.as_ref(),
            namespace,
            step,
            ctx,
        );
        let known = json!({ "metadata": &cached.metadata, "spec": &object["spec"] });
        match crd_write::decide(&object, &known) {
            CrdWrite::Nothing => return Ok(crd_done(true)),
            CrdWrite::Metadata(patch) => {
                drop((cached, object, known));
                let batch = ctx.crd_batch(&r.name);
                return Ok(crd_done(
                    write_crd_metadata(&batch, &api, &r.name, &patch).await?,
                ));
            }
            // The manifest's own annotations were changed on the CRD: read it and apply.
            CrdWrite::Apply => {}
        }
    }
    // Whether it exists is OLM's own question (a scoped group's account need not be able to
    // read); what is written is written as the account.
    let existing = api_as(&ctx.shared.client)
        .get_opt(&r.name)
        .await
        .map_err(classify)?;
    if r.kind == KIND_CRD {
        add_alongside(
            &mut object,
            existing
                .as_ref()
                .and_then(|e| e.metadata.annotations.as_ref()),
            namespace,
            step,
            ctx,
        );
    }
    if r.kind == KIND_CRD
        && let Some(found) = &existing
    {
        let decision = crd_write::decide(&object, &serde_json::to_value(found).unwrap_or_default());
        if decision != CrdWrite::Apply && established(found) {
            ctx.crd_verdicts.record(
                &r.name,
                found.metadata.uid.as_deref(),
                found.metadata.generation,
                crd_write::content_digest(&object),
            );
        }
        match decision {
            CrdWrite::Nothing => return Ok(crd_done(established(found))),
            CrdWrite::Metadata(patch) => {
                // A CRD that many installs share is large, and steps wait for their turn
                // to write it: what was read of it is not held meanwhile.
                drop((existing, object));
                let batch = ctx.crd_batch(&r.name);
                return Ok(crd_done(
                    write_crd_metadata(&batch, &api, &r.name, &patch).await?,
                ));
            }
            CrdWrite::Apply => check_crd_upgrade(&object, found, ctx).await?,
        }
    }
    let crd_content = (r.kind == KIND_CRD).then(|| crd_write::content_digest(&object));
    // A CRD's writes take turns with its metadata batch (see `crd_write`).
    let batch = (r.kind == KIND_CRD).then(|| ctx.crd_batch(&r.name));
    let _turn = match &batch {
        Some(batch) => Some(batch.turn.lock().await),
        None => None,
    };
    // Forced: the bundle's manifest wins over whoever applied the object last (a CRD
    // applied with `kubectl apply --server-side`, say), as upstream's updates do.
    let applied = match api
        .patch(
            &r.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
    {
        // Server-side apply refuses fields the kind's schema does not declare (published
        // CSVs carry a few, e.g. `spec.support`); upstream creates and updates, which prune
        // them. So do we, for such a manifest only.
        Err(kube::Error::Api(e)) if e.message.contains("field not declared in schema") => {
            tracing::info!(kind = %r.kind, name = %r.name, error = %e.message, "pruning fields the schema does not declare");
            apply_pruned(&api, &r.name, object, existing.is_some()).await
        }
        // A scoped group's account refused a new object: say which right it lacks in
        // upstream's words ("cannot create resource"; upstream creates new objects), found
        // by a dry-run create; "cannot patch" stays when create alone is allowed.
        Err(kube::Error::Api(e)) if e.code == 403 && existing.is_none() => {
            match create(&api, object, true).await {
                Err(refused @ kube::Error::Api(_)) => Err(refused),
                _ => Err(kube::Error::Api(e)),
            }
        }
        other => other,
    }
    .map_err(classify)?;
    if r.kind == KIND_CRD {
        if !established(&applied) {
            return Ok(Applied::Waiting);
        }
        ctx.crd_verdicts.record(
            &r.name,
            applied.metadata.uid.as_deref(),
            applied.metadata.generation,
            crd_content.unwrap_or_default(),
        );
    }
    if r.kind == KIND_CSV {
        csv_uids.insert(r.name.clone(), applied.metadata.uid.unwrap_or_default());
    }
    // A CRD this plan created and then waited for is still "Created".
    Ok(Applied::Done(
        if existing.is_some() && step.status != StepStatus::WaitingForApi {
            StepStatus::Present
        } else {
            StepStatus::Created
        },
    ))
}

/// Puts the CRD's alongside annotations on the step's `object`: those of `existing` for
/// CSVs that still exist, and the step's own CSV's.
fn add_alongside(
    object: &mut Value,
    existing: Option<&BTreeMap<String, String>>,
    namespace: &str,
    step: &Step,
    ctx: &InstallPlanContext,
) {
    let csvs = ctx.shared.informers.csvs.store();
    let alongside = alongside::annotations(existing, namespace, &step.resolving, |ns, name| {
        csvs.get(&ObjectRef::new(name).within(ns)).is_some()
    });
    if !object["metadata"]["annotations"].is_object() {
        object["metadata"]["annotations"] = json!({});
    }
    for (key, value) in alongside {
        object["metadata"]["annotations"][key] = json!(value);
    }
}

/// Writes `patch` (labels and annotations a CRD lacks) with whatever other steps of the
/// same CRD want, in one merge patch when this step has the turn, or not at all when a
/// write in another step's turn included it. Returns whether the CRD written was
/// Established.
async fn write_crd_metadata(
    batch: &CrdBatch,
    api: &Api<DynamicObject>,
    name: &str,
    patch: &Value,
) -> Result<bool, StepError> {
    let mine = batch.want(patch);
    let mut written = batch.turn.lock().await;
    if written.generation >= mine {
        return Ok(written.established);
    }
    let (patch, generation) = batch.take();
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(crd) => {
            written.generation = generation;
            written.established = established(&crd);
            Ok(written.established)
        }
        Err(error) => {
            batch.put_back(&patch);
            Err(classify(error))
        }
    }
}

/// The owners of a namespaced step's object: the manifest's own ownerReferences when it has
/// any (upstream's steps carry them, a CSV's UID left for the executor to fill), else the
/// CSV the step resolves (our plans' steps). None without either.
fn owner_references(object: &mut Value, resolving: &str) -> Vec<Value> {
    match object["metadata"]["ownerReferences"].take() {
        Value::Array(owners) if !owners.is_empty() => owners,
        _ if resolving.is_empty() => Vec::new(),
        _ => vec![json!({
            "apiVersion": ClusterServiceVersion::api_version(&()),
            "kind": KIND_CSV,
            "name": resolving,
            "controller": false,
            "blockOwnerDeletion": false,
        })],
    }
}

/// The UID of CSV `name`; a CSV that does not exist (yet) is retried, until the retry
/// timeout.
async fn csv_uid(
    name: &str,
    namespace: &str,
    csv_uids: &mut BTreeMap<String, String>,
    ctx: &InstallPlanContext,
) -> Result<String, StepError> {
    if let Some(uid) = csv_uids.get(name) {
        return Ok(uid.clone());
    }
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(ctx.shared.client.clone(), namespace);
    let Some(csv) = csvs.get_metadata_opt(name).await.map_err(classify)? else {
        return Err(StepError::Retry {
            message: format!("CSV {name} does not exist yet"),
            forever: false,
        });
    };
    let uid = csv.metadata.uid.unwrap_or_default();
    csv_uids.insert(name.to_string(), uid.clone());
    Ok(uid)
}

/// Creates or merges `object` the way upstream writes steps, so that the API server prunes
/// what the schema does not declare (with a warning) instead of refusing it.
async fn apply_pruned(
    api: &Api<DynamicObject>,
    name: &str,
    object: Value,
    exists: bool,
) -> Result<DynamicObject, kube::Error> {
    if exists {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Merge(&object)).await
    } else {
        create(api, object, false).await
    }
}

/// Creates `object` (only checks that it could be, with `dry_run`).
async fn create(
    api: &Api<DynamicObject>,
    object: Value,
    dry_run: bool,
) -> Result<DynamicObject, kube::Error> {
    let params = kube::api::PostParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let object: DynamicObject = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    api.create(&params, &object).await
}

/// Whether the CRD `name` is Established; None when it does not exist.
async fn crd_established(name: &str, ctx: &InstallPlanContext) -> Result<Option<bool>, StepError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let resource = ApiResource::erase::<CustomResourceDefinition>(&());
    let api: Api<DynamicObject> = Api::all_with(ctx.shared.client.clone(), &resource);
    let crd = api.get_opt(name).await.map_err(classify)?;
    Ok(crd.as_ref().map(established))
}

fn established(crd: &DynamicObject) -> bool {
    crd.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == ConditionStatus::True.as_str())
}

/// Refuses a CRD update that would drop a stored version or that existing custom resources
/// do not validate against.
async fn check_crd_upgrade(
    new: &Value,
    existing: &DynamicObject,
    ctx: &InstallPlanContext,
) -> Result<(), StepError> {
    let existing_value = serde_json::to_value(existing).unwrap_or_default();
    crd_upgrade::check_stored_versions(&existing_value, new).map_err(StepError::Refused)?;
    let crd_name = new["metadata"]["name"].as_str().unwrap_or_default();
    let group = new["spec"]["group"].as_str().unwrap_or_default();
    let kind = new["spec"]["names"]["kind"].as_str().unwrap_or_default();
    let plural = new["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let served_before: Vec<String> = crd_upgrade::served_schemas(&existing_value)
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    for (version, schema) in crd_upgrade::served_schemas(new) {
        if !served_before.contains(&version) || schema.is_null() {
            continue;
        }
        let resource = ApiResource {
            group: group.into(),
            version: version.clone(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(ctx.shared.client.clone(), &resource);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            // Not served yet (the CRD is not Established, e.g. created a moment ago by
            // another plan on a busy API server): no object of it can exist.
            Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
            Err(e) => return Err(classify(e)),
        };
        for cr in list {
            let value = serde_json::to_value(&cr).unwrap_or_default();
            let mut problems = Vec::new();
            crd_upgrade::validate(&schema, &value, "", &mut problems);
            if !problems.is_empty() {
                let object = match cr.namespace() {
                    Some(ns) => format!("{ns}/{}", cr.name_any()),
                    None => cr.name_any(),
                };
                return Err(StepError::Refused(format!(
                    "CustomResourceDefinition {crd_name}: existing {kind} {object} does not validate against the new schema of version {version}: {}",
                    problems.join("; ")
                )));
            }
        }
    }
    Ok(())
}

/// The bundle unpack timeout in `namespace`: its OperatorGroup's annotation, else the
/// process-wide setting.
async fn namespace_unpack_timeout(
    namespace: &str,
    ctx: &InstallPlanContext,
) -> Result<Duration, kube::Error> {
    let groups: Api<OperatorGroup> = Api::namespaced(ctx.shared.client.clone(), namespace);
    let list = groups.list(&ListParams::default()).await?;
    let annotation = list.items.first().and_then(|g| {
        g.annotations()
            .get(unpack::ANNOTATION_UNPACK_TIMEOUT)
            .cloned()
    });
    Ok(unpack::unpack_timeout(
        annotation.as_deref(),
        ctx.shared.settings.bundle_unpack_timeout,
    ))
}

/// Why a namespace with `count` OperatorGroups cannot have plans carried out (upstream's
/// words), if it cannot.
fn group_problem(count: usize) -> Option<String> {
    match count {
        0 => Some("no operator group found that is managing this namespace".into()),
        1 => None,
        n => Some(format!(
            "more than one operator group(s) are managing this namespace count={n}"
        )),
    }
}

/// A client acting as the OperatorGroup's service account, when it names one.
async fn scoped_client(
    namespace: &str,
    groups: &[OperatorGroup],
    ctx: &InstallPlanContext,
) -> Result<Option<Client>, String> {
    let Some(account) = groups.first().and_then(scoped::service_account) else {
        return Ok(None);
    };
    ctx.impersonating
        .acting_as(namespace, account)
        .await
        .map(Some)
}

/// Writes `status`; returns the plan as written.
async fn write_status(
    plan: &InstallPlan,
    status: &InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<InstallPlan, Error> {
    apply_status(ctx, plan, status)
        .await
        .map_err(|error| Error::Kube {
            namespace: plan.namespace().unwrap_or_default(),
            name: plan.name_any(),
            action: "writing status".into(),
            error,
        })
}

fn event(
    plan: &InstallPlan,
    ctx: &InstallPlanContext,
    type_: EventType,
    reason: Reason,
    note: String,
) {
    ctx.shared.event(
        &plan.object_ref(&()),
        type_,
        reason.as_str(),
        "Install",
        note,
    );
}

/// A Warning Event on step `i` (`status.plan[i]`) saying what the API server warned of while
/// applying it, in upstream's words.
fn warned(
    plan: &InstallPlan,
    i: usize,
    step: &Step,
    warnings: &[String],
    ctx: &InstallPlanContext,
) {
    let r = &step.resource;
    let what = if step.resolving.is_empty() {
        "operator installation".to_string()
    } else {
        format!("installation of operator {:?}", step.resolving)
    };
    let note = format!(
        "{} warning(s) generated during {what} ({} {:?}): {}",
        warnings.len(),
        r.kind,
        r.name,
        warnings.join(", ")
    );
    let mut regarding = plan.object_ref(&());
    regarding.field_path = Some(format!("status.plan[{i}]"));
    ctx.shared.event(
        &regarding,
        EventType::Warning,
        Reason::AppliedWithWarnings.as_str(),
        "Install",
        note,
    );
}

/// The plans with a step waiting for the CRD `name` to be established.
fn waiting_for_crd(
    plans: &Store<DeserializeGuard<InstallPlan>>,
    name: &str,
) -> Vec<ObjectRef<DeserializeGuard<InstallPlan>>> {
    plans
        .state()
        .iter()
        .filter(|guarded| {
            guarded.0.as_ref().is_ok_and(|plan| {
                plan.status.as_ref().is_some_and(|status| {
                    status.plan.iter().any(|step| {
                        step.status == StepStatus::WaitingForApi
                            && step.resource.kind == KIND_CRD
                            && step.resource.name == name
                    })
                })
            })
        })
        .map(|guarded| ObjectRef::from_obj(guarded.as_ref()))
        .collect()
}

/// Runs the controller until `shutdown` (leader only).
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let ctx = Arc::new(InstallPlanContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        discovered: Mutex::default(),
        impersonating: scoped::ScopedClients::default(),
        referred_bundles: Mutex::default(),
        crd_batches: Mutex::default(),
        crd_verdicts: SpecVerdicts::default(),
    });
    let (plans, plan_changes) = shared.informers.install_plans.subscribe_touched();
    let (_, crd_changes) = shared.informers.cluster.crds.subscribe_touched();
    // A plan waiting for a CRD to be established goes on as soon as it is.
    let controller = Controller::for_shared_stream(plan_changes, plans.clone())
        .watches_shared_stream(crd_changes, move |crd| {
            waiting_for_crd(&plans, &crd.name_any())
        });
    kit::run(controller, ctx, shutdown).await;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::StepResource;

    #[test]
    fn a_step_is_dispatched_on_its_manifests_kind_whatever_version_the_step_says() {
        let resource = StepResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1beta1".into(),
            kind: "CustomResourceDefinition".into(),
            name: "things.example.com".into(),
            ..StepResource::default()
        };
        let manifest =
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"});
        let gvk = step_gvk(&resource, &manifest);
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str()),
            ("apiextensions.k8s.io", "v1")
        );
        let core = step_gvk(&resource, &json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        assert_eq!(
            (
                core.group.as_str(),
                core.version.as_str(),
                core.kind.as_str()
            ),
            ("", "v1", "ConfigMap")
        );
        let bare = step_gvk(&resource, &json!({}));
        assert_eq!(bare.version, "v1beta1");
        // Upstream's tests write CRDs as plain `v1`: a kind known by name gets its group.
        let plain = step_gvk(
            &resource,
            &json!({"apiVersion": "v1", "kind": "CustomResourceDefinition"}),
        );
        assert_eq!(plain.api_version(), "apiextensions.k8s.io/v1");
        let role = step_gvk(&resource, &json!({"apiVersion": "v1", "kind": "Role"}));
        assert_eq!(role.api_version(), "rbac.authorization.k8s.io/v1");
        // Kinds it does not know keep what they say.
        let other = step_gvk(
            &resource,
            &json!({"apiVersion": "example.com/v2", "kind": "Thing"}),
        );
        assert_eq!(other.api_version(), "example.com/v2");
    }

    #[test]
    fn a_csv_is_v1alpha1_whatever_version_its_bundle_wrote() {
        let resource = StepResource {
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: KIND_CSV.into(),
            name: "k8gb.v0.11.4".into(),
            ..StepResource::default()
        };
        for written in [
            "v1alpha1",
            "operators.coreos.com/v1",
            "operators.coreos.com/v1beta1",
        ] {
            let manifest = json!({"apiVersion": written, "kind": KIND_CSV});
            let gvk = step_gvk(&resource, &manifest);
            assert_eq!(
                gvk.api_version(),
                "operators.coreos.com/v1alpha1",
                "{written}"
            );
        }
    }
}
