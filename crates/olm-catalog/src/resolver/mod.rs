//! The resolver: given the catalogs a namespace sees, what it runs and what it subscribes
//! to, decide what to install or upgrade next, or explain why nothing can be.
//!
//! Pure: no API server, no async. Flow: [`CatalogIndex`] (parsed once per catalog change)
//! → [`subscriptions`] (each Subscription's candidates, from its channel graph) →
//! [`candidates`] (the dependency problem, lazily) → [`solver`] (a SAT solver behind our
//! trait) → [`plan`] (install order and reasons) or [`explain`] (why not).
//! Upstream's rules: `../shared/reference/olm-v0.md` §2 "Upgrades" and §3 "Resolver".

pub mod candidates;
pub mod cel;
pub mod channel_graph;
pub mod constraints;
pub mod error;
pub mod explain;
pub mod index;
pub mod input;
pub mod plan;
mod properties;
pub mod rollback;
pub mod solver;
pub mod subscriptions;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

pub use error::{ResolveError, SubscriptionError};
pub use index::CatalogIndex;
pub use input::{Catalog, CatalogRef, InstalledCsv, Namespace, Subscription, VersionPolicy};
pub use plan::{Held, Outcome, Plan, Reason, Step, SubscriptionResult};
pub use rollback::{RollbackError, rollback_step};
pub use solver::{ResolvoSolver, Solver};

use candidates::{Choice, OlmProblem};
use solver::Clause;

/// Resolves with the default solver.
pub fn resolve(index: &CatalogIndex, namespace: &Namespace) -> Result<Plan, ResolveError> {
    resolve_with(&ResolvoSolver, index, namespace)
}

pub fn resolve_with(
    solver: &dyn Solver,
    index: &CatalogIndex,
    namespace: &Namespace,
) -> Result<Plan, ResolveError> {
    let targets = (0..namespace.subscriptions.len())
        .map(|i| subscriptions::target(index, namespace, i))
        .collect::<Result<Vec<_>, _>>()?;
    let problem = OlmProblem::new(index, namespace);

    let mut mandatory = Vec::new();
    for target in &targets {
        let sub = &namespace.subscriptions[target.subscription];
        let mut alternatives: Vec<_> = target
            .candidates
            .iter()
            .map(|b| problem.choice_id(Choice::Bundle(*b)))
            .collect();
        alternatives.extend(
            target
                .installed
                .map(|i| problem.choice_id(Choice::Installed(i))),
        );
        let label = format!(
            "subscription {} (package {}, channel {}, catalog {})",
            sub.name, sub.package, target.channel, index.catalogs[target.catalog].source
        );
        mandatory.push(Clause {
            label,
            alternatives,
        });
    }
    // CSVs no Subscription owns stay exactly as they are (upstream: "unowned existing CSVs
    // are mandatory").
    let subscribed: BTreeSet<&str> = namespace
        .subscriptions
        .iter()
        .map(|s| s.package.as_str())
        .collect();
    for (i, csv) in namespace.installed.iter().enumerate() {
        if !subscribed.contains(csv.package.as_str()) {
            let label = format!(
                "installed CSV {} (package {}, no subscription)",
                csv.name, csv.package
            );
            mandatory.push(Clause {
                label,
                alternatives: vec![problem.choice_id(Choice::Installed(i))],
            });
        }
    }

    match solver.solve(&problem, mandatory.clone()) {
        Ok(chosen) => Ok(plan::build(&problem, &targets, &chosen)),
        Err(unsat) => Err(ResolveError::NotSatisfiable(explain::explain(
            &problem,
            &mandatory,
            &unsat.detail,
        ))),
    }
}
