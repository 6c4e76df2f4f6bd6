//! The HTTPS server: routes of the `packages.operators.coreos.com/v1` API, authentication
//! and authorization in front of them, watches.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

use super::auth::{Attributes, Authorizer, RequestHeaderConfig};
use super::listed::ListedJson;
use super::listed::Visible;
use super::manifest::{API_VERSION, KIND, PackageManifest};
use super::openapi;
use super::respond::{self, Format};
use super::selector::{LabelSelector, name_from_field_selector};
use super::store::{Event, EventType, Resume, Store};

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(15);
/// A watch without timeoutSeconds ends after this long (the API server picks 30–60 min).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(30 * 60);

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    pub request_header: Arc<RequestHeaderConfig>,
    pub authorizer: Arc<Authorizer>,
}

/// The client certificate's common name, when one was presented and verified.
#[derive(Clone, Debug, Default)]
pub struct ClientCert(pub Option<String>);

pub fn router(state: AppState) -> Router {
    let base = "/apis/packages.operators.coreos.com/v1";
    Router::new()
        .route("/apis", get(|| async { ok(&openapi::group_list()) }))
        .route(
            "/apis/packages.operators.coreos.com",
            get(|| async { ok(&openapi::group()) }),
        )
        .route(base, get(|| async { ok(&openapi::resource_list()) }))
        .route(&format!("{base}/packagemanifests"), get(list_all))
        .route(
            &format!("{base}/namespaces/{{namespace}}/packagemanifests"),
            get(list_namespaced),
        )
        .route(
            &format!("{base}/namespaces/{{namespace}}/packagemanifests/{{name}}"),
            get(get_one),
        )
        .route(
            &format!("{base}/namespaces/{{namespace}}/packagemanifests/{{name}}/icon"),
            get(icon),
        )
        .route("/openapi/v2", get(|| async { ok(&openapi::v2()) }))
        .route("/openapi/v3", get(openapi_v3_index))
        .route(
            "/openapi/v3/apis/packages.operators.coreos.com/v1",
            get(|| async { ok(&openapi::v3_group_version()) }),
        )
        .fallback(fallback)
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state)
}

fn ok(body: &Value) -> Response {
    respond::json_response(StatusCode::OK, body)
}

async fn openapi_v3_index() -> Response {
    let doc = openapi::v3_group_version().to_string();
    ok(&openapi::v3_index(&openapi_v3_hash(&doc)))
}

/// The hash the v3 index names a group-version document by: the first 16 bytes of its
/// SHA-256, in upper-case hex.
fn openapi_v3_hash(doc: &str) -> String {
    let digest = <sha2::Sha256 as sha2::Digest>::digest(doc.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02X}")).collect()
}

async fn fallback(method: Method) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return respond::method_not_allowed();
    }
    respond::status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource".into(),
        None,
    )
}

/// What a request under our API path does, for the SubjectAccessReview.
fn attributes(method: &Method, path: &str, query: &str) -> Attributes {
    let base = "/apis/packages.operators.coreos.com/v1/";
    let Some(rest) = path.strip_prefix(base) else {
        return Attributes::NonResource {
            path: path.to_string(),
        };
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let (namespace, tail) = match parts.as_slice() {
        ["namespaces", ns, tail @ ..] => (Some(ns.to_string()), tail),
        tail => (None, tail),
    };
    let name = tail.get(1).map(std::string::ToString::to_string);
    let subresource = tail.get(2).map(std::string::ToString::to_string);
    let watching = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let verb = match (method, &name) {
        (&Method::GET, None) if watching => "watch",
        (&Method::GET, None) => "list",
        (&Method::GET, Some(_)) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, None) => "deletecollection",
        (&Method::DELETE, Some(_)) => "delete",
        _ => "get",
    };
    Attributes::Resource {
        group: super::manifest::GROUP.into(),
        resource: "packagemanifests".into(),
        verb: verb.into(),
        namespace,
        name,
        subresource,
    }
}

