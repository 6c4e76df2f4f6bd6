//! The `olm.semver` catalog template, as `opm alpha render-template semver` implements it
//! (operator-registry `alpha/template/semver`).
//!
//! A template lists bundle images under three channel archetypes, `candidate`, `fast` and
//! `stable` (in increasing stability). Rendering generates, per archetype, one channel per
//! major version (`stable-v1`) and/or per minor version (`stable-v1.2`), links the entries
//! with `replaces`/`skips`, and picks the package's default channel:
//!
//! * Edges: within one archetype, one kind of channel and one major version, taking the
//!   bundles in semver order, the highest-patch bundle of each minor stream `replaces` the
//!   highest-patch bundle of the previous minor stream and `skips` every other lower bundle
//!   of that major version. No other entry gets an edge (the very last bundle of a group is
//!   treated as a stream head), and nothing crosses a major version or an archetype.
//! * Default channel: opm keeps a "high-water" channel, compared when each channel is
//!   *created* (so with the version of the channel's lowest bundle): the more stable
//!   archetype wins, then the higher version, then the preferred channel kind
//!   (`defaultChannelTypePreference`), then minor over major. In practice this is the channel
//!   created last in the most stable non-empty archetype; with both kinds generated, a
//!   minor channel opened by a newer bundle beats the major channel even when `major` is
//!   preferred (e.g. `stable-v2.1` over `stable-v2`).
//! * The package's description and icon come from the CSV of the default channel's head
//!   bundle, found in its `olm.bundle.object` properties (or, for the description only,
//!   its `olm.csv.metadata`).
//!
//! Differences from opm, all in cases where opm would write an invalid catalog or depends on
//! Go map order: bundles come out sorted by name (opm's writer does the same); two
//! different images that render to the same bundle name are an error; only the
//! `olm.package` property is parsed (opm parses every known property type).

use std::collections::{BTreeSet, HashMap};

use semver::Version;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::catalog::csv::{bundle_csv, first_icon_as_opm};
use crate::catalog::fbc::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, PROP_CSV_METADATA, PROP_PACKAGE, Package,
    SCHEMA_CHANNEL, SCHEMA_PACKAGE, json_kind,
};
use crate::catalog::go_json;
use crate::catalog::semver_range::blang_parse;

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
    #[error("bundle {bundle:?} (image {image:?}) has invalid version {version:?}: {message}")]
    InvalidVersion {
        bundle: String,
        image: String,
        version: String,
        message: String,
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

/// Parses a template from YAML or JSON, checks `schema` and the channel-kind settings, and
/// fills in the defaults as opm does (minor channels when neither kind is asked for; the
/// preference follows the generated kind, minor first).
pub fn parse(text: &str) -> Result<SemverTemplate, TemplateError> {
    let value = if let Ok(v) = serde_json::from_str::<Value>(text) {
        v
    } else {
        // Like Go's yaml.Unmarshal, read the first document only.
        match serde_yaml::Deserializer::from_str(text).next() {
            None => Value::Null,
            Some(doc) => {
                Value::deserialize(doc).map_err(|e| TemplateError::Syntax(e.to_string()))?
            }
        }
    };
    let mut template = SemverTemplate::from_value(value).map_err(TemplateError::Syntax)?;
    let settings = template.settings()?;
    template.generate_major_channels = settings.major;
    template.generate_minor_channels = settings.minor;
    template.default_channel_type_preference = match settings.preference {
        Kind::Major => PREFER_MAJOR,
        _ => PREFER_MINOR,
    }
    .into();
    Ok(template)
}

/// Renders the template into FBC. `resolve(image)` turns each distinct bundle image into its
/// `olm.bundle` (opm pulls and renders the image); each is called once, in template order.
pub fn render(
    template: &SemverTemplate,
    resolve: &mut dyn FnMut(&str) -> Result<Bundle, String>,
) -> Result<DeclarativeConfig, TemplateError> {
    let settings = template.settings()?;

    // Render each distinct image once.
    let mut bundles: Vec<Bundle> = Vec::new();
    let mut bundle_of_image: HashMap<&str, usize> = HashMap::new();
    let mut image_of_bundle: Vec<&str> = Vec::new();
    for (_, list) in template.archetypes() {
        for entry in &list.bundles {
            let image = entry.image.as_str();
            if bundle_of_image.contains_key(image) {
                continue;
            }
            let bundle = resolve(image).map_err(|message| TemplateError::Resolve {
                image: image.into(),
                message,
            })?;
            let index = match bundles.iter().position(|b| b.name == bundle.name) {
                Some(i) if bundles[i] == bundle => i,
                Some(i) => {
                    return Err(TemplateError::ConflictingBundles {
                        bundle: bundle.name,
                        first_image: image_of_bundle[i].into(),
                        second_image: image.into(),
                    });
                }
                None => {
                    bundles.push(bundle);
                    image_of_bundle.push(image);
                    bundles.len() - 1
                }
            };
            bundle_of_image.insert(image, index);
        }
    }
    if bundles.is_empty() {
        return Err(TemplateError::NoBundles);
    }

    // Versions per archetype, in template order, with opm's checks.
    let mut package = String::new();
    let mut versions: Vec<(Archetype, Vec<(String, Version)>)> = Vec::new();
    for (archetype, list) in template.archetypes() {
        let mut entries: Vec<(String, Version)> = Vec::new();
        for entry in &list.bundles {
            let bundle = &bundles[bundle_of_image[entry.image.as_str()]];
            let image = entry.image.clone();
            let (package_name, version_text) = package_property(bundle, &image)?;
            let version =
                blang_parse(&version_text).map_err(|message| TemplateError::InvalidVersion {
                    bundle: bundle.name.clone(),
                    image: image.clone(),
                    version: version_text.clone(),
                    message,
                })?;
            if package.is_empty() {
                package = package_name;
            } else if package_name != package {
                return Err(TemplateError::PackageMismatch {
                    bundle: bundle.name.clone(),
                    image,
                    found: package_name,
                    expected: package,
                });
            }
            if entries.iter().any(|(name, _)| *name == bundle.name) {
                return Err(TemplateError::DuplicateEntry {
                    archetype: archetype.name(),
                    bundle: bundle.name.clone(),
                    image,
                });
            }
            entries.push((bundle.name.clone(), version));
        }
        check_build_metadata(archetype, &entries)?;
        versions.push((archetype, entries));
    }

    let (mut channels, default_channel) = generate_channels(&package, &settings, versions);
    channels.sort_by(|a, b| a.name.cmp(&b.name));

    let mut pkg = Package {
        schema: SCHEMA_PACKAGE.into(),
        name: package,
        default_channel,
        ..Default::default()
    };
    populate_package_metadata(&mut pkg, &channels, &bundles);

    bundles.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(DeclarativeConfig {
        packages: vec![pkg],
        channels,
        bundles,
        ..Default::default()
    })
}

impl SemverTemplate {
    fn archetypes(&self) -> [(Archetype, &ChannelBundles); 3] {
        [
            (Archetype::Candidate, &self.candidate),
            (Archetype::Fast, &self.fast),
            (Archetype::Stable, &self.stable),
        ]
    }

    /// opm's `readFile` checks and defaults.
    fn settings(&self) -> Result<Settings, TemplateError> {
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

    fn from_value(value: Value) -> Result<Self, String> {
        let mut fields = fields_of(
            value,
            "the template",
            &[
                "schema",
                "generateMajorChannels",
                "generateMinorChannels",
                "defaultChannelTypePreference",
                "candidate",
                "fast",
                "stable",
            ],
        )?;
        let mut archetype = |name: &str| {
            fields
                .remove(name)
                .map(|v| ChannelBundles::from_value(v, name))
                .transpose()
        };
        let candidate = archetype("candidate")?.unwrap_or_default();
        let fast = archetype("fast")?.unwrap_or_default();
        let stable = archetype("stable")?.unwrap_or_default();
        Ok(SemverTemplate {
            schema: string_field(&mut fields, "schema")?,
            generate_major_channels: bool_field(&mut fields, "generateMajorChannels")?,
            generate_minor_channels: bool_field(&mut fields, "generateMinorChannels")?,
            default_channel_type_preference: string_field(
                &mut fields,
                "defaultChannelTypePreference",
            )?,
            candidate,
            fast,
            stable,
        })
    }
}

impl ChannelBundles {
    fn from_value(value: Value, archetype: &str) -> Result<Self, String> {
        let mut fields = fields_of(value, archetype, &["bundles"])?;
        let bundles = match fields.remove("bundles") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| {
                    let mut f = fields_of(item, &format!("{archetype}.bundles[]"), &["image"])?;
                    Ok(BundleEntry {
                        image: string_field(&mut f, "image")?,
                    })
                })
                .collect::<Result<_, String>>()?,
            Some(other) => {
                return Err(format!(
                    "{archetype}.bundles must be a list, not {}",
                    json_kind(&other)
                ));
            }
        };
        Ok(ChannelBundles { bundles })
    }
}

