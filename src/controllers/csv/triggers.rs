//! What wakes a CSV's round: the mappers from other objects' changes to the CSVs they
//! concern.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::runtime::controller::Controller;

use crate::api::{
    ClusterServiceVersion, CsvPhase, InstallPlan, OperatorCondition, OperatorGroup, Subscription,
};
use crate::cluster::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::controllers::context::Context;

use super::context::{CsvContext, CsvRef};
use super::index::Guarded;
use super::phase;
use super::rbac_cache::RbacStores;

/// The change streams that wake a CSV's round (see [`controller`]).
pub(super) struct Wakes {
    pub(super) csvs: BoxStream<'static, Arc<Guarded>>,
    /// The CSV cache's own changes: a replaced CSV's round must read its replacement from
    /// the cache, and a wake-up sent right after the replacement's status write could find
    /// the cache a step behind and leave the old CSV Replacing.
    pub(super) replacements: BoxStream<'static, Arc<Guarded>>,
    pub(super) providers: BoxStream<'static, Arc<Guarded>>,
    pub(super) groups: BoxStream<'static, Arc<DeserializeGuard<OperatorGroup>>>,
    pub(super) deployments: BoxStream<'static, Arc<Deployment>>,
    pub(super) accounts: BoxStream<'static, Arc<PartialObjectMeta<ServiceAccount>>>,
    pub(super) secrets: BoxStream<'static, Arc<PartialObjectMeta<Secret>>>,
    pub(super) subscriptions: BoxStream<'static, Arc<DeserializeGuard<Subscription>>>,
    /// A plan that finishes its steps releases the CSV its CSV replaces.
    pub(super) plans: BoxStream<'static, Arc<DeserializeGuard<InstallPlan>>>,
    pub(super) crds: BoxStream<'static, Arc<PartialObjectMeta<CustomResourceDefinition>>>,
    pub(super) rbac: BoxStream<'static, CsvRef>,
    /// CSVs to look at again because a related one (replaced or replacing) moved.
    pub(super) related: BoxStream<'static, CsvRef>,
}

/// The controller of CSVs, woken by what each round reads: the group and Subscriptions of
/// its namespace, what it made (Deployments, accounts, RBAC, APIServices), the CSVs it
/// replaces or depends on, the OperatorCondition of the CSV it replaces, and its CRDs.
pub(super) fn controller(
    shared: &Context,
    ctx: &Arc<CsvContext>,
    wakes: Wakes,
) -> Controller<Guarded> {
    let (in_group, in_sub, for_conditions) = (Arc::clone(ctx), Arc::clone(ctx), Arc::clone(ctx));
    let in_plan = Arc::clone(ctx);
    let api_services = shared
        .informers
        .cluster
        .owned_api_services
        .subscribe_touched()
        .1;
    let controller = Controller::for_shared_stream(wakes.csvs, ctx.csvs.clone())
        .watches_shared_stream(wakes.groups, move |group| {
            in_group
                .index
                .in_namespace(&in_group.csvs, group.meta().namespace.as_deref(), |_| true)
        })
        .watches_shared_stream(wakes.subscriptions, move |sub| {
            in_sub
                .index
                .in_namespace(&in_sub.csvs, sub.meta().namespace.as_deref(), |_| true)
        })
        .watches_shared_stream(wakes.plans, move |plan| {
            in_plan
                .index
                .in_namespace(&in_plan.csvs, plan.meta().namespace.as_deref(), |csv| {
                    csv.status.as_ref().and_then(|s| s.phase) == Some(CsvPhase::Replacing)
                })
        })
        .watches_shared_stream(wakes.deployments, |d| owner_csv(d.labels()))
        // An account of the CSV's that goes (or comes back) is a requirement that changed.
        .watches_shared_stream(wakes.accounts, |a| owner_csv(a.labels()))
        // A serving certificate replaced or removed by someone else is checked again.
        .watches_shared_stream(wakes.secrets, |s| owner_csv(s.labels()))
        .reconcile_on(wakes.rbac)
        // An owned APIService that becomes Available (or stops being) moves its CSV.
        .watches_shared_stream(api_services, |service| owner_csv(service.labels()))
        // An OperatorCondition that changes may release the CSV that replaces its own.
        .watches_shared_stream(conditions(shared), move |condition| {
            let name = condition.name_any();
            let (index, csvs) = (&for_conditions.index, &for_conditions.csvs);
            index.in_namespace(csvs, condition.namespace().as_deref(), |csv| {
                csv.spec.replaces.as_deref() == Some(&name)
            })
        })
        .reconcile_on(wakes.related);
    watch_csvs(
        controller,
        ctx,
        wakes.replacements,
        wakes.providers,
        wakes.crds,
    )
}

