//! The reasons OLM writes into conditions, `status.reason` fields and Events, one enum per
//! kind. Clients and the cluster tests match on these strings, so a spelling is part of the
//! API: upstream's where upstream has the reason, and never changed once written. Controllers
//! fill the `String` reason fields of the API types from these enums only, so no call site
//! can misspell one.

use std::fmt;
use std::str::FromStr;

/// A reason a condition can carry: what [`crate::controllers::kit::Cond`] takes, so that
/// every condition reason comes from one of the enums here.
pub trait ConditionReason: Copy {
    /// The reason as the API spells it.
    fn as_str(self) -> &'static str;
}

/// Text that is none of an enum's spellings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a known reason")]
pub struct UnknownReason(pub String);

/// Defines a reason enum from its variants and their spellings, with `as_str`, `Display`,
/// `FromStr` and `all()`. `wraps Variant(Inner);` adds a variant carrying another reason enum
/// (the pull causes), converted into with `From`.
macro_rules! reasons {
    (
        $(#[$attr:meta])*
        pub enum $name:ident {
            $( $(#[$variant_attr:meta])* $variant:ident = $spelling:literal, )+
        }
        $( wraps $wrapper:ident($inner:ident); )?
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant, )+
            $( $wrapper($inner), )?
        }

        impl $name {
            /// The variants that carry nothing.
            const OWN: &'static [$name] = &[$($name::$variant),+];

            /// The reason as the API spells it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $spelling, )+
                    $( $name::$wrapper(inner) => inner.as_str(), )?
                }
            }

            /// Every value, wrapped ones included (for tests and lookups by spelling).
            pub fn all() -> impl Iterator<Item = $name> {
                let own = Self::OWN.iter().copied();
                $( let own = own.chain($inner::all().map($name::$wrapper)); )?
                own
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownReason;

            fn from_str(text: &str) -> Result<Self, UnknownReason> {
                Self::all()
                    .find(|reason| reason.as_str() == text)
                    .ok_or_else(|| UnknownReason(text.to_string()))
            }
        }

        $(
            impl From<$inner> for $name {
                fn from(inner: $inner) -> Self {
                    $name::$wrapper(inner)
                }
            }
        )?
    };
}

/// Implements [`ConditionReason`] for the kinds' enums (not for [`PullCause`], which a
/// condition carries only wrapped in its kind's enum).
macro_rules! condition_reasons {
    ($($name:ident),+) => {
        $(
            impl ConditionReason for $name {
                fn as_str(self) -> &'static str {
                    $name::as_str(self)
                }
            }
        )+
    };
}

reasons! {
    /// Why an image could not be had: the registry's answer, or why no credentials could be
    /// had from the catalog's pull Secrets. Shown on the CatalogSource of an image catalog
    /// and on an InstallPlan's bundle lookups.
    pub enum PullCause {
        Unauthorized = "Unauthorized",
        NotFound = "NotFound",
        Unreachable = "Unreachable",
        /// Any other error the registry answered with.
        RegistryError = "RegistryError",
        /// The pull took longer than the bundle unpack timeout allows.
        Timeout = "Timeout",
        /// The credentials could not be used.
        InvalidCredentials = "InvalidCredentials",
        InvalidReference = "InvalidReference",
        /// Not an image of the expected kind, or its content cannot be read.
        InvalidImage = "InvalidImage",
        /// The local image cache failed.
        LocalError = "LocalError",
        SecretUnreadable = "SecretUnreadable",
        SecretNotFound = "SecretNotFound",
        /// A pull Secret without usable dockerconfigjson content.
        InvalidSecret = "InvalidSecret",
    }
}

