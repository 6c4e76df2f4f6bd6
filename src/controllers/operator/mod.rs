//! The Operator controller (`operators.coreos.com/v1` Operator, as upstream's): one
//! cluster-scoped Operator per installed package and namespace, named
//! `<package>.<namespace>`, whose status lists every object labelled
//! `operators.coreos.com/<package>.<namespace>`.
//!
//! Labels are set where objects are made: a plan's steps carry them (CSV, CRDs, the rest,
//! generated Subscriptions), the CSV controller copies the CSV's onto its Deployments and
//! RBAC, the Subscription controller puts them on the plans it creates. Adoption here covers
//! the rest, as upstream's adoption controller does: the Subscription itself, its installed
//! CSV and its newest plan (installs made before the label existed), and it creates the
//! Operator when the package's Subscription exists. A user may delete an Operator whose
//! components are gone; it comes back only with a new Subscription.
//!
//! Components of kinds OLM already watches (CSVs, Subscriptions, InstallPlans, CRDs) come
//! from the shared informers; the others (Deployments, ServiceAccounts, Services, Secrets,
//! ConfigMaps, RBAC) from watches of this controller's own ([`labelled`]), which keep only
//! labelled objects and wake their Operators. While an uninstall is under way (Subscription
//! gone, components left) the Operator is also looked at every few seconds.

pub mod components;
mod labelled;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, PanicError, ReconcileError, Reconciler, apply_status};
use crate::api::{
    ClusterServiceVersion, InstallPlan, Operator, OperatorSpec, RichReference, Subscription,
    operator_label, operator_name, operator_names,
};
use crate::cluster::informers::Change;
use crate::controllers::kit::Shutdown;
use components::reference;

pub const CONTROLLER: &str = "operator";
/// Field manager of the Operators' status and of the labels adoption sets.
pub const FIELD_MANAGER: &str = "olm-operator";
/// How often an Operator is looked at while an uninstall is under way.
const SETTLING_RECHECK: Duration = Duration::from_secs(3);
/// Bursts of component changes (an install writes a CSV's status several times, its CRDs
/// turn Established one by one) make one round.
const DEBOUNCE: Duration = Duration::from_secs(2);
/// Kinds whose changes reach this controller through the informers.
const WATCHED: [&str; 4] = [
    "ClusterServiceVersion",
    "Subscription",
    "InstallPlan",
    "CustomResourceDefinition",
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Operator {name}: {action}: {error}")]
    Kube {
        name: String,
        action: String,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Panicked(_) => "panic",
        }
    }
}

fn kube_error(name: &str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let (name, action) = (name.to_string(), action.into());
    move |error| Error::Kube {
        name,
        action,
        error,
    }
}

fn ok<K>(guarded: &Arc<DeserializeGuard<K>>) -> Option<&K> {
    guarded.0.as_ref().ok()
}

/// The Operators' status.
pub struct OperatorContext {
    shared: Arc<Context>,
    kit: KitState<ObjectKey>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    subscriptions: Store<DeserializeGuard<Subscription>>,
    plans: Store<DeserializeGuard<InstallPlan>>,
    crds: Store<PartialObjectMeta<CustomResourceDefinition>>,
    /// Components of the other kinds (Deployments, RBAC, …).
    labelled: labelled::Labelled,
}

impl Reconciler for OperatorContext {
    type Object = Operator;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!(object_key);

    async fn sync(&self, operator: &Operator) -> Result<Action, Error> {
        let name = operator.name_any();
        // Operators are cluster-scoped, but a scoped context sees only its namespace's
        // components: it keeps only its own namespace's Operators (`<package>.<namespace>`;
        // namespaces have no dots), or scopes would overwrite each other's lists.
        if let Some(scope) = self.shared.settings.watch_namespace.as_deref()
            && name.rsplit_once('.').map(|(_, namespace)| namespace) != Some(scope)
        {
            return Ok(Action::await_change());
        }
        let label = operator_label(&name);
        let mut refs = self.watched_components(&label);
        refs.extend(self.labelled.components(&name).await);
        let status = components::status(&label, refs);
        let settling = status
            .components
            .as_ref()
            .is_some_and(|c| components::settling(&c.refs, &WATCHED));
        if operator.status.as_ref() != Some(&status) {
            apply_status(self, operator, &status)
                .await
                .map_err(kube_error(&name, "writing status"))?;
        }
        Ok(if settling {
            Action::requeue(SETTLING_RECHECK)
        } else {
            Action::await_change()
        })
    }
}

impl OperatorContext {
    /// Components among the objects the informers hold.
    fn watched_components(&self, label: &str) -> Vec<RichReference> {
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
        for crd in self.crds.state() {
            if labelled(&crd.metadata) {
                refs.push(reference(
                    "apiextensions.k8s.io/v1",
                    "CustomResourceDefinition",
                    None,
                    &crd.name_any(),
                    Vec::new(),
                ));
            }
        }
        refs
    }
}

