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

/// The certificate of a directory, replaced when its files change.
#[derive(Clone, Debug)]
pub struct Reloading {
    dir: PathBuf,
    current: Arc<RwLock<Current>>,
}

impl Reloading {
    pub fn load(dir: &Path) -> Result<Reloading, TlsError> {
        let files = read_files(dir)?;
        let key = certified(dir, &files)?;
        tracing::info!(serial = %serial(&key), "serving certificate loaded");
        Ok(Reloading {
            dir: dir.to_path_buf(),
            current: Arc::new(RwLock::new(Current { key, files })),
        })
    }

    /// Compares the files with what is served every [`POLL`]; loads them when they differ
    /// and make a usable pair (a half-written update is retried at the next look).
    pub async fn watch(self) {
        loop {
            tokio::time::sleep(POLL).await;
            let Ok(files) = read_files(&self.dir) else {
                continue;
            };
            if self.current.read().is_ok_and(|c| c.files == files) {
                continue;
            }
            match certified(&self.dir, &files) {
                Ok(key) => {
                    tracing::info!(serial = %serial(&key), "serving certificate reloaded");
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

fn read_files(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| TlsError::Read { path, source })
    };
    Ok((read("tls.crt")?, read("tls.key")?))
}

fn certified(dir: &Path, (cert, key): &(Vec<u8>, Vec<u8>)) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Certificate {
            path: dir.join("tls.crt"),
            source,
        })?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|source| TlsError::Key {
        path: dir.join("tls.key"),
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
