//! Registry access: push an image from an OCI layout (blobs the registry has are not sent
//! again, blobs stream from disk), resolve a tag to its digest with one HEAD, and pull an
//! image into an on-disk cache keyed by digest. Plain HTTP only for loopback hosts and
//! those the caller names; retries with backoff on 5xx and connection errors.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{ImageIndexEntry, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio::io::AsyncReadExt;

use super::auth::AuthError;
use super::layout::{Descriptor, Layout, LayoutError};
use super::unpack::UnpackError;
use crate::api::PullCause;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{reference:?} is not an image reference: {message}")]
    Reference { reference: String, message: String },
    #[error("{reference}: {what}: {message}")]
    Request {
        reference: String,
        what: String,
        message: String,
        /// Classified from the structured error, never from the message: URLs in messages
        /// carry port numbers, and a port like 34015 must not read as a 401.
        cause: PullCause,
    },
    #[error("{reference}: {message}")]
    Image { reference: String, message: String },
    /// The image's labels say it is not the kind of image wanted (see [`Select`]).
    #[error("{reference}: {missing}")]
    Refused {
        reference: String,
        #[source]
        missing: MissingLabel,
    },
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("{reference}: {source}")]
    Unpack {
        reference: String,
        #[source]
        source: UnpackError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP client could not be made: in a scratch image without a CA bundle, say.
    #[error(
        "{registry}: building the HTTP client: {message} (a CA bundle at /etc/ssl/certs/ca-certificates.crt, or SSL_CERT_FILE, gives the TLS roots)"
    )]
    Client { registry: String, message: String },
}

impl RegistryError {
    /// A short cause for conditions and logs: unauthorized, not found, unreachable, ….
    pub fn cause(&self) -> PullCause {
        match self {
            RegistryError::Request { cause, .. } => *cause,
            RegistryError::Auth(_) => PullCause::InvalidCredentials,
            RegistryError::Reference { .. } => PullCause::InvalidReference,
            RegistryError::Image { .. }
            | RegistryError::Refused { .. }
            | RegistryError::Unpack { .. } => PullCause::InvalidImage,
            RegistryError::Layout(_) | RegistryError::Io { .. } | RegistryError::Client { .. } => {
                PullCause::LocalError
            }
        }
    }
}

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `host[:port]` reached over plain HTTP (loopback always is).
    pub insecure: Vec<String>,
    /// Per-request read timeout.
    pub timeout: Option<Duration>,
}

pub fn parse_reference(text: &str) -> Result<Reference, RegistryError> {
    text.trim()
        .parse::<Reference>()
        .map_err(|e| RegistryError::Reference {
            reference: text.into(),
            message: e.to_string(),
        })
}

/// Whether a registry host is on this machine (plain HTTP is safe there).
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => registry.rsplit_once(':').map_or(registry, |(h, _)| h),
    };
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The process-wide TLS provider: ring, which kube already uses (no aws-lc build).
fn ensure_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Platform choice in an index: linux on this architecture, else the only entry.
fn choose_platform(entries: &[ImageIndexEntry]) -> Option<String> {
    use oci_client::manifest::Platform;
    let linux_here = |p: &Platform| {
        p.os == oci_spec::image::Os::Linux && p.architecture == oci_spec::image::Arch::default()
    };
    entries
        .iter()
        .find(|e| e.platform.as_ref().is_some_and(linux_here))
        .or_else(|| (entries.len() == 1).then(|| &entries[0]))
        .map(|e| e.digest.clone())
}

