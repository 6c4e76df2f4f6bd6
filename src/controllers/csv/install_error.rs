//! Why an install did not go through, as the CSV's Failed status says it: the API server's
//! message, naming the object.

use crate::cluster::scoped::ScopedError;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// No client acting as the scoped group's account.
    #[error(transparent)]
    Account(#[from] ScopedError),
    #[error("{kind} {name}: {message}")]
    Write {
        kind: String,
        name: String,
        message: String,
    },
    #[error("conversion webhook of CRD {crd}: {message}")]
    Conversion { crd: String, message: String },
    #[error("listing {kind}s: {message}")]
    List { kind: &'static str, message: String },
    #[error("deleting {kind} {name}: {message}")]
    Delete {
        kind: &'static str,
        name: String,
        message: String,
    },
}

impl InstallError {
    pub fn write(kind: &str, name: &str, error: &kube::Error) -> Self {
        InstallError::Write {
            kind: kind.to_string(),
            name: name.to_string(),
            message: match error {
                kube::Error::Api(status) => status.message.clone(),
                other => other.to_string(),
            },
        }
    }
}