impl<'de> Deserialize<'de> for SemverTemplate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SemverTemplate::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for ChannelBundles {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ChannelBundles::from_value(Value::deserialize(d)?, "channel")
            .map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for BundleEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut f = fields_of(Value::deserialize(d)?, "bundle", &["image"])
            .map_err(serde::de::Error::custom)?;
        Ok(BundleEntry {
            image: string_field(&mut f, "image").map_err(serde::de::Error::custom)?,
        })
    }
}

/// The fields of a JSON object as Go's `encoding/json` sees them for a struct: keys match
/// field names exactly or case-insensitively, unknown keys are an error (strict decoding),
/// `null` leaves a field unset, and a `null` object is an empty one.
fn fields_of(
    value: Value,
    what: &str,
    names: &[&'static str],
) -> Result<HashMap<&'static str, Value>, String> {
    let object = match value {
        Value::Null => Map::new(),
        Value::Object(o) => o,
        other => {
            return Err(format!(
                "{what} must be a mapping, not {}",
                json_kind(&other)
            ));
        }
    };
    let mut out = HashMap::new();
    for (key, v) in object {
        let name = go_json::field_name(names, &key)
            .ok_or_else(|| format!("unknown field {key:?} in {what}"))?;
        if !v.is_null() {
            out.insert(name, v);
        }
    }
    Ok(out)
}

fn string_field(fields: &mut HashMap<&'static str, Value>, name: &str) -> Result<String, String> {
    match fields.remove(name) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "{name} must be a string, not {}",
            json_kind(&other)
        )),
    }
}

fn bool_field(fields: &mut HashMap<&'static str, Value>, name: &str) -> Result<bool, String> {
    match fields.remove(name) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(other) => Err(format!(
            "{name} must be true or false, not {}",
            json_kind(&other)
        )),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Archetype {
    Candidate,
    Fast,
    Stable,
}

impl Archetype {
    fn name(self) -> &'static str {
        match self {
            Archetype::Candidate => "candidate",
            Archetype::Fast => "fast",
            Archetype::Stable => "stable",
        }
    }
}

/// A channel kind; `Default` exists only as the starting high-water mark, as in opm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Default,
    Major,
    Minor,
}

impl Kind {
    /// opm's `streamTypePriorities`.
    fn priority(self) -> u8 {
        match self {
            Kind::Default => 0,
            Kind::Major => 1,
            Kind::Minor => 2,
        }
    }
}

struct Settings {
    major: bool,
    minor: bool,
    preference: Kind,
}

