//! The Deployments of a CSV's install strategy, built (pure) from the strategy, the CSV, its
//! OperatorGroup and a Subscription's `config`; and their health.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::mount::{Mount, mount, object};
use super::owned::Owner;
use super::phase::Health;
use super::pods::{DETAIL_LIMIT, bounded};
use crate::api::{StrategyDeploymentSpec, SubscriptionConfig};
use crate::cluster::ownership::{DEPLOYMENT_SPEC_HASH_LABEL, OWNER_LABEL, hash_json};
use crate::controllers::kit::ConditionStatus;

/// Why a deployment of an install strategy cannot be built. The text is what the CSV's
/// status shows (the install fails on it), so it names the deployment as the CSV does.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The strategy's spec of `deployment` does not read as a DeploymentSpec.
    #[error("deployment {deployment}: spec: {error}")]
    Spec {
        deployment: String,
        #[source]
        error: serde_json::Error,
    },
    /// The spec of `deployment`, read, does not write back as a JSON object.
    #[error("deployment {deployment}: spec is not an object")]
    NotAnObject { deployment: String },
}

/// The apps/v1 Deployment to apply for `strategy`, or why its spec is unusable.
pub fn build(
    strategy: &StrategyDeploymentSpec,
    owner: &Owner,
    config: Option<&SubscriptionConfig>,
    certificate: Option<&Mount>,
) -> Result<Value, BuildError> {
    // Read as a DeploymentSpec and written back, as upstream's typed decoding does: what is
    // not a DeploymentSpec at all is refused here, and fields a Deployment does not have
    // are dropped (published bundles carry some, e.g. `spec.template.containers`, which
    // server-side apply would refuse).
    let unreadable = |error| BuildError::Spec {
        deployment: strategy.name.clone(),
        error,
    };
    let typed =
        serde_json::from_value::<DeploymentSpec>(strategy.spec.clone()).map_err(unreadable)?;
    let mut spec = serde_json::to_value(typed).map_err(unreadable)?;
    let spec_map = spec
        .as_object_mut()
        .ok_or_else(|| BuildError::NotAnObject {
            deployment: strategy.name.clone(),
        })?;
    spec_map.insert("revisionHistoryLimit".into(), json!(1));
    let template = object(spec_map, "template");
    let template_meta = object(template, "metadata");
    let annotations = object(template_meta, "annotations");
    for (key, value) in &owner.annotations {
        annotations.insert(key.clone(), json!(value));
    }
    if let Some(extra) = config.and_then(|c| c.annotations.as_ref()) {
        for (key, value) in extra {
            annotations.insert(key.clone(), json!(value));
        }
    }
    let pod = object(template, "spec");
    for containers in ["containers", "initContainers"] {
        let Some(Value::Array(list)) = pod.get_mut(containers) else {
            continue;
        };
        for container in list.iter_mut().filter_map(Value::as_object_mut) {
            let mut env = vec![json!({"name": "OPERATOR_CONDITION_NAME", "value": owner.csv})];
            if containers == "containers"
                && let Some(config) = config
            {
                env.extend(config.env.iter().flatten().cloned());
                append_unique(container, "envFrom", config.env_from.iter().flatten());
                merge_by_name(
                    container,
                    "volumeMounts",
                    config.volume_mounts.iter().flatten(),
                );
                if let Some(resources) = &config.resources {
                    container.insert("resources".into(), resources.clone());
                }
            }
            merge_by_name(container, "env", env.iter());
        }
    }
    if let Some(config) = config {
        merge_by_name(pod, "volumes", config.volumes.iter().flatten());
        append_unique(pod, "tolerations", config.tolerations.iter().flatten());
        if let Some(selector) = &config.node_selector {
            pod.insert("nodeSelector".into(), json!(selector));
        }
        if let Some(affinity) = &config.affinity {
            pod.insert("affinity".into(), affinity.clone());
        }
    }
    if let (Some(certificate), Some(template)) = (
        certificate,
        spec.get_mut("template").and_then(Value::as_object_mut),
    ) {
        mount(template, certificate);
    }

    let mut labels = strategy.label.clone();
    labels.extend(owner.labels());
    let hash = hash_json(&(&spec, &labels));
    labels.insert(DEPLOYMENT_SPEC_HASH_LABEL.into(), hash);
    let mut metadata = json!({
        "name": strategy.name,
        "namespace": owner.namespace,
        "labels": labels,
        "ownerReferences": [owner.reference()],
    });
    if let Some(extra) = config.and_then(|c| c.annotations.as_ref()) {
        metadata["annotations"] = json!(extra);
    }
    Ok(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": spec,
    }))
}

