//! Rendering a template: each image's bundle once, opm's checks of packages and versions,
//! then the channels ([`super::channels`]) and the package with its metadata.

use std::collections::HashMap;

use semver::Version;
use serde_json::Value;

use super::channels::generate_channels;
use super::model::{Archetype, SemverTemplate, TemplateError};
use crate::catalog::bundles::csv::{bundle_csv, first_icon_as_opm};
use crate::catalog::model::fbc::{
    Bundle, Channel, DeclarativeConfig, PROP_CSV_METADATA, PROP_PACKAGE, Package, SCHEMA_PACKAGE,
    json_kind,
};
use crate::catalog::model::semver_range::blang_parse;
use crate::catalog::text::go_json;

/// Renders the template into FBC. `resolve(image)` turns each distinct bundle image into its
/// `olm.bundle` (opm pulls and renders the image); each is called once, in template order.
/// Its error, the caller's own, is told as [`TemplateError::Resolve`].
pub fn render<E: std::fmt::Display>(
    template: &SemverTemplate,
    resolve: &mut dyn FnMut(&str) -> Result<Bundle, E>,
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
            let bundle = resolve(image).map_err(|e| TemplateError::Resolve {
                image: image.into(),
                message: e.to_string(),
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
                blang_parse(&version_text).map_err(|error| TemplateError::InvalidVersion {
                    bundle: bundle.name.clone(),
                    image: image.clone(),
                    version: version_text.clone(),
                    error,
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
