//! The writes of a round after its plans: each Subscription's status where it differs (with
//! a Warning Event when resolution newly fails), and the deletion of the plans beyond the
//! number upstream keeps.

use kube::api::{Api, DeleteParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::context::{Error, MAX_PLANS_PER_NAMESPACE, SubscriptionContext, kube_error};
use super::decide::Statuses;
use crate::api::{InstallPlan, Subscription, SubscriptionReason, SubscriptionStatus};
use crate::controllers::context::Context;
use crate::controllers::kit::{ConditionStatus, apply_status};

/// Writes the statuses `decide` found out of date, then deletes the plans it would prune.
pub(super) async fn apply(
    namespace: &str,
    subs: &[&Subscription],
    statuses: &Statuses,
    ctx: &SubscriptionContext,
) -> Result<(), Error> {
    for (sub, desired) in subs.iter().zip(&statuses.desired) {
        if sub.status.as_ref() != Some(desired) {
            write_status(sub, desired, ctx).await?;
            announce(sub, desired, &ctx.shared);
        }
    }
    prune_plans(namespace, &statuses.prune, ctx).await
}

/// Deletes the old plans `names` (one already gone is no error).
async fn prune_plans(
    namespace: &str,
    names: &[String],
    ctx: &SubscriptionContext,
) -> Result<(), Error> {
    let plan_api: Api<InstallPlan> = Api::namespaced(ctx.shared.client.clone(), namespace);
    for name in names {
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
    Ok(())
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
