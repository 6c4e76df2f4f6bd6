//! The controllers `olm run` hosts, one module per kind, sharing one [`context::Context`]
//! (client, event Recorder, metrics, catalog snapshots, settings, leadership). Each keeps its
//! own state in its own module and applies under its own field manager (`olm-<controller>`);
//! they meet through the API objects and the snapshots, never through each other's internals.

pub mod authz;
pub mod catalogsource;
pub mod context;
pub mod copied_csvs;
pub mod csv;
pub mod host;
pub mod installplan;
pub mod kit;
pub mod metrics;
pub mod olmconfig;
pub mod operator;
pub mod operatorcondition;
pub mod operatorgroup;
pub mod plan;
pub mod subscription;

use crate::controllers::host::{Controller, Role};

/// Every controller of `olm run` that runs once per watched namespace (or once for all), with
/// when it runs.
pub fn all() -> Vec<Controller> {
    vec![
        Controller::new(
            catalogsource::CONTROLLER,
            // Every replica keeps the catalog cache (read-only servers answer from it); only the
            // leader writes status and Events.
            Role::EveryReplica,
            catalogsource::run,
        ),
        Controller::new(subscription::CONTROLLER, Role::Leader, subscription::run),
        Controller::new(installplan::CONTROLLER, Role::Leader, installplan::run),
        Controller::new(operatorgroup::CONTROLLER, Role::Leader, operatorgroup::run),
        Controller::new(csv::CONTROLLER, Role::Leader, csv::run),
        Controller::new(operator::CONTROLLER, Role::Leader, operator::run),
        Controller::new(
            operatorcondition::CONTROLLER,
            Role::Leader,
            operatorcondition::run,
        ),
    ]
}

/// The controllers of cluster singletons: once per process, whatever the watched namespaces.
pub fn once_per_process() -> Vec<Controller> {
    vec![Controller::new(
        olmconfig::CONTROLLER,
        Role::Leader,
        olmconfig::run,
    )]
}