/// 401 without a front-proxy identity, 403 when the SubjectAccessReview says no.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
        return (StatusCode::OK, "ok").into_response();
    }
    let cert = request
        .extensions()
        .get::<ClientCert>()
        .cloned()
        .unwrap_or_default();
    let Some(user) = state
        .request_header
        .identity(cert.0.as_deref(), request.headers())
    else {
        return respond::unauthorized();
    };
    let attributes = attributes(
        request.method(),
        &path,
        request.uri().query().unwrap_or_default(),
    );
    match state.authorizer.allowed(&user, &attributes).await {
        // The API is read-only: whoever may write still gets 405, as from upstream.
        Ok(true) if request.method() != Method::GET && request.method() != Method::HEAD => {
            respond::method_not_allowed()
        }
        Ok(true) => next.run(request).await,
        Ok(false) => match &attributes {
            Attributes::Resource {
                verb,
                namespace,
                name,
                ..
            } => respond::forbidden(&user.name, verb, namespace.as_deref(), name.as_deref()),
            Attributes::NonResource { path } => respond::status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!(
                    "forbidden: User \"{}\" cannot get path \"{path}\"",
                    user.name
                ),
                None,
            ),
        },
        Err(error) => {
            tracing::warn!(%error, user = %user.name, "SubjectAccessReview failed");
            respond::internal(format!("authorizing the request: {error}"))
        }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    label_selector: Option<String>,
    field_selector: Option<String>,
    watch: Option<String>,
    resource_version: Option<String>,
    timeout_seconds: Option<u64>,
    allow_watch_bookmarks: Option<bool>,
    send_initial_events: Option<bool>,
}

struct Filter {
    labels: LabelSelector,
    name: Option<String>,
}

impl Filter {
    /// The selectors of a request, or the message of the 400 that refuses them.
    fn parse(query: &ListQuery) -> Result<Filter, String> {
        let labels = LabelSelector::parse(query.label_selector.as_deref().unwrap_or_default())
            .map_err(|e| format!("unable to parse requirement: {e}"))?;
        let name = name_from_field_selector(query.field_selector.as_deref().unwrap_or_default())
            .map_err(|e| e.to_string())?;
        Ok(Filter { labels, name })
    }

    fn matches(&self, m: &PackageManifest) -> bool {
        self.name.as_ref().is_none_or(|n| *n == m.metadata.name)
            && self.labels.matches(&m.metadata.labels)
    }
}

async fn list_all(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    list(state, None, headers, query)
}

async fn list_namespaced(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    list(state, Some(namespace), headers, query)
}

fn list(
    state: AppState,
    namespace: Option<String>,
    headers: HeaderMap,
    query: ListQuery,
) -> Response {
    let filter = match Filter::parse(&query) {
        Ok(f) => f,
        Err(message) => return respond::bad_request(message),
    };
    let format = Format::of(&headers);
    if matches!(query.watch.as_deref(), Some("true" | "1")) {
        return watch_response(state, namespace, filter, format, query);
    }
    let (revision, items) = state.store.list(namespace.as_deref());
    let items: Vec<Visible> = items
        .into_iter()
        .filter(|v| filter.matches(&v.manifest))
        .collect();
    respond::list(items, revision, format, Timestamp::now())
}

async fn get_one(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let Some(visible) = state.store.get(&namespace, &name) else {
        return respond::not_found(&name);
    };
    match Format::of(&headers) {
        Format::Object => {
            let mut json = Vec::with_capacity(visible.listed.written_len(visible.namespace()));
            visible.listed.write(visible.namespace(), &mut json);
            respond::json_bytes_response(StatusCode::OK, json)
        }
        format => ok(&respond::object(
            &visible.in_namespace(),
            format,
            Timestamp::now(),
        )),
    }
}

/// A neutral package icon for packages that have none (upstream also serves a default).
const DEFAULT_ICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect x="8" y="16" width="48" height="40" rx="4" fill="#8d8d8f"/><path d="M8 24h48M24 16l8-8 8 8" stroke="#d1d1d1" stroke-width="4" fill="none"/></svg>"##;

