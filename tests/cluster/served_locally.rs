//! What an operator's pod would serve, served by this process instead (pods never run under
//! kwok): an HTTPS server on loopback with the serving certificate OLM issued (the files the
//! pod would find mounted), answering each JSON request with `answer(path, body)`, and the
//! operator's Service pointed at it the way kwokctl points aggregated APIs at local
//! processes (`type: ExternalName`, 127.0.0.1).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use serde_json::Value;

use super::harness::kubectl;

/// A Secret's key, decoded.
pub fn secret_text(secret: &Value, key: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(secret["data"][key].as_str().unwrap_or_default())
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// Writes the Secret's serving pair into `dir` under `names` (certificate, key), as the
/// pod's mount would.
pub fn write_mounted_files(secret: &Value, dir: &Path, names: (&str, &str)) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(names.0), secret_text(secret, "tls.crt")).unwrap();
    std::fs::write(dir.join(names.1), secret_text(secret, "tls.key")).unwrap();
}

/// Serves on 127.0.0.1:`port` with the certificate and key at `cert` and `key`, counting
/// the requests in `calls`. Runs until aborted.
pub async fn serve(
    port: u16,
    cert: &Path,
    key: &Path,
    calls: Arc<AtomicUsize>,
    answer: fn(&str, &Value) -> Value,
) {
    use http_body_util::BodyExt;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let calls = calls.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            let service = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let calls = calls.clone();
                    async move {
                        let path = request.uri().path().to_string();
                        let body = request.into_body().collect().await?.to_bytes();
                        let body: Value = serde_json::from_slice(&body).unwrap_or_default();
                        calls.fetch_add(1, Ordering::SeqCst);
                        let mut response = hyper::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(answer(&path, &body).to_string()),
                        ));
                        response
                            .headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, hyper::Error>(response)
                    }
                },
            );
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
        });
    }
}

/// Points the Service `name` in `namespace` at this process.
pub fn point_service_here(namespace: &str, name: &str) {
    kubectl(
        &[
            "patch",
            "service",
            name,
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"type":"ExternalName","externalName":"127.0.0.1","clusterIP":null,"clusterIPs":null}}"#,
        ],
        None,
    )
    .ok();
}
