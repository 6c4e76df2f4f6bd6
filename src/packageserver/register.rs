//! Making the kube-apiserver route `packages.operators.coreos.com/v1` to this process.
//!
//! - Loopback (`--packages-address 127.0.0.1:PORT`, a laptop or the tests): a Service of type
//!   ExternalName pointing at `localhost` and the APIService with our CA; both are removed
//!   on a graceful shutdown (an APIService whose server is gone breaks discovery).
//! - In a cluster: the Service and APIService come from `deploy/`; the serving key and
//!   certificate live in a Secret every replica reads (created by the first, rotated when a
//!   third of its validity is left), and the APIService's `caBundle` is kept equal to it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::ObjectMeta;
use serde_json::json;

use super::tls::{self, ServingCert};

pub const API_SERVICE: &str = "v1.packages.operators.coreos.com";
const FIELD_MANAGER: &str = "olm-packageserver";
const NOT_AFTER: &str = "olm.operatorframework.io/not-after";

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("{action} {what}: {source}")]
    Api {
        action: &'static str,
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("Secret {0} has no {1}")]
    IncompleteSecret(String, &'static str),
}

fn api_error(
    action: &'static str,
    what: impl Into<String>,
) -> impl FnOnce(kube::Error) -> RegisterError {
    let what = what.into();
    move |source| RegisterError::Api {
        action,
        what,
        source,
    }
}

/// Where the API is reachable: the Service (name, namespace) the APIService points at.
#[derive(Clone, Debug)]
pub struct ServiceRef {
    pub name: String,
    pub namespace: String,
}

impl ServiceRef {
    pub fn dns_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

fn api_service(service: &ServiceRef, port: u16, ca_pem: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE, "labels": {"app.kubernetes.io/managed-by": "olm"}},
        "spec": {
            "group": "packages.operators.coreos.com",
            "version": "v1",
            "groupPriorityMinimum": 2000,
            "versionPriority": 15,
            "caBundle": k8s_openapi::ByteString(ca_pem.as_bytes().to_vec()),
            "service": {"name": service.name, "namespace": service.namespace, "port": port},
        },
    })
}

/// Loopback: the ExternalName Service and the APIService, pointing at `localhost:port`.
pub async fn register_loopback(
    client: &kube::Client,
    service: &ServiceRef,
    port: u16,
    ca_pem: &str,
) -> Result<(), RegisterError> {
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), &service.namespace);
    let svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service.name, "namespace": service.namespace,
                     "labels": {"app.kubernetes.io/managed-by": "olm"}},
        "spec": {"type": "ExternalName", "externalName": "localhost",
                 "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    services
        .patch(&service.name, &params, &Patch::Apply(&svc))
        .await
        .map_err(api_error(
            "applying Service",
            format!("{}/{}", service.namespace, service.name),
        ))?;
    let api_services: Api<APIService> = Api::all(client.clone());
    api_services
        .patch(
            API_SERVICE,
            &params,
            &Patch::Apply(&api_service(service, port, ca_pem)),
        )
        .await
        .map_err(api_error("applying APIService", API_SERVICE))?;
    Ok(())
}

/// Removes the loopback registration, unless another process has taken it over since
/// (the APIService no longer carries our CA).
pub async fn unregister_loopback(
    client: &kube::Client,
    service: &ServiceRef,
    ca_pem: &str,
) -> Result<(), RegisterError> {
    let api_services: Api<APIService> = Api::all(client.clone());
    if let Some(current) = api_services
        .get_opt(API_SERVICE)
        .await
        .map_err(api_error("reading APIService", API_SERVICE))?
    {
        let ours = current
            .spec
            .as_ref()
            .and_then(|s| s.ca_bundle.as_ref())
            .is_some_and(|ca| ca.0 == ca_pem.as_bytes());
        if ours {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: current.metadata.resource_version.clone(),
                    uid: None,
                }),
                ..Default::default()
            };
            match api_services.delete(API_SERVICE, &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(api_error("deleting APIService", API_SERVICE)(e)),
            }
            let services: Api<k8s_openapi::api::core::v1::Service> =
                Api::namespaced(client.clone(), &service.namespace);
            match services
                .delete(&service.name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(api_error(
                        "deleting Service",
                        format!("{}/{}", service.namespace, service.name),
                    )(e));
                }
            }
        }
    }
    Ok(())
}

