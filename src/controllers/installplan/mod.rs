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
//! - Before any step runs, and before approval, the plan's impact preview
//!   (`status.impact`, [`impact`]): RBAC, CRDs, images, webhooks and objects it changes.
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
mod context;
mod crd_upgrade;
mod crd_write;
mod decide;
mod error;
mod execute;
mod impact;
mod referred;
mod step;
pub mod unpack;

pub use context::{CONTROLLER, FIELD_MANAGER, InstallPlanContext};
use context::{Error, UNPACK_RECHECK, event, fail, now, write_status};
use crd_write::SpecVerdicts;
use referred::ReferredBundles;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, Reconciler};
use crate::api::{
    InstallPlan, InstallPlanPhase, InstallPlanReason as Reason, InstallPlanStatus, OperatorGroup,
    StepStatus,
};
use crate::cluster::scoped;
use crate::controllers::kit::Shutdown;
use crate::controllers::plan::steps::KIND_CRD;

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
        // Before approval, what running it would change; an approved plan's preview is
        // written with its first round of steps (one status write, not two).
        InstallPlanPhase::RequiresApproval if impact::wanted(&status) => {
            impact::preview(plan, status, ctx).await
        }
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
        InstallPlanPhase::Installing => {
            let status = match impact::wanted(&status) {
                true => impact::previewed(plan, status, ctx).await?,
                false => status,
            };
            // As upstream, a namespace without exactly one group is said first (the plan
            // waits, nothing runs: `execute` only writes why); its steps are judged after.
            let namespace = plan.namespace().unwrap_or_default();
            let groups = execute::groups_in(&namespace, ctx).await;
            if execute::group_problem(groups.len()).is_some() {
                return execute::execute(plan, status, ctx).await;
            }
            match admitted(plan, &status.plan, ctx).await? {
                Ok(()) => execute::execute(plan, status, ctx).await,
                Err(refused) => refuse(plan, status, &refused, ctx).await,
            }
        }
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
/// [`admit::admit`], and each step of a kind off the list refused when that kind is served:
/// nothing runs of a plan that carries one.
async fn admitted(
    plan: &InstallPlan,
    steps: &[crate::api::Step],
    ctx: &InstallPlanContext,
) -> Result<Result<(), admit::Inadmissible>, Error> {
    let unlisted = match admit::admit(steps) {
        Ok(unlisted) => unlisted,
        Err(refused) => return Ok(Err(refused)),
    };
    for refused in unlisted {
        let admit::Inadmissible::Unsupported {
            group,
            version,
            kind,
            ..
        } = &refused
        else {
            continue;
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let served = step::served(&gvk, ctx).await.map_err(|e| Error::Other {
            namespace: plan.namespace().unwrap_or_default(),
            name: plan.name_any(),
            message: format!("discovering {group}/{version} {kind}: {e}"),
        })?;
        if served {
            return Ok(Err(refused));
        }
    }
    Ok(Ok(()))
}

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
    impact::start(&shared.informers);
    let (plans, plan_changes) = shared.informers.install_plans.subscribe_touched();
    let (_, crd_changes) = shared.informers.cluster.crds.subscribe_touched();
    // A plan waiting for a CRD to be established goes on as soon as it is.
    let controller = Controller::for_shared_stream(plan_changes, plans.clone())
        .watches_shared_stream(crd_changes, move |crd| {
            waiting_for_crd(&plans, &crd.name_any())
        });
    kit::run(controller, ctx, shutdown).await;
}
