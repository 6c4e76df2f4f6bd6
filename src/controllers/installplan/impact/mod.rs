//! The impact preview of an InstallPlan (`status.impact`): what running it would change,
//! written once, before any of its steps runs (and so before approval for a plan that
//! waits for it). People read it with `olm plan show`; the Subscription controller reads
//! it to hold upgrades that add permissions.
//!
//! - RBAC added and removed per ServiceAccount, between each CSV the plan installs and the
//!   CSV it replaces; an added rule the account's RBAC does not already allow is an
//!   escalation ([`rbac`], Kubernetes' RuleAllows over the shared RBAC caches).
//! - CRD versions added, unserved and removed, stored versions left unserved, schema
//!   changes, existing objects the new schema refuses and fields of theirs it would drop
//!   ([`crds`]); the last three kinds are blockers.
//! - Images per Deployment and container, webhooks and owned APIServices ([`csvs`]).
//! - Objects created, updated and deleted ([`decide::touched`]), with what the CSV
//!   controller makes for each CSV ([`made`]: its OperatorCondition's Role and RoleBinding,
//!   the plan's Roles lifted or copied for its OperatorGroup, and for webhooks and API
//!   services the serving Service, Secret, RBAC, configurations and APIServices, named by
//!   `plan::serving`; and the OperatorGroup controller's ClusterRoles of each provided API
//!   and of the group, named by `plan::provided`); "updated" only when the object's content
//!   changes, not just its metadata.
//!
//! [`gather`] reads, [`decide`] computes (pure). A read that may succeed later is retried,
//! until the install plan retry timeout after the plan was made; then, or at once for an
//! error that cannot pass, the preview says it failed and why: a plan is never held back
//! by its preview.

mod crds;
mod csvs;
mod decide;
mod gather;
mod made;
mod rbac;
#[cfg(test)]
mod tests;

pub use gather::start;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::context::{Error, InstallPlanContext, now, write_status};
use crate::api::{InstallPlan, InstallPlanPhase, InstallPlanStatus, StepStatus};

/// Whether the plan is due its preview: it has steps and no lookups left, has none yet,
/// and no step has run (waiting for approval, or Installing with every step untouched).
pub fn wanted(status: &InstallPlanStatus) -> bool {
    let untouched = status
        .plan
        .iter()
        .all(|s| matches!(s.status, StepStatus::Unknown | StepStatus::NotPresent));
    let phase = matches!(
        status.phase,
        InstallPlanPhase::RequiresApproval | InstallPlanPhase::Installing
    );
    status.impact.is_none()
        && !status.plan.is_empty()
        && status.bundle_lookups.is_empty()
        && phase
        && untouched
}

/// Computes the plan's preview and writes it; the write's watch event starts the next
/// round, which goes on as before. (An Installing plan's preview is written with its first
/// round of steps instead: [`previewed`].)
pub async fn preview(
    plan: &InstallPlan,
    status: InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    let status = previewed(plan, status, ctx).await?;
    write_status(plan, &status, ctx).await?;
    Ok(Action::await_change())
}

/// `status` with the plan's preview, computed before any of its steps runs. A preview that
/// cannot be had for a while is an error (the round is retried); one that keeps failing,
/// or never can succeed, is recorded as failed.
pub async fn previewed(
    plan: &InstallPlan,
    mut status: InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<InstallPlanStatus, Error> {
    let namespace = plan.namespace().unwrap_or_default();
    let mut impact = match gather::gather(&status.plan, &namespace, ctx).await {
        Ok(found) => decide::decide(&found),
        Err(error) if error.transient() && !expired(plan, ctx) => {
            return Err(Error::Other {
                namespace,
                name: plan.name_any(),
                message: format!("previewing the plan: {error}"),
            });
        }
        Err(error) => {
            tracing::warn!(plan = %plan.name_any(), %namespace, %error, "InstallPlan preview failed");
            decide::failed(&error.to_string())
        }
    };
    impact.computed_at = Some(Time(now()));
    status.impact = Some(impact);
    Ok(status)
}

/// Whether the plan was made longer than the retry timeout ago: a preview that keeps
/// failing stops holding it then.
fn expired(plan: &InstallPlan, ctx: &InstallPlanContext) -> bool {
    let Some(created) = plan.creation_timestamp() else {
        return false;
    };
    let age = now().duration_since(created.0).unsigned_abs();
    age > ctx.shared.settings.install_plan_retry_timeout
}
