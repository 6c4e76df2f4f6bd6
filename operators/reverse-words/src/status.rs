//! The status of a `ReverseWordsApp` from what is observed: its Deployment and the pods
//! behind it. Pure, so each case is a unit test.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use operator_common::conditions;

use crate::api::{DEPLOYMENT_NOT_READY, READY, ReverseWordsAppStatus};

/// Ready: the Deployment controller has seen the current spec and every desired replica
/// is updated and ready, with no old pods left.
pub fn deployment_ready(deployment: &Deployment) -> bool {
    let desired = deployment.spec.replicas.unwrap_or(1);
    let Some(status) = &deployment.status else {
        return false;
    };
    status.observed_generation >= deployment.metadata.generation
        && status.replicas.unwrap_or(0) == desired
        && status.updated_replicas.unwrap_or(0) == desired
        && status.ready_replicas.unwrap_or(0) == desired
}

/// Names of the pending or running pods that are not being deleted, sorted.
pub fn app_pods(pods: &[Pod]) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            matches!(phase, Some("Pending" | "Running"))
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// What the reconcile saw.
pub enum Observed<'a> {
    /// The children were applied; this is the Deployment as the server returned it.
    Applied {
        deployment: &'a Deployment,
        pods: &'a [Pod],
    },
    /// A step failed: the message says which and why.
    Failed(&'a str),
}

pub fn desired(
    current: &ReverseWordsAppStatus,
    generation: Option<i64>,
    observed: Observed<'_>,
) -> ReverseWordsAppStatus {
    let mut status = current.clone();
    let (ready, reason, message) = match observed {
        Observed::Applied { deployment, pods } => {
            status.app_pods = app_pods(pods);
            let ready = deployment_ready(deployment);
            let message = if ready {
                "all replicas are ready".to_string()
            } else {
                let s = deployment.status.clone().unwrap_or_default();
                format!(
                    "{} of {} replicas ready",
                    s.ready_replicas.unwrap_or(0),
                    deployment.spec.replicas.unwrap_or(1)
                )
            };
            (ready, None, message)
        }
        Observed::Failed(message) => (false, Some("ReconcileFailed"), message.to_string()),
    };
    conditions::set(
        &mut status.conditions,
        DEPLOYMENT_NOT_READY,
        !ready,
        reason.unwrap_or(DEPLOYMENT_NOT_READY),
        &message,
        generation,
    );
    conditions::set(
        &mut status.conditions,
        READY,
        ready,
        reason.unwrap_or(READY),
        &message,
        generation,
    );
    status
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn deployment(
        desired: i32,
        generation: i64,
        observed: i64,
        ready: i32,
        total: i32,
    ) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            spec: DeploymentSpec {
                replicas: Some(desired),
                ..DeploymentSpec::default()
            },
            status: Some(DeploymentStatus {
                observed_generation: Some(observed),
                replicas: Some(total),
                updated_replicas: Some(ready),
                ready_replicas: Some(ready),
                ..DeploymentStatus::default()
            }),
        }
    }

    fn pod(name: &str, phase: &str, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                deletion_timestamp: deleting.then(|| Time(Timestamp::now())),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    fn condition(status: &ReverseWordsAppStatus, type_: &str) -> (String, String) {
        let c = conditions::find(&status.conditions, type_).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn ready_needs_every_replica_of_the_current_generation() {
        assert!(deployment_ready(&deployment(2, 3, 3, 2, 2)));
        assert!(
            !deployment_ready(&deployment(2, 3, 2, 2, 2)),
            "old generation"
        );
        assert!(!deployment_ready(&deployment(2, 1, 1, 1, 1)), "one of two");
        assert!(
            !deployment_ready(&deployment(2, 1, 1, 2, 3)),
            "an old pod left"
        );
        let fresh = Deployment {
            status: None,
            ..deployment(1, 1, 1, 1, 1)
        };
        assert!(!deployment_ready(&fresh), "no status yet");
    }

    #[test]
    fn app_pods_are_the_live_pending_or_running_ones() {
        let pods = [
            pod("b", "Running", false),
            pod("a", "Pending", false),
            pod("c", "Succeeded", false),
            pod("d", "Running", true),
        ];
        assert_eq!(app_pods(&pods), vec!["a", "b"]);
    }

    #[test]
    fn status_follows_the_deployment() {
        let pods = [pod("dp-x-1", "Running", false)];
        let not_ready = desired(
            &ReverseWordsAppStatus::default(),
            Some(1),
            Observed::Applied {
                deployment: &deployment(1, 1, 1, 0, 1),
                pods: &pods,
            },
        );
        assert_eq!(condition(&not_ready, READY), ("False".into(), READY.into()));
        assert_eq!(
            condition(&not_ready, DEPLOYMENT_NOT_READY),
            ("True".into(), DEPLOYMENT_NOT_READY.into())
        );
        assert_eq!(not_ready.app_pods, vec!["dp-x-1"]);

        let ready = desired(
            &not_ready,
            Some(1),
            Observed::Applied {
                deployment: &deployment(1, 1, 1, 1, 1),
                pods: &pods,
            },
        );
        assert_eq!(condition(&ready, READY), ("True".into(), READY.into()));
        assert_eq!(condition(&ready, DEPLOYMENT_NOT_READY).0, "False");
        // Recomputing the same observation changes nothing: no status write.
        let again = desired(
            &ready,
            Some(1),
            Observed::Applied {
                deployment: &deployment(1, 1, 1, 1, 1),
                pods: &pods,
            },
        );
        assert_eq!(again, ready);
    }

    #[test]
    fn a_failure_shows_in_the_conditions() {
        let failed = desired(
            &ReverseWordsAppStatus::default(),
            Some(2),
            Observed::Failed("applying Service service-x: forbidden"),
        );
        let ready = conditions::find(&failed.conditions, READY).unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason, "ReconcileFailed");
        assert!(ready.message.contains("forbidden"));
        assert_eq!(ready.observed_generation, Some(2));
    }
}
