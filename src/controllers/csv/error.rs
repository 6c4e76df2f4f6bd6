//! The error of a CSV's round, shared by the phase machine and the copier: an API call that
//! failed, on which CSV and at which step.

use crate::controllers::kit::{PanicError, ReconcileError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ClusterServiceVersion {namespace}/{name}: {step}: {error}")]
    Kube {
        namespace: String,
        name: String,
        step: &'static str,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { step, .. } => step,
            Error::Panicked(_) => "panic",
        }
    }
}