async fn icon(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let Some(shown) = state.store.icon(&namespace, &name) else {
        return respond::not_found(&name);
    };
    let decoded =
        (shown.icon.as_ref()).and_then(|i| Some((super::icon::decode(i)?, i.mediatype.clone())));
    let (bytes, media_type, etag) = match decoded {
        Some((bytes, media_type)) => {
            let etag = format!("\"{name}.{}.{}\"", shown.default_channel, shown.head);
            (bytes, media_type, etag)
        }
        None => (
            DEFAULT_ICON.as_bytes().to_vec(),
            "image/svg+xml".to_string(),
            String::new(),
        ),
    };
    let mut response = Response::new(Body::from(bytes));
    if let Ok(v) = HeaderValue::from_str(&media_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag)
        && !etag.is_empty()
    {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

/// Where a watch starts, from its resourceVersion and sendInitialEvents.
enum Start {
    /// ADDED for everything there now (no resourceVersion, "0", or sendInitialEvents).
    Everything,
    After(u64),
}

impl Start {
    /// Where `query` starts, or the 400 for a resourceVersion that is not one.
    fn of(query: &ListQuery) -> Result<Start, Box<Response>> {
        match query.resource_version.as_deref() {
            _ if query.send_initial_events == Some(true) => Ok(Start::Everything),
            None | Some("" | "0") => Ok(Start::Everything),
            Some(rv) => match rv.parse::<u64>() {
                Ok(rv) => Ok(Start::After(rv)),
                Err(_) => Err(Box::new(respond::bad_request(format!(
                    "invalid resourceVersion {rv:?}"
                )))),
            },
        }
    }
}

/// A watch as it opens: the events it sends first, the receiver of those after, and the
/// last revision the first ones cover.
struct Opened {
    initial: Vec<Shown>,
    receiver: broadcast::Receiver<Event>,
    last: u64,
}

impl Opened {
    /// Opens a watch in `namespace` at `start`, or the 410 for a resourceVersion older than
    /// the events kept.
    fn at(store: &Store, namespace: Option<&str>, start: Start) -> Result<Opened, Box<Response>> {
        match start {
            Start::Everything => {
                let (revision, items, receiver) = store.snapshot_and_subscribe(namespace);
                let initial = items
                    .iter()
                    .map(|v| (EventType::Added, v.in_namespace(), Arc::clone(&v.listed)))
                    .collect();
                Ok(Opened {
                    initial,
                    receiver,
                    last: revision,
                })
            }
            Start::After(rv) => match store.resume(rv) {
                (Resume::Events(events), receiver) => {
                    let last = events.last().map_or(rv, |e| e.revision);
                    let initial = events
                        .into_iter()
                        .filter_map(|e| visible(store, namespace, &e))
                        .collect();
                    Ok(Opened {
                        initial,
                        receiver,
                        last,
                    })
                }
                (Resume::Expired { oldest }, _) => Err(Box::new(respond::status(
                    StatusCode::GONE,
                    "Expired",
                    format!(
                        "too old resource version: {rv} ({})",
                        oldest.saturating_sub(1)
                    ),
                    None,
                ))),
            },
        }
    }
}

fn watch_response(
    state: AppState,
    namespace: Option<String>,
    filter: Filter,
    format: Format,
    query: ListQuery,
) -> Response {
    let opened =
        Start::of(&query).and_then(|start| Opened::at(&state.store, namespace.as_deref(), start));
    let opened = match opened {
        Ok(opened) => opened,
        Err(response) => return *response,
    };
    let watch = Watch {
        store: state.store,
        namespace,
        filter,
        bookmarks: query.allow_watch_bookmarks == Some(true),
        initial_end_bookmark: query.send_initial_events == Some(true),
        timeout: query
            .timeout_seconds
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_WATCH_TIMEOUT),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let writer = EventWriter {
        format,
        first: true,
        tx,
    };
    tokio::spawn(watch.run(opened, writer));
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    }));
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// One watch's stream: what it shows and for how long.
struct Watch {
    store: Arc<Store>,
    namespace: Option<String>,
    filter: Filter,
    bookmarks: bool,
    initial_end_bookmark: bool,
    timeout: Duration,
}