reasons! {
    /// CatalogSource reasons: of its Connected, CatalogLoaded, SpecValid and Reconciled
    /// conditions (the first failing one is also `status.reason`), and of its Events.
    pub enum CatalogSourceReason {
        Connected = "Connected",
        ConnectionFailed = "ConnectionFailed",
        ConfigMapNotFound = "ConfigMapNotFound",
        /// An image catalog whose image has not been pulled yet.
        NotPulled = "NotPulled",
        /// The spec cannot work as written (upstream's spelling).
        SpecInvalidError = "SpecInvalidError",
        Loaded = "Loaded",
        NotLoaded = "NotLoaded",
        InvalidCatalog = "InvalidCatalog",
        InvalidConfigMap = "InvalidConfigMap",
        LoadFailed = "LoadFailed",
        InvalidIntervalError = "InvalidIntervalError",
        /// A reconcile panicked (the Reconciled condition).
        Panicked = "Panicked",
        /// Event: content was loaded for the first time.
        CatalogLoaded = "CatalogLoaded",
        /// Event: new content replaced the content in use.
        CatalogUpdated = "CatalogUpdated",
        /// `olm.catalogImageTemplate`: every variable resolved into a valid image reference.
        AllTemplatesResolved = "AllTemplatesResolved",
        /// `olm.catalogImageTemplate`: a variable unknown or a result that is no reference.
        UnableToResolve = "UnableToResolve",
    }
    wraps Pull(PullCause);
}

reasons! {
    /// Subscription reasons: of its conditions (CatalogSourcesUnhealthy, ResolutionFailed,
    /// InstallPlanPending, InstallPlanFailed, InstallPlanMissing) and of its Events.
    pub enum SubscriptionReason {
        AllCatalogSourcesHealthy = "AllCatalogSourcesHealthy",
        UnhealthyCatalogSourceFound = "UnhealthyCatalogSourceFound",
        ConstraintsNotSatisfiable = "ConstraintsNotSatisfiable",
        ErrorPreventedResolution = "ErrorPreventedResolution",
        RequiresApproval = "RequiresApproval",
        Installing = "Installing",
        Planning = "Planning",
        /// The plan has no phase yet.
        InstallPlanNotYetReconciled = "InstallPlanNotYetReconciled",
        /// A failed plan that names no reason of its own.
        InstallPlanFailed = "InstallPlanFailed",
        ReferencedInstallPlanNotFound = "ReferencedInstallPlanNotFound",
        /// The object does not read as a Subscription.
        SpecInvalidError = "SpecInvalidError",
        /// Event: a plan was created for the Subscription.
        InstallPlanCreated = "InstallPlanCreated",
        /// Event: resolution newly fails.
        ResolutionFailed = "ResolutionFailed",
        /// UpgradeHeld: the plan waits for a person (`installPlanApproval: Manual`).
        ManualApproval = "ManualApproval",
        /// UpgradeHeld: outside every maintenance window.
        OutsideMaintenanceWindow = "OutsideMaintenanceWindow",
        /// UpgradeHeld: the plan's impact preview is not computed yet.
        AwaitingPreview = "AwaitingPreview",
        /// UpgradeHeld: the plan adds rules its accounts did not have (holdNewPermissions).
        NewPermissions = "NewPermissions",
        /// UpgradeHeld: a newer version lies outside versionRange or above approvedVersion.
        OutsideVersionPolicy = "OutsideVersionPolicy",
        /// UpgradeHeld: the newer versions are rejected.
        VersionRejected = "VersionRejected",
        /// UpgradeHeld: held at the version rollbackTo names.
        RolledBack = "RolledBack",
        /// UpgradeHeld: the rollback cannot be done safely; the message says why.
        RollbackRefused = "RollbackRefused",
        /// UpgradeHeld: the upgrade's preview found blockers (or failed) under
        /// holdNewPermissions.
        PlanBlocked = "PlanBlocked",
        /// UpgradeHeld False: the plan is approved; the message says by which policy.
        UpgradeApproved = "UpgradeApproved",
        /// UpgradeHeld False: nothing newer is held back.
        NothingHeld = "NothingHeld",
        /// Event: the policy approved a plan that waited.
        InstallPlanApproved = "InstallPlanApproved",
        /// Event: a waiting plan the policy no longer allows was deleted.
        InstallPlanWithdrawn = "InstallPlanWithdrawn",
    }
}

