//! The waiting plans of a namespace, judged again every round (a window opens, a preview
//! arrives, the policy changes): approved, withdrawn (deleted: it ran nothing), or left to
//! wait, with when time alone may change that. Runs before the round's fingerprint check,
//! because the clock is not among the fingerprint's inputs.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::context::{Error, FIELD_MANAGER, SubscriptionContext, kube_error};
use super::policy::{self, Verdict};
use crate::api::{InstallPlan, Subscription, SubscriptionReason};
use crate::controllers::kit;

/// What judging the waiting plans did.
#[derive(Debug, Default)]
pub(super) struct Released {
    /// Plans deleted because the policy no longer allows their target.
    pub withdrawn: BTreeSet<String>,
    /// Whether any plan was approved or withdrawn (the round must not be skipped).
    pub changed: bool,
    /// When a window opens for a plan that waits for one.
    pub wake: Option<Duration>,
}

pub(super) async fn release(
    namespace: &str,
    subs: &[&Subscription],
    plans: &[InstallPlan],
    ctx: &SubscriptionContext,
) -> Result<Released, Error> {
    let now = kit::now();
    let mut released = Released::default();
    let mut holds = Vec::new();
    let api: Api<InstallPlan> = Api::namespaced(ctx.shared.client.clone(), namespace);
    for plan in plans.iter().filter(|p| policy::waiting(p)) {
        let name = plan.name_any();
        match policy::plan_verdict(plan, subs, now) {
            Some(Verdict::Approve(allowed)) => {
                let patch = serde_json::json!({"spec": {"approved": true}});
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PatchParams::default()
                };
                api.patch(&name, &params, &Patch::Merge(&patch))
                    .await
                    .map_err(kube_error(
                        namespace,
                        format!("approving InstallPlan {name}"),
                    ))?;
                tracing::info!(%namespace, plan = %name, by = %allowed.words(), "InstallPlan approved by the upgrade policy");
                let note = format!("InstallPlan {name} approved by {}", allowed.words());
                announce(
                    plan,
                    subs,
                    SubscriptionReason::InstallPlanApproved,
                    note,
                    ctx,
                );
                released.changed = true;
            }
            Some(Verdict::Withdraw(why)) => {
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => {
                        return Err(kube_error(
                            namespace,
                            format!("withdrawing InstallPlan {name}"),
                        )(error));
                    }
                }
                let note =
                    format!("InstallPlan {name} withdrawn: {why} no longer allows its target");
                announce(
                    plan,
                    subs,
                    SubscriptionReason::InstallPlanWithdrawn,
                    note,
                    ctx,
                );
                released.withdrawn.insert(name);
                released.changed = true;
            }
            Some(hold) => holds.push(hold),
            None => {}
        }
    }
    released.wake = policy::wake_after(&holds, now);
    Ok(released)
}

/// An Event on each Subscription the plan serves.
fn announce(
    plan: &InstallPlan,
    subs: &[&Subscription],
    reason: SubscriptionReason,
    note: String,
    ctx: &SubscriptionContext,
) {
    let served: BTreeSet<String> = policy::targets(plan)
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.subscription)
        .collect();
    for sub in subs.iter().filter(|s| served.contains(&s.name_any())) {
        ctx.shared.event(
            &sub.object_ref(&()),
            EventType::Normal,
            reason.as_str(),
            "Approve",
            note.clone(),
        );
    }
}
