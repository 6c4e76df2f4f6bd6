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
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = key;
        Ok(())
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.0.read().unwrap_or_else(|e| e.into_inner()),
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

/// The subject common name of a DER certificate (a minimal walk of the ASN.1: Certificate →
/// TBSCertificate → subject Name → the CN attribute).
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert, _) = read_tlv(der)?;
    let (_, tbs, _) = read_tlv(cert)?;
    let mut rest = tbs;
    // [0] version (optional), serialNumber, signature, issuer, validity, subject.
    let (tag, _, after) = read_tlv(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..4 {
        rest = read_tlv(rest)?.2;
    }
    let (_, subject, _) = read_tlv(rest)?;
    let mut rdns = subject;
    while !rdns.is_empty() {
        let (_, set, next) = read_tlv(rdns)?;
        let (_, attribute, _) = read_tlv(set)?;
        let (oid_tag, oid, value) = read_tlv(attribute)?;
        if oid_tag == 0x06 && oid == [0x55, 0x04, 0x03] {
            let (_, text, _) = read_tlv(value)?;
            return String::from_utf8(text.to_vec()).ok();
        }
        rdns = next;
    }
    None
}

/// (tag, contents, rest) of one DER element.
fn read_tlv(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *data.first()?;
    let first = *data.get(1)? as usize;
    let (len, header) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *data.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    Some((tag, data.get(header..end)?, &data[end..]))
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