/// One client for one registry and one set of credentials (oci-client keeps credentials
/// per host per client).
pub struct Session {
    client: Client,
    auth: RegistryAuth,
    /// For anonymous digest checks: oci-client re-does its `/v2/` handshake on every
    /// request when there is no token to cache, so a poll would cost two requests.
    plain_head: Option<(reqwest::Client, &'static str)>,
    /// Show a live line per blob (bytes and rate) on stderr while it moves: for a terminal.
    live_progress: bool,
}

impl Session {
    pub fn new(
        reference: &Reference,
        auth: RegistryAuth,
        options: &Options,
    ) -> Result<Session, RegistryError> {
        ensure_crypto_provider();
        let registry = reference.resolve_registry().to_string();
        let plain = is_loopback(&registry) || options.insecure.contains(&registry);
        let scheme = if plain { "http" } else { "https" };
        let proxies = super::proxy::from_environment();
        let client_proxies = proxies.for_client(scheme, &registry);
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::HttpsExcept(vec![registry.clone()])
            } else {
                ClientProtocol::Https
            },
            platform_resolver: Some(Box::new(choose_platform)),
            read_timeout: options.timeout,
            connect_timeout: Some(options.timeout.unwrap_or(Duration::from_secs(10))),
            http_proxy: client_proxies.http,
            https_proxy: client_proxies.https,
            no_proxy: Some(client_proxies.no_proxy),
            ..ClientConfig::default()
        };
        let plain_head = (auth == RegistryAuth::Anonymous)
            .then(|| {
                reqwest::Client::builder()
                    .timeout(options.timeout.unwrap_or(Duration::from_secs(30)))
                    .proxy(reqwest::Proxy::custom(|url| proxies.for_url(url).cloned()))
                    .build()
                    .ok()
            })
            .flatten()
            .map(|c| (c, scheme));
        // Not Client::new: it falls back to a default client that panics without TLS roots.
        let client = Client::try_from(config).map_err(|e| RegistryError::Client {
            registry,
            message: e.to_string(),
        })?;
        Ok(Session {
            client,
            auth,
            plain_head,
            live_progress: false,
        })
    }

    /// Live per-blob progress on stderr (bytes, total, rate) while blobs move; the CLI
    /// turns it on when stderr is a terminal (otherwise one plain line per blob).
    pub fn with_live_progress(mut self, on: bool) -> Session {
        self.live_progress = on;
        self
    }

    /// A session with the user's own credentials (docker config.json / REGISTRY_AUTH_FILE).
    pub fn for_user(reference: &Reference, options: &Options) -> Result<Session, RegistryError> {
        let auth = super::auth::from_user_config(reference.resolve_registry())?;
        Session::new(reference, auth, options)
    }

    /// The digest `reference` points at now: one manifest HEAD (GET when the registry
    /// sends no digest header). For an index, the index's digest.
    pub async fn resolve_digest(&self, reference: &Reference) -> Result<String, RegistryError> {
        if let Some(digest) = self.anonymous_head(reference).await {
            return Ok(digest);
        }
        retrying(|| self.client.fetch_manifest_digest(reference, &self.auth))
            .await
            .map_err(|e| request_error(reference, "resolving the manifest digest", e))
    }

    /// One anonymous manifest HEAD; None when it does not give a digest (auth needed, an
    /// error, no header), and oci-client's full path decides.
    async fn anonymous_head(&self, reference: &Reference) -> Option<String> {
        let (http, scheme) = self.plain_head.as_ref()?;
        let target = reference.digest().or(reference.tag()).unwrap_or("latest");
        let url = format!(
            "{scheme}://{}/v2/{}/manifests/{target}",
            reference.resolve_registry(),
            reference.repository()
        );
        let accept = [
            super::MEDIA_OCI_INDEX,
            super::MEDIA_OCI_MANIFEST,
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        ]
        .join(", ");
        let response = http.head(&url).header("Accept", accept).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let digest = response
            .headers()
            .get("Docker-Content-Digest")?
            .to_str()
            .ok()?
            .to_string();
        match reference.digest() {
            Some(pinned) if pinned != digest => None,
            _ => super::digest_hex(&digest).is_some().then_some(digest),
        }
    }

    /// Pushes the image `manifest` of `layout` as `reference`.
    pub async fn push(
        &self,
        layout: &Layout,
        manifest: &Descriptor,
        reference: &Reference,
        progress: &mut dyn FnMut(&str),
    ) -> Result<PushReport, RegistryError> {
        self.client
            .auth(reference, &self.auth, oci_client::RegistryOperation::Push)
            .await
            .map_err(|e| request_error(reference, "authenticating for push", e))?;
        let image = layout.manifest(manifest)?;
        let mut report = PushReport::default();
        for blob in image.layers.iter().chain(std::iter::once(&image.config)) {
            let exists = retrying(|| self.client.blob_exists(reference, &blob.digest))
                .await
                .map_err(|e| {
                    request_error(reference, &format!("checking blob {}", blob.digest), e)
                })?;
            if exists {
                progress(&format!(
                    "{} exists ({})",
                    short(&blob.digest),
                    human_bytes(blob.size)
                ));
                report.skipped.push(blob.digest.clone());
                continue;
            }
            let started = Instant::now();
            let path = layout.blob_path(&blob.digest)?;
            let sent = Arc::new(AtomicU64::new(0));
            let upload = retrying(|| {
                sent.store(0, Ordering::Relaxed);
                self.push_blob_file(reference, &path, blob, Arc::clone(&sent))
            });
            live(
                self.live_progress,
                &format!("{} uploading", short(&blob.digest)),
                blob.size,
                || sent.load(Ordering::Relaxed),
                upload,
            )
            .await
            .map_err(|e| request_error(reference, &format!("uploading blob {}", blob.digest), e))?;
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            progress(&format!(
                "{} uploaded ({} in {:.2}s, {}/s)",
                short(&blob.digest),
                human_bytes(blob.size),
                seconds,
                human_bytes((blob.size as f64 / seconds) as u64)
            ));
            report.uploaded.push(blob.digest.clone());
        }
        let bytes = layout.read_blob(&manifest.digest)?;
        let content_type = manifest
            .media_type
            .parse::<http::HeaderValue>()
            .map_err(|e| RegistryError::Image {
                reference: reference.whole(),
                message: format!("manifest media type {:?}: {e}", manifest.media_type),
            })?;
        retrying(|| {
            self.client
                .push_manifest_raw(reference, bytes.clone(), content_type.clone())
        })
        .await
        .map_err(|e| request_error(reference, "pushing the manifest", e))?;
        progress(&format!(
            "{} manifest pushed as {}",
            short(&manifest.digest),
            reference.whole()
        ));
        report.digest = manifest.digest.clone();
        Ok(report)
    }

    /// Streams one blob from disk (4 MiB chunks); small blobs go in one request.
    async fn push_blob_file(
        &self,
        reference: &Reference,
        path: &Path,
        blob: &Descriptor,
        sent: Arc<AtomicU64>,
    ) -> Result<String, OciDistributionError> {
        const CHUNK: usize = 4 << 20;
        if blob.size as usize <= CHUNK {
            let bytes = tokio::fs::read(path).await?;
            return self.client.push_blob(reference, bytes, &blob.digest).await;
        }
        let file = tokio::fs::File::open(path).await?;
        let stream = futures::stream::try_unfold((file, sent), |(mut file, sent)| async move {
            let mut buffer = vec![0u8; CHUNK];
            let mut filled = 0;
            while filled < CHUNK {
                let n = file.read(&mut buffer[filled..]).await?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                return Ok(None);
            }
            buffer.truncate(filled);
            sent.fetch_add(filled as u64, Ordering::Relaxed);
            Ok::<_, OciDistributionError>(Some((bytes::Bytes::from(buffer), (file, sent))))
        });
        self.client
            .push_blob_stream(reference, stream.boxed(), &blob.digest, Some(blob.size))
            .await
    }

    /// Pulls `reference` into its [`super::cache_entry`] (once per repository and digest: a
    /// complete entry is reused). `select` sees the config labels before any layer is fetched: it refuses the
    /// image (a message) or names the only path to extract (all when None).
    /// `expected_digest`, when the caller already resolved it, saves the HEAD.
    pub async fn pull(
        &self,
        reference: &Reference,
        cache: &Path,
        select: &Select,
        expected_digest: Option<&str>,
    ) -> Result<PulledImage, RegistryError> {
        self.pull_stored_as(reference, reference, cache, select, expected_digest)
            .await
    }

    /// As [`Session::pull`], kept in the cache under `stored_as`: an image pulled from a
    /// mirror is cached under the name it is known by (the digest is the same).
    pub async fn pull_stored_as(
        &self,
        reference: &Reference,
        stored_as: &Reference,
        cache: &Path,
        select: &Select,
        expected_digest: Option<&str>,
    ) -> Result<PulledImage, RegistryError> {
        let digest = match expected_digest {
            Some(d) => d.to_string(),
            None => self.resolve_digest(reference).await?,
        };
        let dir = super::cache_entry(
            cache,
            stored_as.resolve_registry(),
            stored_as.repository(),
            &digest,
        )
        .ok_or_else(|| RegistryError::Image {
            reference: reference.whole(),
            message: format!("unsupported digest {digest:?}"),
        })?;
        let parent = dir.parent().unwrap_or(cache).to_path_buf();
        let hex = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let io_err = |path: &Path, source| RegistryError::Io {
            path: path.to_path_buf(),
            source,
        };
        if dir.join("complete").is_file() {
            let config = std::fs::read(dir.join("config.json")).map_err(|e| io_err(&dir, e))?;
            let image = PulledImage::new(reference, digest, dir, &config)?;
            select(&image.labels).map_err(|missing| RegistryError::Refused {
                reference: reference.whole(),
                missing,
            })?;
            return Ok(image);
        }
        let pinned = reference.clone_with_digest(digest.clone());
        let (manifest, _) = retrying(|| self.client.pull_image_manifest(&pinned, &self.auth))
            .await
            .map_err(|e| request_error(reference, "pulling the manifest", e))?;
        let config = retrying(|| async {
            let mut config = Vec::new();
            self.client
                .pull_blob(&pinned, &manifest.config, &mut config)
                .await?;
            Ok(config)
        })
        .await
        .map_err(|e| request_error(reference, "pulling the image config", e))?;
        let labels = PulledImage::new(reference, digest.clone(), PathBuf::new(), &config)?.labels;
        let only = select(&labels).map_err(|missing| RegistryError::Refused {
            reference: reference.whole(),
            missing,
        })?;
        let only = only.as_deref();

        std::fs::create_dir_all(&parent).map_err(|e| io_err(&parent, e))?;
        let temp = partial_dir(&parent, &hex);
        let _ = std::fs::remove_dir_all(&temp);
        std::fs::create_dir_all(temp.join("rootfs")).map_err(|e| io_err(&temp, e))?;
        let result = self
            .pull_layers(&pinned, &manifest.layers, &temp, only)
            .await;
        if let Err(error) = result {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(error);
        }
        std::fs::write(temp.join("config.json"), &config).map_err(|e| io_err(&temp, e))?;
        std::fs::write(temp.join("complete"), b"").map_err(|e| io_err(&temp, e))?;
        install_pulled(&temp, &dir).map_err(|e| io_err(&dir, e))?;
        PulledImage::new(reference, digest, dir, &config)
    }

    /// Each layer goes to a temp file (digest checked while it streams), then is applied.
    async fn pull_layers(
        &self,
        pinned: &Reference,
        layers: &[OciDescriptor],
        temp: &Path,
        only: Option<&Path>,
    ) -> Result<(), RegistryError> {
        for (i, layer) in layers.iter().enumerate() {
            let blob = temp.join(format!("layer-{i}"));
            let started = Instant::now();
            let download = retrying(|| async {
                let file = tokio::fs::File::create(&blob).await?;
                self.client.pull_blob(pinned, layer, file).await
            });
            let size = layer.size.max(0) as u64;
            live(
                self.live_progress,
                &format!("{} downloading", short(&layer.digest)),
                size,
                || std::fs::metadata(&blob).map_or(0, |m| m.len()),
                download,
            )
            .await
            .map_err(|e| request_error(pinned, &format!("pulling layer {}", layer.digest), e))?;
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            tracing::debug!(
                layer = %layer.digest,
                size = %human_bytes(size),
                rate = %format!("{}/s", human_bytes((size as f64 / seconds) as u64)),
                "layer pulled"
            );
            let rootfs = temp.join("rootfs");
            let name = layer.digest.clone();
            let only = only.map(Path::to_path_buf);
            let blob_path = blob.clone();
            tokio::task::spawn_blocking(move || {
                let file = std::fs::File::open(&blob_path).map_err(|e| UnpackError::Write {
                    layer: name.clone(),
                    path: blob_path.clone(),
                    source: e,
                })?;
                super::unpack::apply_layer(file, &name, &rootfs, only.as_deref())
            })
            .await
            .map_err(|e| RegistryError::Image {
                reference: pinned.whole(),
                message: format!("unpacking stopped: {e}"),
            })?
            .map_err(|source| RegistryError::Unpack {
                reference: pinned.whole(),
                source,
            })?;
            let _ = std::fs::remove_file(&blob);
        }
        Ok(())
    }
}

