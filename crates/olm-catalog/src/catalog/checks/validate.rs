//! Validation of a whole catalog, rule for rule as `opm validate`; every problem names the
//! package, channel or bundle and the rule it breaks.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::catalog::model::fbc::*;
use crate::catalog::model::semver_range::{VersionRange, parse_version};
use crate::catalog::model::upgrade_edges::{HeadError, UpgradeEdges};

/// The rules, named so tools can match on them (`olm catalog validate -o json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    PackageName,
    DuplicatePackage,
    DefaultChannel,
    NoChannels,
    Icon,
    UnknownPackage,
    ChannelName,
    DuplicateChannel,
    DuplicateEntry,
    NoEntries,
    ChannelHead,
    ReplacesCycle,
    StrandedEntries,
    DuplicateBundle,
    PackageProperty,
    Version,
    DuplicateVersion,
    NotInChannel,
    UnknownBundle,
    EmptySkip,
    SkipRange,
    NoImageOrObjects,
    ImageReference,
    Deprecation,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::PackageName => "package-name",
            Rule::DuplicatePackage => "duplicate-package",
            Rule::DefaultChannel => "default-channel",
            Rule::NoChannels => "no-channels",
            Rule::Icon => "icon",
            Rule::UnknownPackage => "unknown-package",
            Rule::ChannelName => "channel-name",
            Rule::DuplicateChannel => "duplicate-channel",
            Rule::DuplicateEntry => "duplicate-entry",
            Rule::NoEntries => "no-entries",
            Rule::ChannelHead => "channel-head",
            Rule::ReplacesCycle => "replaces-cycle",
            Rule::StrandedEntries => "stranded-entries",
            Rule::DuplicateBundle => "duplicate-bundle",
            Rule::PackageProperty => "package-property",
            Rule::Version => "version",
            Rule::DuplicateVersion => "duplicate-version",
            Rule::NotInChannel => "not-in-channel",
            Rule::UnknownBundle => "unknown-bundle",
            Rule::EmptySkip => "empty-skip",
            Rule::SkipRange => "skip-range",
            Rule::NoImageOrObjects => "no-image-or-objects",
            Rule::ImageReference => "image-reference",
            Rule::Deprecation => "deprecation",
        }
    }
}

/// One broken rule, located by package, channel and bundle.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Problem {
    pub package: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    pub rule: Rule,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "package {:?}", self.package)?;
        if let Some(c) = &self.channel {
            write!(f, ", channel {c:?}")?;
        }
        if let Some(b) = &self.bundle {
            write!(f, ", bundle {b:?}")?;
        }
        write!(f, ": {} [{}]", self.message, self.rule.as_str())
    }
}

pub fn is_dns1123_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

struct Report {
    problems: Vec<Problem>,
}

impl Report {
    fn add(
        &mut self,
        package: &str,
        channel: Option<&str>,
        bundle: Option<&str>,
        rule: Rule,
        message: String,
    ) {
        self.problems.push(Problem {
            package: package.to_string(),
            channel: channel.map(String::from),
            bundle: bundle.map(String::from),
            rule,
            message,
        });
    }
}

/// Every problem in the catalog; empty means valid.
pub fn validate(config: &DeclarativeConfig) -> Vec<Problem> {
    let mut report = Report {
        problems: Vec::new(),
    };
    let packages = index_packages(config, &mut report);
    let channels = index_channels(config, &packages, &mut report);
    check_default_channels(&packages, &channels, &mut report);
    let bundles = index_bundles(config, &packages, &mut report);
    for (package, pkg_channels) in &channels {
        let pkg_bundles = bundles.get(package);
        for (channel, c) in pkg_channels {
            validate_channel(&mut report, package, channel, c, pkg_bundles);
        }
    }
    for (package, pkg_bundles) in &bundles {
        validate_package_bundles(&mut report, package, pkg_bundles, channels.get(package));
    }
    validate_deprecations(&mut report, config, &channels, &bundles);
    report.problems.sort();
    report.problems.dedup();
    report.problems
}

