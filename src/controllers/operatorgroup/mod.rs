//! The OperatorGroup controller: works out which namespaces each group targets and keeps
//! `status.namespaces` current as namespaces come and go; annotates member CSVs with the
//! group (`olm.operatorGroup`, `olm.operatorNamespace`, `olm.targetNamespaces`) and the
//! group with the APIs its members provide (`olm.providedAPIs`); and maintains upstream's
//! aggregated ClusterRoles (per group, and per provided API).
//!
//! Everything it writes is compared with the cache first: a steady state costs no writes.
//! The group's ClusterRoles carry owner labels (cluster-scoped objects cannot be owned by a
//! namespaced group); a pruner deletes those whose group is gone.

mod apply;
mod context;
mod gather;
mod prune;
pub mod status;
mod triggers;

pub use context::{CONTROLLER, Error, FIELD_MANAGER, OperatorGroupContext};

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::kit::own_writes::OwnWrites;
use super::kit::{self, KitState, ObjectKey, Reconciler};
use crate::api::OperatorGroup;
use crate::controllers::kit::Shutdown;
use apply::apply;
use gather::gather;
use prune::prune_group_roles;
use triggers::{groups_for_namespace, groups_in};

impl Reconciler for OperatorGroupContext {
    type Object = OperatorGroup;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!(object_key);

    async fn sync(&self, group: &OperatorGroup) -> Result<Action, Error> {
        sync(group, self).await
    }
}

async fn sync(group: &OperatorGroup, ctx: &OperatorGroupContext) -> Result<Action, Error> {
    // Until every cache is listed, an absent namespace or CSV is only not yet seen.
    if !ctx.caches_listed().await {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let observed = gather(group, ctx).await?;
    let plan = status::decide(group, &observed, kit::now());
    let roles_in_flight = apply(group, &plan, ctx).await?;
    // A named ServiceAccount that does not exist yet: look again later (no SA watch).
    Ok(if roles_in_flight {
        // Roles skipped while our own write of them is on its way: look again once
        // the cache has it.
        Action::requeue(Duration::from_secs(2))
    } else if group.spec.service_account_name.is_some() && observed.service_account_uid.is_none() {
        Action::requeue(Duration::from_secs(30))
    } else {
        Action::await_change()
    })
}

/// Runs the controller, and the pruner of deleted groups' leftovers, until `shutdown`
/// (leader only).
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let (namespaces, namespace_changes) = shared.informers.cluster.namespaces.subscribe_touched();
    let (csvs, csv_changes) = shared.informers.csvs.subscribe_touched();
    // The shared ClusterRole cache (the CSV controller reads it too); its changes are not
    // this controller's triggers.
    let (cluster_roles, _) = shared.informers.cluster.rbac.cluster_roles.subscribe();

    let (groups, group_changes) = shared.informers.operator_groups.subscribe_touched();
    let controller = Controller::for_shared_stream(group_changes, groups.clone());
    let ctx = Arc::new(OperatorGroupContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        groups: groups.clone(),
        namespaces,
        csvs,
        cluster_roles,
        role_writes: OwnWrites::default(),
    });
    let pruner = tokio::spawn(prune_group_roles(Arc::clone(&ctx)));
    let for_namespaces = groups.clone();
    let for_csvs = groups.clone();
    let controller = controller
        .watches_shared_stream(namespace_changes, move |namespace| {
            groups_for_namespace(&for_namespaces, &namespace.name_any())
        })
        .watches_shared_stream(csv_changes, move |csv| {
            groups_in(&for_csvs, csv.meta().namespace.as_deref())
        });
    kit::run(controller, ctx, shutdown).await;
    pruner.abort();
}