/// The hash label of a built Deployment.
pub fn spec_hash(built: &Value) -> Option<&str> {
    built["metadata"]["labels"][DEPLOYMENT_SPEC_HASH_LABEL].as_str()
}

/// Items with a `name` replace same-named ones in `map[key]`, others are appended.
fn merge_by_name<'a>(
    map: &mut Map<String, Value>,
    key: &str,
    items: impl Iterator<Item = &'a Value>,
) {
    let mut items = items.peekable();
    if items.peek().is_none() {
        return;
    }
    let slot = map.entry(key).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    let list = slot.as_array_mut().expect("just made an array");
    for item in items {
        match list.iter_mut().find(|existing| {
            existing.get("name").is_some() && existing.get("name") == item.get("name")
        }) {
            Some(existing) => *existing = item.clone(),
            None => list.push(item.clone()),
        }
    }
}

/// Items not already present (by value) are appended to `map[key]`.
fn append_unique<'a>(
    map: &mut Map<String, Value>,
    key: &str,
    items: impl Iterator<Item = &'a Value>,
) {
    let mut items = items.peekable();
    if items.peek().is_none() {
        return;
    }
    let slot = map.entry(key).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    let list = slot.as_array_mut().expect("just made an array");
    for item in items {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

/// How one Deployment's rollout stands, before its pods are asked.
#[derive(Clone, Debug, PartialEq)]
pub enum Rollout {
    Ready,
    /// Not there, or not yet what we applied: no pod of ours runs to ask (why).
    NotOurs(String),
    /// Ours, rolling out or not available: its pods can tell why (the rollout's state).
    Waiting(String),
    /// Past its progress deadline: waiting will not heal it (the condition's message).
    Stuck(String),
}

impl Rollout {
    /// Whether the Deployment's pods may say more than the Deployment does.
    pub fn pods_tell(&self) -> bool {
        matches!(self, Rollout::Waiting(_) | Rollout::Stuck(_))
    }
}

/// Whether the Deployment applied for `csv` with `hash` is ready: our latest spec is on it
/// (hash and owner labels), `observedGeneration ≥ generation`, `updatedReplicas == replicas`,
/// no old replicas left, and `Available=True`. ProgressDeadlineExceeded will not heal by
/// waiting.
pub fn rollout(name: &str, found: Option<&Deployment>, csv: &str, hash: Option<&str>) -> Rollout {
    let Some(deployment) = found else {
        return Rollout::NotOurs(format!("deployment {name} not found"));
    };
    let labels = deployment.metadata.labels.clone().unwrap_or_default();
    if labels.get(OWNER_LABEL).map(String::as_str) != Some(csv)
        || hash
            .is_some_and(|h| labels.get(DEPLOYMENT_SPEC_HASH_LABEL).map(String::as_str) != Some(h))
    {
        return Rollout::NotOurs(format!("deployment {name} not yet updated"));
    }
    let status = deployment.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let condition = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_.as_deref() == Some(type_))
    };
    if let Some(c) =
        condition("Progressing").filter(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
    {
        return Rollout::Stuck(bounded(
            c.message.as_deref().unwrap_or_default(),
            DETAIL_LIMIT,
        ));
    }
    let generation = deployment.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Rollout::Waiting("its spec update is not yet observed".into());
    }
    // As `kubectl rollout status`: all replicas updated, the old ones gone, the updated ones
    // available. During a rolling update the Available condition stays True on the old
    // pods alone, so it cannot say that the new ones serve.
    let replicas = deployment.spec.replicas.unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    if updated < replicas {
        return Rollout::Waiting(format!("{updated} of {replicas} replicas updated"));
    }
    let old = status.replicas.unwrap_or(0).saturating_sub(updated);
    if old > 0 {
        return Rollout::Waiting(format!("{old} old replicas pending termination"));
    }
    let available = condition("Available");
    if !available
        .and_then(|c| c.status.as_deref())
        .is_some_and(|s| ConditionStatus::True.is(s))
    {
        let mut why = format!(
            "{} of {replicas} replicas available",
            status.available_replicas.unwrap_or(0)
        );
        if let Some(c) = available {
            let said = [c.reason.as_deref(), c.message.as_deref()];
            let said: Vec<&str> = said
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect();
            if !said.is_empty() {
                why = format!("{why} ({})", bounded(&said.join(": "), DETAIL_LIMIT));
            }
        }
        return Rollout::Waiting(why);
    }
    // With maxUnavailable above zero the condition can be True while updated pods still
    // start: as `kubectl rollout status`, every updated replica must be available.
    let available = status.available_replicas.unwrap_or(0);
    if available < updated {
        return Rollout::Waiting(format!(
            "{available} of {updated} updated replicas available"
        ));
    }
    Rollout::Ready
}