type ChannelsByPackage<'a> = BTreeMap<&'a str, BTreeMap<&'a str, &'a Channel>>;
type BundlesByPackage<'a> = BTreeMap<&'a str, BTreeMap<&'a str, &'a Bundle>>;

/// Packages by name: names set, unique and DNS-1123; icons readable.
fn index_packages<'a>(
    config: &'a DeclarativeConfig,
    report: &mut Report,
) -> BTreeMap<&'a str, &'a Package> {
    let mut packages: BTreeMap<&str, &Package> = BTreeMap::new();
    for p in &config.packages {
        if p.name.is_empty() {
            report.add(
                "",
                None,
                None,
                Rule::PackageName,
                "package name must be set".into(),
            );
            continue;
        }
        if packages.insert(p.name.as_str(), p).is_some() {
            report.add(
                &p.name,
                None,
                None,
                Rule::DuplicatePackage,
                "package is defined more than once".into(),
            );
        }
        if !is_dns1123_label(&p.name) {
            report.add(
                &p.name,
                None,
                None,
                Rule::PackageName,
                format!("package name {:?} is not a valid DNS-1123 label", p.name),
            );
        }
        if let Some(icon) = &p.icon
            && let Err(e) = check_icon_data(icon)
        {
            report.add(&p.name, None, None, Rule::Icon, e.to_string());
        }
    }
    packages
}

/// Channels by package: named, unique, of a known package.
fn index_channels<'a>(
    config: &'a DeclarativeConfig,
    packages: &BTreeMap<&str, &Package>,
    report: &mut Report,
) -> ChannelsByPackage<'a> {
    let mut channels: BTreeMap<&str, BTreeMap<&str, &Channel>> = BTreeMap::new();
    for c in &config.channels {
        if !packages.contains_key(c.package.as_str()) {
            report.add(
                &c.package,
                Some(&c.name),
                None,
                Rule::UnknownPackage,
                format!(
                    "channel {:?} belongs to unknown package {:?}",
                    c.name, c.package
                ),
            );
            continue;
        }
        if c.name.is_empty() {
            report.add(
                &c.package,
                None,
                None,
                Rule::ChannelName,
                "channel name must be set".into(),
            );
            continue;
        }
        if channels
            .entry(c.package.as_str())
            .or_default()
            .insert(c.name.as_str(), c)
            .is_some()
        {
            report.add(
                &c.package,
                Some(&c.name),
                None,
                Rule::DuplicateChannel,
                "channel is defined more than once".into(),
            );
        }
    }
    channels
}

/// Every package has channels and a default channel that is one of them.
fn check_default_channels(
    packages: &BTreeMap<&str, &Package>,
    channels: &ChannelsByPackage<'_>,
    report: &mut Report,
) {
    for (name, package) in packages {
        let pkg_channels = channels.get(name);
        if pkg_channels.is_none_or(std::collections::BTreeMap::is_empty) {
            report.add(
                name,
                None,
                None,
                Rule::NoChannels,
                "package has no channels".into(),
            );
        }
        if package.default_channel.is_empty() {
            report.add(
                name,
                None,
                None,
                Rule::DefaultChannel,
                "defaultChannel must be set".into(),
            );
        } else if pkg_channels
            .is_some_and(|c| !c.is_empty() && !c.contains_key(package.default_channel.as_str()))
        {
            report.add(
                name,
                None,
                None,
                Rule::DefaultChannel,
                format!(
                    "defaultChannel {:?} is not a channel of the package",
                    package.default_channel
                ),
            );
        }
    }
}

