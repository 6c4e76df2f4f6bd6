//! `/metrics` and `/debug/catalogs` for callers off the host: over TLS, for a bearer token
//! the API server vouches for (TokenReview), allowed the path by a SubjectAccessReview on
//! the non-resource URL, as Kubernetes components and controller-runtime's secure metrics
//! serve them. `/debug/catalogs` lists only the catalogs of namespaces where the caller may
//! list CatalogSources: a catalog's packages, digests and address are its tenant's.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use super::admin::{AdminState, CatalogsQuery, catalog_summaries, metrics};
use crate::packageserver::auth::{Attributes, Authorizer, User};
use crate::packageserver::tls;

/// How long a token's review is remembered (as the API server's own webhook caches).
const TOKEN_TTL: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum SecureAdminError {
    #[error("binding the secure admin server to {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the secure admin server's certificate: {0}")]
    Tls(#[from] tls::TlsError),
}

/// Token reviews by a hash of the token: who it is (None: nobody), and when asked.
type TokenCache = Arc<Mutex<HashMap<u64, (Option<User>, Instant)>>>;

#[derive(Clone)]
struct Secure {
    admin: AdminState,
    client: kube::Client,
    authorizer: Arc<Authorizer>,
    tokens: TokenCache,
}

impl Secure {
    /// The user `token` belongs to; None when the API server does not vouch for it.
    async fn authenticate(&self, token: &str) -> Result<Option<User>, kube::Error> {
        let key = crate::cluster::ownership::fnv64(&[token.as_bytes()]);
        if let Some((user, at)) = self.cached(key)
            && at.elapsed() < TOKEN_TTL
        {
            return Ok(user);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let status = api.create(&PostParams::default(), &review).await?.status;
        let user = status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .and_then(|u| {
                Some(User {
                    name: u.username.filter(|n| !n.is_empty())?,
                    groups: u.groups.unwrap_or_default(),
                    extra: u.extra.unwrap_or_default().into_iter().collect(),
                })
            });
        let mut tokens = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if tokens.len() > 10_000 {
            tokens.retain(|_, (_, at)| at.elapsed() < TOKEN_TTL);
        }
        tokens.insert(key, (user.clone(), Instant::now()));
        Ok(user)
    }

    fn cached(&self, key: u64) -> Option<(Option<User>, Instant)> {
        self.tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .cloned()
    }
}

fn refuse(code: StatusCode, message: String) -> Response {
    (code, message).into_response()
}

/// Authentication and the path's authorization, before any handler.
async fn guard(State(secure): State<Secure>, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: a bearer token is required\n".into(),
        );
    };
    let user = match secure.authenticate(token).await {
        Ok(Some(user)) => user,
        Ok(None) => return refuse(StatusCode::UNAUTHORIZED, "Unauthorized\n".into()),
        Err(error) => {
            tracing::warn!(%error, "TokenReview for the secure admin server");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "authentication failed\n".into(),
            );
        }
    };
    let path = request.uri().path().to_string();
    let attributes = Attributes::NonResource { path: path.clone() };
    match secure.authorizer.allowed(&user, &attributes).await {
        Ok(true) => {
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Ok(false) => refuse(
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: user \"{}\" cannot get path \"{path}\"\n",
                user.name
            ),
        ),
        Err(error) => {
            tracing::warn!(%error, "SubjectAccessReview for the secure admin server");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "authorization failed\n".into(),
            )
        }
    }
}

/// The catalogs of the namespaces where the caller may list CatalogSources.
async fn catalogs(
    State(secure): State<Secure>,
    axum::Extension(user): axum::Extension<User>,
    Query(query): Query<CatalogsQuery>,
) -> Response {
    let mut summaries = catalog_summaries(&secure.admin, query);
    let mut allowed: HashMap<String, bool> = HashMap::new();
    for summary in &summaries {
        if allowed.contains_key(&summary.namespace) {
            continue;
        }
        let attributes = Attributes::Resource {
            group: crate::api::GROUP.into(),
            resource: "catalogsources".into(),
            verb: "list".into(),
            namespace: Some(summary.namespace.clone()),
            name: None,
            subresource: None,
        };
        let may = match secure.authorizer.allowed(&user, &attributes).await {
            Ok(may) => may,
            Err(error) => {
                tracing::warn!(%error, "SubjectAccessReview for /debug/catalogs");
                return refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "authorization failed\n".into(),
                );
            }
        };
        allowed.insert(summary.namespace.clone(), may);
    }
    summaries.retain(|s| allowed.get(&s.namespace) == Some(&true));
    Json(summaries).into_response()
}

/// Binds `address` and serves until `shutdown`, with a self-signed certificate (scrapers
/// verify the caller side: the token; as controller-runtime does without a cert dir).
pub async fn start(
    address: SocketAddr,
    admin: AdminState,
    client: kube::Client,
    shutdown: watch::Receiver<bool>,
) -> Result<(), SecureAdminError> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| SecureAdminError::Bind { address, source })?;
    let cert = tls::generate(&["localhost".to_string()])?;
    let resolver = Arc::new(tls::CertResolver::new(&cert)?);
    let config = Arc::new(tls::server_config_without_client_auth(resolver)?);
    let secure = Secure {
        admin: admin.clone(),
        authorizer: Arc::new(Authorizer::new(client.clone())),
        client,
        tokens: Arc::default(),
    };
    let router = Router::new()
        .route("/metrics", get(metrics).with_state(admin))
        .route("/debug/catalogs", get(catalogs))
        .layer(middleware::from_fn_with_state(secure.clone(), guard))
        .with_state(secure);
    tracing::info!(%address, "secure admin server listening (/metrics /debug/catalogs: TLS, bearer tokens)");
    tokio::spawn(crate::packageserver::server::serve(
        listener, config, router, shutdown,
    ));
    Ok(())
}