/// In a cluster: the serving certificate from the Secret `secret_name`, created when missing
/// and replaced when a third of its validity is left.
pub async fn serving_cert_from_secret(
    client: &kube::Client,
    service: &ServiceRef,
    secret_name: &str,
) -> Result<ServingCert, RegisterError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &service.namespace);
    let what = format!("{}/{secret_name}", service.namespace);
    let existing = secrets
        .get_opt(secret_name)
        .await
        .map_err(api_error("reading Secret", what.clone()))?;
    if let Some(secret) = &existing
        && let Some(cert) = from_secret(secret, &what)?
        && !needs_rotation(&cert.not_after)
    {
        return Ok(cert);
    }
    let cert = tls::generate(&[
        service.dns_name(),
        format!("{}.{}.svc.cluster.local", service.name, service.namespace),
    ])?;
    let mut data = BTreeMap::new();
    data.insert(
        "tls.crt".to_string(),
        ByteString(cert.cert_pem.clone().into_bytes()),
    );
    data.insert(
        "tls.key".to_string(),
        ByteString(cert.key_pem.clone().into_bytes()),
    );
    data.insert(
        "ca.crt".to_string(),
        ByteString(cert.ca_pem.clone().into_bytes()),
    );
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.to_string()),
            namespace: Some(service.namespace.clone()),
            annotations: Some([(NOT_AFTER.to_string(), cert.not_after.clone())].into()),
            resource_version: existing
                .as_ref()
                .and_then(|s| s.metadata.resource_version.clone()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    };
    // Create or replace with the resourceVersion seen: when two replicas race, one wins
    // and the other reads the winner's certificate.
    let written = match existing {
        None => secrets.create(&PostParams::default(), &secret).await,
        Some(_) => {
            secrets
                .replace(secret_name, &PostParams::default(), &secret)
                .await
        }
    };
    match written {
        Ok(_) => Ok(cert),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let secret = secrets
                .get(secret_name)
                .await
                .map_err(api_error("reading Secret", what.clone()))?;
            from_secret(&secret, &what)?.ok_or(RegisterError::IncompleteSecret(what, "tls.crt"))
        }
        Err(e) => Err(api_error("writing Secret", what)(e)),
    }
}

fn from_secret(secret: &Secret, what: &str) -> Result<Option<ServingCert>, RegisterError> {
    let data = secret.data.clone().unwrap_or_default();
    let field = |key: &'static str| -> Result<Option<String>, RegisterError> {
        Ok(data
            .get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned()))
    };
    let (Some(cert_pem), Some(key_pem), Some(ca_pem)) =
        (field("tls.crt")?, field("tls.key")?, field("ca.crt")?)
    else {
        tracing::warn!(secret = %what, "serving certificate Secret is incomplete; making a new one");
        return Ok(None);
    };
    let not_after = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NOT_AFTER).cloned())
        .unwrap_or_default();
    Ok(Some(ServingCert {
        ca_pem,
        cert_pem,
        key_pem,
        not_after,
    }))
}

/// Rotate when less than a third of the validity is left (or the expiry is unknown).
pub fn needs_rotation(not_after: &str) -> bool {
    let Ok(expiry) = not_after.parse::<k8s_openapi::jiff::Timestamp>() else {
        return true;
    };
    let left = expiry.as_second() - k8s_openapi::jiff::Timestamp::now().as_second();
    left < tls::VALIDITY_DAYS * 86_400 / 3
}

/// Keeps the APIService's caBundle equal to `ca_pem` (in a cluster; the APIService itself
/// comes from `deploy/`).
pub async fn sync_ca_bundle(client: &kube::Client, ca_pem: &str) -> Result<(), RegisterError> {
    let api_services: Api<APIService> = Api::all(client.clone());
    let current = api_services
        .get(API_SERVICE)
        .await
        .map_err(api_error("reading APIService", API_SERVICE))?;
    if current
        .spec
        .as_ref()
        .and_then(|s| s.ca_bundle.as_ref())
        .is_some_and(|ca| ca.0 == ca_pem.as_bytes())
    {
        return Ok(());
    }
    let patch = json!({"spec": {"caBundle": ByteString(ca_pem.as_bytes().to_vec())}});
    api_services
        .patch(API_SERVICE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_error(
            "updating the caBundle of APIService",
            API_SERVICE,
        ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_rotate_with_a_third_of_their_life_left() {
        assert!(needs_rotation(""));
        assert!(needs_rotation("2020-01-01T00:00:00Z"));
        let far = k8s_openapi::jiff::Timestamp::now()
            .checked_add(k8s_openapi::jiff::SignedDuration::from_hours(24 * 300))
            .unwrap();
        assert!(!needs_rotation(&far.to_string()));
    }

    #[test]
    fn the_api_service_points_at_the_service_with_our_ca() {
        let svc = ServiceRef {
            name: "olm-packages".into(),
            namespace: "olm".into(),
        };
        let obj = api_service(&svc, 5443, "CA");
        assert_eq!(obj["spec"]["service"]["port"], 5443);
        assert_eq!(obj["spec"]["caBundle"], "Q0E=");
        assert_eq!(svc.dns_name(), "olm-packages.olm.svc");
    }
}
