//! `olm rollback NAMESPACE/SUBSCRIPTION`: sets the Subscription's
//! `spec.upgradePolicy.rollbackTo` to the CSV its installed one replaced (or `--to`), then
//! follows the rollback: its plan's preview, and either the older CSV installed or the
//! reason OLM refused. The field is the whole request, so GitOps does the same in YAML.

use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use futures::TryStreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::api::{
    InstallPlan, InstallPlanPhase, Subscription, SubscriptionCondition, SubscriptionState,
};

const FIELD_MANAGER: &str = "olm-cli";

#[derive(Args, Debug)]
pub struct RollbackArgs {
    /// The Subscription, as NAMESPACE/NAME.
    pub subscription: String,
    /// The version or CSV to go back to; default: the CSV the installed one replaced
    /// (`status.replacedCSV`).
    #[arg(long)]
    pub to: Option<String>,
    /// Ask for the rollback and return without waiting for it.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for the rollback to finish or be refused.
    #[arg(long, default_value = "5m", value_parser = humantime_secs)]
    pub timeout: Duration,
}

/// A `--timeout` that is not `N`, `Ns`, `Nm` or `Nh`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a duration such as 90s or 5m")]
pub struct DurationError(String);

fn humantime_secs(text: &str) -> Result<Duration, DurationError> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| DurationError(text.into()))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(DurationError(text.into())),
    };
    Ok(Duration::from_secs(n * scale))
}

pub fn run(args: RollbackArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(rollback(args))
}

async fn rollback(args: RollbackArgs) -> anyhow::Result<()> {
    let (namespace, name) = args.subscription.split_once('/').with_context(|| {
        format!(
            "{:?}: name the Subscription as NAMESPACE/NAME",
            args.subscription
        )
    })?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the cluster")?;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let sub = subs
        .get_opt(name)
        .await?
        .with_context(|| format!("subscription {namespace}/{name} does not exist"))?;
    let status = sub.status.clone().unwrap_or_default();
    let installed = status.installed_csv.clone().with_context(|| {
        format!("subscription {namespace}/{name} has nothing installed to roll back")
    })?;
    let Some(to) = args.to.or(status.replaced_csv) else {
        bail!(
            "subscription {namespace}/{name} records no earlier version (status.replacedCSV is empty); name one with --to"
        );
    };
    let patch = serde_json::json!({"spec": {"upgradePolicy": {"rollbackTo": to}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    subs.patch(name, &params, &Patch::Merge(&patch)).await?;
    println!("subscription {namespace}/{name}: rollbackTo {to} (installed: {installed})");
    if args.no_wait {
        return Ok(());
    }
    let done = tokio::time::timeout(args.timeout, follow(&client, namespace, name, &installed))
        .await
        .with_context(|| {
            format!(
                "subscription {namespace}/{name}: no answer within {:?}",
                args.timeout
            )
        })??;
    println!(
        "rolled back to {done}; the Subscription holds there until spec.upgradePolicy.rollbackTo is removed"
    );
    Ok(())
}

/// Follows the Subscription until its rollback plan is Complete with the older CSV
/// installed (its name returned), or OLM says why not (an error). Prints the plan's
/// preview summary once it has one.
async fn follow(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    from: &str,
) -> anyhow::Result<String> {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(subs, config).applied_objects());
    let mut shown = None;
    while let Some(sub) = events.try_next().await? {
        let status = sub.status.unwrap_or_default();
        if let Some(refused) = refusal(&status.conditions) {
            bail!("subscription {namespace}/{name}: {refused}");
        }
        let Some(plan_name) = status.install_plan_ref.and_then(|r| r.name) else {
            continue;
        };
        let Some(plan) = plans.get_opt(&plan_name).await? else {
            continue;
        };
        if !rollback_plan(&plan) {
            continue;
        }
        if shown.as_deref() != Some(plan_name.as_str())
            && let Some(impact) = plan.status.as_ref().and_then(|s| s.impact.as_ref())
        {
            println!("InstallPlan {plan_name}: {}", impact.summary);
            shown = Some(plan_name.clone());
        }
        let installed = status.installed_csv.unwrap_or_default();
        if plan.phase() == InstallPlanPhase::Complete
            && installed != from
            && plan.spec.cluster_service_version_names.contains(&installed)
            && status.state == Some(SubscriptionState::AtLatestKnown)
        {
            return Ok(installed);
        }
    }
    bail!("subscription {namespace}/{name} was deleted")
}

/// Whether OLM made `plan` for a rollback (its targets annotation says so).
fn rollback_plan(plan: &InstallPlan) -> bool {
    let targets: Vec<serde_json::Value> = plan
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("olm-rs.dev/targets"))
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    targets.iter().any(|t| t["rollback"] == true)
}

/// Why OLM will not roll back, from the Subscription's conditions.
fn refusal(conditions: &[SubscriptionCondition]) -> Option<String> {
    conditions
        .iter()
        .find(|c| {
            c.status == "True"
                && ((c.type_ == "UpgradeHeld" && c.reason.as_deref() == Some("RollbackRefused"))
                    || c.type_ == "ResolutionFailed"
                    || c.type_ == "InstallPlanFailed")
        })
        .map(|c| c.message.clone().unwrap_or_default())
}
