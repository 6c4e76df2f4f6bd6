//! Serving certificates for the Deployments that serve webhooks or API services, as
//! upstream issues them: a fresh self-signed CA (ECDSA P-256, never stored) and a serving
//! certificate for the Service's DNS names, kept in the Secret `<deployment>-service-cert`
//! (`tls.crt`, `tls.key`, and the CA certificate under `olmCAKey`). A certificate is reused
//! while it is valid for those names and not due; it is due a day before it expires (halfway
//! through when it is valid for less than two days).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use sha2::Digest;
use x509_cert::certificate::{CertificateInner, Raw};
use x509_cert::der::{Decode, Encode};

/// The Secret keys, as upstream names them.
pub const CERT_KEY: &str = "tls.crt";
pub const PRIVATE_KEY_KEY: &str = "tls.key";
pub const CA_KEY: &str = "olmCAKey";
/// The annotation carrying the CA's hash, on the Secret and on the pod template (a new CA
/// rolls the Deployment).
pub const CA_HASH_ANNOTATION: &str = "olmcahash";
/// Upstream's organisation on both certificates.
const ORGANIZATION: &str = "Red Hat, Inc.";
/// Upstream rotates this long before expiry.
const MIN_FRESH: Duration = Duration::from_secs(24 * 3600);

/// A CA and the serving certificate it signed, PEM, and when they expire.
#[derive(Clone, Debug, PartialEq)]
pub struct Material {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

impl Material {
    /// When this certificate is due for rotation.
    pub fn rotate_at(&self) -> Timestamp {
        let validity = self.not_after.duration_since(self.not_before);
        let validity = Duration::try_from(validity).unwrap_or_default();
        let margin = MIN_FRESH.min(validity / 2);
        self.not_after.checked_sub(margin).unwrap_or(self.not_after)
    }

