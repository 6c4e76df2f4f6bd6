//! Reading the ConfigMap's lists: YAML, items decoded as Go decodes them (keys without
//! regard to case), every problem named by key, index and item name.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::{Map, Value, json};

use super::error::{Error, KEY_CRDS, KEY_CSVS, KEY_PACKAGES, item_error};
use crate::catalog::bundles::bundle::SKIP_RANGE_ANNOTATION;
use crate::catalog::model::fbc::json_kind;
use crate::catalog::text::{go_json, yaml_nesting};

/// A key's YAML list; an empty value is an empty list (as upstream reads it).
pub(super) fn parse_list(
    data: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Vec<Value>, Error> {
    let text = data.get(key).ok_or(Error::MissingKey { key })?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    if let Err(deep) = yaml_nesting::check(text.as_bytes()) {
        return Err(Error::Yaml {
            key,
            line: Some(deep.line),
            message: deep.to_string(),
        });
    }
    let value: Value = serde_yaml::from_str(text).map_err(|e| {
        let location = e.location();
        let mut message = e.to_string();
        if let Some(l) = &location {
            // The line is in the error already; drop the message's own mention of it.
            let at = format!(" at line {} column {}", l.line(), l.column());
            message = message.replacen(&at, "", 1);
        }
        Error::Yaml {
            key,
            line: location.map(|l| l.line()),
            message,
        }
    })?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => Ok(items),
        other => Err(Error::NotAList {
            key,
            found: json_kind(&other).into(),
        }),
    }
}

/// A field of the wrong type; the caller puts the path to it in front.
#[derive(Debug, thiserror::Error)]
enum FieldError {
    #[error("{key} must be a string, not {found}")]
    NotAString { key: String, found: &'static str },
    #[error("{key} must be a list, not {found}")]
    NotAList { key: String, found: &'static str },
}

/// An optional string field: absent and null read as "".
fn opt_str(map: Option<&Map<String, Value>>, key: &str) -> Result<String, FieldError> {
    match map.and_then(|m| go_json::get(m, key)) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(FieldError::NotAString {
            key: key.into(),
            found: json_kind(other),
        }),
    }
}

fn opt_object<'a>(
    map: Option<&'a Map<String, Value>>,
    key: &str,
) -> Option<&'a Map<String, Value>> {
    map.and_then(|m| go_json::get(m, key))
        .and_then(Value::as_object)
}

fn opt_list<'a>(map: Option<&'a Map<String, Value>>, key: &str) -> Result<&'a [Value], FieldError> {
    match map.and_then(|m| go_json::get(m, key)) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(FieldError::NotAList {
            key: key.into(),
            found: json_kind(other),
        }),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ApiKey {
    pub(super) group: String,
    pub(super) version: String,
    pub(super) kind: String,
    pub(super) plural: String,
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} (version {}, kind {})",
            self.plural, self.group, self.version, self.kind
        )
    }
}

pub(super) struct Crd {
    pub(super) name: String,
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) plural: String,
    pub(super) versions: Vec<String>,
    pub(super) object: Value,
}

