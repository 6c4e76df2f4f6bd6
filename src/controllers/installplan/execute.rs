//! An Installing plan's round: its steps in order, each carried out by [`super::step`],
//! then the status the round leaves (Complete, waiting, retrying, or Failed).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};

use super::context::{
    Error, GROUP_RECHECK, InstallPlanContext, RECHECK, event, fail, now, warned, write_status,
};
use super::decide::{self, Round, RoundOutcome};
use super::error::{Disposition, StepError};
use super::step::{self, Applied};
use crate::api::{
    InstallPlan, InstallPlanConditionType as Type, InstallPlanPhase, InstallPlanReason as Reason,
    InstallPlanStatus, OperatorGroup, StepStatus,
};
use crate::cluster::scoped;
use crate::controllers::kit::{Cond, ConditionStatus};
use crate::controllers::plan::{self, steps::KIND_CRD};

pub async fn execute(
    plan: &InstallPlan,
    mut status: InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    let namespace = plan.namespace().unwrap_or_default();
    // What the cluster holds: `status` may already differ (its preview, just computed).
    let before = plan.status.clone().unwrap_or_default();
    let groups = groups_in(&namespace, ctx).await;
    // As upstream: a plan is carried out only in a namespace with exactly one group; until
    // then it stays Installing and says why (cleared once the group is there).
    if let Some(message) = group_problem(groups.len()) {
        if installed_message(&status).as_deref() != Some(message.as_str()) {
            let time = Time(now());
            let said = Cond::new(
                Type::Installed.as_str(),
                false,
                Reason::InstallCheckFailed,
                message,
            );
            plan::set_installed(&mut status, said.into_install_plan(time.clone(), time));
        }
        if status != before {
            write_status(plan, &status, ctx).await?;
        }
        return Ok(Action::requeue(GROUP_RECHECK));
    }
    let scoped = scoped_client(&namespace, &groups, ctx)
        .await
        .map_err(|error| Error::Other {
            namespace: namespace.clone(),
            name: plan.name_any(),
            message: error.to_string(),
        })?;
    // Whatever was said while the namespace had no single group no longer holds.
    status
        .conditions
        .retain(|c| c.reason.as_deref() != Some(Reason::InstallCheckFailed.as_str()));
    // A plan a client wrote may have no start: the retry clock starts now.
    status.start_time.get_or_insert_with(|| Time(now()));
    let round = run_steps(plan, &mut status, scoped.as_ref(), ctx).await;
    let started = status.start_time.as_ref().map_or_else(now, |t| t.0);
    let elapsed = now().duration_since(started).unsigned_abs();
    let timeout = ctx.shared.settings.install_plan_retry_timeout;
    match decide::round_outcome(round, elapsed, timeout) {
        RoundOutcome::Fail(message) => {
            fail(plan, status, Reason::InstallComponentFailed, message, ctx).await
        }
        RoundOutcome::Again(message) => {
            // Say why it is not done yet (written only when the reason changes).
            if message.is_some() {
                status.message = message;
            }
            if status != before {
                write_status(plan, &status, ctx).await?;
            }
            Ok(Action::requeue(RECHECK))
        }
        RoundOutcome::Complete => complete(plan, status, ctx).await,
    }
}

async fn complete(
    plan: &InstallPlan,
    mut status: InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    status.phase = InstallPlanPhase::Complete;
    status.message = None;
    let now = Time(now());
    let installed = Cond::without_reason(Type::Installed.as_str(), ConditionStatus::True);
    plan::set_installed(&mut status, installed.into_install_plan(now.clone(), now));
    write_status(plan, &status, ctx).await?;
    let csvs = plan.spec.cluster_service_version_names.join(", ");
    let note = format!("installed {csvs}");
    event(plan, ctx, EventType::Normal, Reason::Installed, note);
    Ok(Action::await_change())
}

