//! The answer: bundles to install in order (dependencies before their dependents), each
//! with why, and what became of each Subscription.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use serde::Serialize;

use super::candidates::{Choice, OlmProblem};
use super::solver::{ChoiceId, Problem};
use super::subscriptions::Target;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub package: String,
    pub bundle: String,
    pub version: String,
    pub catalog: String,
    pub catalog_namespace: String,
    pub channel: String,
    /// The installed CSV this bundle replaces.
    pub replaces: Option<String>,
    /// Bundles (new or installed) that need this one; empty for a subscribed bundle.
    pub dependency_of: Vec<String>,
    #[serde(skip)]
    pub reason: Reason,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    Subscribed {
        subscription: String,
    },
    /// Pulled in by a dependency; upstream creates this Subscription for it.
    Dependency {
        generated_subscription: String,
    },
}

/// What became of one Subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Install { bundle: String },
    Upgrade { from: String, to: String },
    AtLatestKnown { csv: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionResult {
    pub subscription: String,
    pub outcome: Outcome,
    /// A newer bundle the Subscription's version policy kept it from.
    pub held: Option<Held>,
}

/// A bundle a version policy kept out, and the policy's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub bundle: String,
    pub version: String,
    pub policy: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub subscriptions: Vec<SubscriptionResult>,
}

/// Upstream's name for a Subscription it generates for a dependency.
pub fn generated_subscription_name(
    package: &str,
    channel: &str,
    catalog: &str,
    catalog_namespace: &str,
) -> String {
    format!("{package}-{channel}-{catalog}-{catalog_namespace}")
}

pub fn build(problem: &OlmProblem<'_>, targets: &[Target], chosen: &[ChoiceId]) -> Plan {
    let new_bundles: BTreeSet<ChoiceId> = chosen
        .iter()
        .copied()
        .filter(|c| matches!(problem.choice(*c), Choice::Bundle(_)))
        .collect();
    let edges = dependency_edges(problem, chosen);
    let mut plan = Plan::default();
    let mut subscribed: BTreeMap<ChoiceId, &Target> = BTreeMap::new();
    for target in targets {
        let (result, to) = outcome(problem, target, chosen);
        if let Some(to) = to {
            subscribed.insert(to, target);
        }
        plan.subscriptions.push(result);
    }

    // Install order: each subscription's bundle after its dependencies, depth first.
    let mut order: Vec<ChoiceId> = Vec::new();
    let mut visited: HashSet<ChoiceId> = HashSet::new();
    let roots: Vec<ChoiceId> = targets
        .iter()
        .filter_map(|t| {
            subscribed
                .iter()
                .find(|(_, s)| s.subscription == t.subscription)
                .map(|(c, _)| *c)
        })
        .chain(new_bundles.iter().copied())
        .collect();
    for root in roots {
        visit(root, &edges.needs, &new_bundles, &mut visited, &mut order);
    }
    plan.steps = order
        .into_iter()
        .filter_map(|c| step(problem, c, subscribed.get(&c).copied(), &edges))
        .collect();
    plan
}

/// Which chosen choice needs which (dependent -> dependencies), and the names of what needs
/// each dependency; from the first chosen alternative of each clause.
struct Edges {
    needs: BTreeMap<ChoiceId, BTreeSet<ChoiceId>>,
    needed_by: BTreeMap<ChoiceId, BTreeSet<String>>,
}

fn dependency_edges(problem: &OlmProblem<'_>, chosen: &[ChoiceId]) -> Edges {
    let chosen_set: HashSet<ChoiceId> = chosen.iter().copied().collect();
    let is_chosen = |c: ChoiceId| match problem.choice(c) {
        Choice::Token { provider, .. } => chosen_set.contains(&provider),
        _ => chosen_set.contains(&c),
    };
    let provider_of = |c: ChoiceId| match problem.choice(c) {
        Choice::Token { provider, .. } => provider,
        _ => c,
    };
    let mut edges = Edges {
        needs: BTreeMap::new(),
        needed_by: BTreeMap::new(),
    };
    for &dependent in chosen {
        if matches!(problem.choice(dependent), Choice::Token { .. }) {
            continue;
        }
        for clause in problem.requirements(dependent) {
            let Some(dependency) = clause
                .alternatives
                .iter()
                .copied()
                .find(|a| is_chosen(*a))
                .map(provider_of)
            else {
                continue;
            };
            if dependency == dependent {
                continue;
            }
            edges.needs.entry(dependent).or_default().insert(dependency);
            edges
                .needed_by
                .entry(dependency)
                .or_default()
                .insert(choice_name(problem, dependent));
        }
    }
    edges
}