reasons! {
    /// InstallPlan reasons: of its Installed condition when it fails, of its bundle lookups'
    /// conditions (the pull causes), and of its Events.
    pub enum InstallPlanReason {
        InstallComponentFailed = "InstallComponentFailed",
        /// The namespace has no OperatorGroup, or several: the plan waits (Installing).
        InstallCheckFailed = "InstallCheckFailed",
        InvalidInstallPlan = "InvalidInstallPlan",
        /// The object does not read as an InstallPlan.
        SpecInvalidError = "SpecInvalidError",
        /// A bundle image could not be had before the unpack timeout, or never can be.
        BundleLookupFailed = "BundleLookupFailed",
        /// Event: the plan waits for approval.
        RequiresApproval = "RequiresApproval",
        /// Event: the plan was approved.
        Approved = "Approved",
        /// Event: every step is done.
        Installed = "Installed",
        /// Event on a step (`status.plan[i]`): the API server warned while applying it.
        AppliedWithWarnings = "AppliedWithWarnings",
    }
    wraps Pull(PullCause);
}

reasons! {
    /// A ClusterServiceVersion's `status.reason` (upstream's `ConditionReason`), also the
    /// reason of its phase history and of the Event of each transition.
    pub enum CsvReason {
        RequirementsUnknown = "RequirementsUnknown",
        RequirementsNotMet = "RequirementsNotMet",
        AllRequirementsMet = "AllRequirementsMet",
        InvalidInstallStrategy = "InvalidInstallStrategy",
        InstallSucceeded = "InstallSucceeded",
        InstallWaiting = "InstallWaiting",
        InstallComponentFailed = "InstallComponentFailed",
        InstallCheckFailed = "InstallCheckFailed",
        ComponentUnhealthy = "ComponentUnhealthy",
        NeedsReinstall = "NeedsReinstall",
        /// A webhook definition cannot be installed (upstream's spelling).
        InvalidWebhookDescription = "InvalidWebhookDescription",
        /// A serving certificate of a webhook is due: the CSV installs again with a new one.
        NeedsCertRotation = "NeedsCertRotation",
        /// The replaced CSV's OperatorCondition says Upgradeable=False (upstream's spelling).
        OperatorConditionNotUpgradeable = "OperatorConditionNotUpgradeable",
        /// Another CSV owns an API service this one owns (upstream's spelling).
        OwnerConflict = "OwnerConflict",
        BeingReplaced = "BeingReplaced",
        Replaced = "Replaced",
        NoOperatorGroup = "NoOperatorGroup",
        TooManyOperatorGroups = "TooManyOperatorGroups",
        UnsupportedOperatorGroup = "UnsupportedOperatorGroup",
        NoTargetNamespaces = "NoTargetNamespaces",
        /// Another OperatorGroup whose target namespaces meet this one's already provides an
        /// API this CSV provides (upstream's spelling).
        InterOperatorGroupOwnerConflict = "InterOperatorGroupOwnerConflict",
        /// The group's `staticProvidedAPIs` lacks an API this CSV provides (upstream's spelling).
        CannotModifyStaticOperatorGroupProvidedAPIs = "CannotModifyStaticOperatorGroupProvidedAPIs",
        /// The object does not read as a CSV (ours; the spelling of upstream's CatalogSource
        /// reason for a spec it cannot use).
        SpecInvalidError = "SpecInvalidError",
        /// The status of a copy in a target namespace.
        Copied = "Copied",
        /// Ours, not upstream's: a reason read back from the object that none of the above
        /// spells (another writer's), kept while the phase holds.
        Unknown = "Unknown",
        /// A status without a reason (upstream's zero value), kept as the empty text it
        /// reads as while the phase holds.
        Unset = "",
    }
}

