//! One step, decided (pure): the object it writes, shaped from its manifest, and what to do
//! given what the cluster holds. The applier ([`super::apply`]) only carries this out.

use std::time::Duration;

use kube::api::GroupVersionKind;
use serde_json::{Value, json};

use super::crd_write::{self, CrdWrite};
use super::error::StepError;
use crate::api::{ClusterServiceVersion, Step, StepStatus};
use crate::controllers::kit::ConditionStatus;
use crate::controllers::plan::steps::{KIND_CRD, KIND_CSV, KIND_SUBSCRIPTION, LABEL_MANAGED};
use kube::Resource;

/// What a step does this round.
#[derive(Debug, PartialEq)]
pub enum StepAction {
    /// Nothing to write: the step is done with this status.
    Done(StepStatus),
    /// Nothing to write: its API is not served yet (a CRD being established).
    Wait,
    /// Merge these labels and annotations into the CRD (see [`crd_write`]).
    PatchCrdMetadata(Value),
    /// Write the whole object (server-side apply, forced). `check_upgrade`: it replaces an
    /// existing CRD, checked for upgrade safety first.
    Apply { check_upgrade: bool },
}

/// What to do with the CRD step in `status` so far that writes `object`, decided from the
/// shared metadata cache: `known` is the CRD's cached metadata with the step's spec (the
/// cache knows it holds that spec, and so is Established). None: read the CRD and decide
/// with [`decide`] (the manifest's own annotations were changed on it).
pub fn decide_cached(status: StepStatus, object: &Value, known: &Value) -> Option<StepAction> {
    match crd_write::decide(object, known) {
        CrdWrite::Nothing => Some(crd_done(true, status)),
        CrdWrite::Metadata(patch) => Some(StepAction::PatchCrdMetadata(patch)),
        CrdWrite::Apply => None,
    }
}

/// What to do with the step of `kind` in `status` so far that writes `object`, given the
/// object the API server holds (`existing`).
pub fn decide(
    kind: &str,
    status: StepStatus,
    object: &Value,
    existing: Option<&Value>,
) -> StepAction {
    let apply = |check_upgrade| StepAction::Apply { check_upgrade };
    match existing {
        _ if kind != KIND_CRD => apply(false),
        None => apply(false),
        Some(found) => match crd_write::decide(object, found) {
            CrdWrite::Nothing => crd_done(established(found), status),
            CrdWrite::Metadata(patch) => StepAction::PatchCrdMetadata(patch),
            CrdWrite::Apply => apply(true),
        },
    }
}

/// A CRD step with nothing (more) to write: waiting until its CRD is Established; then
/// Created when this plan waited for it, else Present.
pub fn crd_done(established: bool, status: StepStatus) -> StepAction {
    match established {
        false => StepAction::Wait,
        true if status == StepStatus::WaitingForApi => StepAction::Done(StepStatus::Created),
        true => StepAction::Done(StepStatus::Present),
    }
}

/// The status of a step whose object was written: Present when it existed before, except
/// for a CRD this plan created and then waited for, which stays Created.
pub fn written(existed: bool, status: StepStatus) -> StepStatus {
    if existed && status != StepStatus::WaitingForApi {
        StepStatus::Present
    } else {
        StepStatus::Created
    }
}

/// Whether the CRD `crd` (as JSON) is Established.
pub fn established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == ConditionStatus::True.as_str())
}

/// The step's manifest as JSON.
pub fn manifest(step: &Step) -> Result<Value, StepError> {
    let r = &step.resource;
    serde_json::from_str(r.manifest.as_deref().unwrap_or("null")).map_err(|source| {
        StepError::NotJson {
            kind: r.kind.clone(),
            name: r.name.clone(),
            source,
        }
    })
}

/// The object a step writes, shaped from its manifest.
pub struct Shaped {
    pub object: Value,
    /// CSVs among its owners whose UID the executor fills in: (index in
    /// `metadata.ownerReferences`, CSV name).
    pub owner_uids: Vec<(usize, String)>,
}