/// A scratch directory beside the cache entry, of this pull alone: two catalogs of the same
/// image pull it at the same time, and must not write into (or remove) each other's.
fn partial_dir(parent: &Path, hex: &str) -> PathBuf {
    static PULLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PULLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    parent.join(format!(".partial-{hex}-{}-{n}", std::process::id()))
}

/// Moves a finished pull into its cache entry. When another pull of the same digest got
/// there first, its entry stays (a reader may be using it) and this copy goes; an entry left
/// incomplete by a crash is replaced.
fn install_pulled(temp: &Path, dir: &Path) -> std::io::Result<()> {
    if std::fs::rename(temp, dir).is_ok() {
        return Ok(());
    }
    if dir.join("complete").is_file() {
        return std::fs::remove_dir_all(temp);
    }
    std::fs::remove_dir_all(dir)?;
    std::fs::rename(temp, dir)
}

/// What to extract of an image, decided from its labels (see [`Session::pull`]).
pub type Select = dyn Fn(&std::collections::BTreeMap<String, String>) -> Result<Option<PathBuf>, MissingLabel>
    + Send
    + Sync;

/// Why a [`Select`] refused an image before any layer was fetched: its config lacks the
/// label that makes it the kind of image the caller pulls.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a {kind} image: its config has no {label} label")]
pub struct MissingLabel {
    /// The kind of image wanted (`catalog`, `bundle`).
    pub kind: &'static str,
    /// The label it lacks.
    pub label: &'static str,
}

