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
//! Operator when the package's Subscription exists. As upstream's operator controller, an
//! Operator that is missing while labelled components of it exist is made again
//! ([`recreate`]); a user may delete an Operator whose components are gone, and it stays
//! gone.
//!
//! The component kinds are upstream's (`componentLists`, operator-lifecycle-manager's
//! `pkg/controller/operators/components.go`), each listed with its `status.conditions`
//! where it has them. CSVs, Subscriptions, InstallPlans and OperatorConditions come from
//! the shared informers; the others (Deployments, Services, Namespaces, APIServices, CRDs,
//! ServiceAccounts, Secrets, ConfigMaps, RBAC) from watches of this controller's own
//! ([`labelled`]), which keep only labelled objects and wake their Operators. A change to a
//! component of any kind, or its deletion, wakes its Operators: none is looked at on a
//! timer.

mod adoption;
pub mod components;
mod context;
mod gather;
mod labelled;
mod recreate;
mod triggers;

pub use adoption::AdoptionContext;
pub use context::{CONTROLLER, Error, FIELD_MANAGER, OperatorContext};

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, Reconciler, apply_status};
use crate::api::{ClusterServiceVersion, InstallPlan, Operator, OperatorCondition, operator_label};
use crate::controllers::kit::Shutdown;
use crate::controllers::kit::backoff::Backoff;
use adoption::RecentCreates;
use context::{DEBOUNCE, guarded_meta, in_scope, kube_error};
use recreate::{Missing, Recreation};
use triggers::{affected, for_subscription, subscriptions_beside};

impl Reconciler for OperatorContext {
    type Object = Operator;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!(object_key);

    async fn sync(&self, operator: &Operator) -> Result<Action, Error> {
        let name = operator.name_any();
        if !in_scope(self.shared.settings.watch_namespace.as_deref(), &name) {
            return Ok(Action::await_change());
        }
        let label = operator_label(&name);
        let mut refs = self.watched_components(&label);
        refs.extend(self.labelled.components(&name).await);
        let status = components::status(&label, refs);
        if operator.status.as_ref() != Some(&status) {
            apply_status(self, operator, &status)
                .await
                .map_err(kube_error(&name, "writing status"))?;
        }
        // Every component kind is watched: a change to any wakes this Operator again.
        Ok(Action::await_change())
    }
}

/// Runs both reconcilers and the recreation queue until `shutdown` (leader only).
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let informers = &shared.informers;
    let (operators, operator_changes) = informers.cluster.operators.subscribe_touched();
    let (_, operator_deletions) = informers.cluster.operators.subscribe();
    let (labelled_wakes, labelled_woken) = tokio::sync::mpsc::unbounded_channel();
    let (labelled, labelled_watches) = labelled::Labelled::start(
        &shared.client,
        shared.settings.watch_namespace.as_deref(),
        labelled_wakes,
    );
    let (missing, queued) = Missing::new(operators.clone());
    // Both create Operators: one's create is the other's too, until the cache shows it.
    let created = Arc::new(RecentCreates::default());
    let (status, controller) = status_controller(
        &shared,
        operator_changes,
        operators.clone(),
        labelled,
        labelled_woken,
        &missing,
    );
    let recreation = Arc::new(Recreation {
        status: Arc::clone(&status),
        operators: operators.clone(),
        created: Arc::clone(&created),
        backoff: Backoff::default(),
    });
    let (adoption, adoption_controller) = adoption_controller(&shared, operators, created);
    tokio::join!(
        kit::run(controller, status, shutdown.clone()),
        kit::run(adoption_controller, adoption, shutdown.clone()),
        recreation.run(queued, operator_deletions, shutdown),
    );
    for watch in labelled_watches {
        watch.abort();
    }
}

type OperatorStore = kube::runtime::reflector::Store<kube::core::DeserializeGuard<Operator>>;
type Guarded<K> = Arc<kube::core::DeserializeGuard<K>>;