/// Bundles by package: of a known package, unique.
fn index_bundles<'a>(
    config: &'a DeclarativeConfig,
    packages: &BTreeMap<&str, &Package>,
    report: &mut Report,
) -> BundlesByPackage<'a> {
    let mut bundles: BTreeMap<&str, BTreeMap<&str, &Bundle>> = BTreeMap::new();
    for b in &config.bundles {
        if !packages.contains_key(b.package.as_str()) {
            report.add(
                &b.package,
                None,
                Some(&b.name),
                Rule::UnknownPackage,
                format!(
                    "bundle {:?} belongs to unknown package {:?}",
                    b.name, b.package
                ),
            );
            continue;
        }
        if bundles
            .entry(b.package.as_str())
            .or_default()
            .insert(b.name.as_str(), b)
            .is_some()
        {
            report.add(
                &b.package,
                None,
                Some(&b.name),
                Rule::DuplicateBundle,
                "bundle is defined more than once".into(),
            );
        }
    }
    bundles
}

/// A package's bundles: one olm.package property naming it with a semver version (no two
/// bundles sharing one), in a channel, with an image or objects, and valid image references.
fn validate_package_bundles(
    report: &mut Report,
    package: &str,
    pkg_bundles: &BTreeMap<&str, &Bundle>,
    pkg_channels: Option<&BTreeMap<&str, &Channel>>,
) {
    let mut versions: HashMap<String, Vec<&str>> = HashMap::new();
    let in_channels: HashSet<&str> = pkg_channels
        .into_iter()
        .flat_map(|cs| cs.values())
        .flat_map(|c| c.entries.iter().map(|e| e.name.as_str()))
        .collect();
    for (name, b) in pkg_bundles {
        let bundle = Some(*name);
        if let Some(version) = package_version(report, package, name, b) {
            versions.entry(version).or_default().push(name);
        }
        if !in_channels.contains(name) {
            report.add(
                package,
                None,
                bundle,
                Rule::NotInChannel,
                "bundle is not in any channel".into(),
            );
        }
        let has_objects = b.properties_of(PROP_BUNDLE_OBJECT).next().is_some();
        if b.image.is_empty() && !has_objects {
            report.add(
                package,
                None,
                bundle,
                Rule::NoImageOrObjects,
                "bundle has neither an image nor olm.bundle.object properties".into(),
            );
        }
        if !b.image.is_empty()
            && let Err(e) = check_image_reference(&b.image)
        {
            report.add(
                package,
                None,
                bundle,
                Rule::ImageReference,
                format!("image {:?}: {e}", b.image),
            );
        }
        // An empty related image is kept (as opm renders it) and only warned about:
        // opm validate accepts it.
        for r in b.related_images.iter().filter(|r| !r.image.is_empty()) {
            if let Err(e) = check_image_reference(&r.image) {
                report.add(
                    package,
                    None,
                    bundle,
                    Rule::ImageReference,
                    format!("related image {:?}: {e}", r.image),
                );
            }
        }
    }
    let mut duplicates: Vec<_> = versions
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .collect();
    duplicates.sort();
    for (version, mut names) in duplicates {
        names.sort();
        report.add(
            package,
            None,
            None,
            Rule::DuplicateVersion,
            format!("bundles {} share version {version}", names.join(", ")),
        );
    }
}

/// A bundle's one `olm.package` property: it must name `package` and carry a semver
/// version; returns that version without build metadata (what duplicates are judged by).
fn package_version(report: &mut Report, package: &str, name: &str, b: &Bundle) -> Option<String> {
    let bundle = Some(name);
    let package_props: Vec<_> = b.properties_of(PROP_PACKAGE).collect();
    match package_props.as_slice() {
        [one] => {
            let prop_package = one
                .get("packageName")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            if prop_package != package {
                report.add(
                    package,
                    None,
                    bundle,
                    Rule::PackageProperty,
                    format!(
                        "olm.package property names package {prop_package:?}, expected {package:?}"
                    ),
                );
            }
            let version = one
                .get("version")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            match parse_version(version) {
                Ok(mut key) => {
                    key.build = semver::BuildMetadata::EMPTY;
                    return Some(key.to_string());
                }
                Err(e) => report.add(
                    package,
                    None,
                    bundle,
                    Rule::Version,
                    format!("version {version:?} is not semver: {e}"),
                ),
            }
        }
        [] => report.add(
            package,
            None,
            bundle,
            Rule::PackageProperty,
            "bundle has no olm.package property".into(),
        ),
        _ => report.add(
            package,
            None,
            bundle,
            Rule::PackageProperty,
            format!(
                "bundle has {} olm.package properties, expected exactly one",
                package_props.len()
            ),
        ),
    }
    None
}

