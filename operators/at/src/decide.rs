//! The phase machine of an `At` (PENDING → RUNNING → DONE) and the Pod it runs: pure
//! functions of the spec, the current phase, the clock and the observed Pod.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use crate::api::{At, DONE, PENDING, RUNNING};
use crate::schedule;

pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "at-operator");
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=at-operator";

pub fn pod_name(at: &str) -> String {
    format!("{at}-pod")
}

/// The one-shot busybox Pod running `spec.command` (split on spaces, as the seed does).
pub fn pod(at: &At, owner: &OwnerReference) -> Pod {
    let name = at.metadata.name.clone().unwrap_or_default();
    let labels = BTreeMap::from([
        ("app".to_string(), name.clone()),
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
    ]);
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&name)),
            namespace: at.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "busybox".into(),
                image: Some("busybox".into()),
                command: Some(
                    at.spec
                        .command
                        .split_whitespace()
                        .map(String::from)
                        .collect(),
                ),
                ..Container::default()
            }],
            restart_policy: Some("OnFailure".into()),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The Pod as far as the phase machine cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    Absent,
    Active,
    /// Succeeded or Failed; the text says which and why.
    Finished(String),
}

pub fn pod_state(pod: Option<&Pod>) -> PodState {
    let Some(pod) = pod else {
        return PodState::Absent;
    };
    let status = pod.status.clone().unwrap_or_default();
    match status.phase.as_deref() {
        Some(phase @ ("Succeeded" | "Failed")) => {
            let detail = [status.reason, status.message]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
            PodState::Finished(if detail.is_empty() {
                phase.to_string()
            } else {
                format!("{phase} ({detail})")
            })
        }
        _ => PodState::Active,
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Decision {
    pub phase: &'static str,
    /// Create the Pod now.
    pub create_pod: bool,
    /// Look again after this long (the schedule is ahead).
    pub requeue_after: Option<Duration>,
    /// `Ok(())` when the schedule parses (or no longer matters), else why not.
    pub schedule: Result<(), schedule::Error>,
}

pub fn decide(
    phase: Option<&str>,
    schedule_text: &str,
    now: Timestamp,
    pod: &PodState,
) -> Decision {
    match phase {
        Some(DONE) => Decision {
            phase: DONE,
            create_pod: false,
            requeue_after: None,
            schedule: Ok(()),
        },
        Some(RUNNING) => running(pod),
        // No phase yet (a new At) or PENDING, or a phase this operator does not know.
        _ => match schedule::parse(schedule_text) {
            Err(error) => Decision {
                phase: PENDING,
                create_pod: false,
                requeue_after: None,
                schedule: Err(error),
            },
            Ok(at) if at > now => Decision {
                phase: PENDING,
                create_pod: false,
                requeue_after: Some(Duration::from_millis(
                    (at.as_millisecond() - now.as_millisecond()).max(0) as u64,
                )),
                schedule: Ok(()),
            },
            Ok(_) => running(pod),
        },
    }
}

fn running(pod: &PodState) -> Decision {
    match pod {
        PodState::Finished(_) => Decision {
            phase: DONE,
            create_pod: false,
            requeue_after: None,
            schedule: Ok(()),
        },
        // The Pod's changes come through the watch of owned Pods.
        PodState::Active | PodState::Absent => Decision {
            phase: RUNNING,
            create_pod: *pod == PodState::Absent,
            requeue_after: None,
            schedule: Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodStatus;

    use super::*;
    use crate::api::AtSpec;

    fn now() -> Timestamp {
        "2030-05-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn pending_until_the_schedule_then_running_with_a_pod() {
        let d = decide(None, "2030-05-01T12:00:30Z", now(), &PodState::Absent);
        assert_eq!(d.phase, PENDING);
        assert_eq!(d.requeue_after, Some(Duration::from_secs(30)));
        assert!(!d.create_pod);
        let d = decide(
            Some(PENDING),
            "2030-05-01T12:00:00Z",
            now(),
            &PodState::Absent,
        );
        assert_eq!(
            (d.phase, d.create_pod, d.requeue_after),
            (RUNNING, true, None)
        );
        let d = decide(
            Some(PENDING),
            "2001-01-01T00:00:00Z",
            now(),
            &PodState::Absent,
        );
        assert_eq!(d.phase, RUNNING, "an overdue schedule runs at once");
    }

    #[test]
    fn running_until_the_pod_finishes() {
        let d = decide(Some(RUNNING), "x", now(), &PodState::Active);
        assert_eq!((d.phase, d.create_pod), (RUNNING, false));
        let d = decide(Some(RUNNING), "x", now(), &PodState::Absent);
        assert_eq!(
            (d.phase, d.create_pod),
            (RUNNING, true),
            "a lost pod is made again"
        );
        let d = decide(
            Some(RUNNING),
            "x",
            now(),
            &PodState::Finished("Succeeded".into()),
        );
        assert_eq!((d.phase, d.create_pod), (DONE, false));
        let d = decide(Some(DONE), "x", now(), &PodState::Absent);
        assert_eq!(
            (d.phase, d.create_pod, d.requeue_after),
            (DONE, false, None)
        );
    }

    #[test]
    fn a_bad_schedule_stays_pending_and_says_why() {
        let d = decide(None, "next tuesday", now(), &PodState::Absent);
        assert_eq!(
            (d.phase, d.create_pod, d.requeue_after),
            (PENDING, false, None)
        );
        let error = d.schedule.unwrap_err();
        assert!(error.to_string().contains("next tuesday"), "{error}");
    }

    #[test]
    fn the_pod_runs_the_command_once() {
        let mut at = At::new(
            "job",
            AtSpec {
                schedule: "2030-05-01T12:00:00Z".into(),
                command: "echo  YAY".into(),
            },
        );
        at.metadata.namespace = Some("ns".into());
        let owner = OwnerReference {
            kind: "At".into(),
            name: "job".into(),
            ..OwnerReference::default()
        };
        let p = pod(&at, &owner);
        assert_eq!(p.metadata.name.as_deref(), Some("job-pod"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(p.metadata.owner_references, Some(vec![owner]));
        assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "job");
        let spec = p.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
        assert_eq!(spec.containers[0].image.as_deref(), Some("busybox"));
        assert_eq!(
            spec.containers[0].command,
            Some(vec!["echo".into(), "YAY".into()])
        );
    }

    #[test]
    fn pod_state_from_its_phase() {
        let with = |phase: &str, reason: Option<&str>| Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                reason: reason.map(String::from),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert_eq!(pod_state(None), PodState::Absent);
        assert_eq!(pod_state(Some(&with("Running", None))), PodState::Active);
        assert_eq!(pod_state(Some(&with("Pending", None))), PodState::Active);
        assert_eq!(
            pod_state(Some(&with("Succeeded", None))),
            PodState::Finished("Succeeded".into())
        );
        assert_eq!(
            pod_state(Some(&with("Failed", Some("Evicted")))),
            PodState::Finished("Failed (Evicted)".into())
        );
    }
}
