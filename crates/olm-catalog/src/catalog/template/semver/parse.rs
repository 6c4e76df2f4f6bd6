//! Reading a template as opm's strict Go JSON decoding does: YAML or JSON, field names
//! matched without regard to case, unknown fields rejected.

use std::collections::HashMap;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::model::{
    BundleEntry, ChannelBundles, FieldError, Kind, PREFER_MAJOR, PREFER_MINOR, SemverTemplate,
    TemplateError,
};
use crate::catalog::model::fbc::json_kind;
use crate::catalog::text::go_json;

/// Parses a template from YAML or JSON, checks `schema` and the channel-kind settings, and
/// fills in the defaults as opm does (minor channels when neither kind is asked for; the
/// preference follows the generated kind, minor first).
pub fn parse(text: &str) -> Result<SemverTemplate, TemplateError> {
    let value = if let Ok(v) = serde_json::from_str::<Value>(text) {
        v
    } else {
        // Like Go's yaml.Unmarshal, read the first document only.
        crate::catalog::text::yaml_nesting::check(text.as_bytes())
            .map_err(|deep| TemplateError::Syntax(deep.located()))?;
        match serde_yaml::Deserializer::from_str(text).next() {
            None => Value::Null,
            Some(doc) => {
                Value::deserialize(doc).map_err(|e| TemplateError::Syntax(e.to_string()))?
            }
        }
    };
    let mut template = SemverTemplate::from_value(value)?;
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

impl SemverTemplate {
    fn from_value(value: Value) -> Result<Self, FieldError> {
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
    fn from_value(value: Value, archetype: &str) -> Result<Self, FieldError> {
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
                .collect::<Result<_, FieldError>>()?,
            Some(other) => {
                return Err(FieldError::NotAList {
                    archetype: archetype.into(),
                    found: json_kind(&other),
                });
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
) -> Result<HashMap<&'static str, Value>, FieldError> {
    let object = match value {
        Value::Null => Map::new(),
        Value::Object(o) => o,
        other => {
            return Err(FieldError::NotAMapping {
                what: what.into(),
                found: json_kind(&other),
            });
        }
    };
    let mut out = HashMap::new();
    for (key, v) in object {
        let name = go_json::field_name(names, &key).ok_or_else(|| FieldError::Unknown {
            what: what.into(),
            key: key.clone(),
        })?;
        if !v.is_null() {
            out.insert(name, v);
        }
    }
    Ok(out)
}

fn string_field(
    fields: &mut HashMap<&'static str, Value>,
    name: &'static str,
) -> Result<String, FieldError> {
    match fields.remove(name) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(FieldError::NotAString {
            name,
            found: json_kind(&other),
        }),
    }
}

fn bool_field(
    fields: &mut HashMap<&'static str, Value>,
    name: &'static str,
) -> Result<bool, FieldError> {
    match fields.remove(name) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(other) => Err(FieldError::NotABool {
            name,
            found: json_kind(&other),
        }),
    }
}