impl CsvReason {
    /// The reason a status shows, as the phase machine carries it on: an absent reason is
    /// [`CsvReason::Unset`], one it does not know [`CsvReason::Unknown`].
    pub fn read_back(text: Option<&str>) -> CsvReason {
        text.unwrap_or_default()
            .parse()
            .unwrap_or(CsvReason::Unknown)
    }

    /// Whether the CSV failed because of its OperatorGroup (it retries once the group is
    /// usable).
    pub const fn is_operator_group_problem(self) -> bool {
        matches!(
            self,
            CsvReason::NoOperatorGroup
                | CsvReason::TooManyOperatorGroups
                | CsvReason::UnsupportedOperatorGroup
                | CsvReason::NoTargetNamespaces
                | CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::CannotModifyStaticOperatorGroupProvidedAPIs
        )
    }
}

reasons! {
    /// OperatorGroup reasons: of its MultipleOperatorGroup and OperatorGroupServiceAccount
    /// conditions, and of its Events.
    pub enum OperatorGroupReason {
        MultipleOperatorGroupsFound = "MultipleOperatorGroupsFound",
        ServiceAccountNotFound = "ServiceAccountNotFound",
        /// Event: the group's target namespaces changed.
        TargetNamespacesChanged = "TargetNamespacesChanged",
    }
}

reasons! {
    /// OLMConfig reasons: of its DisabledCopiedCSVs condition, upstream's spellings.
    pub enum OlmConfigReason {
        /// Copied CSVs are made (the condition is False).
        CopiedCSVsEnabled = "CopiedCSVsEnabled",
        /// Copied CSVs are disabled (True once none is left).
        CopiedCSVsDisabled = "CopiedCSVsDisabled",
    }
}

condition_reasons!(
    CatalogSourceReason,
    SubscriptionReason,
    InstallPlanReason,
    CsvReason,
    OperatorGroupReason,
    OlmConfigReason
);

#[cfg(test)]
mod tests {
    use super::*;

    /// `all` (every value of an enum) with the spellings in `expected` (written out by hand,
    /// so a typo in either place fails), and back through `FromStr`.
    fn assert_spellings<R>(all: impl Iterator<Item = R>, expected: &[(R, &str)])
    where
        R: Copy + fmt::Debug + fmt::Display + PartialEq + FromStr<Err = UnknownReason>,
    {
        let listed: Vec<R> = expected.iter().map(|(r, _)| *r).collect();
        assert_eq!(
            listed,
            all.collect::<Vec<R>>(),
            "the table lists every value, in order"
        );
        for (reason, spelling) in expected {
            assert_eq!(reason.to_string(), *spelling, "{reason:?}");
            assert_eq!(spelling.parse::<R>(), Ok(*reason), "{spelling:?}");
        }
    }

    const PULL_CAUSES: [(PullCause, &str); 12] = [
        (PullCause::Unauthorized, "Unauthorized"),
        (PullCause::NotFound, "NotFound"),
        (PullCause::Unreachable, "Unreachable"),
        (PullCause::RegistryError, "RegistryError"),
        (PullCause::Timeout, "Timeout"),
        (PullCause::InvalidCredentials, "InvalidCredentials"),
        (PullCause::InvalidReference, "InvalidReference"),
        (PullCause::InvalidImage, "InvalidImage"),
        (PullCause::LocalError, "LocalError"),
        (PullCause::SecretUnreadable, "SecretUnreadable"),
        (PullCause::SecretNotFound, "SecretNotFound"),
        (PullCause::InvalidSecret, "InvalidSecret"),
    ];