/// What resolution decided for one Subscription, and the bundle it installs (if any).
fn outcome(
    problem: &OlmProblem<'_>,
    target: &Target,
    chosen: &[ChoiceId],
) -> (SubscriptionResult, Option<ChoiceId>) {
    let sub = &problem.namespace.subscriptions[target.subscription];
    let installed = target
        .installed
        .map(|i| problem.choice_id(Choice::Installed(i)));
    let to = target
        .candidates
        .iter()
        .map(|b| problem.choice_id(Choice::Bundle(*b)))
        .find(|c| chosen.contains(c));
    let outcome = match (installed, to) {
        (Some(i), Some(to)) => Outcome::Upgrade {
            from: choice_name(problem, i),
            to: choice_name(problem, to),
        },
        (None, Some(to)) => Outcome::Install {
            bundle: choice_name(problem, to),
        },
        (Some(i), None) => Outcome::AtLatestKnown {
            csv: choice_name(problem, i),
        },
        (None, None) => unreachable!("a satisfied subscription has a chosen candidate"),
    };
    let held = target.held.as_ref().map(|(bundle, policy)| {
        let info = &problem.index.bundles[*bundle];
        Held {
            bundle: info.name.clone(),
            version: info
                .version
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            policy: policy.clone(),
        }
    });
    let result = SubscriptionResult {
        subscription: sub.name.clone(),
        outcome,
        held,
    };
    (result, to)
}

/// The install step of a chosen bundle: for a Subscription's target, or as a dependency
/// (with the Subscription upstream generates for it). None for what is not a new bundle.
fn step(
    problem: &OlmProblem<'_>,
    c: ChoiceId,
    target: Option<&Target>,
    edges: &Edges,
) -> Option<Step> {
    let Choice::Bundle(b) = problem.choice(c) else {
        return None;
    };
    let bundle = &problem.index.bundles[b];
    let catalog = &problem.index.catalogs[bundle.catalog].source;
    let (channel, reason, replaces) = match target {
        Some(target) => {
            let sub = &problem.namespace.subscriptions[target.subscription];
            let replaces = target
                .installed
                .map(|i| problem.namespace.installed[i].name.clone());
            (
                target.channel.clone(),
                Reason::Subscribed {
                    subscription: sub.name.clone(),
                },
                replaces,
            )
        }
        None => {
            let channel = bundle
                .channel
                .as_ref()
                .map(|(c, _)| c.clone())
                .unwrap_or_default();
            let generated_subscription = generated_subscription_name(
                &bundle.package,
                &channel,
                &catalog.name,
                &catalog.namespace,
            );
            (
                channel,
                Reason::Dependency {
                    generated_subscription,
                },
                None,
            )
        }
    };
    Some(Step {
        package: bundle.package.clone(),
        bundle: bundle.name.clone(),
        version: bundle
            .version
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        catalog: catalog.name.clone(),
        catalog_namespace: catalog.namespace.clone(),
        channel,
        replaces,
        dependency_of: edges
            .needed_by
            .get(&c)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default(),
        reason,
    })
}

fn visit(
    c: ChoiceId,
    needs: &BTreeMap<ChoiceId, BTreeSet<ChoiceId>>,
    new_bundles: &BTreeSet<ChoiceId>,
    visited: &mut HashSet<ChoiceId>,
    order: &mut Vec<ChoiceId>,
) {
    if !new_bundles.contains(&c) || !visited.insert(c) {
        return;
    }
    for &d in needs.get(&c).into_iter().flatten() {
        visit(d, needs, new_bundles, visited, order);
    }
    order.push(c);
}

fn choice_name(problem: &OlmProblem<'_>, c: ChoiceId) -> String {
    match problem.choice(c) {
        Choice::Bundle(b) => problem.index.bundles[b].name.clone(),
        Choice::Installed(i) => problem.namespace.installed[i].name.clone(),
        Choice::Token { provider, .. } => choice_name(problem, provider),
    }
}

impl fmt::Display for Step {
    /// One line: what, from where, and why.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.replaces.is_some() {
            "upgrade to"
        } else {
            "install"
        };
        write!(
            f,
            "{verb} {} ({} {}) from catalog {}/{} channel {}: ",
            self.bundle,
            self.package,
            self.version,
            self.catalog_namespace,
            self.catalog,
            self.channel
        )?;
        match &self.reason {
            Reason::Subscribed { subscription } => match &self.replaces {
                Some(old) => write!(f, "subscription {subscription}, replacing {old}"),
                None => write!(f, "subscription {subscription}"),
            },
            Reason::Dependency {
                generated_subscription,
            } => {
                write!(
                    f,
                    "dependency of {} (generated subscription {generated_subscription})",
                    self.dependency_of.join(", ")
                )
            }
        }
    }
}
