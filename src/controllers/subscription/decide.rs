//! The pure half of the Subscription controller: from the objects of one namespace to the
//! resolver's input, from the resolver's answer to InstallPlans (how they are split), and
//! from all of it to each Subscription's status. No client, no clock: unit-tested here.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::api::{
    Approval, ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, InstallPlanReference,
    PlannedBundle, Subscription, SubscriptionCatalogHealth, SubscriptionCondition,
    SubscriptionReason, SubscriptionState, SubscriptionStatus,
};
use crate::catalog::model::fbc::{PROP_GVK, Property};
use crate::catalog::model::semver_range::parse_version;
use crate::controllers::kit::{Cond, ConditionStatus};
use crate::resolver::{
    self, CatalogIndex, CatalogRef, Held, InstalledCsv, Namespace, Outcome, Plan, Reason,
    ResolveError, Step,
};

pub use crate::api::ANNOTATION_PROPERTIES;
/// Label of the copies of a CSV in target namespaces; copies are not installs.
pub const LABEL_COPIED_FROM: &str = crate::api::COPIED_FROM_LABEL;
/// OperatorGroup annotation: resolve against the namespace's own catalogs only.
pub const ANNOTATION_EXCLUDE_GLOBAL: &str =
    "olm.operatorframework.io/exclude-global-namespace-resolution";

/// Why a Subscription could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub reason: SubscriptionReason,
    pub message: String,
}

/// The CSVs the resolver sees as installed: copies and CSVs on their way out ([`outgoing`])
/// are left out, so an upgrade in flight counts as its newest CSV. The package comes from
/// the properties annotation the InstallPlan writes, else from the Subscription that
/// installed it; the source from that Subscription.
pub fn installed_csvs(
    csvs: &[&ClusterServiceVersion],
    subs: &[&Subscription],
) -> Vec<InstalledCsv> {
    let leaving = outgoing(csvs);
    let own = csvs
        .iter()
        .copied()
        .filter(|c| !c.labels().contains_key(LABEL_COPIED_FROM));
    let mut out = Vec::new();
    for csv in own {
        let name = csv.name_any();
        if leaving.contains(&name) {
            continue;
        }
        let (property_package, property_version) = package_property(csv);
        let owner = subs.iter().find(|s| {
            s.status.as_ref().is_some_and(|st| {
                st.current_csv.as_deref() == Some(&name)
                    || st.installed_csv.as_deref() == Some(&name)
            })
        });
        // A Subscription's installed CSV is its install whatever package it came from, as
        // upstream relates them (by name): a Subscription moved to another package upgrades
        // it to a bundle of the new package that replaces it.
        let package = owner
            .map(|s| s.spec.name.clone())
            .or(property_package)
            .unwrap_or_else(|| name.clone());
        let version = csv
            .spec
            .version
            .as_deref()
            .or(property_version.as_deref())
            .and_then(|v| parse_version(v).ok())
            .unwrap_or_else(|| semver::Version::new(0, 0, 0));
        let source = owner
            .or_else(|| subs.iter().find(|s| s.spec.name == package))
            .map(|s| CatalogRef::new(&s.spec.source, &s.spec.source_namespace));
        out.push(InstalledCsv {
            name,
            package,
            version,
            source,
            provided: owned_api_properties(csv),
        });
    }
    out
}

/// The CSVs on their way out: Replacing or Deleting, or replaced by another CSV present
/// (unless that is a rollback's stale history).
fn outgoing(csvs: &[&ClusterServiceVersion]) -> BTreeSet<String> {
    let own: Vec<&ClusterServiceVersion> = csvs
        .iter()
        .copied()
        .filter(|c| !c.labels().contains_key(LABEL_COPIED_FROM))
        .collect();
    let by_name: BTreeMap<String, &ClusterServiceVersion> =
        own.iter().map(|c| (c.name_any(), *c)).collect();
    let replaced = own.iter().filter_map(|c| {
        let name = c.spec.replaces.as_deref()?;
        by_name
            .get(name)
            .is_none_or(|old| c.replaces_now(old))
            .then(|| name.to_string())
    });
    let leaving = own
        .iter()
        .filter(|c| {
            matches!(
                c.status.as_ref().and_then(|s| s.phase),
                Some(CsvPhase::Replacing | CsvPhase::Deleting)
            )
        })
        .map(|c| c.name_any());
    replaced.chain(leaving).collect()
}