/// The status reconciler and its triggers: a change reaches the Operators its labels name
/// now and those listing it already (a component that lost its label, or was deleted, must
/// leave their lists); wakes of Operators the cache lacks also go to `missing`.
fn status_controller(
    shared: &Arc<Context>,
    operator_changes: impl futures::Stream<Item = Guarded<Operator>> + Send + 'static,
    operators: OperatorStore,
    labelled: labelled::Labelled,
    labelled_woken: tokio::sync::mpsc::UnboundedReceiver<String>,
    missing: &Missing,
) -> (
    Arc<OperatorContext>,
    Controller<kube::core::DeserializeGuard<Operator>>,
) {
    let informers = &shared.informers;
    let (csvs, csv_changes) = informers.csvs.subscribe_touched();
    let (subscriptions, sub_changes) = informers.subscriptions.subscribe_touched();
    let (plans, plan_changes) = informers.install_plans.subscribe_touched();
    let (operator_conditions, condition_changes) =
        informers.operator_conditions.subscribe_touched();
    let status = Arc::new(OperatorContext {
        shared: Arc::clone(shared),
        kit: KitState::default(),
        csvs,
        subscriptions,
        plans,
        operator_conditions,
        labelled,
    });
    // Each trigger's Operators, the missing ones queued for recreation as well.
    let [on_csv, on_plan, on_condition, on_labelled, on_sub] =
        std::array::from_fn(|_| missing.clone());
    let controller = Controller::for_shared_stream(operator_changes, operators)
        .with_config(Config::default().debounce(DEBOUNCE))
        .watches_shared_stream(csv_changes, move |o| {
            on_csv.pass(affected::<ClusterServiceVersion>(
                on_csv.operators(),
                guarded_meta(&o),
            ))
        })
        .watches_shared_stream(plan_changes, move |o| {
            on_plan.pass(affected::<InstallPlan>(
                on_plan.operators(),
                guarded_meta(&o),
            ))
        })
        .watches_shared_stream(condition_changes, move |o| {
            let meta = guarded_meta(&o);
            on_condition.pass(affected::<OperatorCondition>(
                on_condition.operators(),
                meta,
            ))
        })
        .reconcile_on(futures::StreamExt::flat_map(
            tokio_stream::wrappers::UnboundedReceiverStream::new(labelled_woken),
            move |name: String| {
                futures::stream::iter(on_labelled.pass(vec![ObjectRef::new(&name)]))
            },
        ))
        .watches_shared_stream(sub_changes, move |o| {
            on_sub.pass(for_subscription(on_sub.operators(), &o))
        });
    (status, controller)
}

/// The adoption reconciler: a Subscription is looked at again when its installed CSV or
/// plan changes (they may appear after its status names them).
fn adoption_controller(
    shared: &Arc<Context>,
    operators: OperatorStore,
    created: Arc<RecentCreates>,
) -> (
    Arc<AdoptionContext>,
    Controller<kube::core::DeserializeGuard<crate::api::Subscription>>,
) {
    let informers = &shared.informers;
    let (subscriptions, adoption_subs) = informers.subscriptions.subscribe_touched();
    let (csvs, adoption_csvs) = informers.csvs.subscribe_touched();
    let (plans, adoption_plans) = informers.install_plans.subscribe_touched();
    let adoption = Arc::new(AdoptionContext {
        shared: Arc::clone(shared),
        kit: KitState::default(),
        operators,
        csvs,
        plans,
        created,
    });
    let subs_for_csvs = subscriptions.clone();
    let subs_for_plans = subscriptions.clone();
    let controller = Controller::for_shared_stream(adoption_subs, subscriptions)
        .watches_shared_stream(adoption_csvs, move |o| {
            subscriptions_beside(&subs_for_csvs, &o)
        })
        .watches_shared_stream(adoption_plans, move |o| {
            subscriptions_beside(&subs_for_plans, &o)
        });
    (adoption, controller)
}
