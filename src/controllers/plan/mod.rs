//! What an InstallPlan carries, in upstream's shape. The Subscription controller fills a new
//! plan's status: one step per object of each bundle (inline JSON; CSVs first, then CRDs,
//! then the rest, and a Subscription step per generated dependency), and for a bundle whose
//! catalog serves no objects a `bundleLookups` entry naming the image to unpack. The
//! InstallPlan controller turns unpacked lookups into steps and carries out the steps,
//! whoever wrote them. Everything a plan needs is in its typed status, so a restart at any
//! point finds it there.
//!
//! Not a controller: the shared vocabulary of the two that meet at a plan.

pub mod manifests;
pub mod provided;
pub mod rbac;
pub mod serving;
pub mod spread;
pub mod steps;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::api::{
    BundleLookup, InstallPlan, InstallPlanPhase, InstallPlanReason, InstallPlanStatus,
    PlannedBundle, Step,
};
use crate::catalog::model::fbc::PROP_PACKAGE;
use crate::controllers::context::Context;
use crate::controllers::kit::{Cond, ConditionStatus};
use manifests::Fetched;
use steps::{BundleManifests, KIND_CRD, KIND_CSV, PlanError};

/// The field manager of an InstallPlan's status, whichever controller writes it: the
/// InstallPlan controller takes over what the Subscription controller first wrote, and
/// fields one manager owns are removed when it stops applying them.
pub const STATUS_FIELD_MANAGER: &str = "olm-installplan";

/// A plan's bundles as their catalogs serve them.
#[derive(Debug, Default)]
pub struct Gathered {
    pub with_manifests: Vec<BundleManifests>,
    /// Bundles to pull from their image, with the catalog's properties for them.
    pub to_unpack: Vec<(PlannedBundle, String, Vec<Value>)>,
    /// The catalogs the bundles come from, in plan order.
    pub catalog_sources: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("fetching the manifests of bundle {bundle} from catalog {namespace}/{catalog}: {source}")]
pub struct GatherError {
    pub bundle: String,
    pub catalog: String,
    pub namespace: String,
    #[source]
    pub source: manifests::FetchError,
}

/// The gather step of a new plan: each bundle's objects from the catalog it was resolved
/// from (or the image to unpack it from).
pub async fn gather(bundles: Vec<PlannedBundle>, ctx: &Context) -> Result<Gathered, GatherError> {
    let mut gathered = Gathered::default();
    for bundle in bundles {
        if !gathered.catalog_sources.contains(&bundle.catalog) {
            gathered.catalog_sources.push(bundle.catalog.clone());
        }
        match manifests::fetch(&bundle, ctx).await {
            Ok(Fetched::Objects {
                objects,
                properties,
            }) => gathered.with_manifests.push(BundleManifests {
                bundle,
                objects,
                properties,
            }),
            Ok(Fetched::NeedsUnpack {
                image, properties, ..
            }) => gathered.to_unpack.push((bundle, image, properties)),
            Err(source) => {
                return Err(GatherError {
                    bundle: bundle.name,
                    catalog: bundle.catalog,
                    namespace: bundle.catalog_namespace,
                    source,
                });
            }
        }
    }
    Ok(gathered)
}

/// The decide step of a new plan (pure): its first status, RequiresApproval when it `waits`
/// for approval, else Installing; Failed when the bundles cannot make steps.
pub fn initial_status(
    namespace: &str,
    gathered: Gathered,
    waits: bool,
    now: Timestamp,
) -> InstallPlanStatus {
    let mut plan = match steps::build_steps(namespace, &gathered.with_manifests) {
        Ok(mut steps) => {
            steps::refer_when_too_large(&mut steps, &gathered.with_manifests);
            steps
        }
        Err(error) => {
            return failed(
                InstallPlanStatus::default(),
                InstallPlanReason::InstallComponentFailed,
                error.to_string(),
                now,
            );
        }
    };
    let mut bundle_lookups = Vec::new();
    for (bundle, image, properties) in gathered.to_unpack {
        // The dependency's Subscription is a step from the start, as upstream plans it.
        if let Some(name) = &bundle.generated_subscription {
            plan.push(steps::generated_subscription_step(name, namespace, &bundle));
        }
        bundle_lookups.push(lookup(&bundle, image, properties));
    }
    let time = Time(now);
    InstallPlanStatus {
        phase: if waits {
            InstallPlanPhase::RequiresApproval
        } else {
            InstallPlanPhase::Installing
        },
        conditions: vec![
            Cond::without_reason("Resolved", ConditionStatus::True)
                .into_install_plan(time.clone(), time),
        ],
        catalog_sources: gathered.catalog_sources,
        plan,
        bundle_lookups,
        start_time: (!waits).then_some(Time(now)),
        ..InstallPlanStatus::default()
    }
}

