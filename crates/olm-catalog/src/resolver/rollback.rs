//! A rollback: the install step that takes a Subscription's package back to an older
//! version of the same catalog. The resolver never plans one (no channel edge leads back),
//! so it is looked up here and planned as an upgrade of the installed CSV would be: the
//! older CSV's `spec.replaces` names the installed one.

use semver::Version;

use super::index::CatalogIndex;
use super::input::{CatalogRef, InstalledCsv, Subscription};
use super::plan::{Reason, Step};

/// Why a rollback cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RollbackError {
    #[error("catalog {0} is not available")]
    UnknownCatalog(CatalogRef),
    #[error("package {package} is not in catalog {catalog}")]
    PackageNotFound {
        package: String,
        catalog: CatalogRef,
    },
    #[error("catalog {catalog} has no bundle of package {package} at version {version}")]
    NoSuchVersion {
        package: String,
        version: Version,
        catalog: CatalogRef,
    },
}

/// The step installing `package` at `version` from the Subscription's catalog in place of
/// `installed`; the Subscription's channel when the bundle is in it, else the channel the
/// catalog installs it from.
pub fn rollback_step(
    index: &CatalogIndex,
    sub: &Subscription,
    installed: &InstalledCsv,
    version: &Version,
) -> Result<Step, RollbackError> {
    let catalog = index
        .catalog_id(&sub.source)
        .ok_or_else(|| RollbackError::UnknownCatalog(sub.source.clone()))?;
    let package = index.catalogs[catalog]
        .packages
        .get(&sub.package)
        .ok_or_else(|| RollbackError::PackageNotFound {
            package: sub.package.clone(),
            catalog: sub.source.clone(),
        })?;
    let mut found: Vec<usize> = package
        .bundles
        .values()
        .copied()
        .filter(|b| index.bundles[*b].version.as_ref() == Some(version))
        .collect();
    // Several bundles of one version (rare): the first by name, for a stable answer.
    found.sort_by(|a, b| index.bundles[*a].name.cmp(&index.bundles[*b].name));
    let bundle =
        found
            .first()
            .map(|b| &index.bundles[*b])
            .ok_or_else(|| RollbackError::NoSuchVersion {
                package: sub.package.clone(),
                version: version.clone(),
                catalog: sub.source.clone(),
            })?;
    let in_channel = sub.channel.as_deref().filter(|c| {
        package
            .channels
            .get(*c)
            .and_then(|g| g.as_ref().ok())
            .is_some_and(|g| g.distance(&bundle.name).is_some())
    });
    let channel = in_channel
        .map(String::from)
        .or_else(|| bundle.channel.as_ref().map(|(c, _)| c.clone()))
        .unwrap_or_else(|| package.default_channel.clone());
    Ok(Step {
        package: sub.package.clone(),
        bundle: bundle.name.clone(),
        version: version.to_string(),
        catalog: sub.source.name.clone(),
        catalog_namespace: sub.source.namespace.clone(),
        channel,
        replaces: Some(installed.name.clone()),
        dependency_of: Vec::new(),
        reason: Reason::Subscribed {
            subscription: sub.name.clone(),
        },
    })
}
