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
        "CustomResourceDefinition {crd}: existing {kind} {object} does not validate against the new schema of version {version}: {problems}{}",
        and_more(*.others)
    )]
    InvalidExisting {
        crd: String,
        kind: String,
        object: String,
        version: String,
        /// The schema violations, `; `-separated (boxed: keeps every step's `Result` small).
        problems: Box<str>,
        /// How many more existing objects the schema refuses (named one at a time, as
        /// upstream names them, but counted so the owner knows the size of the fix).
        others: usize,
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

/// ` (and N more objects)` after the first refused object's problems, or nothing.
fn and_more(others: usize) -> String {
    match others {
        0 => String::new(),
        1 => " (and 1 more object)".into(),
        n => format!(" (and {n} more objects)"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_crd_upgrade_names_the_first_object_and_counts_the_others() {
        let refused = |others| {
            StepError::InvalidExisting {
                crd: "ats.cnat.d2iq.com".into(),
                kind: "At".into(),
                object: "ns/a1".into(),
                version: "v1alpha1".into(),
                problems: ".spec.command: required".into(),
                others,
            }
            .to_string()
        };
        assert!(refused(0).ends_with("of version v1alpha1: .spec.command: required"));
        assert!(refused(1).ends_with("required (and 1 more object)"));
        assert!(refused(7).ends_with("required (and 7 more objects)"));
    }
}