/// The names of the CSVs a status may call installed: not being deleted and not on their
/// way out, even when a rollback names one of those again.
pub fn staying_csvs(csvs: &[&ClusterServiceVersion]) -> BTreeSet<String> {
    let leaving = outgoing(csvs);
    csvs.iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .filter(|n| !leaving.contains(n))
        .collect()
}

/// `olm.gvk` of each API the CSV's spec owns: a CRD (`plural.group` name) and an API
/// service, as upstream reads a CSV it finds in the namespace.
fn owned_api_properties(csv: &ClusterServiceVersion) -> Vec<Property> {
    let crds = csv
        .spec
        .customresourcedefinitions
        .as_ref()
        .map(|d| d.owned.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|crd| {
            let (_, group) = crd.name.split_once('.')?;
            Some((group.to_string(), crd.version.clone(), crd.kind.clone()))
        });
    let api_services = csv
        .spec
        .apiservicedefinitions
        .as_ref()
        .map(|d| d.owned.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|a| (a.group.clone(), a.version.clone(), a.kind.clone()));
    crds.chain(api_services)
        .map(|(group, version, kind)| {
            Property::new(
                PROP_GVK,
                serde_json::json!({"group": group, "version": version, "kind": kind}),
            )
        })
        .collect()
}

/// `olm.package` of the properties annotation: (packageName, version).
fn package_property(csv: &ClusterServiceVersion) -> (Option<String>, Option<String>) {
    let Some(text) = csv.annotations().get(ANNOTATION_PROPERTIES) else {
        return (None, None);
    };
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return (None, None);
    };
    let Some(property) = value["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["type"] == crate::catalog::model::fbc::PROP_PACKAGE)
    else {
        return (None, None);
    };
    let s = |k: &str| property["value"][k].as_str().map(String::from);
    (s("packageName"), s("version"))
}

pub fn resolver_subscription(sub: &Subscription) -> resolver::Subscription {
    resolver::Subscription {
        name: sub.name_any(),
        package: sub.spec.name.clone(),
        channel: sub.spec.channel.clone(),
        source: CatalogRef::new(&sub.spec.source, &sub.spec.source_namespace),
        starting_csv: sub.spec.starting_csv.clone().filter(|s| !s.is_empty()),
        versions: resolver::VersionPolicy::default(),
    }
}

/// What resolving a namespace gave: the plan for the Subscriptions that resolve, and why
/// each of the others does not.
#[derive(Debug, Default)]
pub struct Resolution {
    pub plan: Plan,
    pub failures: BTreeMap<String, Failure>,
    /// Subscriptions whose step goes back to an older version (`rollbackTo`).
    pub rollbacks: BTreeSet<String>,
}

