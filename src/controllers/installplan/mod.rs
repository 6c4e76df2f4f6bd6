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
mod apply;
mod crd_upgrade;
mod crd_write;
mod decide;
mod error;
mod execute;
mod referred;
mod step;
pub mod unpack;

use crd_write::{CrdBatch, SpecVerdicts};
use referred::ReferredBundles;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, GroupVersionKind, ListParams};
use kube::core::DeserializeGuard;
use kube::discovery::ApiCapabilities;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::kit::PanicError;
use super::kit::{self, KitState, ObjectKey, ReconcileError, Reconciler, apply_status};
use super::scoped;
use crate::api::{
    InstallPlan, InstallPlanPhase, InstallPlanReason as Reason, InstallPlanStatus, OperatorGroup,
    Step, StepStatus,
};
use crate::controllers::host::Shutdown;
use crate::controllers::plan::{self, steps::KIND_CRD};

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
    /// The bundles last read back for plans that carry their objects by reference.
    referred: ReferredBundles,
    /// Per CRD name, the metadata its steps want written (see [`CrdBatch`]).
    crd_batches: Mutex<HashMap<String, Arc<CrdBatch>>>,
    /// Per CRD name, the step content it was last found to hold (see [`SpecVerdicts`]).
    crd_verdicts: SpecVerdicts,
}

impl InstallPlanContext {
    /// The write batch of the CRD `name`.
    fn crd_batch(&self, name: &str) -> Arc<CrdBatch> {
        Arc::clone(
            self.crd_batches
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(name.to_string())
                .or_default(),
        )
    }

    /// Where objects of `gvk` are served, when discovered before.
    fn discovered(&self, gvk: &GroupVersionKind) -> Option<(ApiResource, ApiCapabilities)> {
        let discovered = self
            .discovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        discovered.get(gvk).cloned()
    }

    fn remember_discovered(&self, gvk: &GroupVersionKind, found: &(ApiResource, ApiCapabilities)) {
        let mut discovered = self
            .discovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        discovered.insert(gvk.clone(), found.clone());
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
            Ok(()) => execute::execute(plan, status, ctx).await,
            Err(refused) => refuse(plan, status, &refused, ctx).await,
        },
        // No phase or Planning: its writer has not handed it over yet; upstream leaves such
        // a plan alone too (its Subscription says InstallPlanNotYetReconciled).
        InstallPlanPhase::None | InstallPlanPhase::Planning => Ok(Action::await_change()),
    }
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
        referred: ReferredBundles::default(),
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