fn validate_channel(
    report: &mut Report,
    package: &str,
    channel: &str,
    c: &Channel,
    bundles: Option<&BTreeMap<&str, &Bundle>>,
) {
    let ch = Some(channel);
    if c.entries.is_empty() {
        report.add(
            package,
            ch,
            None,
            Rule::NoEntries,
            "channel has no entries".into(),
        );
        return;
    }
    let names = validate_entries(report, package, ch, c, bundles);
    let edges = UpgradeEdges::new(&c.entries);
    let head = match edges.head() {
        Ok(head) => head,
        Err(HeadError::NoHead) => {
            report.add(
                package,
                ch,
                None,
                Rule::ChannelHead,
                "no channel head: every entry is replaced or skipped by another".into(),
            );
            return;
        }
        Err(HeadError::MultipleHeads(many)) => {
            report.add(
                package,
                ch,
                None,
                Rule::ChannelHead,
                format!("multiple channel heads: {}", many.join(", ")),
            );
            return;
        }
    };
    if let Err(cycle) = edges.replaces_chain(head) {
        report.add(
            package,
            ch,
            None,
            Rule::ReplacesCycle,
            format!("cycle in the replaces chain: {}", cycle.join(" -> ")),
        );
        return;
    }
    let stranded = stranded_entries(c, head, &names);
    if !stranded.is_empty() {
        report.add(
            package,
            ch,
            None,
            Rule::StrandedEntries,
            format!(
                "entries not reachable from head {head:?} through replaces and not skipped: {}",
                stranded.join(", ")
            ),
        );
    }
}

/// Each entry of channel `c` on its own: named once, naming a bundle, skips and skipRange
/// well formed. Returns the entries' names.
fn validate_entries<'c>(
    report: &mut Report,
    package: &str,
    ch: Option<&str>,
    c: &'c Channel,
    bundles: Option<&BTreeMap<&str, &Bundle>>,
) -> BTreeSet<&'c str> {
    let mut names = BTreeSet::new();
    for e in &c.entries {
        if !names.insert(e.name.as_str()) {
            report.add(
                package,
                ch,
                Some(&e.name),
                Rule::DuplicateEntry,
                "entry appears more than once in the channel".into(),
            );
        }
        if !bundles.is_some_and(|b| b.contains_key(e.name.as_str())) {
            report.add(
                package,
                ch,
                Some(&e.name),
                Rule::UnknownBundle,
                "channel entry names a bundle that does not exist".into(),
            );
        }
        if e.skips.iter().any(std::string::String::is_empty) {
            report.add(
                package,
                ch,
                Some(&e.name),
                Rule::EmptySkip,
                "skips contains an empty name".into(),
            );
        }
        if !e.skip_range.is_empty()
            && let Err(err) = VersionRange::parse(&e.skip_range)
        {
            report.add(
                package,
                ch,
                Some(&e.name),
                Rule::SkipRange,
                format!("invalid skipRange: {err}"),
            );
        }
    }
    names
}