/// Resolves the namespace, keeping a Subscription that cannot be resolved from failing the
/// others (upstream fails them all, #3009): a Subscription with its own error (unknown
/// catalog or package, no such channel…) is set aside and the rest resolved again; when the
/// whole set is unsatisfiable, each Subscription is tried alone and those that fail alone are
/// set aside. Only a conflict between Subscriptions that each resolve alone fails them all.
pub fn resolve_namespace(index: &CatalogIndex, mut namespace: Namespace) -> Resolution {
    let mut failures = BTreeMap::new();
    loop {
        if namespace.subscriptions.is_empty() {
            return Resolution {
                failures,
                ..Resolution::default()
            };
        }
        match resolver::resolve(index, &namespace) {
            Ok(plan) => {
                return Resolution {
                    plan,
                    failures,
                    ..Resolution::default()
                };
            }
            Err(ResolveError::Subscription(e)) => {
                let name = e.subscription().to_string();
                let reason = match *e {
                    resolver::SubscriptionError::UnknownCatalog { .. } => {
                        SubscriptionReason::ErrorPreventedResolution
                    }
                    _ => SubscriptionReason::ConstraintsNotSatisfiable,
                };
                failures.insert(
                    name.clone(),
                    Failure {
                        reason,
                        message: e.to_string(),
                    },
                );
                namespace.subscriptions.retain(|s| s.name != name);
            }
            Err(ResolveError::NotSatisfiable(message)) => {
                let alone_failing: Vec<(String, String)> = if namespace.subscriptions.len() > 1 {
                    namespace
                        .subscriptions
                        .iter()
                        .filter_map(|s| {
                            let single = Namespace {
                                subscriptions: vec![s.clone()],
                                ..namespace.clone()
                            };
                            resolver::resolve(index, &single)
                                .err()
                                .map(|e| (s.name.clone(), e.to_string()))
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                if alone_failing.is_empty() {
                    for s in &namespace.subscriptions {
                        failures.insert(
                            s.name.clone(),
                            Failure {
                                reason: SubscriptionReason::ConstraintsNotSatisfiable,
                                message: message.clone(),
                            },
                        );
                    }
                    return Resolution {
                        failures,
                        ..Resolution::default()
                    };
                }
                for (name, message) in alone_failing {
                    failures.insert(
                        name.clone(),
                        Failure {
                            reason: SubscriptionReason::ConstraintsNotSatisfiable,
                            message,
                        },
                    );
                    namespace.subscriptions.retain(|s| s.name != name);
                }
            }
        }
    }
}

/// The bundles of one InstallPlan and the Subscriptions it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanGroup {
    pub subscriptions: BTreeSet<String>,
    pub steps: Vec<Step>,
}

impl PlanGroup {
    pub fn csv_names(&self) -> Vec<String> {
        self.steps.iter().map(|s| s.bundle.clone()).collect()
    }

    /// Manual when any of its Subscriptions is Manual.
    pub fn approval(&self, subs: &[&Subscription]) -> Approval {
        let manual = subs.iter().any(|s| {
            self.subscriptions.contains(&s.name_any())
                && s.spec.install_plan_approval == Some(Approval::Manual)
        });
        if manual {
            Approval::Manual
        } else {
            Approval::Automatic
        }
    }

    /// What the plan does for each Subscription it serves, when any of them has an
    /// upgrade policy (the plan then carries them, see [`super::policy`]); else none.
    pub fn targets(
        &self,
        subs: &[&Subscription],
        rollbacks: &BTreeSet<String>,
    ) -> Vec<super::policy::PlanTarget> {
        let governed = subs
            .iter()
            .any(|s| self.subscriptions.contains(&s.name_any()) && s.spec.upgrade_policy.is_some());
        if !governed {
            return Vec::new();
        }
        self.steps
            .iter()
            .filter_map(|step| match &step.reason {
                Reason::Subscribed { subscription } => Some(super::policy::PlanTarget {
                    subscription: subscription.clone(),
                    csv: step.bundle.clone(),
                    version: step.version.clone(),
                    first_install: step.replaces.is_none(),
                    rollback: rollbacks.contains(subscription),
                }),
                Reason::Dependency { .. } => None,
            })
            .collect()
    }

    pub fn planned_bundles(&self) -> Vec<PlannedBundle> {
        self.steps
            .iter()
            .map(|s| {
                let (subscription, generated_subscription) = match &s.reason {
                    Reason::Subscribed { subscription } => (Some(subscription.clone()), None),
                    Reason::Dependency {
                        generated_subscription,
                    } => (None, Some(generated_subscription.clone())),
                };
                PlannedBundle {
                    name: s.bundle.clone(),
                    package: s.package.clone(),
                    version: s.version.clone(),
                    channel: s.channel.clone(),
                    catalog: s.catalog.clone(),
                    catalog_namespace: s.catalog_namespace.clone(),
                    replaces: s.replaces.clone(),
                    subscription,
                    generated_subscription,
                    dependency_of: s.dependency_of.clone(),
                }
            })
            .collect()
    }
}

/// Splits a namespace's plan into one InstallPlan per Subscription, except that a
/// dependency ties every Subscription needing it (directly or through other new bundles)
/// into the same plan. So approving a Manual plan changes only what that plan names, and a
/// Manual Subscription never holds back an Automatic one it shares nothing with.
pub fn split(plan: &Plan) -> Vec<PlanGroup> {
    let n = plan.steps.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], i: usize) -> usize {
        let mut root = i;
        while parent[root] != root {
            root = parent[root];
        }
        let mut i = i;
        while parent[i] != root {
            let next = parent[i];
            parent[i] = root;
            i = next;
        }
        root
    }
    let by_bundle: BTreeMap<&str, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.bundle.as_str(), i))
        .collect();
    for (i, step) in plan.steps.iter().enumerate() {
        for dependent in &step.dependency_of {
            if let Some(&j) = by_bundle.get(dependent.as_str()) {
                let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                parent[a] = b;
            }
        }
    }
    let mut groups: Vec<(usize, PlanGroup)> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let root = find(&mut parent, i);
        let at = match groups.iter().position(|(r, _)| *r == root) {
            Some(at) => at,
            None => {
                groups.push((
                    root,
                    PlanGroup {
                        subscriptions: BTreeSet::new(),
                        steps: Vec::new(),
                    },
                ));
                groups.len() - 1
            }
        };
        let group = &mut groups[at].1;
        if let Reason::Subscribed { subscription } = &step.reason {
            group.subscriptions.insert(subscription.clone());
        }
        group.steps.push(step.clone());
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// Whether a plan for these CSVs already exists.
#[derive(Debug, PartialEq, Eq)]
pub enum Existing {
    /// A plan not yet Complete names exactly these CSVs, or a plan on its way names them
    /// among others: use it, create nothing.
    Reuse(String),
    /// Only a Complete plan names them: the CSVs may be in flight to the cache; check the
    /// API server before planning them again.
    Completed(String),
    None,
}

