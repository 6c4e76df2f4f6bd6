//! The KMM Module and the consumer DaemonSet a `Ptemplate` should have: pure functions of
//! its spec. Server-side apply of these corrects any drift of the fields they set.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Container, LocalObjectReference, PodSpec, PodTemplateSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use crate::api::{Ptemplate, module_resource};

pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "ptemplate-operator");
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=ptemplate-operator";
/// The extended resource the device plugin advertises and consumers request.
pub const DEVICE_RESOURCE: &str = "example.com/ptemplate";
pub const KERNEL_MODULE: &str = "ptemplate_char_dev";
pub const DEFAULT_CONSUMER_IMAGE: &str = "quay.io/chrisp262/pt-device-plugin:consumer-latest";
pub const DEFAULT_MAXDEV: i64 = 5;
pub const DEFAULT_REQUIRED_DEVICES: i64 = 1;

/// Images of the kernel module (per kernel) and of the device plugin.
#[derive(Clone, Debug)]
pub struct Images {
    pub kmod: String,
    pub device_plugin: String,
}

pub fn module_name(pt: &str) -> String {
    pt.to_string()
}

pub fn daemonset_name(pt: &str) -> String {
    format!("{pt}-consumer")
}

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

fn object_labels(app: &str) -> BTreeMap<String, String> {
    let mut labels = labels(app);
    labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    labels
}

/// The Module KMM loads `ptemplate_char_dev` from, with `max_dev` and `default_msg`.
pub fn module(pt: &Ptemplate, owner: &OwnerReference, images: &Images) -> Value {
    let name = pt.metadata.name.clone().unwrap_or_default();
    let resource = module_resource();
    let mut parameters = vec![format!(
        "max_dev={}",
        pt.spec.maxdev.unwrap_or(DEFAULT_MAXDEV)
    )];
    if let Some(message) = pt.spec.defaultmsg.as_deref().filter(|m| !m.is_empty()) {
        parameters.push(format!("default_msg={message}"));
    }
    let mut spec = json!({
        "moduleLoader": {
            "container": {
                "modprobe": { "moduleName": KERNEL_MODULE, "parameters": parameters },
                "kernelMappings": [{ "regexp": "^.+$", "containerImage": images.kmod }],
            }
        },
        "devicePlugin": { "container": { "image": images.device_plugin } },
        "selector": pt.spec.selector,
    });
    if let Some(secret) = &pt.spec.image_repo_secret {
        spec["imageRepoSecret"] = json!({ "name": secret.name });
    }
    json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {
            "name": module_name(&name),
            "namespace": pt.metadata.namespace,
            "labels": object_labels(&name),
            "ownerReferences": [owner],
        },
        "spec": spec,
    })
}