/// The wakes from other CSVs and from CRDs.
fn watch_csvs(
    controller: Controller<Guarded>,
    ctx: &Arc<CsvContext>,
    replacements: BoxStream<'static, Arc<Guarded>>,
    providers: BoxStream<'static, Arc<Guarded>>,
    crds: BoxStream<'static, Arc<PartialObjectMeta<CustomResourceDefinition>>>,
) -> Controller<Guarded> {
    let (for_replaced, for_dependents) = (ctx.csvs.clone(), Arc::clone(ctx));
    let crd_triggers = CrdTriggers {
        ctx: Arc::clone(ctx),
        generations: std::sync::Mutex::default(),
    };
    controller
        .watches_shared_stream(replacements, move |csv| {
            let csv = csv.0.as_ref().ok()?;
            let replaces = csv.spec.replaces.as_deref().filter(|r| !r.is_empty())?;
            let old = ObjectRef::new(replaces).within(csv.metadata.namespace.as_deref()?);
            // Only a CSV that is there: the first of a chain replaces one long gone.
            for_replaced.get(&old).map(|_| old)
        })
        // A CSV waiting for the CSV that provides a CRD it requires goes on when that one moves.
        .watches_shared_stream(providers, move |provider| {
            let Ok(provider) = provider.0.as_ref() else {
                return Vec::new();
            };
            let ctx = &for_dependents;
            let namespace = provider.metadata.namespace.as_deref();
            ctx.index
                .in_namespace(&ctx.csvs, namespace, |csv| depends_on(csv, provider))
        })
        .watches_shared_stream(crds, move |crd| {
            let wake = crd_triggers.wake(&crd);
            let ctx = &crd_triggers.ctx;
            ctx.index
                .with_crd(&ctx.csvs, &crd.name_any(), |csv| match wake {
                    CrdWake::Everyone => true,
                    CrdWake::Unsettled => csv
                        .status
                        .as_ref()
                        .is_none_or(|s| s.phase != Some(CsvPhase::Succeeded)),
                    CrdWake::No => false,
                })
        })
}

/// Whether `csv`, never installed, requires a CRD that `provider` owns.
fn depends_on(csv: &ClusterServiceVersion, provider: &ClusterServiceVersion) -> bool {
    let owned = provider
        .spec
        .customresourcedefinitions
        .iter()
        .flat_map(|c| &c.owned);
    let required = csv
        .spec
        .customresourcedefinitions
        .iter()
        .flat_map(|c| &c.required);
    let required: Vec<&str> = required.map(|d| d.name.as_str()).collect();
    phase::never_installed(csv.status.as_ref())
        && owned
            .into_iter()
            .any(|d| required.contains(&d.name.as_str()))
}

/// The OperatorConditions of the controller's scope, as the shared informer hands them on.
fn conditions(
    shared: &Context,
) -> impl futures::Stream<Item = Arc<DeserializeGuard<OperatorCondition>>> + Send + 'static {
    shared.informers.operator_conditions.subscribe_touched().1
}

/// The shared RBAC caches, and the CSVs their changes wake: RBAC labelled as a CSV's (its
/// plan's steps, its copies) wakes that CSV; a grant made otherwise is seen by the
/// unmet-requirements backstop.
pub(super) fn rbac_watch(
    informers: &crate::cluster::informers::RbacInformers,
) -> (
    RbacStores,
    impl futures::Stream<Item = ObjectRef<DeserializeGuard<ClusterServiceVersion>>> + Send + 'static,
) {
    use futures::StreamExt;
    fn wakes<K: kube::Resource + Send + Sync + 'static>(
        changes: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    ) -> futures::stream::BoxStream<'static, ObjectRef<DeserializeGuard<ClusterServiceVersion>>>
    {
        changes
            .flat_map(|o| {
                futures::stream::iter(owner_csv(
                    o.meta().labels.as_ref().unwrap_or(&BTreeMap::new()),
                ))
            })
            .boxed()
    }
    let (roles, role_changes) = informers.roles.subscribe_touched();
    let (role_bindings, role_binding_changes) = informers.role_bindings.subscribe_touched();
    let (cluster_roles, cluster_role_changes) = informers.cluster_roles.subscribe_touched();
    let (cluster_role_bindings, cluster_role_binding_changes) =
        informers.cluster_role_bindings.subscribe_touched();
    let stores = RbacStores {
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
    };
    let all = futures::stream::select_all([
        wakes(role_changes),
        wakes(role_binding_changes),
        wakes(cluster_role_changes),
        wakes(cluster_role_binding_changes),
    ]);
    (stores, all)
}

