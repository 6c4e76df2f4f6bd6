//! The keys of a ConfigMap catalog and what goes wrong reading one, below the parser and the
//! converter that both report it.

use std::fmt;

pub const KEY_CRDS: &str = "customResourceDefinitions";
pub const KEY_CSVS: &str = "clusterServiceVersions";
pub const KEY_PACKAGES: &str = "packages";

/// The most data read from one ConfigMap, counted as the API server counts it (the values,
/// not the keys): it refuses larger ConfigMaps, so only a hand-made object can be bigger.
pub const MAX_CONFIGMAP_BYTES: usize = 1 << 20;

/// Why a ConfigMap's data is not a catalog; every variant names the data key, and the list
/// item (index and name) where there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigMapCatalogError {
    #[error(
        "the ConfigMap data is {size} bytes, larger than the limit of {MAX_CONFIGMAP_BYTES} \
         (1 MiB, the API server's own limit)"
    )]
    TooLarge { size: usize },
    #[error("the ConfigMap data has no {key:?} key")]
    MissingKey { key: &'static str },
    #[error("{key}: malformed YAML{}: {message}", at_line(*.line))]
    Yaml {
        key: &'static str,
        line: Option<usize>,
        message: String,
    },
    #[error("{key}: expected a YAML list, found {found}")]
    NotAList { key: &'static str, found: String },
    #[error("{key}[{index}]{}: {message}", named(.name))]
    Item {
        key: &'static str,
        index: usize,
        /// The item's name (CSV or CRD `metadata.name`, `packageName`), when it has one.
        name: Option<String>,
        message: String,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" at line {l}")).unwrap_or_default()
}

fn named(name: &Option<String>) -> String {
    name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
}

pub(super) type Error = ConfigMapCatalogError;

pub(super) fn item_error(
    key: &'static str,
    index: usize,
    name: &str,
    message: impl fmt::Display,
) -> Error {
    Error::Item {
        key,
        index,
        name: (!name.is_empty()).then(|| name.to_string()),
        message: message.to_string(),
    }
}