/// The CSVs `plan` names, as a set.
fn named_csvs(plan: &InstallPlan) -> BTreeSet<&str> {
    plan.spec
        .cluster_service_version_names
        .iter()
        .map(String::as_str)
        .collect()
}

/// Whether `plan` names exactly the CSVs `csv_names` (in any order).
pub fn names_exactly(plan: &InstallPlan, csv_names: &[String]) -> bool {
    named_csvs(plan) == csv_names.iter().map(String::as_str).collect()
}

/// The plan that carries `csv_names` out already, if any. Besides a plan of exactly these
/// CSVs, a plan that is not Failed and names them among others counts: a dependency's
/// generated Subscription can reach the cache before its CSV does, and its CSV is in the
/// plan of the Subscription that needed it.
pub fn existing_plan(csv_names: &[String], plans: &[&InstallPlan]) -> Existing {
    let wanted: BTreeSet<&str> = csv_names.iter().map(String::as_str).collect();
    let mut matching: Vec<(bool, &InstallPlan)> = plans
        .iter()
        .copied()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let named = named_csvs(p);
            if named == wanted {
                Some((true, p))
            } else {
                let covers = !wanted.is_empty()
                    && named.is_superset(&wanted)
                    && p.phase() != InstallPlanPhase::Failed;
                covers.then_some((false, p))
            }
        })
        .collect();
    // Exact plans first, then the newest.
    matching.sort_by_key(|(exact, p)| (!exact, std::cmp::Reverse(p.spec.generation.unwrap_or(0))));
    if let Some((_, p)) = matching
        .iter()
        .find(|(_, p)| p.phase() != InstallPlanPhase::Complete)
    {
        return Existing::Reuse(p.name_any());
    }
    match matching.first() {
        Some((_, p)) => Existing::Completed(p.name_any()),
        None => Existing::None,
    }
}

/// A plan still on its way (not Complete, not Failed).
pub fn in_progress(phase: InstallPlanPhase) -> bool {
    !matches!(phase, InstallPlanPhase::Complete | InstallPlanPhase::Failed)
}

/// The plan a Subscription is held to: its referenced plan, while that is in progress.
/// Upstream blocks re-resolution of such a Subscription the same way (UpgradePending).
pub fn pinned_plan<'a>(sub: &Subscription, plans: &[&'a InstallPlan]) -> Option<&'a InstallPlan> {
    let name = sub
        .status
        .as_ref()?
        .install_plan_ref
        .as_ref()?
        .name
        .as_deref()?;
    plans
        .iter()
        .copied()
        .find(|p| p.name_any() == name && in_progress(p.phase()))
}

/// The next `spec.generation`: one more than any plan of the namespace.
pub fn next_generation(plans: &[&InstallPlan]) -> i32 {
    plans
        .iter()
        .filter_map(|p| p.spec.generation)
        .max()
        .unwrap_or(0)
        .saturating_add(1)
}

/// What a round resolved and planned, as the status step reads it.
pub struct Round<'a> {
    pub resolution: &'a Resolution,
    /// Every plan of the namespace: listed fresh, plus those this round created.
    pub plans: &'a [&'a InstallPlan],
    /// The new or adopted plan of each Subscription that has one this round.
    pub plan_of: &'a BTreeMap<String, String>,
    /// CSVs present in the namespace.
    pub csvs: &'a BTreeSet<String>,
    /// The live CSV of each package (the resolver's installed set: none on its way out).
    pub installed_by_package: &'a BTreeMap<String, String>,
    pub catalogs: &'a [CatalogHealth],
    /// Waiting plans deleted this round because the policy no longer allows them.
    pub withdrawn: &'a BTreeSet<String>,
    pub now: Time,
}