fn component<K: Resource<DynamicType = ()>>(
    object: &K,
    conditions: Vec<crate::api::ComponentCondition>,
) -> RichReference {
    reference(
        &K::api_version(&()),
        &K::kind(&()),
        object.meta().namespace.as_deref(),
        object.meta().name.as_deref().unwrap_or_default(),
        conditions,
    )
}

/// Adoption, per Subscription: its Operator exists, and the Subscription, its installed CSV
/// and its newest plan carry the Operator's label.
pub struct AdoptionContext {
    shared: Arc<Context>,
    kit: KitState<ObjectKey>,
    operators: Store<DeserializeGuard<Operator>>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    plans: Store<DeserializeGuard<InstallPlan>>,
    /// Operators this controller created that its cache may not show yet.
    created: RecentCreates,
}

impl Reconciler for AdoptionContext {
    type Object = Subscription;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = "operator-adoption";
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    // The Subscription controller reports unreadable Subscriptions.
    const REPORTS_INVALID: bool = false;

    crate::kit_accessors!(object_key);

    async fn sync(&self, sub: &Subscription) -> Result<Action, Error> {
        if sub.spec.name.is_empty() || sub.meta().deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let namespace = sub.namespace().unwrap_or_default();
        let name = operator_name(&sub.spec.name, &namespace);
        let label = operator_label(&name);
        adopt(&self.shared, sub, &label, &name).await?;
        let status = sub.status.as_ref();
        if let Some(csv) = status
            .and_then(|s| s.installed_csv.as_deref())
            .and_then(|csv| self.csvs.get(&ObjectRef::new(csv).within(&namespace)))
            && let Ok(csv) = &csv.0
        {
            adopt(&self.shared, csv, &label, &name).await?;
        }
        if let Some(plan) = status
            .and_then(|s| s.install_plan_ref.as_ref())
            .and_then(|r| r.name.as_deref())
            .and_then(|plan| self.plans.get(&ObjectRef::new(plan).within(&namespace)))
            && let Ok(plan) = &plan.0
        {
            adopt(&self.shared, plan, &label, &name).await?;
        }
        if self.operators.get(&ObjectRef::new(&name)).is_some() {
            self.created.seen(&name);
        } else if !self.created.in_flight(&name) {
            create_operator(&self.shared, &name).await?;
            self.created.made(&name);
        }
        Ok(Action::await_change())
    }
}

