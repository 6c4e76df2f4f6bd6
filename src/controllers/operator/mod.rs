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

mod adoption;
pub mod components;
mod context;
mod gather;
mod labelled;
mod triggers;

pub use adoption::AdoptionContext;
pub use context::{CONTROLLER, Error, FIELD_MANAGER, OperatorContext};

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, Reconciler, apply_status};
use crate::api::{ClusterServiceVersion, InstallPlan, Operator, operator_label};
use crate::controllers::kit::Shutdown;
use adoption::RecentCreates;
use context::{DEBOUNCE, SETTLING_RECHECK, WATCHED, guarded_meta, kube_error};
use triggers::{affected, crd_wakes, for_subscription, subscriptions_beside};

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
    let crd_wakes = crd_wakes(operators.clone(), crd_changes);
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
        .watches_shared_stream(sub_changes, move |o| for_subscription(&for_subs, &o));

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
    let subs_for_csvs = subscriptions.clone();
    let subs_for_plans = subscriptions.clone();
    let adoption_controller = Controller::for_shared_stream(adoption_subs, subscriptions)
        .watches_shared_stream(adoption_csvs, move |o| {
            subscriptions_beside(&subs_for_csvs, &o)
        })
        .watches_shared_stream(adoption_plans, move |o| {
            subscriptions_beside(&subs_for_plans, &o)
        });
    tokio::join!(
        kit::run(status_controller, status, shutdown.clone()),
        kit::run(adoption_controller, adoption, shutdown),
    );
    for watch in labelled_watches {
        watch.abort();
    }
}