/// The single `olm.package` property's `packageName` and `version`.
fn package_property(bundle: &Bundle, image: &str) -> Result<(String, String), TemplateError> {
    let values: Vec<&Value> = bundle.properties_of(PROP_PACKAGE).collect();
    if values.len() != 1 {
        return Err(TemplateError::PackagePropertyCount {
            bundle: bundle.name.clone(),
            image: image.into(),
            count: values.len(),
        });
    }
    let invalid = |message: String| TemplateError::InvalidPackageProperty {
        bundle: bundle.name.clone(),
        image: image.into(),
        message,
    };
    let object = match values[0] {
        Value::Object(o) => o,
        other => {
            return Err(invalid(format!(
                "value must be a mapping, not {}",
                json_kind(other)
            )));
        }
    };
    let field = |name: &str| -> Result<String, TemplateError> {
        match go_json::get(object, name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(invalid(format!(
                "{name} must be a string, not {}",
                json_kind(other)
            ))),
        }
    };
    Ok((field("packageName")?, field("version")?))
}

/// opm's `withoutBuildMetadataConflict`: two bundles of one archetype whose versions are
/// equal once build metadata is dropped cannot be ordered.
fn check_build_metadata(
    archetype: Archetype,
    entries: &[(String, Version)],
) -> Result<(), TemplateError> {
    for (i, (second, second_version)) in entries.iter().enumerate() {
        if let Some((first, first_version)) = entries[..i]
            .iter()
            .find(|(_, v)| v.cmp_precedence(second_version).is_eq())
        {
            return Err(TemplateError::BuildMetadataConflict {
                archetype: archetype.name(),
                first: first.clone(),
                first_version: first_version.to_string(),
                second: second.clone(),
                second_version: second_version.to_string(),
            });
        }
    }
    Ok(())
}

/// opm's `highwaterChannel`.
struct Highwater {
    archetype: Archetype,
    kind: Kind,
    version: Version,
    name: String,
}

impl Highwater {
    fn gt(&self, other: &Highwater, preference: Kind) -> bool {
        if self.archetype != other.archetype {
            return self.archetype > other.archetype;
        }
        if !self.version.cmp_precedence(&other.version).is_eq() {
            return self.version.cmp_precedence(&other.version).is_gt();
        }
        if self.kind != other.kind {
            if self.kind == preference {
                return true;
            }
            if other.kind == preference {
                return false;
            }
            return self.kind.priority() > other.kind.priority();
        }
        false
    }
}

/// One channel entry with what linking needs to know about it (opm's `entryTuple`).
struct Placed {
    archetype: Archetype,
    kind: Kind,
    channel: usize,
    index: usize,
    name: String,
    version: Version,
}

/// opm's `generateChannels` + `linkChannels`: the channels (unsorted) and the default
/// channel's name.
fn generate_channels(
    package: &str,
    settings: &Settings,
    versions: Vec<(Archetype, Vec<(String, Version)>)>,
) -> (Vec<Channel>, String) {
    let mut channels: Vec<Channel> = Vec::new();
    let mut channel_index: HashMap<String, usize> = HashMap::new();
    let mut placed: Vec<Placed> = Vec::new();
    let mut highwater = Highwater {
        archetype: Archetype::Candidate,
        kind: Kind::Default,
        version: Version::new(0, 0, 0),
        name: String::new(),
    };

    for (archetype, mut bundles) in versions {
        bundles.sort_by(|a, b| a.1.cmp_precedence(&b.1));
        for (name, version) in bundles {
            let mut kinds = Vec::with_capacity(2);
            if settings.major {
                kinds.push((
                    Kind::Major,
                    format!("{}-v{}", archetype.name(), version.major),
                ));
            }
            if settings.minor {
                kinds.push((
                    Kind::Minor,
                    format!("{}-v{}.{}", archetype.name(), version.major, version.minor),
                ));
            }
            for (kind, channel_name) in kinds {
                let channel = match channel_index.get(&channel_name) {
                    Some(&i) => i,
                    None => {
                        let candidate = Highwater {
                            archetype,
                            kind,
                            version: version.clone(),
                            name: channel_name.clone(),
                        };
                        if candidate.gt(&highwater, settings.preference) {
                            highwater = candidate;
                        }
                        channels.push(Channel {
                            schema: SCHEMA_CHANNEL.into(),
                            name: channel_name.clone(),
                            package: package.into(),
                            ..Default::default()
                        });
                        channel_index.insert(channel_name, channels.len() - 1);
                        channels.len() - 1
                    }
                };
                channels[channel].entries.push(ChannelEntry {
                    name: name.clone(),
                    ..Default::default()
                });
                let index = channels[channel].entries.len() - 1;
                placed.push(Placed {
                    archetype,
                    kind,
                    channel,
                    index,
                    name: name.clone(),
                    version: version.clone(),
                });
            }
        }
    }

    link(&mut channels, placed);
    (channels, highwater.name)
}

/// opm's `linkChannels`: walk all entries ordered by archetype, kind and version; at each
/// change of minor (or anything bigger) the previous entry, the head of its minor stream,
/// gets `replaces` = the head of the stream before it and `skips` = the rest of the major
/// version so far; archetype, kind and major changes reset what is carried.
fn link(channels: &mut [Channel], mut entries: Vec<Placed>) {
    entries.sort_by(|a, b| {
        a.archetype
            .cmp(&b.archetype)
            .then(a.kind.priority().cmp(&b.kind.priority()))
            .then(a.version.cmp_precedence(&b.version))
    });

    let finalize =
        |channels: &mut [Channel], at: &Placed, replaces: &str, skips: &BTreeSet<String>| {
            let entry = &mut channels[at.channel].entries[at.index];
            entry.replaces = replaces.to_string();
            let skips: Vec<String> = skips.iter().filter(|s| *s != replaces).cloned().collect();
            if !skips.is_empty() {
                entry.skips = skips;
            }
        };

    let mut prev_z_max = String::new();
    let mut skips: BTreeSet<String> = BTreeSet::new();
    for pair in entries.windows(2) {
        let (prev, cur) = (&pair[0], &pair[1]);
        let arch_change = prev.archetype != cur.archetype;
        let kind_change = prev.kind != cur.kind;
        let x_change = prev.version.major != cur.version.major;
        let y_change =
            (prev.version.major, prev.version.minor) != (cur.version.major, cur.version.minor);

        if arch_change || kind_change || x_change || y_change {
            finalize(channels, prev, &prev_z_max, &skips);
        }
        if arch_change || kind_change || x_change {
            skips.clear();
            prev_z_max.clear();
        } else {
            if y_change {
                prev_z_max = prev.name.clone();
            }
            skips.insert(prev.name.clone());
        }
    }

    if let [.., penultimate, last] = entries.as_slice()
        && penultimate.archetype == last.archetype
        && penultimate.kind == last.kind
        && penultimate.version.major == last.version.major
    {
        finalize(channels, last, &prev_z_max, &skips);
    }
}