/// Puts the Operator's label on `object` unless it has it.
async fn adopt<K>(ctx: &Context, object: &K, label: &str, name: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    if object.labels().contains_key(label) {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(
        ctx.client.clone(),
        object.meta().namespace.as_deref().unwrap_or_default(),
    );
    let patch = json!({"metadata": {"labels": {label: ""}}});
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(kube_error(
        name,
        format!("labelling {} {}", K::kind(&()), object.name_any()),
    ))?;
    tracing::debug!(operator = name, kind = %K::kind(&()), object = %object.name_any(), "component adopted");
    Ok(())
}

/// Names created a moment ago. A Subscription's status changes several times during an
/// install, and each change is a round; until the Operator's watch event arrives, each round
/// would create it again and be refused (at 1,000 installs at once, 2,158 creates for 1,000
/// Operators). A name is forgotten once the cache shows it, or after `CREATE_SETTLE` in case
/// it was deleted before the cache ever did.
#[derive(Default)]
struct RecentCreates(std::sync::Mutex<HashMap<String, std::time::Instant>>);

const CREATE_SETTLE: Duration = Duration::from_secs(30);

impl RecentCreates {
    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<String, std::time::Instant>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn made(&self, name: &str) {
        let mut names = self.names();
        names.retain(|_, at| at.elapsed() < CREATE_SETTLE);
        names.insert(name.to_string(), std::time::Instant::now());
    }

    fn in_flight(&self, name: &str) -> bool {
        self.names()
            .get(name)
            .is_some_and(|at| at.elapsed() < CREATE_SETTLE)
    }

    fn seen(&self, name: &str) {
        self.names().remove(name);
    }
}

async fn create_operator(ctx: &Context, name: &str) -> Result<(), Error> {
    let api: Api<Operator> = Api::all(ctx.client.clone());
    let operator = Operator::new(name, OperatorSpec {});
    match api.create(&PostParams::default(), &operator).await {
        Ok(_) => {
            tracing::info!(operator = name, "Operator created");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(error) => Err(kube_error(name, "creating the Operator")(error)),
    }
}

/// The Operators an object is a component of.
fn operators_of(meta: &ObjectMeta) -> Vec<ObjectRef<DeserializeGuard<Operator>>> {
    operator_names(meta.labels.iter().flatten())
        .into_iter()
        .map(|name| ObjectRef::new(&name))
        .collect()
}

/// The Operators `meta`'s labels name, and those whose list has the object.
fn affected<K: Resource<DynamicType = ()>>(
    operators: &Store<DeserializeGuard<Operator>>,
    meta: &ObjectMeta,
) -> Vec<ObjectRef<DeserializeGuard<Operator>>> {
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
    ) -> Vec<ObjectRef<DeserializeGuard<Operator>>> {
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

fn guarded_meta<K: Resource>(guarded: &DeserializeGuard<K>) -> &ObjectMeta {
    match &guarded.0 {
        Ok(object) => object.meta(),
        Err(invalid) => &invalid.metadata,
    }
}

/// Runs both reconcilers until `shutdown` (leader only).
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let informers = &shared.informers;
    let (operators, operator_changes) = informers.cluster.operators.subscribe_touched();
    let (csvs, csv_changes) = informers.csvs.subscribe_touched();
    let (subscriptions, sub_changes) = informers.subscriptions.subscribe_touched();
    let (plans, plan_changes) = informers.install_plans.subscribe_touched();
    let (crds, crd_changes) = informers.cluster.crds.subscribe();
    let (_, adoption_subs) = informers.subscriptions.subscribe_touched();
    let (_, adoption_csvs) = informers.csvs.subscribe_touched();
    let (_, adoption_plans) = informers.install_plans.subscribe_touched();

    let (labelled_wakes, labelled_woken) = tokio::sync::mpsc::unbounded_channel();
    let (labelled, labelled_watches) = labelled::Labelled::start(
        &shared.client,
        shared.settings.watch_namespace.as_deref(),
        labelled_wakes,
    );
    let status = Arc::new(OperatorContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        csvs: csvs.clone(),
        subscriptions: subscriptions.clone(),
        plans: plans.clone(),
        crds,
        labelled,
    });
    // A change reaches the Operators its labels name now and those listing it already (a
    // component that lost its label, or was deleted, must leave their lists).
    let crd_wakes = {
        let (operators, mut labels) = (operators.clone(), CrdLabels::default());
        futures::StreamExt::flat_map(crd_changes, move |change| {
            futures::stream::iter(labels.wakes(&operators, change))
        })
    };
    let (for_csvs, for_plans, for_subs) = (operators.clone(), operators.clone(), operators.clone());
    let status_controller = Controller::for_shared_stream(operator_changes, operators.clone())
        .with_config(Config::default().debounce(DEBOUNCE))
        .watches_shared_stream(csv_changes, move |o| {
            affected::<ClusterServiceVersion>(&for_csvs, guarded_meta(&o))
        })
        .watches_shared_stream(plan_changes, move |o| {
            affected::<InstallPlan>(&for_plans, guarded_meta(&o))
        })
        .reconcile_on(crd_wakes)
        .reconcile_on(futures::StreamExt::map(
            tokio_stream::wrappers::UnboundedReceiverStream::new(labelled_woken),
            |name: String| ObjectRef::new(&name),
        ))
        .watches_shared_stream(sub_changes, move |o| {
            let meta = guarded_meta(&o);
            let mut refs = affected::<Subscription>(&for_subs, meta);
            if let Ok(sub) = &o.0 {
                let name = operator_name(
                    &sub.spec.name,
                    meta.namespace.as_deref().unwrap_or_default(),
                );
                refs.push(ObjectRef::new(&name));
            }
            refs
        });

    let adoption = Arc::new(AdoptionContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        operators,
        csvs,
        plans,
        created: RecentCreates::default(),
    });
    // A Subscription is looked at again when its installed CSV or plan changes (they may
    // appear after its status names them).
    let subs_in = |namespace: Option<String>, store: Store<DeserializeGuard<Subscription>>| {
        store
            .state()
            .iter()
            .filter(|s| guarded_meta(s).namespace == namespace)
            .map(|s| ObjectRef::from_obj(s.as_ref()))
            .collect::<Vec<_>>()
    };
    let subs_for_csvs = subscriptions.clone();
    let subs_for_plans = subscriptions.clone();
    let adoption_controller = Controller::for_shared_stream(adoption_subs, subscriptions)
        .watches_shared_stream(adoption_csvs, move |o| {
            subs_in(guarded_meta(&o).namespace.clone(), subs_for_csvs.clone())
        })
        .watches_shared_stream(adoption_plans, move |o| {
            subs_in(guarded_meta(&o).namespace.clone(), subs_for_plans.clone())
        });
    tokio::join!(
        kit::run(status_controller, status, shutdown.clone()),
        kit::run(adoption_controller, adoption, shutdown),
    );
    for watch in labelled_watches {
        watch.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;

    #[test]
    fn an_operator_just_created_is_not_created_again_until_the_cache_shows_it() {
        let created = RecentCreates::default();
        assert!(!created.in_flight("a.ns"));
        created.made("a.ns");
        assert!(created.in_flight("a.ns"));
        assert!(!created.in_flight("b.ns"));
        created.seen("a.ns");
        assert!(
            !created.in_flight("a.ns"),
            "once the cache shows it, it is forgotten"
        );
    }

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
