//! Why a step did not get done this round, and what the plan does about it: refused steps
//! fail the plan; the rest are retried, until the retry timeout unless retried for ever.

use kube::core::Status;

use crate::controllers::plan::manifests::FetchError;

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("step {kind} {name}: the manifest is not JSON: {source}")]
    NotJson {
        kind: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("step {kind} {name}: bundle {bundle} in catalog {catalog} has no such object")]
    NotInBundle {
        kind: String,
        name: String,
        bundle: String,
        /// `namespace/name` of the CatalogSource.
        catalog: String,
    },
    #[error(
        "step {kind} {name}: {api_version} {served_kind} is not a kind an InstallPlan may create (UnsupportedResource)"
    )]
    Unsupported {
        kind: String,
        name: String,
        api_version: String,
        served_kind: String,
    },
    #[error(
        "CustomResourceDefinition {crd}: version {version} is in status.storedVersions but not in the new CRD; refusing the upgrade (risk of data loss)"
    )]
    StoredVersionDropped { crd: String, version: String },
    #[error(
        "CustomResourceDefinition {crd}: existing {kind} {object} does not validate against the new schema of version {version}: {problems}"
    )]
    InvalidExisting {
        crd: String,
        kind: String,
        object: String,
        version: String,
        /// The schema violations, `; `-separated.
        problems: String,
    },
    /// The catalog could not hand the bundle over (busy or down): retried for ever.
    #[error("step {kind} {name}: reading bundle {bundle} from catalog {catalog}: {source}")]
    CatalogUnavailable {
        kind: String,
        name: String,
        bundle: String,
        catalog: String,
        #[source]
        source: Box<FetchError>,
    },
    #[error(
        "api-server resource not found installing {kind} {name}: GroupVersionKind {group}/{version}, Kind={served_kind} not found on the cluster"
    )]
    NotServed {
        kind: String,
        name: String,
        group: String,
        version: String,
        served_kind: String,
    },
    #[error("CSV {0} does not exist yet")]
    CsvMissing(String),
    /// The API server refused; Forbidden is retried for ever, as upstream.
    #[error("{} ({})", .0.message, .0.reason)]
    Api(Box<Status>),
    #[error("{0}")]
    Client(kube::Error),
}

/// What the executor does with a step that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// The plan fails.
    Refuse,
    /// Tried again, until the retry timeout.
    Retry,
    /// Tried again, whatever the time.
    RetryForever,
}

impl StepError {
    pub fn disposition(&self) -> Disposition {
        match self {
            StepError::NotJson { .. }
            | StepError::NotInBundle { .. }
            | StepError::Unsupported { .. }
            | StepError::StoredVersionDropped { .. }
            | StepError::InvalidExisting { .. } => Disposition::Refuse,
            StepError::CatalogUnavailable { .. } => Disposition::RetryForever,
            StepError::Api(e) if e.code == 403 => Disposition::RetryForever,
            StepError::NotServed { .. }
            | StepError::CsvMissing(_)
            | StepError::Api(_)
            | StepError::Client(_) => Disposition::Retry,
        }
    }
}

impl From<kube::Error> for StepError {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => StepError::Api(status),
            other => StepError::Client(other),
        }
    }
}