/// As opm walks a channel: down `replaces` from the head, collecting what the entries on
/// the way skip, and stopping at an entry one of them skipped. Whatever is neither on that
/// walk nor skipped along it is stranded (skips of entries off the walk do not count).
fn stranded_entries<'a>(c: &'a Channel, head: &str, names: &BTreeSet<&'a str>) -> Vec<&'a str> {
    let by_name: HashMap<&str, &ChannelEntry> =
        c.entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut on_chain: HashSet<&str> = HashSet::new();
    let mut skipped: HashSet<&str> = HashSet::new();
    let mut current = by_name.get(head).copied();
    while let Some(entry) = current {
        if skipped.contains(entry.name.as_str()) || !on_chain.insert(entry.name.as_str()) {
            break;
        }
        skipped.extend(entry.skips.iter().map(String::as_str));
        current = by_name.get(entry.replaces.as_str()).copied();
    }
    names
        .iter()
        .copied()
        .filter(|n| !on_chain.contains(n) && !skipped.contains(n))
        .collect()
}

fn validate_deprecations(
    report: &mut Report,
    config: &DeclarativeConfig,
    channels: &BTreeMap<&str, BTreeMap<&str, &Channel>>,
    bundles: &BTreeMap<&str, BTreeMap<&str, &Bundle>>,
) {
    let mut seen = HashSet::new();
    for d in &config.deprecations {
        let package = d.package.as_str();
        if !seen.insert(package) {
            report.add(
                package,
                None,
                None,
                Rule::Deprecation,
                "more than one olm.deprecations blob for the package".into(),
            );
        }
        if !channels.contains_key(package)
            && !bundles.contains_key(package)
            && !config.packages.iter().any(|p| p.name == package)
        {
            report.add(
                package,
                None,
                None,
                Rule::UnknownPackage,
                "olm.deprecations names an unknown package".into(),
            );
            continue;
        }
        for entry in &d.entries {
            let name = entry.reference.name.as_str();
            if entry.message.is_empty() {
                report.add(
                    package,
                    None,
                    None,
                    Rule::Deprecation,
                    format!(
                        "deprecation of {} {name:?} has an empty message",
                        entry.reference.schema
                    ),
                );
            }
            match entry.reference.schema.as_str() {
                SCHEMA_PACKAGE if !name.is_empty() => report.add(
                    package,
                    None,
                    None,
                    Rule::Deprecation,
                    "a package deprecation must not set a name".into(),
                ),
                SCHEMA_PACKAGE => {}
                SCHEMA_CHANNEL if !channels.get(package).is_some_and(|c| c.contains_key(name)) => {
                    report.add(
                        package,
                        Some(name),
                        None,
                        Rule::Deprecation,
                        "deprecation names an unknown channel".into(),
                    );
                }
                SCHEMA_BUNDLE if !bundles.get(package).is_some_and(|b| b.contains_key(name)) => {
                    report.add(
                        package,
                        None,
                        Some(name),
                        Rule::Deprecation,
                        "deprecation names an unknown bundle".into(),
                    );
                }
                SCHEMA_CHANNEL | SCHEMA_BUNDLE => {}
                other => report.add(
                    package,
                    None,
                    None,
                    Rule::Deprecation,
                    format!("deprecation reference has unknown schema {other:?}"),
                ),
            }
        }
    }
}

/// What opm checks of an icon: its data decodes as Go decodes `[]byte` (padded standard
/// base64; line breaks skipped, nothing else).
fn check_icon_data(icon: &Icon) -> Result<(), IconError> {
    crate::catalog::text::go_json::decode_bytes(&icon.base64data)
        .map(drop)
        .map_err(IconError::NotBase64)
}

/// What is wrong with a package icon.
#[derive(Debug, thiserror::Error)]
enum IconError {
    #[error("icon data is not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    #[error("icon data is not an image of a known type (mediatype {0:?})")]
    UnknownType(String),
    #[error("icon mediatype {mediatype:?} does not match its data ({sniffed})")]
    Mismatch {
        mediatype: String,
        sniffed: &'static str,
    },
}