/// How long Deployment `deployment` has made no progress at `now`: since its Progressing
/// condition was last updated (the Deployment controller updates it whenever a replica is
/// made, updated or becomes available), else since it was made.
pub fn quiet_for(deployment: &Deployment, now: Timestamp) -> Duration {
    let progressed = deployment
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| c.type_.as_deref() == Some("Progressing"))
        .find_map(|c| c.last_update_time.as_ref())
        .or(deployment.metadata.creation_timestamp.as_ref());
    progressed
        .and_then(|at| Duration::try_from(now.duration_since(at.0)).ok())
        .unwrap_or_default()
}

/// The health of Deployment `name` from its rollout and what its first unhealthy pod says.
pub fn health(name: &str, rollout: Rollout, pod: Option<&str>) -> Health {
    let with_pod = |text: String| match pod {
        Some(pod) => format!("{text}; {pod}"),
        None => text,
    };
    match rollout {
        Rollout::Ready => Health::Ready,
        Rollout::NotOurs(why) => Health::NotReady(why),
        Rollout::Waiting(why) => Health::NotReady(with_pod(format!(
            "waiting for deployment {name} to become ready: {why}"
        ))),
        Rollout::Stuck(why) => Health::Failed(with_pod(format!(
            "deployment {name} exceeded its progress deadline: {why}"
        ))),
    }
}

/// The health of Deployment `name`, Available, while a pod of it restarted too recently to
/// count (what that pod says).
pub fn unsettled(name: &str, pod: &str) -> Health {
    Health::NotReady(format!(
        "waiting for deployment {name} to become ready: {pod}"
    ))
}