/// Shapes `object` as the step of `step` writes it into `namespace`: its served kind,
/// namespace, the `olm.managed` label and owner references to the CSV it belongs to.
pub fn shape(
    mut object: Value,
    gvk: &GroupVersionKind,
    namespaced: bool,
    namespace: &str,
    step: &Step,
) -> Shaped {
    let kind = step.resource.kind.as_str();
    object["apiVersion"] = json!(gvk.api_version());
    object["kind"] = json!(gvk.kind);
    if namespaced {
        object["metadata"]["namespace"] = json!(namespace);
    }
    let own = kind != KIND_SUBSCRIPTION && kind != KIND_CSV;
    if own {
        if !object["metadata"]["labels"].is_object() {
            object["metadata"]["labels"] = json!({});
        }
        object["metadata"]["labels"][LABEL_MANAGED] = json!("true");
    }
    let mut owner_uids = Vec::new();
    if namespaced && own {
        let owners = owner_references(&mut object, &step.resolving);
        for (i, owner) in owners.iter().enumerate() {
            if owner["kind"] == KIND_CSV && owner["uid"].as_str().is_none_or(str::is_empty) {
                let name = owner["name"].as_str().unwrap_or_default();
                owner_uids.push((i, name.to_string()));
            }
        }
        if !owners.is_empty() {
            object["metadata"]["ownerReferences"] = Value::Array(owners);
        }
    }
    Shaped { object, owner_uids }
}

/// The owners of a namespaced step's object: the manifest's own ownerReferences when it has
/// any (upstream's steps carry them, a CSV's UID left for the executor to fill), else the
/// CSV the step resolves (our plans' steps). None without either.
fn owner_references(object: &mut Value, resolving: &str) -> Vec<Value> {
    match object["metadata"]["ownerReferences"].take() {
        Value::Array(owners) if !owners.is_empty() => owners,
        _ if resolving.is_empty() => Vec::new(),
        _ => vec![json!({
            "apiVersion": ClusterServiceVersion::api_version(&()),
            "kind": KIND_CSV,
            "name": resolving,
            "controller": false,
            "blockOwnerDeletion": false,
        })],
    }
}

/// What a round of steps came to.
#[derive(Debug, Default)]
pub struct Round {
    /// Steps written this round.
    pub applied: usize,
    /// A CRD is not Established yet.
    pub waiting: bool,
    /// The last failure worth another try: what it says, and whether for ever.
    pub retry: Option<(String, bool)>,
    /// A step refused for good: the plan fails.
    pub refused: Option<StepError>,
}

/// Where a round leaves the plan.
#[derive(Debug, PartialEq, Eq)]
pub enum RoundOutcome {
    Fail(String),
    /// Looked at again soon; the plan's message, when it is to say why.
    Again(Option<String>),
    Complete,
}