/// The status step's decisions: one status per Subscription (in order), and the plans to
/// delete.
#[derive(Debug)]
pub struct Statuses {
    pub desired: Vec<SubscriptionStatus>,
    pub prune: Vec<String>,
}

/// Every Subscription's status after a round, and the old plans none of them points to
/// that exceed `keep`.
pub fn statuses(subs: &[&Subscription], round: &Round<'_>, keep: usize) -> Statuses {
    let outcomes: BTreeMap<&str, &Outcome> = round
        .resolution
        .plan
        .subscriptions
        .iter()
        .map(|r| (r.subscription.as_str(), &r.outcome))
        .collect();
    let held: BTreeMap<&str, &Held> = round
        .resolution
        .plan
        .subscriptions
        .iter()
        .filter_map(|r| Some((r.subscription.as_str(), r.held.as_ref()?)))
        .collect();
    let find_plan = |name: &str| round.plans.iter().copied().find(|p| p.name_any() == name);
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    let mut desired = Vec::with_capacity(subs.len());
    for sub in subs {
        let name = sub.name_any();
        let referenced_name = sub
            .status
            .as_ref()
            .and_then(|s| s.install_plan_ref.as_ref())
            .and_then(|r| r.name.clone());
        // A plan the policy withdrew is forgotten, not missing.
        let withdrawn = referenced_name
            .as_ref()
            .is_some_and(|r| round.withdrawn.contains(r));
        let referenced_name = referenced_name.filter(|_| !withdrawn);
        let (outcome, plan) = match (pinned_plan(sub, round.plans), round.plan_of.get(&name)) {
            (Some(p), _) => (None, Some(p)),
            (None, Some(new)) => (outcomes.get(name.as_str()).copied(), find_plan(new)),
            // Nothing new to plan: the plan it references (if still there) tells how the
            // last install went (a Failed one shows as InstallPlanFailed, as upstream).
            // A generated dependency Subscription refers to the plan that created it.
            (None, None) => (
                outcomes.get(name.as_str()).copied(),
                match referenced_name.as_deref() {
                    Some(r) => find_plan(r),
                    None => generating_plan(sub, round.plans),
                },
            ),
        };
        // Also once installed (AtLatestKnown): upstream says so whenever the plan a
        // Subscription references is gone, however the install went.
        let plan_missing = plan.is_none()
            && referenced_name
                .as_deref()
                .is_some_and(|r| find_plan(r).is_none());
        let input = StatusInput {
            failure: round.resolution.failures.get(&name),
            outcome,
            plan,
            plan_missing,
            installed_of_package: round
                .installed_by_package
                .get(&sub.spec.name)
                .map(String::as_str),
            csvs: round.csvs,
            catalogs: round.catalogs,
            held: held.get(name.as_str()).copied(),
            now: round.now.clone(),
        };
        let mut status = desired_status(sub, &input);
        if withdrawn && plan.is_none() {
            status.install_plan_ref = None;
            status.installplan = None;
            status.install_plan_generation = None;
        }
        if let Some(r) = status
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.clone())
        {
            referenced.insert(r);
        }
        desired.push(status);
    }
    Statuses {
        desired,
        prune: plans_to_prune(round.plans, &referenced, keep),
    }
}

/// Plans to delete so that at most `keep` remain: the oldest finished ones no Subscription
/// points to.
pub fn plans_to_prune(
    plans: &[&InstallPlan],
    referenced: &BTreeSet<String>,
    keep: usize,
) -> Vec<String> {
    let mut candidates: Vec<&&InstallPlan> = plans
        .iter()
        .filter(|p| !in_progress(p.phase()) && !referenced.contains(&p.name_any()))
        .collect();
    candidates.sort_by_key(|p| p.spec.generation.unwrap_or(0));
    let excess = plans.len().saturating_sub(keep);
    candidates
        .into_iter()
        .take(excess)
        .map(|p| p.name_any())
        .collect()
}

/// A CatalogSource as a Subscription's `catalogHealth` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogHealth {
    pub source: CatalogRef,
    pub uid: Option<String>,
    pub healthy: bool,
}