/// Everything.
pub fn select_all(
    _: &std::collections::BTreeMap<String, String>,
) -> Result<Option<PathBuf>, MissingLabel> {
    Ok(None)
}

/// The catalog label's directory; an image without the label is not a catalog image.
pub fn select_catalog(
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<Option<PathBuf>, MissingLabel> {
    match labels.get(super::LABEL_CATALOG_CONFIGS) {
        Some(path) => Ok(Some(PathBuf::from(path))),
        None => Err(MissingLabel {
            kind: "catalog",
            label: super::LABEL_CATALOG_CONFIGS,
        }),
    }
}

/// An image in the pull cache.
#[derive(Clone, Debug)]
pub struct PulledImage {
    pub digest: String,
    /// The image config's `config.Labels`.
    pub labels: std::collections::BTreeMap<String, String>,
    /// The extracted files.
    pub rootfs: PathBuf,
}

impl PulledImage {
    fn new(
        reference: &Reference,
        digest: String,
        dir: PathBuf,
        config: &[u8],
    ) -> Result<PulledImage, RegistryError> {
        let value: serde_json::Value =
            serde_json::from_slice(config).map_err(|e| RegistryError::Image {
                reference: reference.whole(),
                message: format!("the image config is not JSON: {e}"),
            })?;
        let labels = value["config"]["Labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(PulledImage {
            digest,
            labels,
            rootfs: dir.join("rootfs"),
        })
    }
}

