//! Registry credentials from a CatalogSource's `spec.secrets` (dockerconfigjson Secrets in
//! its namespace): used for the catalog image and, as upstream's unpack Job uses them, for
//! the bundle images of that catalog.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use oci_client::secrets::RegistryAuth;

use crate::api::PullCause;

/// Why no credentials could be had: a cause for a condition, and a message naming the
/// Secret.
pub type AuthFailure = (PullCause, String);

/// The first of `secrets` that has an entry for `registry`; anonymous when none has.
pub async fn registry_auth(
    client: &Client,
    namespace: &str,
    secrets: &[String],
    registry: &str,
) -> Result<RegistryAuth, AuthFailure> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for name in secrets.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let described = format!("{namespace}/{name}");
        let secret = api
            .get_opt(name)
            .await
            .map_err(|e| {
                (
                    PullCause::SecretUnreadable,
                    format!("spec.secrets: reading Secret {described}: {e}"),
                )
            })?
            .ok_or_else(|| {
                (
                    PullCause::SecretNotFound,
                    format!("spec.secrets: Secret {described} not found"),
                )
            })?;
        let data = secret.data.unwrap_or_default();
        let Some(bytes) = data
            .get(".dockerconfigjson")
            .or_else(|| data.get(".dockercfg"))
        else {
            return Err((
                PullCause::InvalidSecret,
                format!("spec.secrets: Secret {described} has no .dockerconfigjson or .dockercfg"),
            ));
        };
        let auth = crate::oci::auth::from_pull_secret(&bytes.0, registry, &described)
            .map_err(|e| (PullCause::InvalidSecret, format!("spec.secrets: {e}")))?;
        if auth != RegistryAuth::Anonymous {
            return Ok(auth);
        }
    }
    Ok(RegistryAuth::Anonymous)
}