impl Crd {
    pub(super) fn parse(index: usize, object: Value) -> Result<Crd, Error> {
        let Some(map) = object.as_object() else {
            return Err(item_error(
                KEY_CRDS,
                index,
                "",
                format!("expected a CRD object, found {}", json_kind(&object)),
            ));
        };
        let metadata = go_json::get(map, "metadata").and_then(Value::as_object);
        let name = opt_str(metadata, "name").unwrap_or_default();
        let err = |m: String| item_error(KEY_CRDS, index, &name, m);
        let spec = go_json::get(map, "spec").and_then(Value::as_object);
        let names = opt_object(spec, "names");
        let group = opt_str(spec, "group").map_err(|m| err(format!("spec.{m}")))?;
        let kind = opt_str(names, "kind").map_err(|m| err(format!("spec.names.{m}")))?;
        let plural = opt_str(names, "plural").map_err(|m| err(format!("spec.names.{m}")))?;
        let mut versions = Vec::new();
        for v in opt_list(spec, "versions").map_err(|m| err(format!("spec.{m}")))? {
            let version =
                opt_str(v.as_object(), "name").map_err(|m| err(format!("spec.versions[].{m}")))?;
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        // apiextensions v1beta1's single `spec.version`.
        let legacy = opt_str(spec, "version").map_err(|m| err(format!("spec.{m}")))?;
        if !legacy.is_empty() && !versions.contains(&legacy) {
            versions.push(legacy);
        }
        Ok(Crd {
            name,
            group,
            kind,
            plural,
            versions,
            object,
        })
    }
}

pub(super) struct Csv {
    pub(super) index: usize,
    pub(super) name: String,
    pub(super) object: Value,
    pub(super) replaces: String,
    pub(super) skips: Vec<String>,
    pub(super) skip_range: String,
    /// Indexes into the CRD list, each once, in `owned` order.
    pub(super) owned_crds: Vec<usize>,
}

/// `<plural>.<group>` of a CSV's CRD description.
fn split_crd_name(name: &str) -> Option<(&str, &str)> {
    name.split_once('.')
}

impl Csv {
    pub(super) fn parse(
        index: usize,
        mut object: Value,
        crds: &HashMap<ApiKey, usize>,
    ) -> Result<Csv, Error> {
        let Some(map) = object.as_object_mut() else {
            return Err(item_error(
                KEY_CSVS,
                index,
                "",
                format!(
                    "expected a ClusterServiceVersion object, found {}",
                    json_kind(&object)
                ),
            ));
        };
        let metadata = go_json::get(map, "metadata").and_then(Value::as_object);
        let name = opt_str(metadata, "name").unwrap_or_default();
        let err = |m: String| item_error(KEY_CSVS, index, &name, m);
        if name.is_empty() {
            return Err(err("metadata.name is missing; a CSV needs a name".into()));
        }
        // Upstream's e2e CSVs carry their type; fill it in when a hand-written one does not,
        // so the object can be applied as it is.
        match go_json::get(map, "kind") {
            None | Some(Value::Null) => {
                map.insert("kind".into(), json!("ClusterServiceVersion"));
                map.entry("apiVersion")
                    .or_insert_with(|| json!("operators.coreos.com/v1alpha1"));
            }
            Some(Value::String(k)) if k == "ClusterServiceVersion" => {}
            Some(other) => {
                return Err(err(format!(
                    "kind is {other}, expected \"ClusterServiceVersion\""
                )));
            }
        }
        let map = &*map;
        let metadata = go_json::get(map, "metadata").and_then(Value::as_object);
        let spec = go_json::get(map, "spec").and_then(Value::as_object);
        let version = match spec.and_then(|s| go_json::get(s, "version")) {
            None | Some(Value::Null | Value::String(_)) => Ok(()),
            Some(other) => Err(err(format!(
                "spec.version must be a string, not {}",
                json_kind(other)
            ))),
        };
        version?;
        let replaces = opt_str(spec, "replaces").map_err(|m| err(format!("spec.{m}")))?;
        let mut skips = Vec::new();
        for s in opt_list(spec, "skips").map_err(|m| err(format!("spec.{m}")))? {
            match s.as_str() {
                Some(s) => skips.push(s.to_string()),
                None => return Err(err("spec.skips must be a list of CSV names".into())),
            }
        }
        let annotations = opt_object(metadata, "annotations");
        let skip_range = opt_str(annotations, SKIP_RANGE_ANNOTATION)
            .map_err(|m| err(format!("metadata.annotations.{m}")))?;

        let descriptions = opt_object(spec, "customresourcedefinitions");
        let owned_crds = owned_crds(descriptions, crds, &err)?;
        Ok(Csv {
            index,
            name,
            replaces,
            skips,
            skip_range,
            owned_crds,
            object,
        })
    }
}

/// The CRDs a CSV's descriptions own, as indexes into the catalog's CRDs; every owned and
/// required name must be `<plural>.<group>`, and every owned CRD among the catalog's.
fn owned_crds(
    descriptions: Option<&Map<String, Value>>,
    crds: &HashMap<ApiKey, usize>,
    err: &impl Fn(String) -> Error,
) -> Result<Vec<usize>, Error> {
    let mut owned_crds = Vec::new();
    for owned in opt_list(descriptions, "owned")
        .map_err(|m| err(format!("spec.customresourcedefinitions.{m}")))?
    {
        let o = owned.as_object();
        let crd_name = opt_str(o, "name").unwrap_or_default();
        let Some((plural, group)) = split_crd_name(&crd_name) else {
            return Err(err(format!(
                "owned CRD name {crd_name:?} is not <plural>.<group>"
            )));
        };
        let key = ApiKey {
            group: group.to_string(),
            version: opt_str(o, "version").unwrap_or_default(),
            kind: opt_str(o, "kind").unwrap_or_default(),
            plural: plural.to_string(),
        };
        let Some(&crd) = crds.get(&key) else {
            return Err(err(format!("owned CRD {key} is not among {KEY_CRDS}")));
        };
        if !owned_crds.contains(&crd) {
            owned_crds.push(crd);
        }
    }
    for required in opt_list(descriptions, "required")
        .map_err(|m| err(format!("spec.customresourcedefinitions.{m}")))?
    {
        let crd_name = opt_str(required.as_object(), "name").unwrap_or_default();
        if split_crd_name(&crd_name).is_none() {
            return Err(err(format!(
                "required CRD name {crd_name:?} is not <plural>.<group>"
            )));
        }
    }
    Ok(owned_crds)
}

pub(super) struct PackageManifest {
    pub(super) name: String,
    pub(super) default_channel: String,
    /// (name, currentCSV), in the listed order.
    pub(super) channels: Vec<(String, String)>,
}

impl PackageManifest {
    pub(super) fn parse(index: usize, item: &Value) -> Result<PackageManifest, Error> {
        let Some(map) = item.as_object() else {
            return Err(item_error(
                KEY_PACKAGES,
                index,
                "",
                format!("expected a package manifest, found {}", json_kind(item)),
            ));
        };
        let name = opt_str(Some(map), "packageName").unwrap_or_default();
        let err = |m: String| item_error(KEY_PACKAGES, index, &name, m);
        if name.is_empty() {
            return Err(err("packageName is missing".into()));
        }
        let default_channel =
            opt_str(Some(map), "defaultChannel").map_err(|e| err(e.to_string()))?;
        let mut channels = Vec::new();
        for (i, c) in opt_list(Some(map), "channels")
            .map_err(|e| err(e.to_string()))?
            .iter()
            .enumerate()
        {
            let Some(c) = c.as_object() else {
                return Err(err(format!("channels[{i}] is not a mapping")));
            };
            let channel =
                opt_str(Some(c), "name").map_err(|m| err(format!("channels[{i}].{m}")))?;
            let current =
                opt_str(Some(c), "currentCSV").map_err(|m| err(format!("channels[{i}].{m}")))?;
            if channel.is_empty() {
                return Err(err(format!("channels[{i}] has no name")));
            }
            if current.is_empty() {
                return Err(err(format!("channel {channel:?} has no currentCSV")));
            }
            channels.push((channel, current));
        }
        Ok(PackageManifest {
            name,
            default_channel,
            channels,
        })
    }

    /// Upstream's rule: a channel is the default when it is named by `defaultChannel`, or
    /// when it is the only channel.
    pub(super) fn default_channel(&self) -> Result<String, DefaultChannelError> {
        if let Some((name, _)) = self
            .channels
            .iter()
            .find(|(name, _)| *name == self.default_channel)
        {
            return Ok(name.clone());
        }
        match self.channels.as_slice() {
            [(only, _)] => Ok(only.clone()),
            [] => Err(DefaultChannelError::NoChannels),
            _ if self.default_channel.is_empty() => Err(DefaultChannelError::NoneOfSeveral),
            _ => Err(DefaultChannelError::NotAChannel(
                self.default_channel.clone(),
            )),
        }
    }
}

/// Why a package manifest has no default channel.
#[derive(Debug, thiserror::Error)]
pub(super) enum DefaultChannelError {
    #[error("the package has no channels")]
    NoChannels,
    #[error("no default channel specified, and the package has several channels")]
    NoneOfSeveral,
    #[error("defaultChannel {0:?} is not one of the package's channels")]
    NotAChannel(String),
}
