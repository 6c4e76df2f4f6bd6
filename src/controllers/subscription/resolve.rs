//! Resolution of a namespace: the resolver's input from what was gathered, the solver run
//! on a blocking thread (it is synchronous), and failures that say which catalogs were
//! searched and why a catalog that exists had nothing to offer.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::decide::{Failure, Resolution, resolver_subscription};
use super::gather::Gathered;
use super::indexes::Indexes;
use super::policy::Policy;
use super::under_policy::resolve_under_policies;
use crate::api::{Subscription, SubscriptionReason};
use crate::resolver::{CatalogRef, InstalledCsv, Namespace};

/// Resolves the namespace (on a blocking thread: the solver is synchronous), or fails every
/// Subscription when the namespace has not exactly one OperatorGroup.
pub(super) async fn resolve(
    namespace: &str,
    subs: &[&Subscription],
    installed: Vec<InstalledCsv>,
    gathered: &Gathered,
    indexes: &Indexes,
) -> Resolution {
    if gathered.groups.len() != 1 {
        let failure = Failure {
            reason: SubscriptionReason::ErrorPreventedResolution,
            message: format!(
                "expected 1 OperatorGroup in the namespace, found {}",
                gathered.groups.len()
            ),
        };
        return Resolution {
            failures: subs
                .iter()
                .map(|s| (s.name_any(), failure.clone()))
                .collect(),
            ..Resolution::default()
        };
    }
    // A policy that cannot be read sets its Subscription aside, named by the field.
    let mut policies = BTreeMap::new();
    let mut unreadable = BTreeMap::new();
    for sub in subs {
        let Some(spec) = &sub.spec.upgrade_policy else {
            continue;
        };
        match Policy::read(spec) {
            Ok(policy) => {
                policies.insert(sub.name_any(), policy);
            }
            Err(error) => {
                let failure = Failure {
                    reason: SubscriptionReason::SpecInvalidError,
                    message: error.to_string(),
                };
                unreadable.insert(sub.name_any(), failure);
            }
        }
    }
    let input = Namespace {
        name: namespace.to_string(),
        installed,
        subscriptions: subs
            .iter()
            .filter(|s| !unreadable.contains_key(&s.name_any()))
            .map(|s| resolver_subscription(s))
            .collect(),
    };
    let index = indexes.index_of(&gathered.snapshots).await;
    let mut resolution = indexes
        .run(move || resolve_under_policies(&index, input, policies))
        .await;
    explain_failures(&mut resolution.failures, subs, gathered);
    resolution.failures.extend(unreadable);
    resolution
}

/// Says which catalogs were searched, and why a catalog that exists has no content yet.
fn explain_failures(
    failures: &mut BTreeMap<String, Failure>,
    subs: &[&Subscription],
    gathered: &Gathered,
) {
    let searched: Vec<String> = gathered
        .snapshots
        .iter()
        .map(|s| format!("{}/{}", s.catalog.namespace, s.catalog.name))
        .collect();
    for sub in subs {
        let Some(failure) = failures.get_mut(&sub.name_any()) else {
            continue;
        };
        let source = CatalogRef::new(&sub.spec.source, &sub.spec.source_namespace);
        if gathered.snapshot_of(&source).is_none()
            && let Some(catalog) = gathered.catalogs.iter().find(|c| {
                c.name_any() == source.name && c.namespace().as_deref() == Some(&source.namespace)
            })
        {
            let why = catalog
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_else(|| "its content has not been loaded yet".into());
            failure.reason = SubscriptionReason::ErrorPreventedResolution;
            failure.message =
                format!("error using catalogsource {source}: catalog is unavailable: {why}",);
        }
        failure.message = format!(
            "{} (catalogs searched: {})",
            failure.message,
            if searched.is_empty() {
                "none".to_string()
            } else {
                searched.join(", ")
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CatalogSource, SubscriptionSpec};

    fn sub(name: &str, source: &str) -> Subscription {
        let mut sub = Subscription::new(
            name,
            SubscriptionSpec {
                name: "pkg".into(),
                source: source.into(),
                source_namespace: "ns".into(),
                ..Default::default()
            },
        );
        sub.metadata.namespace = Some("ns".into());
        sub
    }

    fn gathered(catalogs: Vec<CatalogSource>) -> Gathered {
        Gathered {
            subscriptions: Vec::new(),
            csvs: Vec::new(),
            groups: Vec::new(),
            catalogs,
            snapshots: Vec::new(),
            cached_plans: Vec::new(),
        }
    }

    fn failure() -> Failure {
        Failure {
            reason: SubscriptionReason::ConstraintsNotSatisfiable,
            message: "no operators found".into(),
        }
    }

    #[test]
    fn a_failure_names_the_catalogs_searched_and_why_one_has_no_content() {
        let mut catalog: CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "broken", "namespace": "ns"},
            "spec": {"sourceType": "grpc"},
            "status": {"message": "image pull failed"},
        }))
        .unwrap();
        catalog.metadata.namespace = Some("ns".into());
        let (a, b) = (sub("a", "broken"), sub("b", "elsewhere"));
        let mut failures: BTreeMap<String, Failure> =
            [("a".to_string(), failure()), ("b".to_string(), failure())].into();
        explain_failures(&mut failures, &[&a, &b], &gathered(vec![catalog]));
        assert_eq!(
            failures["a"],
            Failure {
                reason: SubscriptionReason::ErrorPreventedResolution,
                message: "error using catalogsource ns/broken: catalog is unavailable: \
                          image pull failed (catalogs searched: none)"
                    .into(),
            }
        );
        assert_eq!(
            failures["b"].message,
            "no operators found (catalogs searched: none)"
        );
    }
}