impl Watch {
    /// Writes the opening events, then each new one, until the timeout, the client leaves
    /// or the store's events outrun it.
    async fn run(self, opened: Opened, mut writer: EventWriter) {
        let Opened {
            initial,
            mut receiver,
            mut last,
        } = opened;
        for shown in initial {
            if !self.send(&mut writer, shown).await {
                return;
            }
        }
        if self.initial_end_bookmark && !writer.bookmark(last, true).await {
            return;
        }
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = writer.tx.closed() => return,
                _ = ticker.tick(), if self.bookmarks => {
                    if !writer.bookmark(last, false).await { return; }
                }
                event = receiver.recv() => match event {
                    Ok(event) => {
                        if event.revision <= last { continue; }
                        last = event.revision;
                        if let Some(shown) = visible(&self.store, self.namespace.as_deref(), &event)
                            && !self.send(&mut writer, shown).await
                        {
                            return;
                        }
                    }
                    // Too slow a reader: end the watch; the client resumes or relists.
                    Err(broadcast::error::RecvError::Lagged(_) | broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }

    /// Writes `shown` when the selectors match it; false once the client is gone.
    async fn send(&self, writer: &mut EventWriter, shown: Shown) -> bool {
        let (type_, manifest, listed) = shown;
        !self.filter.matches(&manifest) || writer.send(type_.as_str(), &manifest, &listed).await
    }
}

/// An event as a watch shows it: the manifest (without channels, in the namespace shown)
/// and its JSON, which has them.
type Shown = (EventType, Arc<PackageManifest>, Arc<ListedJson>);

/// The event as a watch in `namespace` sees it: global catalogs' packages rewritten into it,
/// other namespaces' not at all.
fn visible(store: &Store, namespace: Option<&str>, event: &Event) -> Option<Shown> {
    let own = &event.manifest.metadata.namespace;
    let manifest = match namespace {
        None => Arc::clone(&event.manifest),
        Some(ns) if own == ns => Arc::clone(&event.manifest),
        Some(ns) if *own == store.global_namespace => Arc::new(event.manifest.in_namespace(ns)),
        Some(_) => return None,
    };
    Some((event.type_, manifest, Arc::clone(&event.listed)))
}

struct EventWriter {
    format: Format,
    first: bool,
    tx: mpsc::Sender<Bytes>,
}

impl EventWriter {
    async fn send(&mut self, type_: &str, manifest: &PackageManifest, listed: &ListedJson) -> bool {
        let object = match self.format {
            Format::Table => {
                let t = respond::table(
                    &[(manifest, &manifest.metadata.namespace)],
                    None,
                    Timestamp::now(),
                    self.first,
                );
                self.first = false;
                t
            }
            Format::Object => super::listed::object(manifest, listed),
            other => respond::object(manifest, other, Timestamp::now()),
        };
        self.write(json!({"type": type_, "object": object})).await
    }

    async fn bookmark(&mut self, revision: u64, initial_end: bool) -> bool {
        let mut object = json!({
            "kind": KIND,
            "apiVersion": API_VERSION,
            "metadata": {"resourceVersion": revision.to_string()},
        });
        if initial_end {
            object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        if self.format == Format::Metadata {
            object["kind"] = json!("PartialObjectMetadata");
            object["apiVersion"] = json!("meta.k8s.io/v1");
        }
        self.write(json!({"type": "BOOKMARK", "object": object}))
            .await
    }

    async fn write(&self, event: Value) -> bool {
        let mut line = event.to_string().into_bytes();
        line.push(b'\n');
        self.tx.send(Bytes::from(line)).await.is_ok()
    }
}

/// Accepts TLS connections until `stop`; each connection knows its client certificate.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(error) => {
                tracing::warn!(%error, "accepting a packages API connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Small HTTP/2 frames must not wait for the peer's delayed ACK (Nagle): that costs
        // the aggregator about 40 ms a request. Go servers set this by default.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, %peer, "TCP_NODELAY");
        }
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(error)) => {
                        tracing::debug!(%error, %peer, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
            let cn = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| super::tls::common_name(c));
            let service = router.layer(axum::Extension(ClientCert(cn)));
            let service = hyper_util::service::TowerToHyperService::new(service);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            if let Err(error) = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, %peer, "packages API connection ended");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_map_to_review_attributes() {
        let a = attributes(
            &Method::GET,
            "/apis/packages.operators.coreos.com/v1/namespaces/ns/packagemanifests/p/icon",
            "",
        );
        assert_eq!(
            a,
            Attributes::Resource {
                group: super::super::manifest::GROUP.into(),
                resource: "packagemanifests".into(),
                verb: "get".into(),
                namespace: Some("ns".into()),
                name: Some("p".into()),
                subresource: Some("icon".into())
            }
        );
        let a = attributes(
            &Method::GET,
            "/apis/packages.operators.coreos.com/v1/packagemanifests",
            "watch=true&resourceVersion=3",
        );
        assert!(
            matches!(a, Attributes::Resource { ref verb, namespace: None, .. } if verb == "watch")
        );
        let a = attributes(
            &Method::DELETE,
            "/apis/packages.operators.coreos.com/v1/namespaces/n/packagemanifests/p",
            "",
        );
        assert!(matches!(a, Attributes::Resource { ref verb, .. } if verb == "delete"));
        assert_eq!(
            attributes(&Method::GET, "/openapi/v2", ""),
            Attributes::NonResource {
                path: "/openapi/v2".into()
            }
        );
    }

    #[test]
    fn openapi_v3_hash_is_the_head_of_the_sha256() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(openapi_v3_hash("abc"), "BA7816BF8F01CFEA414140DE5DAE2223");
    }
}
