//! The serving certificate in a Deployment's pods: which Secret, and how it is mounted.

use serde_json::{Map, Value, json};

use super::certs::{CA_HASH_ANNOTATION, CERT_KEY, PRIVATE_KEY_KEY};

/// Where upstream mounts the serving pair: the aggregated-API-server convention and
/// controller-runtime's webhook-server default.
pub const APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// What a served Deployment's pods need: the Secret to mount and the CA's hash for the pod
/// template (a new CA rolls the pods).
#[derive(Clone, Debug, PartialEq)]
pub struct Mount {
    pub secret: String,
    pub ca_hash: String,
}

/// Adds both certificate volumes, mounts them in every container (a mount of the same
/// name is left alone, one at the same path is replaced), and sets the CA hash annotation.
pub fn mount(template: &mut Map<String, Value>, mount: &Mount) {
    let annotations = object(object(template, "metadata"), "annotations");
    annotations.insert(CA_HASH_ANNOTATION.into(), json!(mount.ca_hash));
    let pod = object(template, "spec");
    let volumes = [
        (
            "apiservice-cert",
            APISERVICE_CERT_DIR,
            json!([{"key": CERT_KEY, "path": "apiserver.crt"}, {"key": PRIVATE_KEY_KEY, "path": "apiserver.key"}]),
        ),
        (
            "webhook-cert",
            WEBHOOK_CERT_DIR,
            json!([{"key": CERT_KEY, "path": CERT_KEY}, {"key": PRIVATE_KEY_KEY, "path": PRIVATE_KEY_KEY}]),
        ),
    ];
    let list = array(pod, "volumes");
    for (name, _, items) in &volumes {
        let volume = json!({"name": name, "secret": {"secretName": mount.secret, "items": items}});
        match list.iter_mut().find(|v| v["name"] == *name) {
            Some(existing) => *existing = volume,
            None => list.push(volume),
        }
    }
    let Some(Value::Array(containers)) = pod.get_mut("containers") else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        let mounts = array(container, "volumeMounts");
        for (name, path, _) in &volumes {
            if mounts.iter().any(|m| m["name"] == *name) {
                continue;
            }
            let wanted = json!({"name": name, "mountPath": path});
            match mounts.iter_mut().find(|m| m["mountPath"] == *path) {
                Some(existing) => *existing = wanted,
                None => mounts.push(wanted),
            }
        }
    }
}

pub fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("just made an object")
}

pub fn array<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Vec<Value> {
    let slot = map.entry(key).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    slot.as_array_mut().expect("just made an array")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_is_mounted_in_every_container_at_both_paths() {
        let mut template = json!({
            "metadata": {"labels": {"app": "op"}},
            "spec": {"containers": [
                {"name": "a", "volumeMounts": [{"name": "mine", "mountPath": WEBHOOK_CERT_DIR}]},
                {"name": "b"}
            ]}
        });
        mount(
            template.as_object_mut().unwrap(),
            &Mount {
                secret: "op-manager-service-cert".into(),
                ca_hash: "h".into(),
            },
        );
        assert_eq!(template["metadata"]["annotations"][CA_HASH_ANNOTATION], "h");
        assert_eq!(template["spec"]["volumes"].as_array().unwrap().len(), 2);
        for container in template["spec"]["containers"].as_array().unwrap() {
            let mounts = container["volumeMounts"].as_array().unwrap();
            assert_eq!(mounts.len(), 2, "{container}");
            assert!(
                mounts
                    .iter()
                    .any(|m| m["mountPath"] == WEBHOOK_CERT_DIR && m["name"] == "webhook-cert")
            );
            assert!(mounts.iter().any(|m| m["mountPath"] == APISERVICE_CERT_DIR));
        }
    }
}