/// Where `round` leaves a plan whose retries started `elapsed` ago, given the retry
/// `timeout`.
pub fn round_outcome(round: Round, elapsed: Duration, timeout: Duration) -> RoundOutcome {
    if let Some(refused) = round.refused {
        return RoundOutcome::Fail(refused.to_string());
    }
    match round.retry {
        Some((message, forever)) if !forever && elapsed >= timeout => RoundOutcome::Fail(format!(
            "{message} (still failing after the retry timeout of {timeout:?})"
        )),
        Some((message, _)) => RoundOutcome::Again(Some(format!("retrying: {message}"))),
        None if round.waiting => RoundOutcome::Again(None),
        None => RoundOutcome::Complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StepResource;

    fn step(kind: &str, resolving: &str) -> Step {
        Step {
            resolving: resolving.into(),
            resource: StepResource {
                kind: kind.into(),
                name: "x".into(),
                ..StepResource::default()
            },
            ..Step::default()
        }
    }

    fn crd(established: bool) -> Value {
        let status = if established { "True" } else { "False" };
        json!({
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com"},
            "status": {"conditions": [{"type": "Established", "status": status}]},
        })
    }

    #[test]
    fn anything_but_a_crd_is_applied() {
        let action = decide("ConfigMap", StepStatus::Unknown, &json!({}), None);
        assert_eq!(
            action,
            StepAction::Apply {
                check_upgrade: false
            }
        );
    }

    #[test]
    fn a_crd_that_says_it_all_waits_until_established_and_is_never_written() {
        let desired = crd(true);
        let found = crd(false);
        let read = |found| decide(KIND_CRD, StepStatus::Unknown, &desired, found);
        assert_eq!(read(Some(&found)), StepAction::Wait);
        assert_eq!(
            read(Some(&crd(true))),
            StepAction::Done(StepStatus::Present)
        );
        assert_eq!(
            decide_cached(StepStatus::WaitingForApi, &desired, &desired),
            Some(StepAction::Done(StepStatus::Created))
        );
    }

    #[test]
    fn a_crd_with_another_spec_is_checked_before_it_is_replaced() {
        let mut desired = crd(true);
        desired["spec"]["group"] = json!("other.example.com");
        let found = crd(true);
        let read = decide(KIND_CRD, StepStatus::Unknown, &desired, Some(&found));
        assert_eq!(
            read,
            StepAction::Apply {
                check_upgrade: true
            }
        );
        assert_eq!(
            decide(KIND_CRD, StepStatus::Unknown, &desired, None),
            StepAction::Apply {
                check_upgrade: false
            }
        );
    }

    #[test]
    fn a_crd_lacking_only_a_label_gets_a_metadata_patch() {
        let mut desired = crd(true);
        desired["metadata"]["labels"] = json!({"olm.managed": "true"});
        let found = crd(true);
        let action = decide(KIND_CRD, StepStatus::Unknown, &desired, Some(&found));
        assert_eq!(
            action,
            StepAction::PatchCrdMetadata(json!({"metadata": {"labels": {"olm.managed": "true"}}}))
        );
    }

    #[test]
    fn a_namespaced_object_is_owned_by_its_csv_and_labelled_managed() {
        let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let shaped = shape(
            json!({"metadata": {"name": "x"}}),
            &gvk,
            true,
            "ns",
            &step("ConfigMap", "op.v1"),
        );
        assert_eq!(shaped.object["metadata"]["namespace"], "ns");
        assert_eq!(shaped.object["metadata"]["labels"][LABEL_MANAGED], "true");
        assert_eq!(
            shaped.object["metadata"]["ownerReferences"][0]["name"],
            "op.v1"
        );
        assert_eq!(shaped.owner_uids, vec![(0, "op.v1".to_string())]);
        // Cluster-scoped objects have no owners; a CSV is not labelled.
        let cluster = shape(json!({}), &gvk, false, "ns", &step("ClusterRole", "op.v1"));
        assert!(cluster.object["metadata"]["ownerReferences"].is_null());
        let csv = shape(json!({}), &gvk, true, "ns", &step(KIND_CSV, "op.v1"));
        assert!(csv.object["metadata"]["labels"].is_null());
        assert!(csv.owner_uids.is_empty());
    }

    #[test]
    fn a_round_fails_on_a_refusal_or_after_the_retry_timeout_unless_retried_for_ever() {
        let minute = Duration::from_secs(60);
        let retry = |forever| Round {
            retry: Some(("step 1 failed".into(), forever)),
            ..Round::default()
        };
        assert_eq!(
            round_outcome(retry(false), minute, minute),
            RoundOutcome::Fail(
                "step 1 failed (still failing after the retry timeout of 60s)".into()
            )
        );
        assert_eq!(
            round_outcome(retry(true), minute, minute),
            RoundOutcome::Again(Some("retrying: step 1 failed".into()))
        );
        assert_eq!(
            round_outcome(retry(false), Duration::ZERO, minute),
            RoundOutcome::Again(Some("retrying: step 1 failed".into()))
        );
        let refused = Round {
            refused: Some(StepError::CsvMissing("x".into())),
            ..retry(true)
        };
        assert!(matches!(
            round_outcome(refused, Duration::ZERO, minute),
            RoundOutcome::Fail(_)
        ));
        let waiting = Round {
            waiting: true,
            ..Round::default()
        };
        assert_eq!(
            round_outcome(waiting, minute, minute),
            RoundOutcome::Again(None)
        );
        assert_eq!(
            round_outcome(Round::default(), minute, minute),
            RoundOutcome::Complete
        );
    }

    #[test]
    fn written_steps_are_present_unless_this_plan_created_and_waited() {
        assert_eq!(written(true, StepStatus::Unknown), StepStatus::Present);
        assert_eq!(
            written(true, StepStatus::WaitingForApi),
            StepStatus::Created
        );
        assert_eq!(written(false, StepStatus::Unknown), StepStatus::Created);
    }
}
