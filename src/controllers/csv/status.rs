//! The status a round writes, and the Events of its phase transitions.

use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;

use super::phase::Step;
use crate::api::{ClusterServiceVersionStatus, CsvPhase};
use crate::controllers::kit::apply_status;

use super::context::{Error, Round, now};
use super::phase;

/// The status fields this controller writes (cleanup is not its own).
pub(super) fn owned_fields(status: &ClusterServiceVersionStatus) -> ClusterServiceVersionStatus {
    ClusterServiceVersionStatus {
        cleanup: None,
        ..status.clone()
    }
}

/// Writes the status `step` leads to from `current` (the object's status, or where the
/// `passed` steps took it this round); nothing when it is unchanged.
pub(super) async fn write_status(
    round: &Round<'_>,
    current: Option<&ClusterServiceVersionStatus>,
    passed: &[Step],
    step: &Step,
    requirement_status: Vec<crate::api::RequirementStatus>,
    certs: Option<(Timestamp, Timestamp)>,
) -> Result<(), Error> {
    let mut desired = phase::next_status(current, step, requirement_status, now());
    if let Some((issued, rotate_at)) = certs {
        desired.certs_last_updated =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(issued));
        desired.certs_rotate_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            rotate_at,
        ));
    }
    let stored = round.csv.status.as_ref();
    if stored.map(owned_fields) == Some(owned_fields(&desired)) {
        return Ok(());
    }
    apply_status(round.ctx, round.csv, &owned_fields(&desired))
        .await
        .map_err(round.fail("write_status"))?;
    for passed in passed {
        transition_event(round, passed);
    }
    if phase::is_transition(current, step) {
        transition_event(round, step);
        // The CSVs this one replaces or is replaced by wait on its phase.
        let mut related: Vec<String> = round.csv.spec.replaces.iter().cloned().collect();
        related.extend(
            round
                .ctx
                .csvs
                .state()
                .iter()
                .filter_map(|g| g.0.as_ref().ok())
                .filter(|o| {
                    o.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                        && o.spec.replaces.as_deref() == Some(round.name.as_str())
                })
                .map(kube::ResourceExt::name_any),
        );
        // A `replaces` that was never installed (a fresh install) has nothing to wake.
        related.retain(|name| {
            round
                .ctx
                .csvs
                .get(&ObjectRef::new(name).within(&round.namespace))
                .is_some()
        });
        for name in related {
            let _ = round
                .ctx
                .related
                .send(ObjectRef::new(&name).within(&round.namespace));
        }
    }
    Ok(())
}

/// The Event of one phase transition.
pub(super) fn transition_event(round: &Round<'_>, step: &Step) {
    let type_ = if step.phase == CsvPhase::Failed {
        EventType::Warning
    } else {
        EventType::Normal
    };
    round.ctx.shared.event(
        &round.csv.object_ref(&()),
        type_,
        step.reason.as_str(),
        "Sync",
        format!("{:?}: {}", step.phase, step.message),
    );
}