/// Checks opm does not make (its icon checks are disabled upstream, as production catalogs
/// fail them), reported as warnings so authors still learn about them: an icon whose data
/// is not an image of a known type, or whose mediatype does not match the data; a related
/// image with no image (nothing to mirror or pull).
pub fn warnings(config: &DeclarativeConfig) -> Vec<Problem> {
    let mut report = Report {
        problems: Vec::new(),
    };
    for p in &config.packages {
        if let Some(icon) = &p.icon
            && let Err(e) = check_icon_type(icon)
        {
            report.add(&p.name, None, None, Rule::Icon, e.to_string());
        }
    }
    for b in &config.bundles {
        for r in b.related_images.iter().filter(|r| r.image.is_empty()) {
            report.add(
                &b.package,
                None,
                Some(&b.name),
                Rule::ImageReference,
                format!("related image {:?} has an empty image", r.name),
            );
        }
    }
    report.problems
}

fn check_icon_type(icon: &Icon) -> Result<(), IconError> {
    if icon.base64data.is_empty() && icon.mediatype.is_empty() {
        return Ok(());
    }
    let Ok(data) = crate::catalog::text::go_json::decode_bytes(&icon.base64data) else {
        return Ok(()); // an error, reported by validate
    };
    let sniffed = if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if data.starts_with(b"\xff\xd8\xff") {
        "image/jpeg"
    } else if data.starts_with(b"GIF8") {
        "image/gif"
    } else if String::from_utf8_lossy(&data[..data.len().min(1024)]).contains("<svg") {
        "image/svg+xml"
    } else {
        return Err(IconError::UnknownType(icon.mediatype.clone()));
    };
    if !icon.mediatype.eq_ignore_ascii_case(sniffed) {
        return Err(IconError::Mismatch {
            mediatype: icon.mediatype.clone(),
            sniffed,
        });
    }
    Ok(())
}

/// Why an image pull spec does not fit the reference grammar.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageReferenceError {
    #[error("digest must be algorithm:hex")]
    DigestForm,
    #[error("invalid digest {0:?}")]
    Digest(String),
    #[error("invalid tag {0:?}")]
    Tag(String),
    #[error("empty repository name")]
    EmptyRepository,
    #[error("empty registry host")]
    EmptyHost,
    #[error("invalid repository path component {0:?}")]
    PathComponent(String),
}

/// Checks an image pull spec against the reference grammar: `[host[:port]/]path[:tag][@digest]`.
pub fn check_image_reference(image: &str) -> Result<(), ImageReferenceError> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let (algo, hex) = d.split_once(':').ok_or(ImageReferenceError::DigestForm)?;
        if algo.is_empty() || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ImageReferenceError::Digest(d.into()));
        }
    }
    let (path, tag) = match name.rsplit_once(':') {
        Some((p, t)) if !t.contains('/') => (p, Some(t)),
        _ => (name, None),
    };
    if let Some(t) = tag
        && (t.is_empty()
            || t.len() > 128
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            || !t.as_bytes()[0].is_ascii_alphanumeric() && t.as_bytes()[0] != b'_')
    {
        return Err(ImageReferenceError::Tag(t.into()));
    }
    if path.is_empty() {
        return Err(ImageReferenceError::EmptyRepository);
    }
    let mut components: Vec<&str> = path.split('/').collect();
    if components.len() > 1
        && (components[0].contains('.')
            || components[0].contains(':')
            || components[0] == "localhost")
    {
        let host = components.remove(0);
        if host.is_empty() {
            return Err(ImageReferenceError::EmptyHost);
        }
    }
    for c in components {
        let ok = !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && c.as_bytes()[0].is_ascii_alphanumeric()
            && c.as_bytes()[c.len() - 1].is_ascii_alphanumeric();
        if !ok {
            return Err(ImageReferenceError::PathComponent(c.into()));
        }
    }
    Ok(())
}
