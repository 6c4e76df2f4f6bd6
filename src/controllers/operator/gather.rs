//! What a status round reads of the kinds OLM watches anyway (CSVs, Subscriptions,
//! InstallPlans, OperatorConditions): the shared informers' caches, no API call. The other
//! kinds come from [`super::labelled`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::components::{self, reference};
use super::context::{OperatorContext, ok};
use crate::api::{ComponentCondition, RichReference};

impl OperatorContext {
    /// Components among the objects the informers hold.
    pub(super) fn watched_components(&self, label: &str) -> Vec<RichReference> {
        let labelled =
            |meta: &ObjectMeta| meta.labels.as_ref().is_some_and(|l| l.contains_key(label));
        let mut refs = Vec::new();
        for csv in self.csvs.state().iter().filter_map(ok) {
            if labelled(&csv.metadata) {
                refs.push(component(csv, components::csv_conditions(csv)));
            }
        }
        for sub in self.subscriptions.state().iter().filter_map(ok) {
            if labelled(&sub.metadata) {
                refs.push(component(sub, components::subscription_conditions(sub)));
            }
        }
        for plan in self.plans.state().iter().filter_map(ok) {
            if labelled(&plan.metadata) {
                refs.push(component(plan, components::install_plan_conditions(plan)));
            }
        }
        for condition in self.operator_conditions.state().iter().filter_map(ok) {
            if labelled(&condition.metadata) {
                let conditions = components::operator_condition_conditions(condition);
                refs.push(component(condition, conditions));
            }
        }
        refs
    }
}

/// The status reference of `object`, of its own kind, with `conditions`.
fn component<K: Resource<DynamicType = ()>>(
    object: &K,
    conditions: Vec<ComponentCondition>,
) -> RichReference {
    reference(
        &K::api_version(&()),
        &K::kind(&()),
        object.meta().namespace.as_deref(),
        object.meta().name.as_deref().unwrap_or_default(),
        conditions,
    )
}