/// Which CSVs a CRD's change wakes. Every install annotates the CRDs it brings
/// (`installed-alongside`), so a CRD that a hundred operators own changes a hundred times in
/// a burst of installs; waking every owner each time re-ran every CSV's round (a GET of the
/// CRD and of its ServiceAccounts) dozens of times per install. The watch sees metadata
/// only, so what changed is told apart by what the CSVs last read of the CRD
/// ([`CsvContext::crd_states`]): every owner wakes when the CRD comes, goes or its spec
/// changes (its generation); the owners not yet Succeeded also wake on any other change
/// until a round has read the CRD Established with its names accepted (what they wait for);
/// after that, annotation and status churn wakes no one.
#[derive(Debug, PartialEq)]
pub(super) enum CrdWake {
    Everyone,
    Unsettled,
    No,
}

pub(super) struct CrdTriggers {
    pub(super) ctx: Arc<CsvContext>,
    pub(super) generations: std::sync::Mutex<HashMap<String, i64>>,
}

impl CrdTriggers {
    pub(super) fn wake(&self, crd: &PartialObjectMeta<CustomResourceDefinition>) -> CrdWake {
        let name = crd.name_any();
        let mut generations = self
            .generations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.ctx.crd_meta.get(&ObjectRef::new(&name)).is_none() {
            generations.remove(&name);
            return crd_wake(false, false, false);
        }
        let generation = crd.metadata.generation.unwrap_or_default();
        let spec_changed = generations.insert(name.clone(), generation) != Some(generation);
        let read_ready = self
            .ctx
            .crd_states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&name)
            .is_some_and(|(_, state)| state.established && state.names_accepted);
        crd_wake(true, spec_changed, read_ready)
    }
}

/// [`CrdTriggers`]' decision: `present` in the watch, its generation new to us, and last
/// read Established with its names accepted.
pub(super) fn crd_wake(present: bool, spec_changed: bool, read_ready: bool) -> CrdWake {
    match (present, spec_changed, read_ready) {
        (false, _, _) | (true, true, _) => CrdWake::Everyone,
        (true, false, false) => CrdWake::Unsettled,
        (true, false, true) => CrdWake::No,
    }
}

/// The CSV that `labels` name as their owner.
pub(super) fn owner_csv(
    labels: &BTreeMap<String, String>,
) -> Vec<ObjectRef<DeserializeGuard<ClusterServiceVersion>>> {
    // OperatorGroups own objects with the same labels (their ClusterRoles, say): those name
    // no CSV, and waking one by that name only fails to find it in the cache.
    if labels
        .get(OWNER_KIND_LABEL)
        .is_some_and(|kind| kind != "ClusterServiceVersion")
    {
        return vec![];
    }
    match (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL)) {
        (Some(name), Some(ns)) => vec![ObjectRef::new(name).within(ns)],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_objects_a_csv_owns_wake_that_csv() {
        let labels = |kind: Option<&str>| {
            let mut l = BTreeMap::from([
                (OWNER_LABEL.to_string(), "og".to_string()),
                (OWNER_NAMESPACE_LABEL.to_string(), "ns".to_string()),
            ]);
            if let Some(kind) = kind {
                l.insert(OWNER_KIND_LABEL.to_string(), kind.to_string());
            }
            l
        };
        assert!(owner_csv(&labels(Some("OperatorGroup"))).is_empty());
        assert_eq!(owner_csv(&labels(Some("ClusterServiceVersion"))).len(), 1);
        assert_eq!(owner_csv(&labels(None)).len(), 1);
    }

    #[test]
    fn annotation_churn_wakes_no_one_once_the_crd_was_read_ready() {
        // Gone, or a new spec: every owner re-checks.
        assert_eq!(crd_wake(false, false, true), CrdWake::Everyone);
        assert_eq!(crd_wake(true, true, true), CrdWake::Everyone);
        // Another change before any round saw it Established: those still waiting.
        assert_eq!(crd_wake(true, false, false), CrdWake::Unsettled);
        // After: an annotation or status write wakes no one.
        assert_eq!(crd_wake(true, false, true), CrdWake::No);
    }
}
