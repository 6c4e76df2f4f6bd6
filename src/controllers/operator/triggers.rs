//! What wakes an Operator's status round: a change of a component of the kinds the shared
//! informers hold (an object its label names now, or one its status lists already: a
//! component that lost its label, or was deleted, must leave the list; the other kinds wake
//! their Operators from `super::labelled`); and what wakes a Subscription's adoption
//! round: a change of a CSV or InstallPlan of its namespace (they may appear after its
//! status names them).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use super::context::guarded_meta;
use crate::api::{Operator, Subscription, operator_name, operator_names};

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