    /// The hex SHA-256 of the CA certificate PEM (upstream's `olmcahash`).
    pub fn ca_hash(&self) -> String {
        ca_hash(&self.ca_pem)
    }
}

pub fn ca_hash(ca_pem: &str) -> String {
    sha2::Sha256::digest(ca_pem.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The DNS names a Service's serving certificate is for (upstream's three).
pub fn hosts(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Why a serving certificate could not be issued, by step. The text is what the CSV's
/// status shows (the install waits on it), so every variant keeps its one wording.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// `now` is outside what a certificate's validity can start at.
    #[error("{0}")]
    NotBefore(#[source] time::error::ComponentRange),
    /// The end of the validity is outside what a timestamp can hold.
    #[error("{0}")]
    NotAfter(#[source] k8s_openapi::jiff::Error),
    /// The CA's key pair could not be generated.
    #[error("issuing a serving certificate: {0}")]
    CaKey(#[source] rcgen::Error),
    /// The CA's certificate could not be described or self-signed.
    #[error("issuing a serving certificate: {0}")]
    CaCertificate(#[source] rcgen::Error),
    /// The serving certificate's key pair could not be generated.
    #[error("issuing a serving certificate: {0}")]
    ServingKey(#[source] rcgen::Error),
    /// The serving certificate for `hosts` could not be described (a host that is no DNS
    /// name) or signed.
    #[error("issuing a serving certificate: {error}")]
    ServingCertificate {
        hosts: Vec<String>,
        #[source]
        error: rcgen::Error,
    },
}

/// A new CA and serving certificate for `hosts`, valid from `now` for `validity`.
pub fn issue(hosts: &[String], now: Timestamp, validity: Duration) -> Result<Material, IssueError> {
    let not_before = time::OffsetDateTime::from_unix_timestamp(now.as_second())
        .map_err(IssueError::NotBefore)?;
    let validity_secs = i64::try_from(validity.as_secs()).unwrap_or(i64::MAX / 2);
    let not_after = not_before + time::Duration::seconds(validity_secs);
    let serial: u64 = rand_serial();

    let ca_key = KeyPair::generate().map_err(IssueError::CaKey)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(IssueError::CaCertificate)?;
    ca.distinguished_name
        .push(DnType::CommonName, format!("olm-selfsigned-{serial:x}"));
    ca.distinguished_name
        .push(DnType::OrganizationName, ORGANIZATION);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    ca.serial_number = Some(serial.into());
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key).map_err(IssueError::CaCertificate)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().map_err(IssueError::ServingKey)?;
    let serving_failed = |error| IssueError::ServingCertificate {
        hosts: hosts.to_vec(),
        error,
    };
    let mut serving = CertificateParams::new(hosts.to_vec()).map_err(serving_failed)?;
    serving.distinguished_name.push(
        DnType::CommonName,
        hosts.first().cloned().unwrap_or_default(),
    );
    serving
        .distinguished_name
        .push(DnType::OrganizationName, ORGANIZATION);
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.serial_number = Some(rand_serial().into());
    serving.not_before = not_before;
    serving.not_after = not_after;
    let cert = serving.signed_by(&key, &issuer).map_err(serving_failed)?;
    Ok(Material {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        not_before: now,
        not_after: Timestamp::from_second(not_after.unix_timestamp())
            .map_err(IssueError::NotAfter)?,
    })
}

/// A random positive serial (the CA's common name carries it, so each CA is told apart):
/// std's randomly keyed hasher over the clock is random enough for a serial number.
fn rand_serial() -> u64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    std::collections::hash_map::RandomState::new().hash_one(nanos) >> 1
}

/// The material of an existing Secret's data, when it can still be used at `now` for
/// `hosts`: both certificates parse, are active and not due, the serving certificate was
/// issued by that CA and names every host. None means: issue a new one.
pub fn reusable(
    ca_pem: Option<&str>,
    cert_pem: Option<&str>,
    key_pem: Option<&str>,
    hosts: &[String],
    now: Timestamp,
) -> Option<Material> {
    let (ca_pem, cert_pem, key_pem) = (ca_pem?, cert_pem?, key_pem?);
    let ca = parse(ca_pem)?;
    let cert = parse(cert_pem)?;
    if cert.issuer != ca.subject || !hosts.iter().all(|h| cert.dns_names.contains(h)) {
        return None;
    }
    let material = Material {
        ca_pem: ca_pem.to_string(),
        cert_pem: cert_pem.to_string(),
        key_pem: key_pem.to_string(),
        not_before: cert.not_before.max(ca.not_before),
        not_after: cert.not_after.min(ca.not_after),
    };
    (material.not_before <= now && now < material.rotate_at()).then_some(material)
}

struct Parsed {
    subject: Vec<u8>,
    issuer: Vec<u8>,
    not_before: Timestamp,
    not_after: Timestamp,
    dns_names: Vec<String>,
}

fn parse(pem: &str) -> Option<Parsed> {
    use x509_cert::ext::pkix::SubjectAltName;
    use x509_cert::ext::pkix::name::GeneralName;
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).ok()?;
    let cert = CertificateInner::<Raw>::from_der(&der).ok()?;
    let tbs = &cert.tbs_certificate;
    let time = |t: &x509_cert::time::Time| {
        let secs = t.to_unix_duration().as_secs();
        Timestamp::from_second(i64::try_from(secs).ok()?).ok()
    };
    let mut dns_names = Vec::new();
    for ext in tbs.extensions.iter().flatten() {
        if ext.extn_id == x509_cert::der::oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME
            && let Ok(san) = SubjectAltName::from_der(ext.extn_value.as_bytes())
        {
            for name in san.0 {
                if let GeneralName::DnsName(dns) = name {
                    dns_names.push(dns.to_string());
                }
            }
        }
    }
    Some(Parsed {
        subject: tbs.subject.to_der().ok()?,
        issuer: tbs.issuer.to_der().ok()?,
        not_before: time(&tbs.validity.not_before)?,
        not_after: time(&tbs.validity.not_after)?,
        dns_names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn an_issued_certificate_is_reused_until_a_day_before_it_expires() {
        let hosts = hosts("webhook-service", "ops");
        let now = at(1_800_000_000);
        let two_years = Duration::from_secs(730 * 24 * 3600);
        let m = issue(&hosts, now, two_years).unwrap();
        assert_eq!(m.not_after, at(1_800_000_000 + 730 * 24 * 3600));
        assert_eq!(m.rotate_at(), at(1_800_000_000 + 729 * 24 * 3600));
        let reuse = |when| {
            reusable(
                Some(&m.ca_pem),
                Some(&m.cert_pem),
                Some(&m.key_pem),
                &hosts,
                when,
            )
        };
        assert_eq!(reuse(now).as_ref(), Some(&m));
        assert!(reuse(at(1_800_000_000 + 729 * 24 * 3600 - 1)).is_some());
        assert!(reuse(m.rotate_at()).is_none(), "due");
        // Other names, another CA, or missing parts: issue anew.
        let other = super::hosts("other-service", "ops");
        assert!(
            reusable(
                Some(&m.ca_pem),
                Some(&m.cert_pem),
                Some(&m.key_pem),
                &other,
                now
            )
            .is_none()
        );
        let n = issue(&hosts, now, two_years).unwrap();
        assert_ne!(n.ca_hash(), m.ca_hash());
        assert!(
            reusable(
                Some(&n.ca_pem),
                Some(&m.cert_pem),
                Some(&m.key_pem),
                &hosts,
                now
            )
            .is_none()
        );
        assert!(reusable(None, Some(&m.cert_pem), Some(&m.key_pem), &hosts, now).is_none());
        assert!(
            reusable(
                Some("junk"),
                Some(&m.cert_pem),
                Some(&m.key_pem),
                &hosts,
                now
            )
            .is_none()
        );
    }

    #[test]
    fn a_short_validity_rotates_halfway() {
        let m = issue(&hosts("s", "n"), at(1_000), Duration::from_secs(20)).unwrap();
        assert_eq!(m.rotate_at(), at(1_010));
    }

    #[test]
    fn the_serving_certificate_names_the_service_and_loads_in_rustls() {
        let hosts = hosts("svc", "ns");
        let m = issue(&hosts, Timestamp::now(), Duration::from_secs(3600)).unwrap();
        let parsed = parse(&m.cert_pem).unwrap();
        assert_eq!(parsed.dns_names, hosts);
        let ca = parse(&m.ca_pem).unwrap();
        assert_eq!(parsed.issuer, ca.subject);
        // The pair is one rustls serves with (as the operator's webhook server would).
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes()).unwrap();
        rustls::crypto::ring::default_provider()
            .key_provider
            .load_private_key(key)
            .unwrap();
        assert_eq!(m.ca_hash().len(), 64);
    }
}
