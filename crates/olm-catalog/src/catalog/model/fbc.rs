//! The file-based catalog (FBC) model: `olm.package`, `olm.channel`, `olm.bundle` and
//! `olm.deprecations` blobs, plus blobs of any other schema kept as they are.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SCHEMA_PACKAGE: &str = "olm.package";
pub const SCHEMA_CHANNEL: &str = "olm.channel";
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

pub const PROP_PACKAGE: &str = "olm.package";
pub const PROP_GVK: &str = "olm.gvk";
pub const PROP_GVK_REQUIRED: &str = "olm.gvk.required";
pub const PROP_PACKAGE_REQUIRED: &str = "olm.package.required";
pub const PROP_BUNDLE_OBJECT: &str = "olm.bundle.object";
pub const PROP_CSV_METADATA: &str = "olm.csv.metadata";
pub const PROP_CONSTRAINT: &str = "olm.constraint";
pub const PROP_DEPRECATED: &str = "olm.deprecated";

/// One blob of a catalog, borrowed, to write it without copying it into a `Value` first.
#[derive(Clone, Copy, Debug)]
pub enum BlobRef<'a> {
    Package(&'a Package),
    Channel(&'a Channel),
    Bundle(&'a Bundle),
    Deprecation(&'a Deprecation),
    Other(&'a Value),
}

impl Serialize for BlobRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BlobRef::Package(p) => p.serialize(s),
            BlobRef::Channel(c) => c.serialize(s),
            BlobRef::Bundle(b) => b.serialize(s),
            BlobRef::Deprecation(d) => d.serialize(s),
            BlobRef::Other(v) => v.serialize(s),
        }
    }
}

/// A whole catalog, in load order within each kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeclarativeConfig {
    pub packages: Vec<Package>,
    pub channels: Vec<Channel>,
    pub bundles: Vec<Bundle>,
    pub deprecations: Vec<Deprecation>,
    /// Blobs of other schemas, kept so that a catalog round-trips.
    pub others: Vec<Meta>,
}

impl DeclarativeConfig {
    pub fn merge(&mut self, other: DeclarativeConfig) {
        self.packages.extend(other.packages);
        self.channels.extend(other.channels);
        self.bundles.extend(other.bundles);
        self.deprecations.extend(other.deprecations);
        self.others.extend(other.others);
    }

    pub fn is_empty(&self) -> bool {
        self.packages.is_empty()
            && self.channels.is_empty()
            && self.bundles.is_empty()
            && self.deprecations.is_empty()
            && self.others.is_empty()
    }

    /// Every blob, packages first, each package followed by its channels, bundles
    /// and deprecations (the order `opm render` writes).
    pub fn blobs(&self) -> Vec<BlobRef<'_>> {
        let mut out = Vec::new();
        let mut package_names: Vec<&str> = self.packages.iter().map(|p| p.name.as_str()).collect();
        for name in self
            .channels
            .iter()
            .map(|c| c.package.as_str())
            .chain(self.bundles.iter().map(|b| b.package.as_str()))
        {
            if !package_names.contains(&name) {
                package_names.push(name);
            }
        }
        for name in package_names {
            for p in self.packages.iter().filter(|p| p.name == name) {
                out.push(BlobRef::Package(p));
            }
            for c in self.channels.iter().filter(|c| c.package == name) {
                out.push(BlobRef::Channel(c));
            }
            for b in self.bundles.iter().filter(|b| b.package == name) {
                out.push(BlobRef::Bundle(b));
            }
            for d in self.deprecations.iter().filter(|d| d.package == name) {
                out.push(BlobRef::Deprecation(d));
            }
        }
        for d in self
            .deprecations
            .iter()
            .filter(|d| !self.packages.iter().any(|p| p.name == d.package))
        {
            if !self.channels.iter().any(|c| c.package == d.package)
                && !self.bundles.iter().any(|b| b.package == d.package)
            {
                out.push(BlobRef::Deprecation(d));
            }
        }
        out.extend(self.others.iter().map(|m| BlobRef::Other(&m.blob)));
        out
    }

    /// Every blob as JSON, in the order of [`Self::blobs`].
    pub fn to_blobs(&self) -> Vec<Value> {
        self.blobs()
            .iter()
            .map(|b| serde_json::to_value(b).expect("blob serializes"))
            .collect()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    #[serde(default = "schema_package")]
    pub schema: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub default_channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Icon {
    #[serde(default)]
    pub base64data: String,
    #[serde(default)]
    pub mediatype: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    #[serde(default = "schema_channel")]
    pub schema: String,
    pub name: String,
    pub package: String,
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replaces: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skip_range: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    #[serde(default = "schema_bundle")]
    pub schema: String,
    pub name: String,
    pub package: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(default)]
    pub properties: Vec<Property>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<RelatedImage>,
}

impl Bundle {
    pub fn properties_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.properties
            .iter()
            .filter(move |p| p.type_ == kind)
            .map(|p| &p.value)
    }

    /// The `olm.package` property's version, when there is exactly one such property.
    pub fn version(&self) -> Option<&str> {
        let mut packages = self.properties_of(PROP_PACKAGE);
        let first = packages.next()?;
        if packages.next().is_some() {
            return None;
        }
        first.get("version").and_then(Value::as_str)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedImage {
    #[serde(default)]
    pub name: String,
    pub image: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Property {
    #[serde(rename = "type")]
    pub type_: String,
    /// Missing reads as `null`, as opm reads it (a raw JSON field left unset): a bundle's
    /// `properties.yaml` entry without `value` is kept as `value: null`, not dropped.
    #[serde(default)]
    pub value: Value,
}

impl Property {
    pub fn new(type_: &str, value: Value) -> Self {
        Property {
            type_: type_.to_string(),
            value,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Deprecation {
    #[serde(default = "schema_deprecations")]
    pub schema: String,
    pub package: String,
    #[serde(default)]
    pub entries: Vec<DeprecationEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeprecationEntry {
    pub reference: DeprecationReference,
    #[serde(default)]
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeprecationReference {
    #[serde(default)]
    pub schema: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// What a JSON value is, for messages such as "must be a list, not a string".
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Whether `v`, written as JSON text inside a few levels of something else (a property in
/// a bundle in a list), reads back: serde_json decodes text only up to 128 levels deep.
pub fn reads_back_from_text(v: &Value) -> bool {
    const MAX_DEPTH: usize = 120;
    json_depth(v) <= MAX_DEPTH
}

/// How deep a JSON value nests (a scalar is 0).
fn json_depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A blob of a schema OLM does not interpret.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub schema: String,
    pub package: String,
    pub name: String,
    pub blob: Value,
}

fn schema_package() -> String {
    SCHEMA_PACKAGE.into()
}
fn schema_channel() -> String {
    SCHEMA_CHANNEL.into()
}
fn schema_bundle() -> String {
    SCHEMA_BUNDLE.into()
}
fn schema_deprecations() -> String {
    SCHEMA_DEPRECATIONS.into()
}
