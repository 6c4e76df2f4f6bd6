//! The Deployment and Service a `ReverseWordsApp` should have: pure functions of its spec.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, Service, ServicePort,
    ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::ReverseWordsApp;

pub const PORT: i32 = 8080;
pub const CONTAINER: &str = "reversewords";
/// Label of every child, so the operator watches only its own Deployments and Services.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "reverse-words-operator");
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=reverse-words-operator";

pub fn deployment_name(app: &str) -> String {
    format!("dp-{app}")
}

pub fn service_name(app: &str) -> String {
    format!("service-{app}")
}

/// Labels of the app's pods (and selector of its Deployment and Service).
pub fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

/// The image to run: `default_image` (a full reference, from the CSV's relatedImages)
/// with its tag replaced by `spec.appVersion` when that is set.
pub fn image(default_image: &str, app_version: Option<&str>) -> String {
    match app_version.map(str::trim).filter(|v| !v.is_empty()) {
        None => default_image.to_string(),
        Some(tag) => {
            let repository = match default_image.rsplit_once(':') {
                // A colon after the last slash separates the tag (not a registry port).
                Some((repo, tag)) if !tag.contains('/') => repo,
                _ => default_image,
            };
            format!("{repository}:{tag}")
        }
    }
}

fn metadata(name: String, app: &ReverseWordsApp, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: app.metadata.namespace.clone(),
        labels: Some({
            let mut labels = labels(&app.metadata.name.clone().unwrap_or_default());
            labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
            labels
        }),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

pub fn deployment(
    app: &ReverseWordsApp,
    owner: &OwnerReference,
    default_image: &str,
) -> Deployment {
    let name = app.metadata.name.clone().unwrap_or_default();
    let replicas = app.spec.replicas.max(1);
    let liveness = Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/health".into()),
            port: IntOrString::Int(PORT),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(5),
        timeout_seconds: Some(2),
        period_seconds: Some(15),
        ..Probe::default()
    };
    // The app listens within milliseconds of starting; asking every 15 s, as the Go
    // original does, would keep a new replica out of its Service for up to 20 s.
    let readiness = Probe {
        initial_delay_seconds: Some(1),
        period_seconds: Some(2),
        ..liveness.clone()
    };
    Deployment {
        metadata: metadata(deployment_name(&name), app, owner),
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: CONTAINER.into(),
                        image: Some(image(default_image, app.spec.app_version.as_deref())),
                        ports: Some(vec![ContainerPort {
                            container_port: PORT,
                            name: Some(CONTAINER.into()),
                            ..ContainerPort::default()
                        }]),
                        liveness_probe: Some(liveness),
                        readiness_probe: Some(readiness),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

pub fn service(app: &ReverseWordsApp, owner: &OwnerReference) -> Service {
    let name = app.metadata.name.clone().unwrap_or_default();
    Service {
        metadata: metadata(service_name(&name), app, owner),
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(labels(&name)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: PORT,
                target_port: Some(IntOrString::Int(PORT)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ReverseWordsAppSpec;

    const IMAGE: &str = "quay.io/olm-rs/reverse-words-app:v0.5.0";

    fn app(replicas: i32, version: Option<&str>) -> ReverseWordsApp {
        let mut app = ReverseWordsApp::new(
            "demo",
            ReverseWordsAppSpec {
                replicas,
                app_version: version.map(String::from),
            },
        );
        app.metadata.namespace = Some("ns".into());
        app
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "apps.linuxera.org/v1alpha1".into(),
            kind: "ReverseWordsApp".into(),
            name: "demo".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn deployment_runs_the_app_with_the_spec_replicas() {
        let d = deployment(&app(3, None), &owner(), IMAGE);
        assert_eq!(d.metadata.name.as_deref(), Some("dp-demo"));
        assert_eq!(d.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(d.metadata.owner_references, Some(vec![owner()]));
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.selector.match_labels, Some(labels("demo")));
        let pod = spec.template.spec.unwrap();
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some(IMAGE));
        assert_eq!(c.ports.as_ref().unwrap()[0].container_port, 8080);
        let probe = c
            .readiness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap();
        assert_eq!(probe.path.as_deref(), Some("/health"));
        assert_eq!(spec.template.metadata.unwrap().labels, Some(labels("demo")));
    }

    #[test]
    fn zero_replicas_means_one() {
        let d = deployment(&app(0, None), &owner(), IMAGE);
        assert_eq!(d.spec.replicas, Some(1));
    }

    #[test]
    fn app_version_picks_the_tag() {
        assert_eq!(
            image(IMAGE, Some("v0.0.25")),
            "quay.io/olm-rs/reverse-words-app:v0.0.25"
        );
        assert_eq!(image(IMAGE, Some(" ")), IMAGE);
        assert_eq!(
            image("localhost:5000/app", Some("v1")),
            "localhost:5000/app:v1"
        );
        assert_eq!(
            image("localhost:5000/app:v0", Some("v1")),
            "localhost:5000/app:v1"
        );
        let d = deployment(&app(1, Some("latest")), &owner(), IMAGE);
        let image = d.spec.template.spec.unwrap().containers[0].image.clone();
        assert_eq!(
            image.as_deref(),
            Some("quay.io/olm-rs/reverse-words-app:latest")
        );
    }

    #[test]
    fn service_exposes_port_8080_to_the_app_pods() {
        let s = service(&app(1, None), &owner());
        assert_eq!(s.metadata.name.as_deref(), Some("service-demo"));
        assert_eq!(s.metadata.owner_references, Some(vec![owner()]));
        let spec = s.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(spec.selector, Some(labels("demo")));
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.port, port.name.as_deref()), (8080, Some("http")));
    }
}
