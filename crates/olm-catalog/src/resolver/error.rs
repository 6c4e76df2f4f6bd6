//! The resolver's one error type. Every message names the Subscription, package, channel,
//! catalog or bundle involved, so a user can act on it without reading code.

use super::channel_graph::ChannelGraphError;
use super::input::CatalogRef;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A Subscription that cannot be resolved on its own (boxed: errors stay small).
    #[error(transparent)]
    Subscription(Box<SubscriptionError>),
    /// The Subscriptions together have no solution; the text explains why.
    #[error("{0}")]
    NotSatisfiable(String),
}

impl From<SubscriptionError> for ResolveError {
    fn from(e: SubscriptionError) -> Self {
        ResolveError::Subscription(Box::new(e))
    }
}

/// Why one Subscription cannot be resolved, before any solving.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    #[error(
        "subscription {subscription}: catalog {catalog} does not exist (known catalogs: {known})"
    )]
    UnknownCatalog {
        subscription: String,
        catalog: CatalogRef,
        known: String,
    },
    #[error("subscription {subscription}: package {package} is not in catalog {catalog}")]
    PackageNotFound {
        subscription: String,
        package: String,
        catalog: CatalogRef,
    },
    #[error(
        "subscription {subscription}: package {package} in catalog {catalog} has no default channel; set spec.channel"
    )]
    NoDefaultChannel {
        subscription: String,
        package: String,
        catalog: CatalogRef,
    },
    #[error(
        "subscription {subscription}: package {package} in catalog {catalog} has no channel {channel:?} (channels: {available})"
    )]
    ChannelNotFound {
        subscription: String,
        package: String,
        channel: String,
        catalog: CatalogRef,
        available: String,
    },
    #[error(
        "subscription {subscription}: channel {channel:?} of package {package} in catalog {catalog} is unusable: {problem}"
    )]
    InvalidChannel {
        subscription: String,
        package: String,
        channel: String,
        catalog: CatalogRef,
        problem: ChannelGraphError,
    },
    #[error(
        "subscription {subscription}: startingCSV {csv} is not an entry of channel {channel:?} of package {package} in catalog {catalog}"
    )]
    StartingCsvNotFound {
        subscription: String,
        csv: String,
        package: String,
        channel: String,
        catalog: CatalogRef,
    },
    #[error(
        "subscription {subscription}: startingCSV {csv} of package {package} cannot be installed: {reason}"
    )]
    StartingCsvNotInstallable {
        subscription: String,
        csv: String,
        package: String,
        reason: String,
    },
    #[error(
        "subscription {subscription}: channel {channel:?} of package {package} in catalog {catalog} has no installable bundle ({reasons})"
    )]
    NothingInstallable {
        subscription: String,
        package: String,
        channel: String,
        catalog: CatalogRef,
        reasons: String,
    },
    #[error(
        "subscription {subscription}: no installable bundle of channel {channel:?} of package {package} is allowed by {policy} (newest: {newest})"
    )]
    NoAllowedVersion {
        subscription: String,
        package: String,
        channel: String,
        policy: String,
        newest: String,
    },
}

impl SubscriptionError {
    /// The Subscription the error is about.
    pub fn subscription(&self) -> &str {
        match self {
            SubscriptionError::UnknownCatalog { subscription, .. }
            | SubscriptionError::PackageNotFound { subscription, .. }
            | SubscriptionError::NoDefaultChannel { subscription, .. }
            | SubscriptionError::ChannelNotFound { subscription, .. }
            | SubscriptionError::InvalidChannel { subscription, .. }
            | SubscriptionError::StartingCsvNotFound { subscription, .. }
            | SubscriptionError::StartingCsvNotInstallable { subscription, .. }
            | SubscriptionError::NothingInstallable { subscription, .. }
            | SubscriptionError::NoAllowedVersion { subscription, .. } => subscription,
        }
    }
}