#[derive(Debug, Default)]
pub struct PushReport {
    pub digest: String,
    pub uploaded: Vec<String>,
    pub skipped: Vec<String>,
}

fn request_error(reference: &Reference, what: &str, error: OciDistributionError) -> RegistryError {
    let message = match &error {
        OciDistributionError::RequestError(e) => {
            // reqwest's Display hides the cause (connection refused, …).
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        }
        other => other.to_string(),
    };
    RegistryError::Request {
        reference: reference.whole(),
        what: what.into(),
        message,
        cause: request_cause(&error),
    }
}

/// Unauthorized, NotFound, Unreachable or RegistryError, from the error's kind and HTTP status.
fn request_cause(error: &OciDistributionError) -> PullCause {
    use oci_client::errors::OciErrorCode;
    let by_status = |status: u16| match status {
        401 | 403 => PullCause::Unauthorized,
        404 => PullCause::NotFound,
        _ => PullCause::RegistryError,
    };
    match error {
        OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::UnauthorizedError { .. } => PullCause::Unauthorized,
        OciDistributionError::ImageManifestNotFoundError(_) => PullCause::NotFound,
        OciDistributionError::ServerError { code, .. } => by_status(*code),
        OciDistributionError::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .find_map(|e| match e.code {
                OciErrorCode::Unauthorized | OciErrorCode::Denied => Some(PullCause::Unauthorized),
                OciErrorCode::ManifestUnknown
                | OciErrorCode::NameUnknown
                | OciErrorCode::NotFound
                | OciErrorCode::BlobUnknown
                | OciErrorCode::ManifestBlobUnknown => Some(PullCause::NotFound),
                _ => None,
            })
            .unwrap_or(PullCause::RegistryError),
        OciDistributionError::RequestError(e) => match e.status() {
            Some(status) => by_status(status.as_u16()),
            None if e.is_connect() || e.is_timeout() || e.is_request() => PullCause::Unreachable,
            None => PullCause::RegistryError,
        },
        OciDistributionError::IoError(_) => PullCause::Unreachable,
        _ => PullCause::RegistryError,
    }
}