/// All Deployments together: the first that is not ready decides.
pub fn combined(healths: impl IntoIterator<Item = Health>) -> Health {
    let mut result = Health::Ready;
    for health in healths {
        match health {
            Health::Ready => {}
            Health::Failed(_) => return health,
            Health::NotReady(_) if result == Health::Ready => result = health,
            Health::NotReady(_) => {}
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn strategy() -> StrategyDeploymentSpec {
        StrategyDeploymentSpec {
            name: "op".into(),
            label: BTreeMap::from([("control-plane".into(), "op".into())]),
            spec: json!({
                "replicas": 1,
                "selector": {"matchLabels": {"control-plane": "op"}},
                "template": {
                    "metadata": {"labels": {"control-plane": "op"}},
                    "spec": {
                        "containers": [{
                            "name": "manager",
                            "image": "op:v1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "volumeMounts": [{"name": "certs", "mountPath": "/old"}],
                            "resources": {"limits": {"cpu": "1"}}
                        }],
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "nodeSelector": {"old": "x"}
                    }
                }
            }),
        }
    }

    fn owner() -> Owner {
        Owner {
            csv: "op.v1".into(),
            namespace: "ns".into(),
            uid: "uid-1".into(),
            annotations: BTreeMap::from([("olm.targetNamespaces".into(), "ns".into())]),
            operator_labels: BTreeMap::new(),
        }
    }

    #[test]
    fn deployment_carries_labels_owner_annotations_env_and_history_limit() {
        let built = build(&strategy(), &owner(), None, None).unwrap();
        let labels = &built["metadata"]["labels"];
        assert_eq!(labels["control-plane"], "op");
        assert_eq!(labels["olm.managed"], "true");
        assert_eq!(labels["olm.owner"], "op.v1");
        assert_eq!(labels["olm.owner.namespace"], "ns");
        assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
        assert!(spec_hash(&built).is_some());
        assert_eq!(built["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(built["spec"]["revisionHistoryLimit"], 1);
        assert_eq!(
            built["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
            "ns"
        );
        let env = built["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap();
        assert!(env.contains(&json!({"name": "OPERATOR_CONDITION_NAME", "value": "op.v1"})));
        // Same input, same hash (a restart re-applies nothing).
        assert_eq!(
            spec_hash(&built),
            spec_hash(&build(&strategy(), &owner(), None, None).unwrap())
        );
    }

    #[test]
    fn fields_a_deployment_does_not_have_are_dropped_as_upstream_drops_them() {
        let mut published = strategy();
        // victoriametrics-operator's bundle: containers one level too high.
        published.spec["template"]["containers"] = json!([{"name": "stray", "image": "x"}]);
        published.spec["template"]["spec"]["containers"][0]["imagePullPolicyy"] = json!("typo");
        let built = build(&published, &owner(), None, None).unwrap();
        assert!(built["spec"]["template"].get("containers").is_none());
        assert!(
            built["spec"]["template"]["spec"]["containers"][0]
                .get("imagePullPolicyy")
                .is_none()
        );
        assert_eq!(
            built["spec"]["template"]["spec"]["containers"][0]["name"],
            strategy().spec["template"]["spec"]["containers"][0]["name"]
        );
    }

    #[test]
    fn subscription_config_merges_and_replaces_as_upstream() {
        let config = SubscriptionConfig {
            env: Some(vec![
                json!({"name": "B", "value": "override"}),
                json!({"name": "C", "value": "3"}),
            ]),
            env_from: Some(vec![json!({"configMapRef": {"name": "cm"}})]),
            volumes: Some(vec![
                json!({"name": "certs", "secret": {"secretName": "s"}}),
            ]),
            volume_mounts: Some(vec![json!({"name": "certs", "mountPath": "/new"})]),
            tolerations: Some(vec![json!({"key": "gpu", "operator": "Exists"})]),
            resources: Some(json!({"requests": {"memory": "1Gi"}})),
            node_selector: Some(BTreeMap::from([("disk".into(), "ssd".into())])),
            affinity: Some(json!({"nodeAffinity": {}})),
            ..SubscriptionConfig::default()
        };
        let built = build(&strategy(), &owner(), Some(&config), None).unwrap();
        let pod = &built["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let env: Vec<(&str, &str)> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(
            env,
            [
                ("A", "1"),
                ("B", "override"),
                ("OPERATOR_CONDITION_NAME", "op.v1"),
                ("C", "3")
            ]
        );
        assert_eq!(container["envFrom"][0]["configMapRef"]["name"], "cm");
        assert_eq!(
            container["volumeMounts"],
            json!([{"name": "certs", "mountPath": "/new"}])
        );
        assert_eq!(
            container["resources"],
            json!({"requests": {"memory": "1Gi"}})
        );
        assert_eq!(pod["volumes"][0]["secret"]["secretName"], "s");
        assert_eq!(pod["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(pod["nodeSelector"], json!({"disk": "ssd"}));
        assert_eq!(pod["affinity"], json!({"nodeAffinity": {}}));
        assert_ne!(
            spec_hash(&built),
            spec_hash(&build(&strategy(), &owner(), None, None).unwrap())
        );
    }

    #[test]
    fn a_spec_that_is_no_deployment_spec_is_refused() {
        let mut bad = strategy();
        bad.spec = json!({"replicas": "many"});
        let error = build(&bad, &owner(), None, None).unwrap_err();
        assert!(matches!(&error, BuildError::Spec { deployment, .. } if deployment == "op"));
        assert!(
            error.to_string().starts_with("deployment op: spec: "),
            "{error}"
        );
    }

    fn deployment(generation: i64, observed: i64, updated: i32, available: bool) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(generation),
                labels: Some(BTreeMap::from([
                    ("olm.owner".into(), "op.v1".into()),
                    (DEPLOYMENT_SPEC_HASH_LABEL.into(), "h".into()),
                ])),
                ..ObjectMeta::default()
            },
            spec: DeploymentSpec {
                replicas: Some(1),
                ..DeploymentSpec::default()
            },
            status: Some(DeploymentStatus {
                observed_generation: Some(observed),
                replicas: Some(updated.max(1)),
                updated_replicas: Some(updated),
                available_replicas: Some(if available { updated } else { 0 }),
                conditions: Some(vec![DeploymentCondition {
                    type_: Some("Available".into()),
                    status: Some(if available { "True" } else { "False" }.into()),
                    ..DeploymentCondition::default()
                }]),
                ..DeploymentStatus::default()
            }),
        }
    }

    #[test]
    fn health_needs_observed_generation_updated_replicas_and_available() {
        let r = |d: Deployment| rollout("op", Some(&d), "op.v1", Some("h"));
        assert_eq!(r(deployment(2, 2, 1, true)), Rollout::Ready);
        assert_eq!(
            r(deployment(3, 2, 1, true)),
            Rollout::Waiting("its spec update is not yet observed".into())
        );
        assert_eq!(
            r(deployment(2, 2, 0, true)),
            Rollout::Waiting("0 of 1 replicas updated".into())
        );
        assert_eq!(
            r(deployment(2, 2, 1, false)),
            Rollout::Waiting("0 of 1 replicas available".into())
        );
        let mut surging = deployment(2, 2, 1, true);
        surging.status.as_mut().unwrap().replicas = Some(2);
        assert_eq!(
            r(surging.clone()),
            Rollout::Waiting("1 old replicas pending termination".into())
        );
        // Old pods gone, the Available condition True, an updated pod not yet available.
        let status = surging.status.as_mut().unwrap();
        (status.replicas, status.available_replicas) = (Some(1), Some(0));
        assert_eq!(
            r(surging),
            Rollout::Waiting("0 of 1 updated replicas available".into())
        );
        assert_eq!(
            rollout("op", None, "op.v1", None),
            Rollout::NotOurs("deployment op not found".into())
        );
        // Another CSV's (not yet adopted) Deployment is not ours to call ready, nor are its
        // pods ours to ask.
        let theirs = rollout("op", Some(&deployment(1, 1, 1, true)), "op.v2", None);
        assert!(matches!(&theirs, Rollout::NotOurs(_)) && !theirs.pods_tell());
        assert_eq!(
            combined([
                Health::Ready,
                Health::NotReady("a".into()),
                Health::Failed("b".into())
            ]),
            Health::Failed("b".into())
        );
    }

    /// A Deployment from the API server: one replica whose pod cannot start.
    fn unavailable(extra_condition: serde_json::Value) -> Deployment {
        let mut conditions = vec![json!({
            "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
            "message": "Deployment does not have minimum availability."
        })];
        conditions.push(extra_condition);
        serde_json::from_value(json!({
            "metadata": {"name": "op", "generation": 1, "labels": {
                "olm.owner": "op.v1", "olm.deployment-spec-hash": "h"
            }},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "op"}}, "template": {}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                "unavailableReplicas": 1, "conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn a_deployment_is_quiet_since_its_last_progress_else_since_it_was_made() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let now = at("2026-11-29T12:00:30Z");
        let progressing = json!({"type": "Progressing", "status": "True",
            "reason": "ReplicaSetUpdated", "lastUpdateTime": "2026-11-29T12:00:25Z"});
        let mut moved = unavailable(progressing);
        moved.metadata.creation_timestamp = Some(Time(at("2026-11-29T12:00:00Z")));
        assert_eq!(quiet_for(&moved, now), Duration::from_secs(5));
        let mut fresh = unavailable(json!({"type": "Other", "status": "True"}));
        fresh.metadata.creation_timestamp = Some(Time(at("2026-11-29T12:00:28Z")));
        assert_eq!(quiet_for(&fresh, now), Duration::from_secs(2));
        // A clock behind the API server's: no time has passed.
        assert_eq!(
            quiet_for(&fresh, at("2026-11-29T12:00:00Z")),
            Duration::ZERO
        );
    }

    #[test]
    fn a_waiting_deployment_says_why_and_which_pod_fails() {
        let progressing = json!({"type": "Progressing", "status": "True",
            "reason": "ReplicaSetUpdated", "message": "ReplicaSet \"op-7d9f\" is progressing."});
        let waiting = rollout("op", Some(&unavailable(progressing)), "op.v1", Some("h"));
        assert!(waiting.pods_tell());
        let pod = "pod op-7d9f-x2k4l container \"manager\": ImagePullBackOff: Back-off pulling image \"127.0.0.1:1/none:v1\"";
        assert_eq!(
            health("op", waiting.clone(), Some(pod)),
            Health::NotReady(format!(
                "waiting for deployment op to become ready: 0 of 1 replicas available (MinimumReplicasUnavailable: Deployment does not have minimum availability.); {pod}"
            ))
        );
        assert_eq!(
            health("op", waiting, None),
            Health::NotReady(
                "waiting for deployment op to become ready: 0 of 1 replicas available (MinimumReplicasUnavailable: Deployment does not have minimum availability.)".into()
            )
        );
    }

    #[test]
    fn a_deployment_past_its_progress_deadline_fails_with_its_condition_message() {
        let stuck = json!({"type": "Progressing", "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet \"op-7d9f\" has timed out progressing."});
        let stuck = rollout("op", Some(&unavailable(stuck)), "op.v1", Some("h"));
        assert!(stuck.pods_tell());
        let pod = "pod op-7d9f-x2k4l container \"manager\": CrashLoopBackOff: 4 restarts, last exit: Error (exit code 1)";
        assert_eq!(
            health("op", stuck, Some(pod)),
            Health::Failed(format!(
                "deployment op exceeded its progress deadline: ReplicaSet \"op-7d9f\" has timed out progressing.; {pod}"
            ))
        );
        assert_eq!(
            health(
                "op",
                Rollout::NotOurs("deployment op not found".into()),
                Some(pod)
            ),
            Health::NotReady("deployment op not found".into())
        );
    }
}
