//! Why a Deployment's pods are not ready, pure: the first unhealthy pod and its first
//! unhealthy container, in one bounded line for a CSV's message (`pod op-7d9f-x2k4l
//! container "manager": ImagePullBackOff: …`). The kubelet's own words are kept, cut to
//! [`DETAIL_LIMIT`] characters; what changes on every restart (the back-off delay) is left
//! out, so a crash-looping pod does not rewrite the CSV's status at each back-off.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;

/// At most this many characters of a kubelet or scheduler message.
pub const DETAIL_LIMIT: usize = 200;

/// How long a container that restarted must have been running again before its CSV reads
/// Succeeded: one that exits at once is Running and Ready for a moment after each restart,
/// long enough for its Deployment to turn Available.
pub const SETTLE_AFTER_RESTART: Duration = Duration::from_secs(30);

/// `text` cut to `limit` characters, with `…` where it was cut.
pub fn bounded(text: &str, limit: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The pods of Deployment `deployment` (made by one of its ReplicaSets, `<deployment>-…`),
/// not being deleted, newest first (the current template's before the old ones), then by
/// name so that the same pod is named round after round.
pub fn of_deployment<'a>(deployment: &str, pods: &'a [Pod]) -> Vec<&'a Pod> {
    let prefix = format!("{deployment}-");
    let mut mine: Vec<&Pod> = pods
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            pod.metadata.owner_references.iter().flatten().any(|o| {
                o.kind == "ReplicaSet" && o.controller == Some(true) && o.name.starts_with(&prefix)
            })
        })
        .collect();
    mine.sort_by(|a, b| {
        let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(b)
            .cmp(&created(a))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    mine
}

/// What the first unhealthy pod among `pods` (in their order) says, if any is.
pub fn first_unhealthy(pods: &[&Pod]) -> Option<String> {
    pods.iter().find_map(|pod| unhealthy(pod))
}

/// The first pod among `pods` with a container that restarted and has been running again
/// for less than `settle` at `now`: what it says, and how long until it has settled.
pub fn unsettled(pods: &[&Pod], now: Timestamp, settle: Duration) -> Option<(String, Duration)> {
    pods.iter().find_map(|pod| {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let statuses = pod.status.as_ref()?.container_statuses.iter().flatten();
        statuses.filter(|c| c.restart_count > 0).find_map(|c| {
            let running = c.state.as_ref()?.running.as_ref()?;
            let started = running.started_at.as_ref().map_or(now, |t| t.0);
            let ran = Duration::try_from(now.duration_since(started)).unwrap_or_default();
            let left = settle.checked_sub(ran).filter(|left| !left.is_zero())?;
            let history = last_run(c).join(", ");
            Some((
                format!(
                    "pod {name} container {:?}: running again after {history}",
                    c.name
                ),
                left,
            ))
        })
    })
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// `reason: message`, either part left out when empty.
fn reason_and_message(reason: Option<&str>, message: Option<&str>) -> String {
    let reason = reason.filter(|r| !r.is_empty());
    let message = message
        .map(|m| bounded(m, DETAIL_LIMIT))
        .filter(|m| !m.is_empty());
    match (reason, message) {
        (Some(reason), Some(message)) => format!("{reason}: {message}"),
        (Some(reason), None) => reason.to_string(),
        (None, Some(message)) => message,
        (None, None) => "no reason given".to_string(),
    }
}

/// Why `pod` is not ready, or None when it is.
fn unhealthy(pod: &Pod) -> Option<String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.as_deref().unwrap_or("Pending");
    if phase == "Failed" {
        let why = reason_and_message(status.reason.as_deref(), status.message.as_deref());
        return Some(format!("pod {name}: Failed: {why}"));
    }
    if let Some(c) = condition(pod, "PodScheduled").filter(|c| c.status == "False") {
        let why = reason_and_message(c.reason.as_deref(), c.message.as_deref());
        return Some(format!("pod {name}: not scheduled: {why}"));
    }
    let ready = condition(pod, "Ready");
    if ready.is_some_and(|c| c.status == "True") {
        return None;
    }
    let init = status.init_container_statuses.iter().flatten();
    let init = init.filter_map(|s| container_problem(s, true).map(|p| ("init container", s, p)));
    let main = status.container_statuses.iter().flatten();
    let main = main.filter_map(|s| container_problem(s, false).map(|p| ("container", s, p)));
    if let Some((kind, s, problem)) = init.chain(main).next() {
        return Some(format!("pod {name} {kind} {:?}: {problem}", s.name));
    }
    Some(match ready {
        Some(c) => format!(
            "pod {name}: not ready: {}",
            reason_and_message(c.reason.as_deref(), c.message.as_deref())
        ),
        None => format!("pod {name}: {phase}"),
    })
}

/// How the container's previous runs ended: `3 restarts`, `last exit: Error (exit code 1)`.
fn last_run(status: &ContainerStatus) -> Vec<String> {
    let mut parts = Vec::new();
    match status.restart_count {
        0 => {}
        1 => parts.push("1 restart".to_string()),
        n => parts.push(format!("{n} restarts")),
    }
    if let Some(ended) = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
    {
        let reason = ended.reason.as_deref().unwrap_or("terminated");
        parts.push(format!(
            "last exit: {reason} (exit code {})",
            ended.exit_code
        ));
    }
    parts
}

/// `head`, then the parts after `separator`, comma-separated.
fn followed(head: String, separator: &str, parts: &[String]) -> String {
    if parts.is_empty() {
        head
    } else {
        format!("{head}{separator}{}", parts.join(", "))
    }
}

/// Why one container is not (yet) ready, or None when it is (or, for an init container, it
/// completed).
fn container_problem(status: &ContainerStatus, init: bool) -> Option<String> {
    let state = status.state.clone().unwrap_or_default();
    let history = last_run(status);
    match state {
        ContainerState {
            waiting: Some(waiting),
            ..
        } => {
            let reason = waiting.reason.as_deref().unwrap_or("Waiting");
            // The kubelet's back-off message names a delay that grows on every restart.
            Some(if reason == "CrashLoopBackOff" {
                followed(reason.to_string(), ": ", &history)
            } else {
                let said = reason_and_message(Some(reason), waiting.message.as_deref());
                followed(said, ", ", &history)
            })
        }
        ContainerState {
            terminated: Some(ended),
            ..
        } if !(init && ended.exit_code == 0) => {
            let reason = ended.reason.as_deref().unwrap_or("terminated");
            let mut head = format!("terminated: {reason} (exit code {})", ended.exit_code);
            if let Some(message) = ended.message.as_deref().filter(|m| !m.trim().is_empty()) {
                head = format!("{head}: {}", bounded(message, DETAIL_LIMIT));
            }
            Some(followed(head, ", ", &history))
        }
        ContainerState {
            running: Some(_), ..
        } if !status.ready => {
            let head = if init {
                "running"
            } else {
                "running, not ready"
            };
            Some(followed(head.to_string(), ", ", &history))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "creationTimestamp": "2026-11-28T10:00:00Z",
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "op-7d9f",
                    "uid": "u", "controller": true
                }]
            },
            "status": status,
        }))
        .unwrap()
    }

    fn running_pod(containers: serde_json::Value) -> serde_json::Value {
        json!({
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                 "message": "containers with unready status: [manager]"}
            ],
            "containerStatuses": containers,
        })
    }

    fn says(status: serde_json::Value) -> String {
        let pods = [pod("op-7d9f-x2k4l", status)];
        first_unhealthy(&of_deployment("op", &pods)).unwrap()
    }

    #[test]
    fn an_image_that_cannot_be_pulled_is_named_with_the_kubelet_message() {
        let back_off = says(running_pod(json!([{
            "name": "manager", "image": "127.0.0.1:1/none:v1", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image \"127.0.0.1:1/none:v1\": ErrImagePull: dial tcp 127.0.0.1:1: connect: connection refused"}}
        }])));
        assert_eq!(
            back_off,
            "pod op-7d9f-x2k4l container \"manager\": ImagePullBackOff: Back-off pulling image \"127.0.0.1:1/none:v1\": ErrImagePull: dial tcp 127.0.0.1:1: connect: connection refused"
        );
        let err = says(running_pod(json!([{
            "name": "manager", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImagePull", "message": "failed to pull"}}
        }])));
        assert_eq!(
            err,
            "pod op-7d9f-x2k4l container \"manager\": ErrImagePull: failed to pull"
        );
    }

    #[test]
    fn a_crash_loop_says_how_often_and_how_the_last_run_ended_not_the_delay() {
        let text = says(running_pod(json!([{
            "name": "manager", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                "message": "back-off 40s restarting failed container=manager pod=op-7d9f-x2k4l"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}
        }])));
        assert_eq!(
            text,
            "pod op-7d9f-x2k4l container \"manager\": CrashLoopBackOff: 3 restarts, last exit: Error (exit code 1)"
        );
    }

    #[test]
    fn an_oom_kill_shows_in_the_last_exit() {
        let text = says(running_pod(json!([{
            "name": "manager", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 1,
            "state": {"running": {"startedAt": "2026-11-28T10:01:00Z"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
        }])));
        assert_eq!(
            text,
            "pod op-7d9f-x2k4l container \"manager\": running, not ready, 1 restart, last exit: OOMKilled (exit code 137)"
        );
        let terminated = says(running_pod(json!([{
            "name": "manager", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
        }])));
        assert_eq!(
            terminated,
            "pod op-7d9f-x2k4l container \"manager\": terminated: OOMKilled (exit code 137)"
        );
    }

    #[test]
    fn an_unschedulable_pod_gives_the_scheduler_message() {
        let text = says(json!({
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/4 nodes are available: 1 node(s) had untolerated taint {olm.test/real-node: true}, 3 node(s) didn't match Pod's node affinity/selector."}]
        }));
        assert_eq!(
            text,
            "pod op-7d9f-x2k4l: not scheduled: Unschedulable: 0/4 nodes are available: 1 node(s) had untolerated taint {olm.test/real-node: true}, 3 node(s) didn't match Pod's node affinity/selector."
        );
    }

    #[test]
    fn init_containers_come_first_and_a_completed_one_is_healthy() {
        let mut status = running_pod(json!([{
            "name": "manager", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "PodInitializing"}}
        }]));
        status["initContainerStatuses"] = json!([
            {"name": "done", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "setup", "image": "x", "imageID": "", "ready": false, "restartCount": 2,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}}}
        ]);
        assert_eq!(
            says(status),
            "pod op-7d9f-x2k4l init container \"setup\": CrashLoopBackOff: 2 restarts, last exit: Error (exit code 2)"
        );
    }

    #[test]
    fn ready_pods_others_pods_and_deleted_pods_say_nothing() {
        let ready = pod(
            "op-7d9f-a",
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        );
        let mut other = pod("other-1", json!({"phase": "Pending"}));
        other.metadata.owner_references.as_mut().unwrap()[0].name = "other-5c4b".into();
        let mut deleted = pod("op-7d9f-b", json!({"phase": "Pending"}));
        deleted.metadata.deletion_timestamp = ready.metadata.creation_timestamp.clone();
        let pods = [ready, other, deleted];
        let mine = of_deployment("op", &pods);
        assert_eq!(mine.len(), 1);
        assert_eq!(first_unhealthy(&mine), None);
        // A pod with no status yet is Pending.
        let fresh = [pod("op-7d9f-c", json!({}))];
        assert_eq!(
            first_unhealthy(&of_deployment("op", &fresh)).unwrap(),
            "pod op-7d9f-c: Pending"
        );
    }

    #[test]
    fn an_evicted_pod_and_long_messages_are_bounded() {
        let long = "x".repeat(500);
        let text = says(json!({"phase": "Failed", "reason": "Evicted", "message": long}));
        assert!(
            text.starts_with("pod op-7d9f-x2k4l: Failed: Evicted: xxx"),
            "{text}"
        );
        assert!(text.ends_with("x…"), "{text}");
        assert!(text.chars().count() < DETAIL_LIMIT + 60, "{}", text.len());
        assert_eq!(bounded("äöü", 2), "äö…");
        assert_eq!(bounded(" ok ", 5), "ok");
    }

    #[test]
    fn a_restarted_container_has_not_settled_until_it_ran_long_enough() {
        let status = |restarts: i32| {
            json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{
                    "name": "manager", "image": "busybox", "imageID": "", "ready": true,
                    "restartCount": restarts,
                    "state": {"running": {"startedAt": "2026-11-28T10:00:10Z"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}
                }]
            })
        };
        let at = |s: &str| -> Timestamp { s.parse().unwrap() };
        let pods = [pod("op-7d9f-x2k4l", status(4))];
        let mine = of_deployment("op", &pods);
        // Ready, so not unhealthy; but it restarted 8 s ago.
        assert_eq!(first_unhealthy(&mine), None);
        assert_eq!(
            unsettled(&mine, at("2026-11-28T10:00:18Z"), SETTLE_AFTER_RESTART),
            Some((
                "pod op-7d9f-x2k4l container \"manager\": running again after 4 restarts, last exit: Error (exit code 1)".into(),
                Duration::from_secs(22)
            ))
        );
        assert_eq!(
            unsettled(&mine, at("2026-11-28T10:00:40Z"), SETTLE_AFTER_RESTART),
            None
        );
        // A container that never restarted is settled as soon as it is ready.
        let fresh = [pod("op-7d9f-x2k4l", status(0))];
        assert_eq!(
            unsettled(
                &of_deployment("op", &fresh),
                at("2026-11-28T10:00:11Z"),
                SETTLE_AFTER_RESTART
            ),
            None
        );
    }

    #[test]
    fn newest_pods_come_first() {
        let mut old = pod("op-1111-old", json!({"phase": "Pending"}));
        old.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-28T09:00:00Z".parse().unwrap(),
            ));
        let new = pod("op-7d9f-new", json!({"phase": "Pending"}));
        let pods = [old, new];
        assert_eq!(
            first_unhealthy(&of_deployment("op", &pods)).unwrap(),
            "pod op-7d9f-new: Pending"
        );
    }
}
