//! The semver template's model: the template, its channels' settings, and its errors.

use serde::Serialize;

use crate::catalog::model::semver_range::VersionError;

/// The template's `schema`.
pub const SCHEMA: &str = "olm.semver";

/// `defaultChannelTypePreference` values.
pub const PREFER_MAJOR: &str = "major";
pub const PREFER_MINOR: &str = "minor";

/// An `olm.semver` template. Field names are matched case-insensitively and unknown fields
/// are rejected, as opm's strict Go JSON decoding does (opm's own README writes
/// `GenerateMajorChannels`, `Candidate`, `Bundles`, `Image`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SemverTemplate {
    pub schema: String,
    pub generate_major_channels: bool,
    pub generate_minor_channels: bool,
    /// `major`, `minor`, or empty for "the kind being generated" (minor when both are).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_channel_type_preference: String,
    pub candidate: ChannelBundles,
    pub fast: ChannelBundles,
    pub stable: ChannelBundles,
}

/// The bundles of one channel archetype.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChannelBundles {
    pub bundles: Vec<BundleEntry>,
}

/// One bundle, by image reference.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BundleEntry {
    pub image: String,
}

/// Why a template could not be parsed or rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("semver template: {0}")]
    Syntax(String),
    /// A field of the wrong type, or one opm's strict decoding does not know.
    #[error("semver template: {0}")]
    Field(#[from] FieldError),
    #[error("semver template has schema {0:?}, expected \"olm.semver\"")]
    UnknownSchema(String),
    #[error(
        "semver template: unknown defaultChannelTypePreference {0:?}; valid values are \"major\" and \"minor\""
    )]
    UnknownPreference(String),
    #[error(
        "semver template: defaultChannelTypePreference is {preference:?} but {generate} is not set"
    )]
    PreferenceMismatch {
        preference: String,
        generate: &'static str,
    },
    #[error("semver template lists no bundles (candidate, fast and stable are all empty)")]
    NoBundles,
    #[error("bundle image {image:?}: {message}")]
    Resolve { image: String, message: String },
    #[error(
        "bundle images {first_image:?} and {second_image:?} both render to bundle {bundle:?}, with different content"
    )]
    ConflictingBundles {
        bundle: String,
        first_image: String,
        second_image: String,
    },
    #[error(
        "bundle {bundle:?} (image {image:?}) has {count} olm.package properties, expected exactly 1"
    )]
    PackagePropertyCount {
        bundle: String,
        image: String,
        count: usize,
    },
    #[error("bundle {bundle:?} (image {image:?}) has an invalid olm.package property: {message}")]
    InvalidPackageProperty {
        bundle: String,
        image: String,
        message: String,
    },
    #[error("bundle {bundle:?} (image {image:?}) has invalid version {version:?}: {error}")]
    InvalidVersion {
        bundle: String,
        image: String,
        version: String,
        error: VersionError,
    },
    #[error(
        "bundle {bundle:?} (image {image:?}) belongs to package {found:?}, but the template's bundles belong to package {expected:?}"
    )]
    PackageMismatch {
        bundle: String,
        image: String,
        found: String,
        expected: String,
    },
    #[error("bundle {bundle:?} (image {image:?}) appears twice in {archetype}")]
    DuplicateEntry {
        archetype: &'static str,
        bundle: String,
        image: String,
    },
    #[error(
        "{archetype}: bundle {first:?} (version {first_version}) and bundle {second:?} (version {second_version}) have versions that differ only in build metadata, which cannot be ordered"
    )]
    BuildMetadataConflict {
        archetype: &'static str,
        first: String,
        first_version: String,
        second: String,
        second_version: String,
    },
}

/// A template field opm's strict Go JSON decoding refuses (`found` is the JSON kind given).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("{what} must be a mapping, not {found}")]
    NotAMapping { what: String, found: &'static str },
    #[error("unknown field {key:?} in {what}")]
    Unknown { what: String, key: String },
    #[error("{archetype}.bundles must be a list, not {found}")]
    NotAList {
        archetype: String,
        found: &'static str,
    },
    #[error("{name} must be a string, not {found}")]
    NotAString {
        name: &'static str,
        found: &'static str,
    },
    #[error("{name} must be true or false, not {found}")]
    NotABool {
        name: &'static str,
        found: &'static str,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Archetype {
    Candidate,
    Fast,
    Stable,
}

impl Archetype {
    pub(super) fn name(self) -> &'static str {
        match self {
            Archetype::Candidate => "candidate",
            Archetype::Fast => "fast",
            Archetype::Stable => "stable",
        }
    }
}

/// A channel kind; `Default` exists only as the starting high-water mark, as in opm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Default,
    Major,
    Minor,
}

impl Kind {
    /// opm's `streamTypePriorities`.
    pub(super) fn priority(self) -> u8 {
        match self {
            Kind::Default => 0,
            Kind::Major => 1,
            Kind::Minor => 2,
        }
    }
}

pub(super) struct Settings {
    pub(super) major: bool,
    pub(super) minor: bool,
    pub(super) preference: Kind,
}

impl SemverTemplate {
    pub(super) fn archetypes(&self) -> [(Archetype, &ChannelBundles); 3] {
        [
            (Archetype::Candidate, &self.candidate),
            (Archetype::Fast, &self.fast),
            (Archetype::Stable, &self.stable),
        ]
    }

    /// opm's `readFile` checks and defaults.
    pub(super) fn settings(&self) -> Result<Settings, TemplateError> {
        if self.schema != SCHEMA {
            return Err(TemplateError::UnknownSchema(self.schema.clone()));
        }
        let major = self.generate_major_channels;
        let minor = self.generate_minor_channels || !major;
        let preference = match self.default_channel_type_preference.as_str() {
            "" if minor => Kind::Minor,
            "" => Kind::Major,
            PREFER_MINOR if minor => Kind::Minor,
            PREFER_MAJOR if major => Kind::Major,
            p @ (PREFER_MINOR | PREFER_MAJOR) => {
                let generate = if p == PREFER_MINOR {
                    "generateMinorChannels"
                } else {
                    "generateMajorChannels"
                };
                return Err(TemplateError::PreferenceMismatch {
                    preference: p.into(),
                    generate,
                });
            }
            other => return Err(TemplateError::UnknownPreference(other.into())),
        };
        Ok(Settings {
            major,
            minor,
            preference,
        })
    }
}