/// Everything one Subscription's status is computed from.
pub struct StatusInput<'a> {
    pub failure: Option<&'a Failure>,
    /// What resolution decided for it (None when it failed or is held by its plan).
    pub outcome: Option<&'a Outcome>,
    /// The plan it points to now (a new one, an adopted one, or the one it is held to).
    pub plan: Option<&'a InstallPlan>,
    /// The plan it referenced is gone and none replaced it.
    pub plan_missing: bool,
    /// The live CSV of its package, if any.
    pub installed_of_package: Option<&'a str>,
    /// CSVs present in the namespace.
    pub csvs: &'a BTreeSet<String>,
    pub catalogs: &'a [CatalogHealth],
    /// A newer bundle its upgrade policy kept it from.
    pub held: Option<&'a Held>,
    pub now: Time,
}

pub fn desired_status(sub: &Subscription, input: &StatusInput<'_>) -> SubscriptionStatus {
    let previous = sub.status.clone().unwrap_or_default();
    let mut status = SubscriptionStatus {
        current_csv: previous.current_csv.clone(),
        installed_csv: previous.installed_csv.clone(),
        replaced_csv: previous.replaced_csv.clone(),
        install_plan_generation: previous.install_plan_generation,
        install_plan_ref: previous.install_plan_ref.clone(),
        installplan: previous.installplan.clone(),
        state: previous.state,
        reason: None,
        catalog_health: catalog_health(&previous, input.catalogs, &input.now),
        conditions: Vec::new(),
        last_updated: previous.last_updated.clone(),
    };
    if let Some(plan) = input.plan {
        refer_to_plan(&mut status, plan);
    }
    match input.outcome {
        Some(Outcome::AtLatestKnown { csv }) => status.current_csv = Some(csv.clone()),
        Some(Outcome::Install { bundle: to } | Outcome::Upgrade { to, .. }) => {
            status.current_csv = Some(to.clone());
        }
        None => {}
    }
    let exists = |name: &Option<String>| name.as_ref().is_some_and(|n| input.csvs.contains(n));
    status.installed_csv = installed_csv(&status, &previous, input, exists);
    // What the installed CSV replaced here: where a rollback goes back to.
    if previous.installed_csv.is_some() && status.installed_csv != previous.installed_csv {
        status.replaced_csv.clone_from(&previous.installed_csv);
    }
    let plan_phase = input.plan.map(InstallPlan::phase);
    status.state = match (plan_phase, input.failure) {
        (Some(phase), _) if in_progress(phase) => Some(SubscriptionState::UpgradePending),
        _ if status.current_csv.is_some() && exists(&status.current_csv) => {
            Some(SubscriptionState::AtLatestKnown)
        }
        (_, Some(_)) => previous.state,
        _ if status.current_csv.is_some() => Some(SubscriptionState::UpgradePending),
        _ => previous.state,
    };
    let mut conditions = conditions(sub, &previous, input);
    // A condition that keeps its status keeps its transition time.
    for c in &mut conditions {
        let kept = previous
            .conditions
            .iter()
            .find(|p| p.type_ == c.type_ && p.status == c.status)
            .and_then(|p| p.last_transition_time.clone());
        c.last_transition_time = Some(kept.unwrap_or_else(|| input.now.clone()));
    }
    status.conditions = conditions;

    let mut unchanged_base = previous;
    unchanged_base.last_updated = None;
    let mut compared = status.clone();
    compared.last_updated = None;
    if compared != unchanged_base || status.last_updated.is_none() {
        status.last_updated = Some(input.now.clone());
    }
    status
}

/// The CSV the Subscription has installed, as upstream keeps it: the current one once it
/// exists; else the live CSV of its package (a round that resolves the next hop, or a plan
/// waiting for approval, moves `currentCSV` on before its CSV exists); else the CSV the
/// hop upgrades from, the one recorded, or the previous current one, whichever exists.
/// Empty only while no CSV of the Subscription exists.
fn installed_csv(
    status: &SubscriptionStatus,
    previous: &SubscriptionStatus,
    input: &StatusInput<'_>,
    exists: impl Fn(&Option<String>) -> bool,
) -> Option<String> {
    let live = input.installed_of_package.map(str::to_string);
    let upgraded_from = match input.outcome {
        Some(Outcome::Upgrade { from, .. }) => Some(from.clone()),
        _ => None,
    };
    [
        &status.current_csv,
        &live,
        &upgraded_from,
        &status.installed_csv,
        &previous.current_csv,
    ]
    .into_iter()
    .find(|name| exists(name))
    .cloned()
    .flatten()
}