/// 5xx and transport failures are worth another try; 4xx and bad content are not.
fn retryable(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::RequestError(e) => {
            e.is_connect() || e.is_timeout() || e.status().is_some_and(|s| s.is_server_error())
        }
        OciDistributionError::ServerError { code, .. } => *code >= 500,
        OciDistributionError::IoError(_) => true,
        _ => false,
    }
}

async fn retrying<T, F, Fut>(operation: F) -> Result<T, OciDistributionError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, OciDistributionError>>,
{
    operation
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(5))
                .with_max_times(retry_times()),
        )
        .when(retryable)
        .await
}

/// `OLM_REGISTRY_RETRIES` (default 3): tests of a registry that is down set 0.
fn retry_times() -> usize {
    std::env::var("OLM_REGISTRY_RETRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// Runs `work`; when `on`, redraws one stderr line every 250 ms with the bytes `done` says
/// have moved of `total`, and the rate, and clears it at the end.
async fn live<F: Future>(
    on: bool,
    label: &str,
    total: u64,
    done: impl Fn() -> u64,
    work: F,
) -> F::Output {
    if !on {
        return work.await;
    }
    let mut work = std::pin::pin!(work);
    let started = Instant::now();
    // The first line after 250 ms: a blob that moves faster shows only its plain line.
    let every = Duration::from_millis(250);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            out = &mut work => {
                eprint!("\r\x1b[K");
                return out;
            }
            _ = tick.tick() => {
                let n = done();
                let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-3);
                eprint!(
                    "\r\x1b[K  {label} {} / {} ({}/s)",
                    human_bytes(n),
                    human_bytes(total),
                    human_bytes(rate as u64)
                );
            }
        }
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(19)]
}

pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulled(parent: &Path, hex: &str, file: &str) -> PathBuf {
        let temp = partial_dir(parent, hex);
        std::fs::create_dir_all(temp.join("rootfs")).unwrap();
        std::fs::write(temp.join("rootfs").join(file), b"").unwrap();
        std::fs::write(temp.join("complete"), b"").unwrap();
        temp
    }

    #[test]
    fn concurrent_pulls_of_one_image_keep_one_complete_entry() {
        let cache = std::env::temp_dir().join(format!("olm-pull-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let dir = cache.join("abc");
        let (first, second) = (
            pulled(&cache, "abc", "first"),
            pulled(&cache, "abc", "second"),
        );
        assert_ne!(
            first, second,
            "each pull has a scratch directory of its own"
        );
        install_pulled(&first, &dir).unwrap();
        install_pulled(&second, &dir).unwrap();
        assert!(dir.join("rootfs/first").is_file(), "the entry in use stays");
        assert!(!second.exists() && !first.exists());
        // An entry a crash left without its marker is replaced.
        std::fs::remove_file(dir.join("complete")).unwrap();
        install_pulled(&pulled(&cache, "abc", "third"), &dir).unwrap();
        assert!(dir.join("rootfs/third").is_file() && dir.join("complete").is_file());
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn only_loopback_is_plain_http_by_default() {
        assert!(is_loopback("127.0.0.1:5000"));
        assert!(is_loopback("localhost:5000"));
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("quay.io"));
        assert!(!is_loopback("10.0.0.1:5000"));
    }

    #[test]
    fn causes_come_from_the_error_kind_not_from_port_numbers_in_urls() {
        let url = "http://127.0.0.1:34015/v2/olm/catalog/manifests/v1".to_string();
        let server = |code| OciDistributionError::ServerError {
            code,
            url: url.clone(),
            message: String::new(),
        };
        assert_eq!(request_cause(&server(500)), PullCause::RegistryError);
        assert_eq!(request_cause(&server(404)), PullCause::NotFound);
        assert_eq!(request_cause(&server(401)), PullCause::Unauthorized);
        assert_eq!(
            request_cause(&OciDistributionError::UnauthorizedError { url: url.clone() }),
            PullCause::Unauthorized
        );
        let envelope: oci_client::errors::OciEnvelope = serde_json::from_str(
            r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
        )
        .unwrap();
        assert_eq!(
            request_cause(&OciDistributionError::RegistryError { envelope, url }),
            PullCause::NotFound
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_whatever_the_port() {
        ensure_crypto_provider();
        // A port that was just free: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let error = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/v2/"))
            .send()
            .await
            .unwrap_err();
        let error = OciDistributionError::RequestError(error);
        assert_eq!(request_cause(&error), PullCause::Unreachable);
    }
}