/// One consumer pod per selected node, asking for `requiredDevices` devices.
pub fn daemonset(pt: &Ptemplate, owner: &OwnerReference) -> DaemonSet {
    let name = pt.metadata.name.clone().unwrap_or_default();
    let app = daemonset_name(&name);
    let devices = pt.spec.required_devices.unwrap_or(DEFAULT_REQUIRED_DEVICES);
    let limits = BTreeMap::from([(DEVICE_RESOURCE.to_string(), Quantity(devices.to_string()))]);
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(app.clone()),
            namespace: pt.metadata.namespace.clone(),
            labels: Some(object_labels(&app)),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels(&app)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&app)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    node_selector: Some(pt.spec.selector.clone()),
                    image_pull_secrets: pt.spec.image_repo_secret.as_ref().map(|s| {
                        vec![LocalObjectReference {
                            name: s.name.clone(),
                        }]
                    }),
                    containers: vec![Container {
                        name: "consumer".into(),
                        image: Some(
                            pt.spec
                                .consumerimage
                                .clone()
                                .filter(|i| !i.is_empty())
                                .unwrap_or_else(|| DEFAULT_CONSUMER_IMAGE.into()),
                        ),
                        resources: Some(ResourceRequirements {
                            limits: Some(limits.clone()),
                            requests: Some(limits),
                            ..ResourceRequirements::default()
                        }),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DaemonSetSpec::default()
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{PtemplateSpec, SecretRef};

    fn images() -> Images {
        Images {
            kmod: "quay.io/x/kmod:${KERNEL_FULL_VERSION}".into(),
            device_plugin: "quay.io/x/plugin:v1".into(),
        }
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "pt.example.com/v1alpha1".into(),
            kind: "Ptemplate".into(),
            name: "consumer-pod".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// The seed's example.
    fn seed() -> Ptemplate {
        let mut pt = Ptemplate::new(
            "consumer-pod",
            PtemplateSpec {
                maxdev: Some(5),
                defaultmsg: Some("ptemplate".into()),
                consumerimage: Some("quay.io/chrisp262/pt-device-plugin:consumer-latest".into()),
                required_devices: Some(2),
                image_repo_secret: Some(SecretRef {
                    name: "pt-char-pull-secret".into(),
                }),
                selector: BTreeMap::from([(
                    "node-role.kubernetes.io/worker".into(),
                    "worker".into(),
                )]),
            },
        );
        pt.metadata.namespace = Some("ns".into());
        pt
    }

    #[test]
    fn module_loads_the_driver_with_the_spec_parameters() {
        let m = module(&seed(), &owner(), &images());
        assert_eq!(m["apiVersion"], "kmm.sigs.x-k8s.io/v1beta1");
        assert_eq!(m["kind"], "Module");
        assert_eq!(m["metadata"]["name"], "consumer-pod");
        assert_eq!(m["metadata"]["namespace"], "ns");
        assert_eq!(m["metadata"]["ownerReferences"][0]["kind"], "Ptemplate");
        let container = &m["spec"]["moduleLoader"]["container"];
        assert_eq!(container["modprobe"]["moduleName"], "ptemplate_char_dev");
        assert_eq!(
            container["modprobe"]["parameters"],
            json!(["max_dev=5", "default_msg=ptemplate"])
        );
        assert_eq!(
            container["kernelMappings"][0]["containerImage"],
            "quay.io/x/kmod:${KERNEL_FULL_VERSION}"
        );
        assert_eq!(
            m["spec"]["devicePlugin"]["container"]["image"],
            "quay.io/x/plugin:v1"
        );
        assert_eq!(m["spec"]["imageRepoSecret"]["name"], "pt-char-pull-secret");
        assert_eq!(
            m["spec"]["selector"],
            json!({"node-role.kubernetes.io/worker": "worker"})
        );
    }

    #[test]
    fn defaults_when_the_spec_leaves_fields_out() {
        let mut pt = seed();
        pt.spec.maxdev = None;
        pt.spec.defaultmsg = None;
        pt.spec.consumerimage = None;
        pt.spec.required_devices = None;
        pt.spec.image_repo_secret = None;
        let m = module(&pt, &owner(), &images());
        assert_eq!(
            m["spec"]["moduleLoader"]["container"]["modprobe"]["parameters"],
            json!(["max_dev=5"])
        );
        assert!(m["spec"].get("imageRepoSecret").is_none());
        let ds = daemonset(&pt, &owner());
        let pod = ds.spec.template.spec.unwrap();
        assert_eq!(
            pod.containers[0].image.as_deref(),
            Some(DEFAULT_CONSUMER_IMAGE)
        );
        assert_eq!(
            pod.containers[0]
                .resources
                .as_ref()
                .unwrap()
                .limits
                .as_ref()
                .unwrap()[DEVICE_RESOURCE],
            Quantity("1".into())
        );
        assert_eq!(pod.image_pull_secrets, None);
    }

    #[test]
    fn daemonset_runs_consumers_on_the_selected_nodes() {
        let ds = daemonset(&seed(), &owner());
        assert_eq!(ds.metadata.name.as_deref(), Some("consumer-pod-consumer"));
        assert_eq!(ds.metadata.owner_references, Some(vec![owner()]));
        assert_eq!(
            ds.spec.selector.match_labels,
            Some(labels("consumer-pod-consumer"))
        );
        let pod = ds.spec.template.spec.unwrap();
        assert_eq!(
            pod.node_selector.unwrap()["node-role.kubernetes.io/worker"],
            "worker"
        );
        assert_eq!(
            pod.image_pull_secrets.unwrap()[0].name,
            "pt-char-pull-secret"
        );
        let c = &pod.containers[0];
        assert_eq!(
            c.image.as_deref(),
            Some("quay.io/chrisp262/pt-device-plugin:consumer-latest")
        );
        let resources = c.resources.as_ref().unwrap();
        assert_eq!(
            resources.limits.as_ref().unwrap()[DEVICE_RESOURCE],
            Quantity("2".into())
        );
        assert_eq!(resources.requests, resources.limits);
    }
}
