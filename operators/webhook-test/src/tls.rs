//! HTTPS with the serving certificate OLM mounts: `tls.crt` and `tls.key` are read at start
//! and again whenever their bytes change (the kubelet rewrites a Secret volume when the
//! Secret changes), so a rotated certificate is served without a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often the files are compared with what is served.
const POLL: Duration = Duration::from_secs(2);

/// Why the certificate could not be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate: {source}")]
    Certificate {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path}: no PEM private key: {source}")]
    Key {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("the key and certificate do not load: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("listening on {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
}

/// A TLS listener on `port` with the certificate of `files`, kept up to date: the future
/// that serves `router` on it.
pub async fn listen(
    port: u16,
    files: Files,
    router: axum::Router,
) -> Result<impl Future<Output = ()>, TlsError> {
    let certificate = Reloading::load(files)?;
    tokio::spawn(certificate.clone().watch());
    let address = std::net::SocketAddr::from(([0, 0, 0, 0], port));
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| TlsError::Listen { address, source })?;
    tracing::info!(%address, "listening");
    Ok(serve(listener, certificate.server_config()?, router))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificate in use, and the bytes it was made of.
#[derive(Debug)]
struct Current {
    key: Arc<CertifiedKey>,
    files: (Vec<u8>, Vec<u8>),
}

/// Where a certificate and its key are: OLM mounts the same pair as `tls.crt`/`tls.key`
/// for webhooks and `apiserver.crt`/`apiserver.key` for API services.
#[derive(Clone, Debug)]
pub struct Files {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Files {
    pub fn webhook(dir: &Path) -> Files {
        Files {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    pub fn api_service(dir: &Path) -> Files {
        Files {
            cert: dir.join("apiserver.crt"),
            key: dir.join("apiserver.key"),
        }
    }
}

/// The certificate of a pair of files, replaced when they change.
#[derive(Clone, Debug)]
pub struct Reloading {
    files: Files,
    current: Arc<RwLock<Current>>,
}

impl Reloading {
    pub fn load(files: Files) -> Result<Reloading, TlsError> {
        let bytes = read_files(&files)?;
        let key = certified(&files, &bytes)?;
        tracing::info!(cert = %files.cert.display(), serial = %serial(&key), "serving certificate loaded");
        Ok(Reloading {
            files,
            current: Arc::new(RwLock::new(Current { key, files: bytes })),
        })
    }

    /// Compares the files with what is served every [`POLL`]; loads them when they differ
    /// and make a usable pair (a half-written update is retried at the next look).
    pub async fn watch(self) {
        loop {
            tokio::time::sleep(POLL).await;
            let Ok(files) = read_files(&self.files) else {
                continue;
            };
            if self.current.read().is_ok_and(|c| c.files == files) {
                continue;
            }
            match certified(&self.files, &files) {
                Ok(key) => {
                    let cert = self.files.cert.display();
                    tracing::info!(%cert, serial = %serial(&key), "serving certificate reloaded");
                    if let Ok(mut current) = self.current.write() {
                        *current = Current { key, files };
                    }
                }
                Err(error) => tracing::warn!(%error, "changed serving certificate not loaded"),
            }
        }
    }

    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self.clone()));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.key.clone())
    }
}

fn read_files(files: &Files) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    Ok((read(&files.cert)?, read(&files.key)?))
}

fn certified(
    files: &Files,
    (cert, key): &(Vec<u8>, Vec<u8>),
) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Certificate {
            path: files.cert.clone(),
            source,
        })?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|source| TlsError::Key {
        path: files.key.clone(),
        source,
    })?;
    let signing = provider().key_provider.load_private_key(key)?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match()?;
    Ok(Arc::new(certified))
}

/// A short fingerprint of the leaf certificate for the logs: its last DER bytes (the
/// signature), in hex.
fn serial(key: &CertifiedKey) -> String {
    let der = key.end_entity_cert().map(AsRef::as_ref).unwrap_or_default();
    der.iter()
        .rev()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Accepts TLS connections and serves `router` on each, HTTP/1.1 or HTTP/2.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: axum::Router,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::info!(%error, %peer, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            if let Err(error) = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, %peer, "connection ended");
            }
        });
    }
}
