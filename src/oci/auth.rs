//! Registry credentials: the user's docker `config.json` (or `REGISTRY_AUTH_FILE`, as
//! podman and opm read it) with its credential helpers, and Kubernetes pull Secrets.

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("credentials for {registry} from {source_name}: {message}")]
    Unusable {
        registry: String,
        source_name: String,
        message: String,
    },
}

/// Credentials for `registry` (`host[:port]`) from `REGISTRY_AUTH_FILE` when set, else
/// `$DOCKER_CONFIG/config.json` / `~/.docker/config.json` (credential helpers included).
/// No entry means anonymous access.
pub fn from_user_config(registry: &str) -> Result<RegistryAuth, AuthError> {
    let Some(path) = user_config_path() else {
        return Ok(RegistryAuth::Anonymous);
    };
    let source_name = path.display().to_string();
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => {
            return Err(AuthError::Unusable {
                registry: registry.into(),
                source_name,
                message: e.to_string(),
            });
        }
    };
    convert(
        docker_credential::get_credential_from_reader(file, registry),
        registry,
        &source_name,
    )
}

fn user_config_path() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("REGISTRY_AUTH_FILE") {
        return Some(path.into());
    }
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(std::path::Path::new(&dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".docker/config.json"))
}

/// Credentials for `registry` from the content of a pull Secret: `.dockerconfigjson`
/// (`{"auths": {...}}`) or the older `.dockercfg` (the `auths` map alone). Credential
/// helpers named in a Secret are ignored: a Secret must not choose a program to run.
pub fn from_pull_secret(
    data: &[u8],
    registry: &str,
    secret_name: &str,
) -> Result<RegistryAuth, AuthError> {
    let unusable = |message: String| AuthError::Unusable {
        registry: registry.into(),
        source_name: format!("Secret {secret_name}"),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_slice(data).map_err(|e| unusable(format!("not JSON: {e}")))?;
    let auths = match value.get("auths") {
        Some(auths) => auths.clone(),
        None => value,
    };
    let only_auths = serde_json::to_vec(&serde_json::json!({ "auths": auths }))
        .map_err(|e| unusable(e.to_string()))?;
    convert(
        docker_credential::get_credential_from_reader(only_auths.as_slice(), registry),
        registry,
        &format!("Secret {secret_name}"),
    )
}

fn convert(
    found: Result<DockerCredential, CredentialRetrievalError>,
    registry: &str,
    source_name: &str,
) -> Result<RegistryAuth, AuthError> {
    let unusable = |message: String| AuthError::Unusable {
        registry: registry.into(),
        source_name: source_name.into(),
        message,
    };
    match found {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(unusable(
            "identity tokens (OAuth2 refresh tokens) are not supported; log in with a username \
             and password or token"
                .into(),
        )),
        Err(
            CredentialRetrievalError::NoCredentialConfigured
            | CredentialRetrievalError::ConfigNotFound,
        ) => Ok(RegistryAuth::Anonymous),
        Err(e) => Err(unusable(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_secrets_give_basic_auth_and_never_run_helpers() {
        let secret = br#"{"auths":{"127.0.0.1:5000":{"auth":"dXNlcjpwYXNz"}},"credHelpers":{"other:1":"evil"}}"#;
        assert_eq!(
            from_pull_secret(secret, "127.0.0.1:5000", "ns/s").unwrap(),
            RegistryAuth::Basic("user".into(), "pass".into())
        );
        assert_eq!(
            from_pull_secret(secret, "other:1", "ns/s").unwrap(),
            RegistryAuth::Anonymous
        );
        let old_format = br#"{"127.0.0.1:5000":{"auth":"dXNlcjpwYXNz"}}"#;
        assert_eq!(
            from_pull_secret(old_format, "127.0.0.1:5000", "ns/s").unwrap(),
            RegistryAuth::Basic("user".into(), "pass".into())
        );
        let error = from_pull_secret(b"nope", "r:1", "ns/s").unwrap_err();
        assert!(error.to_string().contains("Secret ns/s"), "{error}");
    }
}
