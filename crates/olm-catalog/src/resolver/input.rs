//! What the resolver is asked: the catalogs a namespace can see, what it already runs, and
//! what it subscribes to. Plain data, so controllers and the CLI build it the same way.

use std::fmt;

use semver::Version;

use crate::catalog::model::fbc::DeclarativeConfig;
use crate::catalog::model::semver_range::VersionRange;

/// A catalog as a CatalogSource exposes it.
#[derive(Clone, Debug)]
pub struct Catalog {
    pub name: String,
    pub namespace: String,
    /// Higher wins when several catalogs could satisfy a dependency (CatalogSource `priority`).
    pub priority: i32,
    pub content: DeclarativeConfig,
}

/// Names a catalog the way Subscriptions do: `source` + `sourceNamespace`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CatalogRef {
    pub name: String,
    pub namespace: String,
}

impl CatalogRef {
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        CatalogRef {
            name: name.into(),
            namespace: namespace.into(),
        }
    }
}

impl fmt::Display for CatalogRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A CSV already in the namespace.
#[derive(Clone, Debug)]
pub struct InstalledCsv {
    pub name: String,
    pub package: String,
    pub version: Version,
    /// The catalog it came from, when known; its catalog entry tells which APIs it provides.
    pub source: Option<CatalogRef>,
    /// `olm.gvk` properties of the APIs its own spec owns (CRDs, API services): what it
    /// provides when no catalog has its entry (a CSV created directly, as upstream counts).
    pub provided: Vec<crate::catalog::model::fbc::Property>,
}

/// A Subscription in the namespace.
#[derive(Clone, Debug)]
pub struct Subscription {
    pub name: String,
    pub package: String,
    /// None: the package's default channel.
    pub channel: Option<String>,
    pub source: CatalogRef,
    /// Install this CSV instead of the channel head when nothing is installed yet.
    pub starting_csv: Option<String>,
    /// The versions it may move to (its upgrade policy); any when empty.
    pub versions: VersionPolicy,
}

/// Ranges a Subscription's target must lie in, each with what set it (for explanations).
#[derive(Clone, Debug, Default)]
pub struct VersionPolicy {
    pub ranges: Vec<(VersionRange, String)>,
}

impl VersionPolicy {
    /// The first range `version` lies outside of, with what set it; None when allowed.
    pub fn refusal(&self, version: &Version) -> Option<&str> {
        self.ranges
            .iter()
            .find(|(range, _)| !range.contains(version))
            .map(|(_, why)| why.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Everything one resolution looks at.
#[derive(Clone, Debug, Default)]
pub struct Namespace {
    /// The namespace being resolved; catalogs in it are preferred for dependencies.
    pub name: String,
    pub installed: Vec<InstalledCsv>,
    pub subscriptions: Vec<Subscription>,
}