/// `CatalogSourcesUnhealthy` as upstream computes it: True when the catalog the
/// Subscription names is missing or any catalog it sees is unhealthy; the message names the
/// targeted catalog when it is the one at fault, else the unhealthy ones.
fn catalog_sources_unhealthy(
    sub: &Subscription,
    catalogs: &[CatalogHealth],
) -> SubscriptionCondition {
    const TYPE: &str = "CatalogSourcesUnhealthy";
    let targeted = CatalogRef::new(&sub.spec.source, &sub.spec.source_namespace);
    let unhealthy: Vec<String> = catalogs
        .iter()
        .filter(|c| !c.healthy)
        .map(|c| c.source.to_string())
        .collect();
    let message = match catalogs.iter().find(|c| c.source == targeted) {
        None if !sub.spec.source.is_empty() => {
            format!("targeted catalogsource {targeted} missing")
        }
        Some(c) if !c.healthy => format!("targeted catalogsource {targeted} unhealthy"),
        _ if unhealthy.is_empty() => {
            return condition(
                TYPE,
                ConditionStatus::False,
                SubscriptionReason::AllCatalogSourcesHealthy,
                "all available catalogsources are healthy".into(),
            );
        }
        _ => format!("catalogsource {} unhealthy", unhealthy.join(", ")),
    };
    condition(
        TYPE,
        ConditionStatus::True,
        SubscriptionReason::UnhealthyCatalogSourceFound,
        message,
    )
}

/// The plan that created `sub` as a dependency's Subscription: the one its
/// `olm.generated-by` annotation names (upstream's value), else the one with a step that
/// creates it (ours name the dependent bundles there).
fn generating_plan<'a>(sub: &Subscription, plans: &[&'a InstallPlan]) -> Option<&'a InstallPlan> {
    let generated_by = sub
        .annotations()
        .get(crate::controllers::plan::steps::ANNOTATION_GENERATED_BY)?;
    let name = sub.name_any();
    plans
        .iter()
        .copied()
        .find(|p| p.name_any() == *generated_by)
        .or_else(|| {
            plans.iter().copied().find(|p| {
                p.status.as_ref().is_some_and(|s| {
                    s.plan.iter().any(|step| {
                        step.resource.kind == crate::controllers::plan::steps::KIND_SUBSCRIPTION
                            && step.resource.name == name
                    })
                })
            })
        })
}

/// Points `status` at `plan` (both of upstream's references, and its generation).
fn refer_to_plan(status: &mut SubscriptionStatus, plan: &InstallPlan) {
    let uid = plan.metadata.uid.clone().unwrap_or_default();
    status.install_plan_ref = Some(ObjectReference {
        api_version: Some(InstallPlan::api_version(&()).into_owned()),
        kind: Some(InstallPlan::kind(&()).into_owned()),
        name: Some(plan.name_any()),
        namespace: plan.namespace(),
        uid: Some(uid.clone()),
        ..ObjectReference::default()
    });
    status.installplan = Some(InstallPlanReference {
        api_version: InstallPlan::api_version(&()).into_owned(),
        kind: InstallPlan::kind(&()).into_owned(),
        name: plan.name_any(),
        uuid: uid,
    });
    status.install_plan_generation = plan.spec.generation;
}

