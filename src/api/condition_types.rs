//! The condition types OLM writes, one enum per kind, beside the reasons ([`super::reasons`]):
//! clients match on these strings as on the reasons, so they are spelt in one place.

macro_rules! condition_types {
    ($(#[$attr:meta])* pub enum $name:ident { $($(#[$v_attr:meta])* $variant:ident,)+ }) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $($(#[$v_attr])* $variant,)+
        }

        impl $name {
            /// The type as the API spells it (the variant's name).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

condition_types! {
    /// An InstallPlan's conditions, and those of its bundle lookups.
    pub enum InstallPlanConditionType {
        Resolved,
        Installed,
        BundleLookupPending,
        BundleLookupFailed,
    }
}

condition_types! {
    /// A Subscription's conditions.
    pub enum SubscriptionConditionType {
        CatalogSourcesUnhealthy,
        ResolutionFailed,
        InstallPlanPending,
        InstallPlanMissing,
        InstallPlanFailed,
        /// This OLM's: whether an upgrade is held by `spec.upgradePolicy`, and why.
        UpgradeHeld,
    }
}

condition_types! {
    /// An OLMConfig's conditions (upstream's `DisabledCopiedCSVsConditionType`).
    pub enum OlmConfigConditionType {
        DisabledCopiedCSVs,
    }
}
