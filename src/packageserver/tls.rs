//! TLS for the packages API: a serving certificate (made here, signed by a CA of our own
//! whose certificate goes into the APIService's caBundle), client certificates verified
//! against the request-header CA, and the common name of the one presented.

use std::sync::{Arc, RwLock};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use x509_cert::certificate::{CertificateInner, Raw};

/// How long a generated serving certificate is valid.
pub const VALIDITY_DAYS: i64 = 365;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating the serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the request-header CA from extension-apiserver-authentication: {0}")]
    ClientCa(String),
    #[error("the serving certificate or key: {0}")]
    Serving(String),
}

/// A CA and the serving certificate it signed, all PEM.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingCert {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// RFC 3339.
    pub not_after: String,
}

/// A fresh CA and a serving certificate for `dns_names` (plus 127.0.0.1 and ::1).
pub fn generate(dns_names: &[String]) -> Result<ServingCert, TlsError> {
    let now = time::OffsetDateTime::now_utc();
    let not_after = now + time::Duration::days(VALIDITY_DAYS);
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "olm-packageserver-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = now - time::Duration::minutes(5);
    ca_params.not_after = not_after + time::Duration::days(1);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(dns_names.to_vec())?;
    params.distinguished_name.push(
        DnType::CommonName,
        dns_names.first().cloned().unwrap_or_default(),
    );
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = not_after;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(ServingCert {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        not_after: not_after
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The serving certificate in use, swapped in place when it is rotated.
#[derive(Debug)]
pub struct CertResolver(RwLock<Arc<CertifiedKey>>);

impl CertResolver {
    pub fn new(cert: &ServingCert) -> Result<Self, TlsError> {
        Ok(CertResolver(RwLock::new(certified_key(cert)?)))
    }

    pub fn replace(&self, cert: &ServingCert) -> Result<(), TlsError> {
        let key = certified_key(cert)?;
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = key;
        Ok(())
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self
                .0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ))
    }
}

fn certified_key(cert: &ServingCert) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Serving(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .map_err(|e| TlsError::Serving(e.to_string()))?;
    let key = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Serving(e.to_string()))?;
    Ok(Arc::new(CertifiedKey::new(chain, key)))
}

/// HTTP/2 and HTTP/1.1; a client certificate is asked for and, when given, must chain to
/// the request-header CA (requests without one are refused later with 401).
pub fn server_config(
    resolver: Arc<CertResolver>,
    client_ca_pem: &str,
) -> Result<rustls::ServerConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Serving(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// HTTP/2 and HTTP/1.1 with no client certificates (callers prove who they are otherwise,
/// as the secure admin server's bearer tokens).
pub fn server_config_without_client_auth(
    resolver: Arc<CertResolver>,
) -> Result<rustls::ServerConfig, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Serving(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The subject common name of a DER certificate: the first CN attribute of its subject, if
/// its bytes are UTF-8 (whatever its string type).
///
/// The certificate is one rustls has already verified against the request-header CA; it is
/// decoded with x509-cert's `Raw` profile, which skips RFC 5280's limit on serial numbers
/// that webpki does not enforce, so that any certificate the handshake accepted is named.
pub fn common_name(der: &[u8]) -> Option<String> {
    use x509_cert::der::Decode;
    use x509_cert::der::oid::db::rfc4519::CN;
    let cert = CertificateInner::<Raw>::from_der(der).ok()?;
    let value = cert
        .tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find(|attribute| attribute.oid == CN)?;
    String::from_utf8(value.value.value().to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_load_and_name_their_subject() {
        let cert = generate(&["olm-packages.olm.svc".into()]).unwrap();
        let resolver = Arc::new(CertResolver::new(&cert).unwrap());
        server_config(resolver, &cert.ca_pem).unwrap();
        let der = CertificateDer::from_pem_slice(cert.cert_pem.as_bytes()).unwrap();
        assert_eq!(common_name(&der).as_deref(), Some("olm-packages.olm.svc"));
        let ca = CertificateDer::from_pem_slice(cert.ca_pem.as_bytes()).unwrap();
        assert_eq!(common_name(&ca).as_deref(), Some("olm-packageserver-ca"));
        assert_eq!(common_name(b"\x30\x03"), None);
    }

    /// A client certificate like the API server's front-proxy one, signed by a CA of its own.
    fn client_cert(params: impl FnOnce(&mut CertificateParams)) -> CertificateDer<'static> {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "front-proxy-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        // rcgen's default subject is CN=rcgen self signed cert.
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params(&mut p);
        p.signed_by(&key, &issuer).unwrap().der().clone()
    }

    #[test]
    fn the_client_certificate_common_name_is_read_back() {
        // The CN after other subject attributes.
        let der = client_cert(|p| {
            p.distinguished_name
                .push(DnType::OrganizationName, "system:masters");
            p.distinguished_name
                .push(DnType::CommonName, "front-proxy-client");
        });
        assert_eq!(common_name(&der).as_deref(), Some("front-proxy-client"));
        // Any string type whose bytes are UTF-8.
        let der = client_cert(|p| {
            p.distinguished_name.push(
                DnType::CommonName,
                rcgen::DnValue::PrintableString("aggregator".try_into().unwrap()),
            );
        });
        assert_eq!(common_name(&der).as_deref(), Some("aggregator"));
        // A serial number longer than RFC 5280's 20 bytes, which webpki accepts.
        let der = client_cert(|p| {
            p.serial_number = Some(vec![0x7f; 24].into());
            p.distinguished_name
                .push(DnType::CommonName, "front-proxy-client");
        });
        assert_eq!(common_name(&der).as_deref(), Some("front-proxy-client"));
        // No CN, or not a certificate.
        let der = client_cert(|p| {
            p.distinguished_name
                .push(DnType::OrganizationName, "system:masters");
        });
        assert_eq!(common_name(&der), None);
        assert_eq!(common_name(&der[..der.len() - 1]), None);
        assert_eq!(common_name(b""), None);
    }

    #[test]
    fn a_bad_client_ca_is_named() {
        let cert = generate(&["x".into()]).unwrap();
        let resolver = Arc::new(CertResolver::new(&cert).unwrap());
        let err = server_config(
            resolver,
            "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("request-header CA"), "{err}");
    }
}