/// The conditions a round shows: catalog health, a resolution failure, and how the plan
/// went (pending, failed, missing).
fn conditions(
    sub: &Subscription,
    previous: &SubscriptionStatus,
    input: &StatusInput<'_>,
) -> Vec<SubscriptionCondition> {
    let mut conditions = vec![catalog_sources_unhealthy(sub, input.catalogs)];
    if let Some(failure) = input.failure {
        conditions.push(condition(
            "ResolutionFailed",
            ConditionStatus::True,
            failure.reason,
            failure.message.clone(),
        ));
    }
    if let Some(plan) = input.plan {
        let pending = |reason| {
            condition(
                "InstallPlanPending",
                ConditionStatus::True,
                reason,
                pending_message(plan),
            )
        };
        match plan.phase() {
            InstallPlanPhase::RequiresApproval => {
                conditions.push(pending(SubscriptionReason::RequiresApproval));
            }
            InstallPlanPhase::Complete => {}
            InstallPlanPhase::Failed => conditions.push(plan_failed(plan)),
            InstallPlanPhase::None => {
                conditions.push(pending(SubscriptionReason::InstallPlanNotYetReconciled));
            }
            InstallPlanPhase::Planning => conditions.push(pending(SubscriptionReason::Planning)),
            InstallPlanPhase::Installing => {
                conditions.push(pending(SubscriptionReason::Installing));
            }
        }
    } else if input.plan_missing {
        let name = previous
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        conditions.push(condition(
            "InstallPlanMissing",
            ConditionStatus::True,
            SubscriptionReason::ReferencedInstallPlanNotFound,
            format!("InstallPlan {name} referenced by this Subscription does not exist"),
        ));
    }
    conditions.extend(super::policy::explain(
        sub,
        input.plan,
        input.held,
        input.now.0,
    ));
    conditions
}

fn condition(
    type_: &str,
    status: ConditionStatus,
    reason: SubscriptionReason,
    message: String,
) -> SubscriptionCondition {
    Cond::new(type_, status, reason, message).into_subscription()
}

/// What a pending plan says, as upstream relays it: its Installed condition's message, else
/// the messages of its bundle lookups still pending, else nothing.
fn pending_message(plan: &InstallPlan) -> String {
    let Some(status) = &plan.status else {
        return String::new();
    };
    if let Some(message) = status
        .conditions
        .iter()
        .find(|c| c.type_.as_deref() == Some("Installed") && c.status.as_deref() != Some("Unknown"))
        .and_then(|c| c.message.clone())
        .filter(|m| !m.is_empty())
    {
        return message;
    }
    status
        .bundle_lookups
        .iter()
        .filter_map(|l| {
            l.conditions
                .iter()
                .find(|c| c.type_.as_deref() == Some("BundleLookupPending"))
                .and_then(|c| c.message.clone())
                .filter(|m| !m.is_empty())
        })
        .map(|m| format!("{m}."))
        .collect::<Vec<_>>()
        .join(" ")
}

/// InstallPlanFailed for a failed `plan`: with the reason the plan gives on its Installed
/// condition, as upstream passes it on, else a reason of our own.
fn plan_failed(plan: &InstallPlan) -> SubscriptionCondition {
    const TYPE: &str = "InstallPlanFailed";
    let status = plan.status.as_ref();
    let message = Some(pending_message(plan))
        .filter(|m| !m.is_empty())
        .or_else(|| status.and_then(|s| s.message.clone()))
        .unwrap_or_else(|| format!("InstallPlan {} failed", plan.name_any()));
    // Relayed only from an Installed=False condition, as upstream.
    let plans_reason = status
        .and_then(|s| {
            s.conditions.iter().find(|c| {
                c.type_.as_deref() == Some("Installed") && c.status.as_deref() == Some("False")
            })
        })
        .and_then(|c| c.reason.clone());
    match plans_reason {
        Some(reason) => Cond::relaying_reason(TYPE, ConditionStatus::True, reason, message),
        None => Cond::new(
            TYPE,
            ConditionStatus::True,
            SubscriptionReason::InstallPlanFailed,
            message,
        ),
    }
    .into_subscription()
}

/// One entry per visible catalog; an entry keeps its `lastUpdated` while its health holds.
fn catalog_health(
    previous: &SubscriptionStatus,
    catalogs: &[CatalogHealth],
    now: &Time,
) -> Vec<SubscriptionCatalogHealth> {
    catalogs
        .iter()
        .map(|c| {
            let reference = ObjectReference {
                api_version: Some(crate::api::CatalogSource::api_version(&()).into_owned()),
                kind: Some(crate::api::CatalogSource::kind(&()).into_owned()),
                name: Some(c.source.name.clone()),
                namespace: Some(c.source.namespace.clone()),
                uid: c.uid.clone(),
                ..ObjectReference::default()
            };
            let last_updated = previous
                .catalog_health
                .iter()
                .find(|p| p.catalog_source_ref == reference && p.healthy == c.healthy)
                .and_then(|p| p.last_updated.clone())
                .unwrap_or_else(|| now.clone());
            SubscriptionCatalogHealth {
                catalog_source_ref: reference,
                healthy: c.healthy,
                last_updated: Some(last_updated),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
