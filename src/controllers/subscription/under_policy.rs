//! Resolution under upgrade policies (pure): each Subscription's limits become the
//! resolver's version policy, and a Subscription whose `rollbackTo` is older than what it
//! has installed is taken out of the solve and given its rollback step instead. No channel
//! edge leads back, so the resolver never plans one; the step replaces the installed CSV
//! as an upgrade would.

use std::collections::BTreeMap;

use super::decide::{Failure, Resolution, resolve_namespace};
use super::policy::{Limit, Policy};
use crate::api::SubscriptionReason;
use crate::resolver::{
    CatalogIndex, InstalledCsv, Namespace, Outcome, SubscriptionResult, rollback_step,
};

/// Resolves `namespace` with each Subscription held to its policy (`policies`, by name).
pub fn resolve_under_policies(
    index: &CatalogIndex,
    mut namespace: Namespace,
    mut policies: BTreeMap<String, Policy>,
) -> Resolution {
    let mut failures = BTreeMap::new();
    let mut rollbacks = Vec::new();
    namespace.subscriptions.retain_mut(|sub| {
        let Some(policy) = policies.get_mut(&sub.name) else {
            return true;
        };
        if let Some(csv) = policy.rollback_csv.take() {
            match version_of(index, sub, &csv) {
                Some(version) => policy.limits.push(Limit::RollbackTo(version)),
                None => {
                    failures.insert(sub.name.clone(), no_such_csv(&sub.package, &csv));
                    return false;
                }
            }
        }
        match policy.versions() {
            Ok(versions) => sub.versions = versions,
            Err(error) => {
                failures.insert(sub.name.clone(), invalid(error.to_string()));
                return false;
            }
        }
        let installed = namespace
            .installed
            .iter()
            .find(|csv| csv.package == sub.package);
        match (policy.rollback_to(), installed) {
            (Some(to), Some(installed)) if installed.version > *to => {
                rollbacks.push((sub.clone(), installed.clone(), to.clone()));
                false
            }
            _ => true,
        }
    });
    let mut resolution = resolve_namespace(index, namespace);
    resolution.failures.extend(failures);
    for (sub, installed, to) in rollbacks {
        add_rollback(index, &mut resolution, &sub, &installed, &to);
    }
    resolution
}

/// The rollback step of `sub`, or why there is none.
fn add_rollback(
    index: &CatalogIndex,
    resolution: &mut Resolution,
    sub: &crate::resolver::Subscription,
    installed: &InstalledCsv,
    to: &semver::Version,
) {
    match rollback_step(index, sub, installed, to) {
        Ok(step) => {
            resolution.plan.subscriptions.push(SubscriptionResult {
                subscription: sub.name.clone(),
                outcome: Outcome::Upgrade {
                    from: installed.name.clone(),
                    to: step.bundle.clone(),
                },
                held: None,
            });
            resolution.plan.steps.push(step);
            resolution.rollbacks.insert(sub.name.clone());
        }
        Err(error) => {
            resolution.failures.insert(
                sub.name.clone(),
                Failure {
                    reason: SubscriptionReason::ConstraintsNotSatisfiable,
                    message: format!("rollbackTo {to}: {error}"),
                },
            );
        }
    }
}

/// The version of bundle `csv` of the Subscription's package in its catalog.
fn version_of(
    index: &CatalogIndex,
    sub: &crate::resolver::Subscription,
    csv: &str,
) -> Option<semver::Version> {
    let catalog = index.catalog_id(&sub.source)?;
    let bundle = *index.catalogs[catalog]
        .packages
        .get(&sub.package)?
        .bundles
        .get(csv)?;
    index.bundles[bundle].version.clone()
}

fn no_such_csv(package: &str, csv: &str) -> Failure {
    Failure {
        reason: SubscriptionReason::ConstraintsNotSatisfiable,
        message: format!(
            "spec.upgradePolicy.rollbackTo {csv:?} is neither a version nor a bundle of package {package} in the Subscription's catalog"
        ),
    }
}

fn invalid(message: String) -> Failure {
    Failure {
        reason: SubscriptionReason::SpecInvalidError,
        message,
    }
}
