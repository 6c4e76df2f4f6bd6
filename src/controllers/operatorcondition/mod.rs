//! OperatorConditions: what the operator reports in `spec.conditions` is copied into
//! `status.conditions` with the generation OLM saw (the CSV controller reads that copy to
//! decide whether an upgrade may go on, and a copy of an older generation is stale). The
//! OperatorCondition itself, and the RBAC that lets the operator write it, come with the
//! CSV's install (the CSV controller plans them).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};

use super::context::Context;
use super::kit::Shutdown;
use super::kit::{self, KitState, ObjectKey, PanicError, ReconcileError, Reconciler, apply_status};
use crate::api::OperatorCondition;
use crate::api::operatorcondition::{OperatorConditionEntry, OperatorConditionStatus};

pub const CONTROLLER: &str = "operatorcondition";
pub const FIELD_MANAGER: &str = "olm-operatorcondition";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OperatorCondition {key}: writing status: {error}")]
    WriteStatus {
        key: String,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::WriteStatus { .. } => "kube",
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct OperatorConditionContext {
    shared: Arc<Context>,
    kit: KitState<ObjectKey>,
}

impl Reconciler for OperatorConditionContext {
    type Object = OperatorCondition;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!(object_key);

    async fn sync(&self, condition: &OperatorCondition) -> Result<Action, Error> {
        let current = condition
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let desired = observed(
            &current,
            &condition.spec.conditions,
            condition.metadata.generation,
            kit::now(),
        );
        if desired != current {
            let status = OperatorConditionStatus {
                conditions: desired,
            };
            apply_status(self, condition, &status)
                .await
                .map_err(|error| Error::WriteStatus {
                    key: ObjectKey::of(&condition.metadata).to_string(),
                    error,
                })?;
            tracing::debug!(condition = %condition.name_any(), "status conditions copied from spec");
        }
        Ok(Action::await_change())
    }
}

/// `status.conditions` once `reported` (the spec's) are observed at `generation`: each
/// reported condition replaces the status one of its type (keeping its transition time when
/// the status did not change); status conditions of other types stay.
pub fn observed(
    current: &[OperatorConditionEntry],
    reported: &[OperatorConditionEntry],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<OperatorConditionEntry> {
    let mut out = current.to_vec();
    for condition in reported {
        let mut entry = OperatorConditionEntry {
            observed_generation: generation,
            ..condition.clone()
        };
        match out.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(existing) => {
                entry.last_transition_time = if existing.status == entry.status {
                    existing.last_transition_time.clone()
                } else {
                    entry.last_transition_time.or(Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
                    ))
                };
                *existing = entry;
            }
            None => {
                entry.last_transition_time = entry.last_transition_time.or(Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
                ));
                out.push(entry);
            }
        }
    }
    out
}

pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let (conditions, changes) = shared.informers.operator_conditions.subscribe_touched();
    let controller = Controller::for_shared_stream(changes, conditions);
    let ctx = Arc::new(OperatorConditionContext {
        shared,
        kit: KitState::default(),
    });
    kit::run(controller, ctx, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(type_: &str, status: &str) -> OperatorConditionEntry {
        OperatorConditionEntry {
            type_: type_.into(),
            status: status.into(),
            reason: "R".into(),
            message: "m".into(),
            ..OperatorConditionEntry::default()
        }
    }

    #[test]
    fn reported_conditions_are_observed_with_the_generation() {
        let now = Timestamp::from_second(1000).unwrap();
        let first = observed(&[], &[entry("Upgradeable", "False")], Some(1), now);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].observed_generation, Some(1));
        assert!(first[0].last_transition_time.is_some());
        // Same status at a later generation: only the generation moves.
        let later = Timestamp::from_second(2000).unwrap();
        let second = observed(&first, &[entry("Upgradeable", "False")], Some(2), later);
        assert_eq!(second[0].observed_generation, Some(2));
        assert_eq!(
            second[0].last_transition_time,
            first[0].last_transition_time
        );
        // Unchanged input: unchanged output (no write).
        assert_eq!(
            observed(&second, &[entry("Upgradeable", "False")], Some(2), later),
            second
        );
        // Other types stay.
        let other = vec![entry("Other", "True")];
        assert_eq!(observed(&other, &[], Some(2), later), other);
    }
}
