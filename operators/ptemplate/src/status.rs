//! The status of a `Ptemplate` from what is observed: its consumer DaemonSet and pods.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use operator_common::conditions;

use crate::api::{PtemplateStatus, READY};

/// Names of the consumer pods that are not being deleted, sorted.
pub fn consumers(pods: &[Pod]) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// Ready: the DaemonSet controller saw the current spec and every scheduled consumer is ready.
pub fn daemonset_ready(ds: &DaemonSet) -> (bool, String) {
    let Some(status) = &ds.status else {
        return (false, "the consumer DaemonSet has no status yet".into());
    };
    let current = status.observed_generation >= ds.metadata.generation;
    let ready = current && status.number_ready == status.desired_number_scheduled;
    (
        ready,
        format!(
            "{} of {} consumers ready",
            status.number_ready, status.desired_number_scheduled
        ),
    )
}

pub enum Observed<'a> {
    Applied {
        daemonset: &'a DaemonSet,
        pods: &'a [Pod],
    },
    Failed(&'a str),
}

pub fn desired(
    current: &PtemplateStatus,
    generation: Option<i64>,
    observed: Observed<'_>,
) -> PtemplateStatus {
    let mut status = current.clone();
    match observed {
        Observed::Applied { daemonset, pods } => {
            status.consumers = consumers(pods);
            let (ready, message) = daemonset_ready(daemonset);
            let reason = if ready {
                "ConsumersReady"
            } else {
                "ConsumersNotReady"
            };
            conditions::set(
                &mut status.conditions,
                READY,
                ready,
                reason,
                &message,
                generation,
            );
        }
        Observed::Failed(message) => {
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                "ReconcileFailed",
                message,
                generation,
            );
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DaemonSetStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn ds(generation: i64, observed: i64, ready: i32, desired: i32) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            status: Some(DaemonSetStatus {
                observed_generation: Some(observed),
                number_ready: ready,
                desired_number_scheduled: desired,
                ..DaemonSetStatus::default()
            }),
            ..DaemonSet::default()
        }
    }

    fn pod(name: &str, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                deletion_timestamp: deleting.then(|| Time(Timestamp::now())),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn ready_when_every_scheduled_consumer_is() {
        assert!(daemonset_ready(&ds(2, 2, 3, 3)).0);
        assert!(!daemonset_ready(&ds(2, 1, 3, 3)).0, "old generation");
        assert_eq!(
            daemonset_ready(&ds(1, 1, 1, 3)),
            (false, "1 of 3 consumers ready".into())
        );
        assert!(!daemonset_ready(&DaemonSet::default()).0);
    }

    #[test]
    fn status_lists_live_consumers_and_readiness() {
        let pods = [pod("b", false), pod("a", false), pod("c", true)];
        let s = desired(
            &PtemplateStatus::default(),
            Some(1),
            Observed::Applied {
                daemonset: &ds(1, 1, 2, 2),
                pods: &pods,
            },
        );
        assert_eq!(s.consumers, vec!["a", "b"]);
        let ready = conditions::find(&s.conditions, READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "ConsumersReady")
        );
        let again = desired(
            &s,
            Some(1),
            Observed::Applied {
                daemonset: &ds(1, 1, 2, 2),
                pods: &pods,
            },
        );
        assert_eq!(again, s, "nothing changed, nothing to write");
        let failed = desired(
            &s,
            Some(2),
            Observed::Failed("applying Module m: forbidden"),
        );
        let ready = conditions::find(&failed.conditions, READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "ReconcileFailed")
        );
        assert_eq!(
            failed.consumers, s.consumers,
            "a failure keeps the last consumers"
        );
    }
}