/// Carries out the steps not done yet, in order, recording each one's status in `status`.
async fn run_steps(
    plan: &InstallPlan,
    status: &mut InstallPlanStatus,
    scoped: Option<&Client>,
    ctx: &InstallPlanContext,
) -> Round {
    let namespace = plan.namespace().unwrap_or_default();
    let mut csv_uids: BTreeMap<String, String> = BTreeMap::new();
    let mut round = Round::default();
    for i in 0..status.plan.len() {
        let step = status.plan[i].clone();
        if matches!(step.status, StepStatus::Created | StepStatus::Present) {
            continue;
        }
        let kind = step.resource.kind.as_str();
        // A CRD already applied and waiting for its API is only looked at, never applied
        // again (as upstream): and once one is known to wait, the others wait for the next
        // round. On a busy API server (a thousand CRDs being established) re-applying them
        // every round was most of its load.
        if step.status == StepStatus::WaitingForApi && kind == KIND_CRD {
            if round.waiting {
                continue;
            }
            match crd_established(&step.resource.name, ctx).await {
                Ok(Some(true)) => {
                    status.plan[i].status = StepStatus::Created;
                    continue;
                }
                Ok(Some(false)) => {
                    round.waiting = true;
                    continue;
                }
                // Gone meanwhile: applied again below.
                Ok(None) => {}
                Err(error) => {
                    let message = format!("step {} CRD {}: {error}", i + 1, step.resource.name);
                    round.retry = Some((message, error.disposition() == Disposition::RetryForever));
                    break;
                }
            }
        }
        let client = match scoped {
            Some(client) if kind != KIND_CRD => client,
            _ => &ctx.shared.client,
        };
        let run = step::run(&step, &namespace, client, &mut csv_uids, ctx);
        let (result, warnings) = crate::cluster::warnings::collect(run).await;
        if !warnings.is_empty() {
            warned(plan, i, &step, &warnings, ctx);
        }
        match result {
            Ok(Applied::Done(done)) => {
                status.plan[i].status = done;
                round.applied += 1;
                fault_injection::maybe_pause(plan, round.applied).await;
            }
            Ok(Applied::Waiting) => {
                status.plan[i].status = StepStatus::WaitingForApi;
                round.waiting = true;
            }
            Err(error) if error.disposition() == Disposition::Refuse => {
                round.refused = Some(error);
                return round;
            }
            Err(error) => {
                let r = &step.resource;
                let described = format!(
                    "step {} {} {} of bundle {}: {error}",
                    i + 1,
                    r.kind,
                    r.name,
                    step.resolving
                );
                tracing::debug!(plan = %plan.name_any(), %described, "step failed; will retry");
                round.retry = Some((described, error.disposition() == Disposition::RetryForever));
                // A CSV must exist before anything is owned by it; CRDs before their users.
                if matches!(kind, plan::steps::KIND_CSV | KIND_CRD) {
                    break;
                }
            }
        }
    }
    round
}

/// The message of the plan's Installed condition, if any.
fn installed_message(status: &InstallPlanStatus) -> Option<String> {
    status
        .conditions
        .iter()
        .find(|c| c.type_.as_deref() == Some(Type::Installed.as_str()))
        .and_then(|c| c.message.clone())
}

/// The OperatorGroups of `namespace`, from the shared cache: a waiting plan is looked at
/// every few seconds, and a LIST per look was one request per plan per round.
pub(super) async fn groups_in(namespace: &str, ctx: &InstallPlanContext) -> Vec<OperatorGroup> {
    let cache = ctx.shared.informers.operator_groups.store();
    crate::controllers::kit::cache_ready::listed(&cache).await;
    cache
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|g| g.namespace().as_deref() == Some(namespace))
        .cloned()
        .collect()
}

/// Why a namespace with `count` OperatorGroups cannot have plans carried out (upstream's
/// words), if it cannot.
pub fn group_problem(count: usize) -> Option<String> {
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
) -> Result<Option<Client>, scoped::ScopedError> {
    let Some(account) = groups.first().and_then(scoped::service_account) else {
        return Ok(None);
    };
    ctx.impersonating
        .acting_as(namespace, account)
        .await
        .map(Some)
}

/// Whether the CRD `name` is Established; None when it does not exist.
async fn crd_established(name: &str, ctx: &InstallPlanContext) -> Result<Option<bool>, StepError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let resource = ApiResource::erase::<CustomResourceDefinition>(&());
    let api: Api<DynamicObject> = Api::all_with(ctx.shared.client.clone(), &resource);
    let crd = api.get_opt(name).await?;
    Ok(crd.as_ref().map(|crd| decide::established(&crd.data)))
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