/// opm's `populatePackageMetadata`: description and icon from the CSV of the default
/// channel's head (last) entry.
fn populate_package_metadata(pkg: &mut Package, channels: &[Channel], bundles: &[Bundle]) {
    let Some(head) = channels
        .iter()
        .find(|c| c.name == pkg.default_channel)
        .and_then(|c| c.entries.last())
    else {
        return;
    };
    let Some(bundle) = bundles.iter().find(|b| b.name == head.name) else {
        return;
    };
    match bundle_csv(bundle) {
        Some(csv) => {
            // A missing, null or malformed spec has neither description nor icon.
            let Some(Value::Object(spec)) = csv.get("spec") else {
                return;
            };
            if let Some(Value::String(description)) = spec.get("description")
                && !description.is_empty()
            {
                pkg.description = description.clone();
            }
            if let Some(icon) = first_icon_as_opm(spec) {
                pkg.icon = Some(icon);
            }
        }
        None => {
            // Without the CSV object, olm.csv.metadata still carries the description.
            let description = bundle.properties_of(PROP_CSV_METADATA).find_map(|m| {
                m.get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            if let Some(description) = description.filter(|d| !d.is_empty()) {
                pkg.description = description;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::fbc::Property;
    use crate::catalog::fbc::{Icon, PROP_BUNDLE_OBJECT};
    use base64::Engine;
    use base64::engine::general_purpose;
    use serde_json::json;

    fn bundle(pkg: &str, version: &str) -> Bundle {
        Bundle {
            schema: "olm.bundle".into(),
            name: format!("{pkg}.v{version}"),
            package: pkg.into(),
            image: image(pkg, version),
            properties: vec![Property::new(
                PROP_PACKAGE,
                json!({ "packageName": pkg, "version": version }),
            )],
            related_images: vec![],
        }
    }

    fn image(pkg: &str, version: &str) -> String {
        format!("quay.io/foo/olm:{pkg}.v{version}")
    }

    fn list(pkg: &str, versions: &[&str]) -> ChannelBundles {
        ChannelBundles {
            bundles: versions
                .iter()
                .map(|v| BundleEntry {
                    image: image(pkg, v),
                })
                .collect(),
        }
    }

    /// A resolver that knows every version used by the templates below, and counts calls.
    fn fake_resolve(calls: &mut Vec<String>) -> impl FnMut(&str) -> Result<Bundle, String> + '_ {
        move |img: &str| {
            calls.push(img.to_string());
            let rest = img
                .strip_prefix("quay.io/foo/olm:")
                .ok_or_else(|| format!("unknown image {img}"))?;
            let (pkg, version) = rest
                .split_once(".v")
                .ok_or_else(|| format!("unknown image {img}"))?;
            Ok(bundle(pkg, version))
        }
    }

    fn render_ok(t: &SemverTemplate) -> DeclarativeConfig {
        let mut calls = Vec::new();
        render(t, &mut fake_resolve(&mut calls)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn template(major: bool, minor: bool, pref: &str) -> SemverTemplate {
        SemverTemplate {
            schema: SCHEMA.into(),
            generate_major_channels: major,
            generate_minor_channels: minor,
            default_channel_type_preference: pref.into(),
            ..Default::default()
        }
    }

    /// Channels as (name, entry specs), an entry spec being `name`, then `>replaces` and
    /// `+skip` items, with bundle names shortened (`t` for `testoperator.v`, `a` for `a.v`).
    type Specs = Vec<(String, Vec<String>)>;

    fn channels_of(cfg: &DeclarativeConfig) -> Specs {
        cfg.channels
            .iter()
            .map(|c| {
                let entries = c
                    .entries
                    .iter()
                    .map(|e| {
                        let mut s = e.name.clone();
                        if !e.replaces.is_empty() {
                            s += &format!(">{}", e.replaces);
                        }
                        for k in &e.skips {
                            s += &format!("+{k}");
                        }
                        s.replace("testoperator.v", "t").replace("a.v", "a")
                    })
                    .collect();
                (c.name.clone(), entries)
            })
            .collect()
    }

    fn expect(channels: &[(&str, &[&str])]) -> Specs {
        channels
            .iter()
            .map(|(n, es)| (n.to_string(), es.iter().map(|e| e.to_string()).collect()))
            .collect()
    }

    /// The template of opm's README.
    fn readme(major: bool, minor: bool) -> SemverTemplate {
        let p = "testoperator";
        SemverTemplate {
            candidate: list(
                p,
                &[
                    "0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.2.1", "0.2.2", "0.3.0",
                    "1.0.0", "1.0.1", "1.1.0",
                ],
            ),
            fast: list(p, &["0.2.1", "0.2.2", "0.3.0", "1.0.1", "1.1.0"]),
            stable: list(p, &["1.0.1"]),
            ..template(major, minor, "")
        }
    }

    #[test]
    fn readme_major_channels() {
        let cfg = render_ok(&readme(true, false));
        assert_eq!(cfg.packages.len(), 1);
        assert_eq!(cfg.packages[0].name, "testoperator");
        assert_eq!(cfg.packages[0].default_channel, "stable-v1");
        let want: &[(&str, &[&str])] = &[
            (
                "candidate-v0",
                &[
                    "t0.1.0",
                    "t0.1.1",
                    "t0.1.2",
                    "t0.1.3+t0.1.0+t0.1.1+t0.1.2",
                    "t0.2.0",
                    "t0.2.1",
                    "t0.2.2>t0.1.3+t0.1.0+t0.1.1+t0.1.2+t0.2.0+t0.2.1",
                    "t0.3.0>t0.2.2+t0.1.0+t0.1.1+t0.1.2+t0.1.3+t0.2.0+t0.2.1",
                ],
            ),
            (
                "candidate-v1",
                &["t1.0.0", "t1.0.1+t1.0.0", "t1.1.0>t1.0.1+t1.0.0"],
            ),
            (
                "fast-v0",
                &["t0.2.1", "t0.2.2+t0.2.1", "t0.3.0>t0.2.2+t0.2.1"],
            ),
            ("fast-v1", &["t1.0.1", "t1.1.0>t1.0.1"]),
            ("stable-v1", &["t1.0.1"]),
        ];
        let want = expect(want);
        assert_eq!(channels_of(&cfg), want);
        // Every bundle once, sorted by name.
        let names: Vec<&str> = cfg.bundles.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names.len(), 11);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        assert!(
            cfg.channels
                .iter()
                .all(|c| c.package == "testoperator" && c.schema == SCHEMA_CHANNEL)
        );
    }

    #[test]
    fn readme_minor_channels_by_default() {
        let cfg = render_ok(&readme(false, false));
        assert_eq!(cfg.packages[0].default_channel, "stable-v1.0");
        let want: &[(&str, &[&str])] = &[
            (
                "candidate-v0.1",
                &["t0.1.0", "t0.1.1", "t0.1.2", "t0.1.3+t0.1.0+t0.1.1+t0.1.2"],
            ),
            (
                "candidate-v0.2",
                &[
                    "t0.2.0",
                    "t0.2.1",
                    "t0.2.2>t0.1.3+t0.1.0+t0.1.1+t0.1.2+t0.2.0+t0.2.1",
                ],
            ),
            (
                "candidate-v0.3",
                &["t0.3.0>t0.2.2+t0.1.0+t0.1.1+t0.1.2+t0.1.3+t0.2.0+t0.2.1"],
            ),
            ("candidate-v1.0", &["t1.0.0", "t1.0.1+t1.0.0"]),
            ("candidate-v1.1", &["t1.1.0>t1.0.1+t1.0.0"]),
            ("fast-v0.2", &["t0.2.1", "t0.2.2+t0.2.1"]),
            ("fast-v0.3", &["t0.3.0>t0.2.2+t0.2.1"]),
            ("fast-v1.0", &["t1.0.1"]),
            ("fast-v1.1", &["t1.1.0>t1.0.1"]),
            ("stable-v1.0", &["t1.0.1"]),
        ];
        assert_eq!(channels_of(&cfg), expect(want));
    }

    #[test]
    fn each_image_is_resolved_and_emitted_once() {
        let mut calls = Vec::new();
        let cfg = render(&readme(true, true), &mut fake_resolve(&mut calls)).unwrap();
        assert_eq!(calls.len(), 11);
        assert_eq!(calls[0], image("testoperator", "0.1.0"));
        assert_eq!(cfg.bundles.len(), 11);
    }

    /// opm's TestGenerateChannels data set (all in stable, with pre-releases).
    fn opm_generate_channels(major: bool, minor: bool, pref: &str) -> SemverTemplate {
        SemverTemplate {
            stable: list(
                "a",
                &[
                    "0.1.0",
                    "0.1.1",
                    "1.1.0",
                    "1.2.1",
                    "1.3.1",
                    "2.1.0",
                    "1.3.1-beta",
                    "2.1.1",
                    "2.3.1",
                    "2.3.2",
                    "3.1.0",
                    "3.1.1",
                    "1.3.1-alpha",
                    "1.4.1",
                    "1.4.1-beta1",
                    "1.4.1-beta2",
                ],
            ),
            ..template(major, minor, pref)
        }
    }

    const OPM_MAJOR: &[(&str, &[&str])] = &[
        ("stable-v0", &["a0.1.0", "a0.1.1+a0.1.0"]),
        (
            "stable-v1",
            &[
                "a1.1.0",
                "a1.2.1>a1.1.0",
                "a1.3.1-alpha",
                "a1.3.1-beta",
                "a1.3.1>a1.2.1+a1.1.0+a1.3.1-alpha+a1.3.1-beta",
                "a1.4.1-beta1",
                "a1.4.1-beta2",
                "a1.4.1>a1.3.1+a1.1.0+a1.2.1+a1.3.1-alpha+a1.3.1-beta+a1.4.1-beta1+a1.4.1-beta2",
            ],
        ),
        (
            "stable-v2",
            &[
                "a2.1.0",
                "a2.1.1+a2.1.0",
                "a2.3.1",
                "a2.3.2>a2.1.1+a2.1.0+a2.3.1",
            ],
        ),
        ("stable-v3", &["a3.1.0", "a3.1.1+a3.1.0"]),
    ];

    const OPM_MINOR: &[(&str, &[&str])] = &[
        ("stable-v0.1", &["a0.1.0", "a0.1.1+a0.1.0"]),
        ("stable-v1.1", &["a1.1.0"]),
        ("stable-v1.2", &["a1.2.1>a1.1.0"]),
        (
            "stable-v1.3",
            &[
                "a1.3.1-alpha",
                "a1.3.1-beta",
                "a1.3.1>a1.2.1+a1.1.0+a1.3.1-alpha+a1.3.1-beta",
            ],
        ),
        (
            "stable-v1.4",
            &[
                "a1.4.1-beta1",
                "a1.4.1-beta2",
                "a1.4.1>a1.3.1+a1.1.0+a1.2.1+a1.3.1-alpha+a1.3.1-beta+a1.4.1-beta1+a1.4.1-beta2",
            ],
        ),
        ("stable-v2.1", &["a2.1.0", "a2.1.1+a2.1.0"]),
        ("stable-v2.3", &["a2.3.1", "a2.3.2>a2.1.1+a2.1.0+a2.3.1"]),
        ("stable-v3.1", &["a3.1.0", "a3.1.1+a3.1.0"]),
    ];

    #[test]
    fn opm_generate_channels_cases() {
        let mut combined = expect(OPM_MAJOR);
        combined.extend(expect(OPM_MINOR));
        combined.sort();
        // (major, minor, preference, default channel, channels), as in opm's test table
        let cases: Vec<(bool, bool, &str, &str, Specs)> = vec![
            (false, true, "minor", "stable-v3.1", expect(OPM_MINOR)),
            (true, false, "major", "stable-v3", expect(OPM_MAJOR)),
            (true, true, "minor", "stable-v3.1", combined.clone()),
            (true, true, "major", "stable-v3", combined),
            (false, true, "", "stable-v3.1", expect(OPM_MINOR)),
            (true, false, "", "stable-v3", expect(OPM_MAJOR)),
        ];
        for (major, minor, pref, default, channels) in cases {
            let cfg = render_ok(&opm_generate_channels(major, minor, pref));
            assert_eq!(
                cfg.packages[0].default_channel, default,
                "{major} {minor} {pref}"
            );
            assert_eq!(channels_of(&cfg), channels, "{major} {minor} {pref}");
        }
    }

    #[test]
    fn no_edges_across_majors_or_archetypes() {
        // opm's TestLinkChannels "last edge is archetype change" and "last edge is X change".
        let t = SemverTemplate {
            stable: list("a", &["1.1.0", "1.2.1", "1.3.1", "2.1.0", "2.1.1", "2.3.1"]),
            candidate: list("a", &["2.3.2"]),
            ..template(true, false, "")
        };
        let want: &[(&str, &[&str])] = &[
            ("candidate-v2", &["a2.3.2"]),
            (
                "stable-v1",
                &["a1.1.0", "a1.2.1>a1.1.0", "a1.3.1>a1.2.1+a1.1.0"],
            ),
            (
                "stable-v2",
                &["a2.1.0", "a2.1.1+a2.1.0", "a2.3.1>a2.1.1+a2.1.0"],
            ),
        ];
        assert_eq!(channels_of(&render_ok(&t)), expect(want));

        let t = SemverTemplate {
            stable: list("a", &["0.1.0", "0.1.1", "1.1.0", "1.2.1", "1.3.1", "2.1.0"]),
            ..template(true, false, "")
        };
        let want: &[(&str, &[&str])] = &[
            ("stable-v0", &["a0.1.0", "a0.1.1+a0.1.0"]),
            (
                "stable-v1",
                &["a1.1.0", "a1.2.1>a1.1.0", "a1.3.1>a1.2.1+a1.1.0"],
            ),
            ("stable-v2", &["a2.1.0"]),
        ];
        assert_eq!(channels_of(&render_ok(&t)), expect(want));

        // Minimum viable channel.
        let t = SemverTemplate {
            stable: list("a", &["0.1.0"]),
            ..template(true, false, "")
        };
        assert_eq!(
            channels_of(&render_ok(&t)),
            expect(&[("stable-v0", &["a0.1.0"])])
        );
    }

    #[test]
    fn same_bundle_in_two_archetypes_gets_independent_edges() {
        let t = SemverTemplate {
            candidate: list("a", &["1.0.0", "1.1.0"]),
            stable: list("a", &["1.1.0"]),
            ..template(false, true, "")
        };
        let cfg = render_ok(&t);
        let want: &[(&str, &[&str])] = &[
            ("candidate-v1.0", &["a1.0.0"]),
            ("candidate-v1.1", &["a1.1.0>a1.0.0"]),
            ("stable-v1.1", &["a1.1.0"]),
        ];
        assert_eq!(channels_of(&cfg), expect(want));
        assert_eq!(cfg.bundles.len(), 2);
        assert_eq!(cfg.packages[0].default_channel, "stable-v1.1");
    }

    #[test]
    fn default_channel_choice() {
        // (template, expected default channel)
        let cases = vec![
            // the most stable archetype wins over a higher version elsewhere
            (
                SemverTemplate {
                    candidate: list("a", &["5.0.0"]),
                    stable: list("a", &["1.0.0"]),
                    ..template(false, false, "")
                },
                "stable-v1.0",
            ),
            (
                SemverTemplate {
                    candidate: list("a", &["5.0.0"]),
                    fast: list("a", &["1.0.0"]),
                    ..template(false, false, "")
                },
                "fast-v1.0",
            ),
            (
                SemverTemplate {
                    candidate: list("a", &["5.0.0", "0.1.0"]),
                    ..template(false, false, "")
                },
                "candidate-v5.0",
            ),
            // then the highest version
            (
                SemverTemplate {
                    stable: list("a", &["2.0.0", "1.0.0", "1.9.0"]),
                    ..template(false, false, "")
                },
                "stable-v2.0",
            ),
            // then the preferred kind, on a tie
            (
                SemverTemplate {
                    stable: list("a", &["2.0.0"]),
                    ..template(true, true, "major")
                },
                "stable-v2",
            ),
            (
                SemverTemplate {
                    stable: list("a", &["2.0.0"]),
                    ..template(true, true, "minor")
                },
                "stable-v2.0",
            ),
            (
                SemverTemplate {
                    stable: list("a", &["2.0.0"]),
                    ..template(true, true, "")
                },
                "stable-v2.0",
            ),
            // opm compares channels when they are created: the minor channel opened by 2.1.0
            // beats stable-v2 (opened by 2.0.0) even though major is preferred.
            (
                SemverTemplate {
                    stable: list("a", &["2.0.0", "2.1.0"]),
                    ..template(true, true, "major")
                },
                "stable-v2.1",
            ),
            (
                SemverTemplate {
                    stable: list("a", &["2.0.0", "2.0.1"]),
                    ..template(true, true, "major")
                },
                "stable-v2",
            ),
        ];
        for (t, want) in cases {
            assert_eq!(render_ok(&t).packages[0].default_channel, want, "{t:?}");
        }
    }

    #[test]
    fn build_metadata_is_ignored_in_order_but_conflicts_are_errors() {
        // opm's TestBailOnVersionBuildMetadata
        let t = SemverTemplate {
            stable: list(
                "a",
                &[
                    "0.1.0",
                    "0.1.1",
                    "1.1.0",
                    "1.2.1",
                    "1.3.1",
                    "2.1.0",
                    "2.1.1",
                    "2.3.1",
                    "2.3.2",
                    "1.3.1-alpha",
                    "1.3.1-alpha+2001Jan21",
                    "1.3.1-alpha+2003May06",
                ],
            ),
            ..template(false, true, "")
        };
        let mut calls = Vec::new();
        let err = render(&t, &mut fake_resolve(&mut calls)).unwrap_err();
        assert!(
            matches!(
                err,
                TemplateError::BuildMetadataConflict {
                    archetype: "stable",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("a.v1.3.1-alpha+2001Jan21"),
            "{err}"
        );

        // The same versions in different archetypes are fine, and a build suffix alone orders
        // like the plain version.
        let t = SemverTemplate {
            candidate: list("a", &["1.1.0+b1"]),
            stable: list("a", &["1.1.0+b2", "1.0.0"]),
            ..template(false, true, "")
        };
        let cfg = render_ok(&t);
        let want: &[(&str, &[&str])] = &[
            ("candidate-v1.1", &["a1.1.0+b1"]),
            ("stable-v1.0", &["a1.0.0"]),
            ("stable-v1.1", &["a1.1.0+b2>a1.0.0"]),
        ];
        assert_eq!(channels_of(&cfg), expect(want));
    }

    #[test]
    fn render_errors() {
        fn err_of(
            t: &SemverTemplate,
            resolve: &mut dyn FnMut(&str) -> Result<Bundle, String>,
        ) -> TemplateError {
            render(t, resolve).unwrap_err()
        }
        let mut calls = Vec::new();
        let mut ok = fake_resolve(&mut calls);

        // no bundles
        assert_eq!(
            err_of(&template(false, false, ""), &mut ok),
            TemplateError::NoBundles
        );
        // unknown schema
        let t = SemverTemplate {
            schema: "olm.template.basic".into(),
            stable: list("a", &["1.0.0"]),
            ..Default::default()
        };
        assert_eq!(
            err_of(&t, &mut ok),
            TemplateError::UnknownSchema("olm.template.basic".into())
        );
        // preference for a kind that is not generated
        let t = SemverTemplate {
            stable: list("a", &["1.0.0"]),
            ..template(true, false, "minor")
        };
        assert!(matches!(
            err_of(&t, &mut ok),
            TemplateError::PreferenceMismatch { .. }
        ));
        // bundles of two packages
        let t = SemverTemplate {
            candidate: list("a", &["1.0.0"]),
            stable: list("b", &["1.0.0"]),
            ..template(false, false, "")
        };
        let e = err_of(&t, &mut ok);
        assert!(
            matches!(&e, TemplateError::PackageMismatch { found, expected, .. } if found == "b" && expected == "a"),
            "{e}"
        );
        assert!(e.to_string().contains("quay.io/foo/olm:b.v1.0.0"), "{e}");
        // a version that is not semver (blang rules: no leading v, no two-part versions)
        for bad in ["1.0", "01.0.0", "1.0.0-01"] {
            let t = SemverTemplate {
                stable: list("a", &[bad]),
                ..template(false, false, "")
            };
            let e = err_of(&t, &mut ok);
            assert!(
                matches!(&e, TemplateError::InvalidVersion { version, .. } if version == bad),
                "{e}"
            );
        }
        // the same bundle twice in one archetype
        let t = SemverTemplate {
            stable: list("a", &["1.0.0", "1.0.0"]),
            ..template(false, false, "")
        };
        assert!(matches!(
            err_of(&t, &mut ok),
            TemplateError::DuplicateEntry {
                archetype: "stable",
                ..
            }
        ));
        drop(ok);

        // resolve failures name the image
        let t = SemverTemplate {
            stable: list("a", &["1.0.0"]),
            ..template(false, false, "")
        };
        let e = err_of(&t, &mut |_: &str| Err("pull failed".to_string()));
        assert_eq!(
            e.to_string(),
            r#"bundle image "quay.io/foo/olm:a.v1.0.0": pull failed"#
        );
        // no olm.package property, or two
        let e = err_of(&t, &mut |img: &str| {
            Ok(Bundle {
                name: "x".into(),
                image: img.into(),
                ..Default::default()
            })
        });
        assert!(
            matches!(e, TemplateError::PackagePropertyCount { count: 0, .. }),
            "{e}"
        );
        let e = err_of(&t, &mut |img: &str| {
            let mut b = bundle("a", "1.0.0");
            b.image = img.into();
            b.properties.push(b.properties[0].clone());
            Ok(b)
        });
        assert!(
            matches!(e, TemplateError::PackagePropertyCount { count: 2, .. }),
            "{e}"
        );
        // two images rendering to one bundle name with different content
        let t = SemverTemplate {
            candidate: list("a", &["1.0.0"]),
            stable: list("a", &["1.0.1"]),
            ..template(false, false, "")
        };
        let e = err_of(&t, &mut |img: &str| {
            let mut b = bundle("a", "1.0.0");
            b.image = img.into();
            Ok(b)
        });
        assert!(matches!(e, TemplateError::ConflictingBundles { .. }), "{e}");
    }

    #[test]
    fn parse_template() {
        let text = "---\nschema: olm.semver\ngenerateMajorChannels: true\ncandidate:\n  bundles:\n  - image: quay.io/foo/olm:a.v1.0.0\nstable:\n  bundles:\n  - image: quay.io/foo/olm:a.v0.9.0\n";
        let t = parse(text).unwrap();
        assert!(t.generate_major_channels && !t.generate_minor_channels);
        assert_eq!(t.default_channel_type_preference, "major");
        assert_eq!(t.candidate.bundles[0].image, "quay.io/foo/olm:a.v1.0.0");
        assert!(t.fast.bundles.is_empty());

        // defaults: minor channels, preference minor
        let t = parse("schema: olm.semver\n").unwrap();
        assert!(t.generate_minor_channels && !t.generate_major_channels);
        assert_eq!(t.default_channel_type_preference, "minor");

        // JSON, and opm README's capitalised keys (Go matches field names case-insensitively)
        let t = parse(r#"{"Schema": "olm.semver", "GenerateMajorChannels": true, "GenerateMinorChannels": true, "Stable": {"Bundles": [{"Image": "x"}]}}"#).unwrap();
        assert_eq!(t.stable.bundles, vec![BundleEntry { image: "x".into() }]);
        assert_eq!(t.default_channel_type_preference, "minor");

        // through serde directly as well
        let t: SemverTemplate =
            serde_yaml::from_str("schema: olm.semver\nfast: {bundles: [{image: y}]}\n").unwrap();
        assert_eq!(t.fast.bundles[0].image, "y");

        // null fields are unset
        let t = parse("schema: olm.semver\ncandidate:\nfast: {bundles: null}\n").unwrap();
        assert!(t.candidate.bundles.is_empty() && t.fast.bundles.is_empty());
    }

    #[test]
    fn parse_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "schema: olm.semver\ninvalid:\n  bundles: []\n",
                "unknown field \"invalid\"",
            ),
            (
                "schema: olm.semver\nstable:\n  bundles:\n  - image: x\n    tag: y\n",
                "unknown field \"tag\"",
            ),
            (
                "schema: olm.template.basic\n",
                "schema \"olm.template.basic\"",
            ),
            ("", "schema \"\""),
            ("generateMajorChannels: true\n", "schema \"\""),
            (
                "schema: olm.semver\ngenerateMajorChannels: true\ndefaultChannelTypePreference: minor\n",
                "generateMinorChannels",
            ),
            (
                "schema: olm.semver\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
                "generateMajorChannels",
            ),
            (
                "schema: olm.semver\ndefaultChannelTypePreference: foo\n",
                "unknown defaultChannelTypePreference \"foo\"",
            ),
            (
                "schema: olm.semver\ngenerateMajorChannels: \"true\"\n",
                "generateMajorChannels must be true or false",
            ),
            (
                "schema: olm.semver\nstable: [x]\n",
                "stable must be a mapping",
            ),
            ("- schema: olm.semver\n", "must be a mapping"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn package_metadata_from_head_bundle_csv() {
        fn with_csv(mut b: Bundle, description: &str, icon_data: &str) -> Bundle {
            let csv = json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion",
                "metadata": {"name": b.name},
                "spec": {"description": description, "icon": [{"base64data": icon_data, "mediatype": "image/svg+xml"}, {"base64data": "", "mediatype": "x"}]},
            });
            let data = general_purpose::STANDARD.encode(serde_json::to_vec(&csv).unwrap());
            b.properties
                .push(Property::new(PROP_BUNDLE_OBJECT, json!({ "data": data })));
            b
        }
        let t = SemverTemplate {
            stable: list("a", &["1.0.0", "1.1.0"]),
            ..template(true, false, "")
        };
        let mut resolve = |img: &str| -> Result<Bundle, String> {
            Ok(if img.ends_with("1.1.0") {
                with_csv(bundle("a", "1.1.0"), "New description", "aGVsbG93b3JsZA==")
            } else {
                with_csv(bundle("a", "1.0.0"), "Old description", "b2xkZGF0YQ==")
            })
        };
        let cfg = render(&t, &mut resolve).unwrap();
        let pkg = &cfg.packages[0];
        assert_eq!(pkg.default_channel, "stable-v1");
        assert_eq!(pkg.description, "New description");
        assert_eq!(
            pkg.icon,
            Some(Icon {
                base64data: "aGVsbG93b3JsZA==".into(),
                mediatype: "image/svg+xml".into()
            })
        );

        // Bad icon data means no icon, but the description still comes through.
        let mut resolve = |_: &str| Ok(with_csv(bundle("a", "1.0.0"), "D", "not base64!"));
        let t = SemverTemplate {
            stable: list("a", &["1.0.0"]),
            ..template(false, false, "")
        };
        let cfg = render(&t, &mut resolve).unwrap();
        assert_eq!(cfg.packages[0].description, "D");
        assert_eq!(cfg.packages[0].icon, None);

        // Without a CSV object, olm.csv.metadata gives the description.
        let mut resolve = |_: &str| {
            let mut b = bundle("a", "1.0.0");
            b.properties.push(Property::new(
                PROP_CSV_METADATA,
                json!({"description": "From metadata"}),
            ));
            Ok(b)
        };
        let cfg = render(&t, &mut resolve).unwrap();
        assert_eq!(cfg.packages[0].description, "From metadata");
        assert_eq!(cfg.packages[0].icon, None);

        // Without either, nothing.
        let cfg = render_ok(&t);
        assert_eq!(cfg.packages[0].description, "");
        assert_eq!(cfg.packages[0].icon, None);
    }
}
