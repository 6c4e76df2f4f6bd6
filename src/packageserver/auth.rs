//! Who is asking, and may they: the kube-apiserver's front-proxy client certificate (checked
//! during the TLS handshake against the request-header CA, and here against the allowed
//! names) vouches for the identity in the X-Remote-* headers; every request is then
//! authorized with a SubjectAccessReview, decisions cached briefly as upstream's delegating
//! authorizer does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use super::manifest::{GROUP, VERSION};

/// How long an allow or a deny is remembered.
const DECISION_TTL: Duration = Duration::from_secs(10);

/// `kube-system/extension-apiserver-authentication`: how the API server proxies identities.
#[derive(Clone, Debug, Default)]
pub struct RequestHeaderConfig {
    pub client_ca_pem: String,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefixes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("reading ConfigMap kube-system/extension-apiserver-authentication: {0}")]
    ConfigMap(#[source] kube::Error),
    #[error(
        "ConfigMap kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: the API server runs without --requestheader-client-ca-file, so it cannot proxy to aggregated APIs"
    )]
    NoRequestHeaderCa,
    #[error("ConfigMap kube-system/extension-apiserver-authentication key {key}: {message}")]
    BadKey { key: String, message: String },
}

impl RequestHeaderConfig {
    pub async fn load(client: &kube::Client) -> Result<Self, AuthError> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
        let cm = api
            .get("extension-apiserver-authentication")
            .await
            .map_err(AuthError::ConfigMap)?;
        let data = cm.data.unwrap_or_default();
        let list = |key: &str| -> Result<Vec<String>, AuthError> {
            match data.get(key) {
                None => Ok(Vec::new()),
                Some(text) if text.trim().is_empty() => Ok(Vec::new()),
                Some(text) => serde_json::from_str(text).map_err(|e| AuthError::BadKey {
                    key: key.into(),
                    message: e.to_string(),
                }),
            }
        };
        let client_ca_pem = data
            .get("requestheader-client-ca-file")
            .filter(|c| !c.trim().is_empty())
            .cloned()
            .ok_or(AuthError::NoRequestHeaderCa)?;
        Ok(RequestHeaderConfig {
            client_ca_pem,
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_headers_prefixes: list("requestheader-extra-headers-prefix")?,
        })
    }

    /// The user the front proxy vouches for, when the client certificate's common name is
    /// allowed (an empty list allows any certificate the CA signed).
    pub fn identity(&self, client_cn: Option<&str>, headers: &HeaderMap) -> Option<User> {
        let cn = client_cn?;
        if !self.allowed_names.is_empty() && !self.allowed_names.iter().any(|n| n == cn) {
            return None;
        }
        let name = self
            .username_headers
            .iter()
            .find_map(|h| headers.get(h).and_then(|v| v.to_str().ok()))
            .filter(|n| !n.is_empty())?
            .to_string();
        let mut groups = Vec::new();
        for h in &self.group_headers {
            for v in headers.get_all(h) {
                if let Ok(v) = v.to_str() {
                    groups.push(v.to_string());
                }
            }
        }
        // Every authenticated user is in system:authenticated, as the generic API server
        // adds it (the aggregator's own users send no groups and rely on it for discovery).
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, value) in headers {
            let key = key.as_str();
            for prefix in &self.extra_headers_prefixes {
                if let Some(rest) = key
                    .to_ascii_lowercase()
                    .strip_prefix(&prefix.to_ascii_lowercase())
                    && let Ok(v) = value.to_str()
                {
                    extra.entry(unescape(rest)).or_default().push(v.to_string());
                }
            }
        }
        Some(User {
            name,
            groups,
            extra,
        })
    }
}

/// Extra keys are percent-encoded in header names.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&key[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request does, in SubjectAccessReview terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attributes {
    Resource {
        /// The API group and resource (packagemanifests for the packages API).
        group: String,
        resource: String,
        verb: String,
        namespace: Option<String>,
        name: Option<String>,
        subresource: Option<String>,
    },
    NonResource {
        path: String,
    },
}

pub struct Authorizer {
    client: kube::Client,
    cache: Mutex<HashMap<(User, Attributes), (bool, Instant)>>,
}

impl Authorizer {
    pub fn new(client: kube::Client) -> Self {
        Authorizer {
            client,
            cache: Mutex::default(),
        }
    }

    pub async fn allowed(&self, user: &User, attributes: &Attributes) -> Result<bool, kube::Error> {
        let key = (user.clone(), attributes.clone());
        {
            let mut cache = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            if cache.len() > 10_000 {
                cache.retain(|_, (_, at)| now.duration_since(*at) < DECISION_TTL);
            }
            if let Some((allowed, at)) = cache.get(&key)
                && now.duration_since(*at) < DECISION_TTL
            {
                return Ok(*allowed);
            }
        }
        let review = SubjectAccessReview {
            spec: review_spec(user, attributes),
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api.create(&PostParams::default(), &review).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, (allowed, Instant::now()));
        Ok(allowed)
    }
}

fn review_spec(user: &User, attributes: &Attributes) -> SubjectAccessReviewSpec {
    let mut spec = SubjectAccessReviewSpec {
        user: Some(user.name.clone()),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        ..Default::default()
    };
    match attributes {
        Attributes::Resource {
            group,
            resource,
            verb,
            namespace,
            name,
            subresource,
        } => {
            spec.resource_attributes = Some(ResourceAttributes {
                group: Some(group.clone()),
                version: (group == GROUP).then(|| VERSION.into()),
                resource: Some(resource.clone()),
                verb: Some(verb.clone()),
                namespace: namespace.clone(),
                name: name.clone(),
                subresource: subresource.clone(),
                ..Default::default()
            });
        }
        Attributes::NonResource { path } => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some("get".into()),
            });
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn config() -> RequestHeaderConfig {
        RequestHeaderConfig {
            client_ca_pem: String::new(),
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }

    #[test]
    fn identity_needs_an_allowed_certificate_and_a_user_header() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", HeaderValue::from_static("alice"));
        h.append("x-remote-group", HeaderValue::from_static("devs"));
        h.append(
            "x-remote-group",
            HeaderValue::from_static("system:authenticated"),
        );
        h.insert("x-remote-extra-scopes%2fa", HeaderValue::from_static("x"));
        let user = config().identity(Some("front-proxy-client"), &h).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        assert_eq!(user.extra["scopes/a"], ["x"]);
        assert_eq!(config().identity(None, &h), None);
        assert_eq!(config().identity(Some("someone-else"), &h), None);
        let any = RequestHeaderConfig {
            allowed_names: vec![],
            ..config()
        };
        assert!(any.identity(Some("someone-else"), &h).is_some());
        assert_eq!(
            config().identity(Some("front-proxy-client"), &HeaderMap::new()),
            None
        );
    }
}