/// The Event a newly filled plan deserves: how to approve it, or why it failed.
pub fn announce(plan: &InstallPlan, ctx: &Context) {
    let Some(status) = &plan.status else {
        return;
    };
    let (type_, reason, note) = match status.phase {
        InstallPlanPhase::RequiresApproval => (
            EventType::Normal,
            InstallPlanReason::RequiresApproval.as_str().to_string(),
            format!(
                "InstallPlan for {} waits for approval: kubectl patch installplan {} -n {} --type merge -p '{{\"spec\":{{\"approved\":true}}}}'",
                plan.spec.cluster_service_version_names.join(", "),
                plan.name_any(),
                plan.namespace().unwrap_or_default()
            ),
        ),
        InstallPlanPhase::Failed => (
            EventType::Warning,
            status
                .conditions
                .iter()
                .find(|c| c.type_.as_deref() == Some("Installed"))
                .and_then(|c| c.reason.clone())
                .unwrap_or_default(),
            status.message.clone().unwrap_or_default(),
        ),
        _ => return,
    };
    ctx.event(&plan.object_ref(&()), type_, &reason, "Install", note);
}

/// `status` as a Failed plan: the message, and `Installed=False` with `reason`.
pub fn failed(
    mut status: InstallPlanStatus,
    reason: InstallPlanReason,
    message: String,
    now: Timestamp,
) -> InstallPlanStatus {
    status.phase = InstallPlanPhase::Failed;
    status.message = Some(message.clone());
    let time = Time(now);
    set_installed(
        &mut status,
        Cond::new("Installed", ConditionStatus::False, reason, message)
            .into_install_plan(time.clone(), time),
    );
    status
}

/// Replaces the plan's `Installed` condition (one per plan, as upstream).
pub fn set_installed(status: &mut InstallPlanStatus, condition: crate::api::InstallPlanCondition) {
    status
        .conditions
        .retain(|c| c.type_.as_deref() != Some("Installed"));
    status.conditions.push(condition);
}

/// The lookup of a bundle to unpack: its image, CSV name, the CSV it replaces, its
/// catalog, and its properties (`{"properties":[…]}`, the package first) — all the step
/// builder needs once the image's objects are there.
fn lookup(bundle: &PlannedBundle, image: String, properties: Vec<Value>) -> BundleLookup {
    let mut all = vec![package_property(bundle)];
    all.extend(properties.into_iter().filter(|p| p["type"] != PROP_PACKAGE));
    BundleLookup {
        path: image,
        identifier: bundle.name.clone(),
        replaces: bundle.replaces.clone().unwrap_or_default(),
        catalog_source_ref: ObjectReference {
            name: Some(bundle.catalog.clone()),
            namespace: Some(bundle.catalog_namespace.clone()),
            ..ObjectReference::default()
        },
        conditions: Vec::new(),
        properties: Some(json!({ "properties": all }).to_string()),
    }
}

fn package_property(bundle: &PlannedBundle) -> Value {
    json!({"type": PROP_PACKAGE,
           "value": {"packageName": bundle.package, "version": bundle.version}})
}

/// The bundle a lookup stands for, and its properties; an error names what is missing.
pub fn bundle_of_lookup(lookup: &BundleLookup) -> Result<(PlannedBundle, Vec<Value>), PlanError> {
    let invalid = |problem: &str| PlanError::Invalid {
        bundle: lookup.identifier.clone(),
        problem: format!("bundle lookup: {problem}"),
    };
    let properties: Vec<Value> = match lookup.properties.as_deref() {
        Some(text) => serde_json::from_str::<Value>(text)
            .map_err(|_| invalid("properties are not JSON"))?["properties"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let package = properties
        .iter()
        .find(|p| p["type"] == PROP_PACKAGE)
        .map(|p| &p["value"])
        .ok_or_else(|| invalid("no olm.package property"))?;
    let bundle = PlannedBundle {
        name: lookup.identifier.clone(),
        package: package["packageName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        version: package["version"].as_str().unwrap_or_default().to_string(),
        catalog: lookup.catalog_source_ref.name.clone().unwrap_or_default(),
        catalog_namespace: lookup
            .catalog_source_ref
            .namespace
            .clone()
            .unwrap_or_default(),
        replaces: Some(lookup.replaces.clone()).filter(|r| !r.is_empty()),
        ..PlannedBundle::default()
    };
    Ok((bundle, properties))
}

/// The steps of an unpacked bundle (its CSV, CRDs and the rest; its generated Subscription
/// is in the plan already).
pub fn steps_of_unpacked(
    namespace: &str,
    lookup: &BundleLookup,
    objects: Vec<Value>,
) -> Result<Vec<Step>, PlanError> {
    let (bundle, properties) = bundle_of_lookup(lookup)?;
    steps::build_steps(
        namespace,
        &[BundleManifests {
            bundle,
            objects,
            properties,
        }],
    )
}

/// `plan` with `more` steps, kept in upstream's order: CSVs, CRDs, then the rest (stable
/// within each).
pub fn merge_steps(mut plan: Vec<Step>, more: Vec<Step>) -> Vec<Step> {
    plan.extend(more);
    plan.sort_by_key(|step| match step.resource.kind.as_str() {
        KIND_CSV => 0,
        KIND_CRD => 1,
        _ => 2,
    });
    plan
}

#[cfg(test)]
mod tests;
