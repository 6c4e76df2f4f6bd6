//! What wakes an Operator's status round: a change of a component (an object its label
//! names now, or one its status lists already: a component that lost its label, or was
//! deleted, must leave the list), with CRDs filtered to the Operators whose label came or
//! went; and what wakes a Subscription's adoption round: a change of a CSV or InstallPlan
//! of its namespace (they may appear after its status names them).

use std::collections::{BTreeSet, HashMap};

use futures::Stream;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::context::guarded_meta;
use crate::api::{Operator, Subscription, operator_name, operator_names};
use crate::cluster::informers::Change;

type OperatorRef = ObjectRef<DeserializeGuard<Operator>>;

/// The Operators an object is a component of.
fn operators_of(meta: &ObjectMeta) -> Vec<OperatorRef> {
    operator_names(meta.labels.iter().flatten())
        .into_iter()
        .map(|name| ObjectRef::new(&name))
        .collect()
}

/// The Operators `meta`'s labels name, and those whose list has the object.
pub(super) fn affected<K: Resource<DynamicType = ()>>(
    operators: &Store<DeserializeGuard<Operator>>,
    meta: &ObjectMeta,
) -> Vec<OperatorRef> {
    let mut refs = operators_of(meta);
    let kind = K::kind(&());
    for operator in operators.state() {
        let Ok(op) = &operator.0 else { continue };
        let listed = op
            .status
            .iter()
            .filter_map(|s| s.components.as_ref())
            .flat_map(|c| &c.refs)
            .any(|r| {
                r.kind.as_deref() == Some(kind.as_ref())
                    && r.name == meta.name
                    && r.namespace == meta.namespace
            });
        if listed {
            refs.push(ObjectRef::from_obj(operator.as_ref()));
        }
    }
    refs
}

/// Which Operators a CRD's change wakes. A CRD that many installs share carries every one
/// of their Operators' labels, and each install adds one: waking every Operator the labels
/// name made a thousand installs into a million rounds, each listing nine kinds. An
/// Operator lists a CRD by its label alone (no conditions), so only the Operators whose
/// label came or went wake; a CRD seen for the first time, or deleted, wakes all it names
/// and all that list it.
#[derive(Default)]
struct CrdLabels {
    /// The Operators each CRD's labels named when last seen.
    named: HashMap<String, BTreeSet<String>>,
}

impl CrdLabels {
    fn wakes(
        &mut self,
        operators: &Store<DeserializeGuard<Operator>>,
        change: Change<PartialObjectMeta<CustomResourceDefinition>>,
    ) -> Vec<OperatorRef> {
        let (crd, deleted) = match change {
            Change::Applied(crd) => (crd, false),
            Change::Deleted(crd) => (crd, true),
        };
        let name = crd.name_any();
        let now: BTreeSet<String> = operator_names(crd.labels()).into_iter().collect();
        let before = match deleted {
            true => self.named.remove(&name),
            false => self.named.insert(name, now.clone()),
        };
        match before {
            Some(before) if !deleted => before
                .symmetric_difference(&now)
                .map(|name| ObjectRef::new(name))
                .collect(),
            _ => affected::<CustomResourceDefinition>(operators, &crd.metadata),
        }
    }
}

/// The Operators a CRD's changes wake (see [`CrdLabels`]).
pub(super) fn crd_wakes(
    operators: Store<DeserializeGuard<Operator>>,
    changes: impl Stream<Item = Change<PartialObjectMeta<CustomResourceDefinition>>>,
) -> impl Stream<Item = OperatorRef> {
    let mut labels = CrdLabels::default();
    futures::StreamExt::flat_map(changes, move |change| {
        futures::stream::iter(labels.wakes(&operators, change))
    })
}

/// The Operators a Subscription's change wakes: those that list it or that its label
/// names, and the Operator of its package (which its round may have to create).
pub(super) fn for_subscription(
    operators: &Store<DeserializeGuard<Operator>>,
    sub: &DeserializeGuard<Subscription>,
) -> Vec<OperatorRef> {
    let meta = guarded_meta(sub);
    let mut refs = affected::<Subscription>(operators, meta);
    if let Ok(sub) = &sub.0 {
        let name = operator_name(
            &sub.spec.name,
            meta.namespace.as_deref().unwrap_or_default(),
        );
        refs.push(ObjectRef::new(&name));
    }
    refs
}

/// Every Subscription in the namespace of `object` (for adoption).
pub(super) fn subscriptions_beside<K: Resource>(
    subscriptions: &Store<DeserializeGuard<Subscription>>,
    object: &DeserializeGuard<K>,
) -> Vec<ObjectRef<DeserializeGuard<Subscription>>> {
    let namespace = &guarded_meta(object).namespace;
    subscriptions
        .state()
        .iter()
        .filter(|s| guarded_meta(s).namespace == *namespace)
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operator_label;
    use kube::runtime::reflector::store::Writer;
    use std::sync::Arc;

    fn crd(operators: &[&str]) -> Arc<PartialObjectMeta<CustomResourceDefinition>> {
        let mut meta = PartialObjectMeta::<CustomResourceDefinition>::default();
        meta.metadata.name = Some("apps.example.com".into());
        meta.metadata.labels = Some(
            operators
                .iter()
                .map(|name| (operator_label(name), String::new()))
                .chain([("olm.managed".to_string(), "true".to_string())])
                .collect(),
        );
        Arc::new(meta)
    }

    fn names(refs: Vec<ObjectRef<DeserializeGuard<Operator>>>) -> Vec<String> {
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn a_crd_change_wakes_only_the_operators_whose_label_came_or_went() {
        let operators = Writer::<DeserializeGuard<Operator>>::default().as_reader();
        let mut labels = CrdLabels::default();
        let mut wakes = |change| names(labels.wakes(&operators, change));
        // First seen: every Operator it names.
        assert_eq!(
            wakes(Change::Applied(crd(&["app.a", "app.b"]))),
            ["app.a", "app.b"]
        );
        // Another install adds its label: that Operator alone.
        assert_eq!(
            wakes(Change::Applied(crd(&["app.a", "app.b", "app.c"]))),
            ["app.c"]
        );
        // Annotations or status changed: nobody.
        assert!(wakes(Change::Applied(crd(&["app.a", "app.b", "app.c"]))).is_empty());
        // A label removed: its Operator.
        assert_eq!(wakes(Change::Applied(crd(&["app.b", "app.c"]))), ["app.a"]);
        // Deleted: every Operator it names.
        assert_eq!(
            wakes(Change::Deleted(crd(&["app.b", "app.c"]))),
            ["app.b", "app.c"]
        );
    }
}
