//! The InstallPlans a resolution asks for: one per group of its plan, adopted when one
//! exists already (a restart between creating a plan and writing the Subscriptions'
//! status), created and filled otherwise. Under the namespace lock: no duplicates.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::context::{CONTROLLER, Error, SubscriptionContext, kube_error};
use super::decide::{
    Existing, PlanGroup, Resolution, existing_plan, names_exactly, next_generation, pinned_plan,
    split,
};
use super::policy::{self, PlanTarget, TARGETS_ANNOTATION};
use crate::api::{
    Approval, ClusterServiceVersion, InstallPlan, InstallPlanSpec, Subscription,
    SubscriptionReason, operator_label, operator_name,
};
use crate::controllers::context::Context;
use crate::controllers::kit;
use crate::controllers::plan;

/// One InstallPlan per group of the resolution, unless one exists or a Subscription of the
/// group is held by its plan; returns the plan of each Subscription that has a new or
/// adopted one, with every such plan added to `plans`.
pub(super) async fn ensure_plans(
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
            // A rollback goes back to CSVs an older plan once installed: only a completed
            // rollback plan means they are installed now.
            Existing::Completed(name)
                if (!rolls_back(&group, resolution) || is_rollback(&plan_refs, &name))
                    && csvs_exist(namespace, &group.csv_names(), shared).await? =>
            {
                // Installed already; the CSV cache has not caught up yet.
                tracing::debug!(%namespace, plan = %name, "CSVs of a Complete plan exist; not planning them again");
                continue;
            }
            Existing::Completed(_) | Existing::None => {
                let targets = group.targets(subs, &resolution.rollbacks);
                let created =
                    create_plan(namespace, &group, subs, &plan_refs, &targets, shared).await?;
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

/// Whether `group` takes a Subscription back to an older version.
fn rolls_back(group: &PlanGroup, resolution: &Resolution) -> bool {
    group
        .subscriptions
        .iter()
        .any(|s| resolution.rollbacks.contains(s))
}

/// Whether plan `name` was made for a rollback.
fn is_rollback(plans: &[&InstallPlan], name: &str) -> bool {
    plans
        .iter()
        .find(|p| p.name_any() == name)
        .and_then(|p| policy::targets(p))
        .is_some_and(|targets| targets.iter().any(|t| t.rollback))
}

/// Whether every CSV of `names` exists, read fresh (the cache may lag behind a plan that
/// completed a moment ago).
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

/// The Subscriptions of `subs` that `group` serves.
fn served<'a>(
    group: &'a PlanGroup,
    subs: &'a [&'a Subscription],
) -> impl Iterator<Item = &'a Subscription> + 'a {
    subs.iter()
        .copied()
        .filter(|s| group.subscriptions.contains(&s.name_any()))
}

/// The InstallPlan to create for `group`: a generated name, owned by (and labelled as a
/// component of the Operator of) each Subscription it serves, the next generation of the
/// namespace's plans, approved at once unless a Subscription of it is Manual or, with
/// `targets` (an upgrade policy governs it), unless the policy holds it.
fn new_plan(
    namespace: &str,
    group: &PlanGroup,
    subs: &[&Subscription],
    plans: &[&InstallPlan],
    targets: &[PlanTarget],
) -> InstallPlan {
    let approval = if targets.is_empty() {
        group.approval(subs)
    } else if policy::approved_at_creation(targets, subs, kit::now()) {
        Approval::Automatic
    } else {
        Approval::Manual
    };
    let owners: Vec<OwnerReference> = served(group, subs)
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
    if !targets.is_empty() {
        let targets = serde_json::to_string(targets).unwrap_or_default();
        plan.metadata.annotations = Some([(TARGETS_ANNOTATION.to_string(), targets)].into());
    }
    // The plan is a component of the Operator of each package it installs for a Subscription.
    plan.metadata.labels = Some(
        served(group, subs)
            .map(|s| {
                let operator = operator_name(&s.spec.name, namespace);
                (operator_label(&operator), String::new())
            })
            .collect(),
    );
    plan
}

/// Creates the plan of `group` and fills it; returns it as written (no read-back needed).
async fn create_plan(
    namespace: &str,
    group: &PlanGroup,
    subs: &[&Subscription],
    plans: &[&InstallPlan],
    targets: &[PlanTarget],
    ctx: &Context,
) -> Result<InstallPlan, Error> {
    let plan = new_plan(namespace, group, subs, plans, targets);
    let approval = plan.spec.approval;
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), namespace);
    let created = api
        .create(&PostParams::default(), &plan)
        .await
        .map_err(kube_error(namespace, "creating an InstallPlan"))?;
    let name = created.name_any();
    tracing::info!(%namespace, plan = %name, csvs = ?group.csv_names(), ?approval, "InstallPlan created");
    let filled = fill_plan(&created, group, ctx).await?;
    for sub in served(group, subs) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SubscriptionSpec;

    fn sub(name: &str, package: &str, approval: Approval) -> Subscription {
        let mut sub = Subscription::new(
            name,
            SubscriptionSpec {
                name: package.into(),
                source: "operators".into(),
                source_namespace: "ns".into(),
                install_plan_approval: Some(approval),
                ..Default::default()
            },
        );
        sub.metadata.namespace = Some("ns".into());
        sub.metadata.uid = Some(format!("uid-{name}"));
        sub
    }

    #[test]
    fn a_new_plan_is_owned_and_labelled_by_the_subscriptions_it_serves() {
        let (a, b, c) = (
            sub("a", "apple", Approval::Automatic),
            sub("b", "banana", Approval::Manual),
            sub("c", "cherry", Approval::Manual),
        );
        let group = PlanGroup {
            subscriptions: ["a".to_string(), "b".to_string()].into(),
            steps: Vec::new(),
        };
        let plan = new_plan("ns", &group, &[&a, &b, &c], &[], &[]);
        assert_eq!(plan.metadata.generate_name.as_deref(), Some("install-"));
        assert_eq!(plan.metadata.name, None);
        let owners: Vec<&str> = plan
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(owners, ["a", "b"]);
        let labels: Vec<&String> = plan.metadata.labels.iter().flatten().map(|l| l.0).collect();
        assert_eq!(
            labels,
            [
                &operator_label(&operator_name("apple", "ns")),
                &operator_label(&operator_name("banana", "ns")),
            ]
        );
        // One Manual Subscription makes the plan wait for approval.
        assert_eq!(plan.spec.approval, Approval::Manual);
        assert!(!plan.spec.approved);
        assert_eq!(plan.spec.generation, Some(next_generation(&[])));
    }
}