    /// `own` followed by every pull cause wrapped with `wrap`.
    fn with_pull_causes<R: Copy>(
        own: &[(R, &'static str)],
        wrap: fn(PullCause) -> R,
    ) -> Vec<(R, &'static str)> {
        let mut table = own.to_vec();
        table.extend(
            PULL_CAUSES
                .iter()
                .map(|(cause, text)| (wrap(*cause), *text)),
        );
        table
    }

    #[test]
    fn pull_causes_keep_their_spellings() {
        assert_spellings(PullCause::all(), &PULL_CAUSES);
    }

    #[test]
    fn catalog_source_reasons_keep_their_spellings() {
        use CatalogSourceReason as R;
        let own = [
            (R::Connected, "Connected"),
            (R::ConnectionFailed, "ConnectionFailed"),
            (R::ConfigMapNotFound, "ConfigMapNotFound"),
            (R::NotPulled, "NotPulled"),
            (R::SpecInvalidError, "SpecInvalidError"),
            (R::Loaded, "Loaded"),
            (R::NotLoaded, "NotLoaded"),
            (R::InvalidCatalog, "InvalidCatalog"),
            (R::InvalidConfigMap, "InvalidConfigMap"),
            (R::LoadFailed, "LoadFailed"),
            (R::InvalidIntervalError, "InvalidIntervalError"),
            (R::Panicked, "Panicked"),
            (R::CatalogLoaded, "CatalogLoaded"),
            (R::CatalogUpdated, "CatalogUpdated"),
            (R::AllTemplatesResolved, "AllTemplatesResolved"),
            (R::UnableToResolve, "UnableToResolve"),
        ];
        assert_spellings(R::all(), &with_pull_causes(&own, R::Pull));
        assert_eq!(R::from(PullCause::NotFound).as_str(), "NotFound");
    }

    #[test]
    fn subscription_reasons_keep_their_spellings() {
        use SubscriptionReason as R;
        assert_spellings(
            R::all(),
            &[
                (R::AllCatalogSourcesHealthy, "AllCatalogSourcesHealthy"),
                (
                    R::UnhealthyCatalogSourceFound,
                    "UnhealthyCatalogSourceFound",
                ),
                (R::ConstraintsNotSatisfiable, "ConstraintsNotSatisfiable"),
                (R::ErrorPreventedResolution, "ErrorPreventedResolution"),
                (R::RequiresApproval, "RequiresApproval"),
                (R::Installing, "Installing"),
                (R::Planning, "Planning"),
                (
                    R::InstallPlanNotYetReconciled,
                    "InstallPlanNotYetReconciled",
                ),
                (R::InstallPlanFailed, "InstallPlanFailed"),
                (
                    R::ReferencedInstallPlanNotFound,
                    "ReferencedInstallPlanNotFound",
                ),
                (R::SpecInvalidError, "SpecInvalidError"),
                (R::InstallPlanCreated, "InstallPlanCreated"),
                (R::ResolutionFailed, "ResolutionFailed"),
                (R::ManualApproval, "ManualApproval"),
                (R::OutsideMaintenanceWindow, "OutsideMaintenanceWindow"),
                (R::AwaitingPreview, "AwaitingPreview"),
                (R::NewPermissions, "NewPermissions"),
                (R::OutsideVersionPolicy, "OutsideVersionPolicy"),
                (R::VersionRejected, "VersionRejected"),
                (R::RolledBack, "RolledBack"),
                (R::RollbackRefused, "RollbackRefused"),
                (R::PlanBlocked, "PlanBlocked"),
                (R::UpgradeApproved, "UpgradeApproved"),
                (R::NothingHeld, "NothingHeld"),
                (R::InstallPlanApproved, "InstallPlanApproved"),
                (R::InstallPlanWithdrawn, "InstallPlanWithdrawn"),
            ],
        );
    }

    #[test]
    fn install_plan_reasons_keep_their_spellings() {
        use InstallPlanReason as R;
        let own = [
            (R::InstallComponentFailed, "InstallComponentFailed"),
            (R::InstallCheckFailed, "InstallCheckFailed"),
            (R::InvalidInstallPlan, "InvalidInstallPlan"),
            (R::SpecInvalidError, "SpecInvalidError"),
            (R::BundleLookupFailed, "BundleLookupFailed"),
            (R::RequiresApproval, "RequiresApproval"),
            (R::Approved, "Approved"),
            (R::Installed, "Installed"),
            (R::AppliedWithWarnings, "AppliedWithWarnings"),
        ];
        assert_spellings(R::all(), &with_pull_causes(&own, R::Pull));
    }

    #[test]
    fn csv_reasons_keep_their_spellings() {
        use CsvReason as R;
        assert_spellings(
            R::all(),
            &[
                (R::RequirementsUnknown, "RequirementsUnknown"),
                (R::RequirementsNotMet, "RequirementsNotMet"),
                (R::AllRequirementsMet, "AllRequirementsMet"),
                (R::InvalidInstallStrategy, "InvalidInstallStrategy"),
                (R::InstallSucceeded, "InstallSucceeded"),
                (R::InstallWaiting, "InstallWaiting"),
                (R::InstallComponentFailed, "InstallComponentFailed"),
                (R::InstallCheckFailed, "InstallCheckFailed"),
                (R::ComponentUnhealthy, "ComponentUnhealthy"),
                (R::NeedsReinstall, "NeedsReinstall"),
                (R::InvalidWebhookDescription, "InvalidWebhookDescription"),
                (R::NeedsCertRotation, "NeedsCertRotation"),
                (
                    R::OperatorConditionNotUpgradeable,
                    "OperatorConditionNotUpgradeable",
                ),
                (R::OwnerConflict, "OwnerConflict"),
                (R::BeingReplaced, "BeingReplaced"),
                (R::Replaced, "Replaced"),
                (R::NoOperatorGroup, "NoOperatorGroup"),
                (R::TooManyOperatorGroups, "TooManyOperatorGroups"),
                (R::UnsupportedOperatorGroup, "UnsupportedOperatorGroup"),
                (R::NoTargetNamespaces, "NoTargetNamespaces"),
                (
                    R::InterOperatorGroupOwnerConflict,
                    "InterOperatorGroupOwnerConflict",
                ),
                (
                    R::CannotModifyStaticOperatorGroupProvidedAPIs,
                    "CannotModifyStaticOperatorGroupProvidedAPIs",
                ),
                (R::SpecInvalidError, "SpecInvalidError"),
                (R::Copied, "Copied"),
                (R::Unknown, "Unknown"),
                (R::Unset, ""),
            ],
        );
    }

    #[test]
    fn a_csv_reason_read_back_is_known_unknown_or_unset() {
        assert_eq!(CsvReason::read_back(Some("Replaced")), CsvReason::Replaced);
        assert_eq!(
            CsvReason::read_back(Some("APIServiceResourceIssue")),
            CsvReason::Unknown
        );
        assert_eq!(CsvReason::read_back(Some("")), CsvReason::Unset);
        assert_eq!(CsvReason::read_back(None), CsvReason::Unset);
    }

    #[test]
    fn operator_group_reasons_keep_their_spellings() {
        use OperatorGroupReason as R;
        assert_spellings(
            R::all(),
            &[
                (
                    R::MultipleOperatorGroupsFound,
                    "MultipleOperatorGroupsFound",
                ),
                (R::ServiceAccountNotFound, "ServiceAccountNotFound"),
                (R::TargetNamespacesChanged, "TargetNamespacesChanged"),
            ],
        );
    }

    #[test]
    fn olm_config_reasons_keep_their_spellings() {
        use OlmConfigReason as R;
        assert_spellings(
            R::all(),
            &[
                (R::CopiedCSVsEnabled, "CopiedCSVsEnabled"),
                (R::CopiedCSVsDisabled, "CopiedCSVsDisabled"),
            ],
        );
    }

    #[test]
    fn an_unknown_spelling_is_an_error() {
        assert_eq!(
            "connected".parse::<CatalogSourceReason>(),
            Err(UnknownReason("connected".into()))
        );
    }
}
