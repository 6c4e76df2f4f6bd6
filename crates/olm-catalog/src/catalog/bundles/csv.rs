//! The ClusterServiceVersion of a file-based catalog bundle (among its `olm.bundle.object`
//! properties), and what a package shows from a CSV: its icon and description.

use base64::Engine;
use serde_json::{Map, Value};

use crate::catalog::model::fbc::{Bundle, Icon, PROP_BUNDLE_OBJECT};
use crate::catalog::text::go_json;
use crate::catalog::text::yaml_nesting::YamlError;

/// Why an `olm.bundle.object` gives no manifest, or a bundle no CSV.
#[derive(Debug, thiserror::Error)]
pub enum BundleObjectError {
    #[error("olm.bundle.object without data")]
    NoData,
    #[error("olm.bundle.object data: {0}")]
    Base64(#[source] base64::DecodeError),
    #[error("olm.bundle.object data: {0}")]
    Utf8(#[source] std::string::FromUtf8Error),
    #[error("olm.bundle.object data: {0}")]
    Yaml(#[source] YamlError),
    #[error("bundle {bundle}: no ClusterServiceVersion among its objects")]
    NoCsv { bundle: String },
}

/// The manifest an `olm.bundle.object` value carries: its `data` is base64 (as Go decodes
/// `[]byte`, surrounding white space tolerated) of a JSON or YAML object.
pub fn decode_bundle_object(value: &Value) -> Result<Value, BundleObjectError> {
    parse_manifest(&bundle_object_bytes(value)?)
}

/// The manifest bytes an `olm.bundle.object` value carries base64-encoded in `data`.
fn bundle_object_bytes(value: &Value) -> Result<Vec<u8>, BundleObjectError> {
    let data = value
        .get("data")
        .and_then(Value::as_str)
        .ok_or(BundleObjectError::NoData)?;
    go_json::decode_bytes(data.trim()).map_err(BundleObjectError::Base64)
}

/// A manifest of an `olm.bundle.object` as compact JSON, for serving.
pub struct ObjectJson {
    pub json: String,
    pub is_csv: bool,
}

/// The manifest an `olm.bundle.object` value carries, as compact JSON. Data that is a JSON
/// object is compacted as it is, keys in their order; anything else (YAML, or JSON that a
/// tree would read differently, such as a repeated `kind`) is parsed and printed as
/// `decode_bundle_object` reads it.
pub fn bundle_object_json(value: &Value) -> Result<ObjectJson, BundleObjectError> {
    let bytes = bundle_object_bytes(value)?;
    let Some(is_csv) = json_object_kind(&bytes) else {
        let object = parse_manifest(&bytes)?;
        return Ok(ObjectJson {
            is_csv: is_csv(&object),
            json: serde_json::to_string(&object).unwrap_or_default(),
        });
    };
    let json = String::from_utf8(crate::catalog::text::compact_json::strip_whitespace(bytes))
        .map_err(BundleObjectError::Utf8)?;
    Ok(ObjectJson { json, is_csv })
}

/// Whether `bytes`, a JSON object (validated here, without building it), is a CSV;
/// `None` when it is not a JSON object or its `kind` is not one plain string.
fn json_object_kind(bytes: &[u8]) -> Option<bool> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let text = std::str::from_utf8(bytes).ok()?;
    // A JSON array would fill the struct by position.
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    let head: Kind = serde_json::from_str(text).ok()?;
    Some(head.kind.as_deref() == Some("ClusterServiceVersion"))
}

fn parse_manifest(bytes: &[u8]) -> Result<Value, BundleObjectError> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(_) => {
            crate::catalog::text::yaml_nesting::from_slice(bytes).map_err(BundleObjectError::Yaml)
        }
    }
}

/// Whether a manifest is a ClusterServiceVersion.
pub fn is_csv(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")
}

/// The first ClusterServiceVersion among a bundle's `olm.bundle.object`s (objects that do
/// not decode are passed over).
pub fn bundle_csv(bundle: &Bundle) -> Option<Value> {
    bundle
        .properties_of(PROP_BUNDLE_OBJECT)
        .filter_map(|v| decode_bundle_object(v).ok())
        .find(is_csv)
}

/// A package's icon and description from its head CSV, as upstream's conversion of a
/// registry database to a file-based catalog takes them (`populatePackageIcons`): the
/// first icon, when its data decodes as base64 (white space tolerated) to something,
/// re-encoded; the description as it is.
pub fn package_display(csv: &Value) -> (Option<Icon>, String) {
    let spec = &csv["spec"];
    let icon = spec["icon"]
        .as_array()
        .and_then(|icons| icons.first())
        .and_then(|icon| {
            let data = icon["base64data"].as_str()?;
            // White space anywhere (line breaks, a trailing space) is dropped and the data
            // re-encoded, so that Go's strict decoder (opm serve) reads what we write.
            let cleaned: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            let bytes = go_json::decode_bytes(&cleaned)
                .ok()
                .filter(|b| !b.is_empty())?;
            Some(Icon {
                base64data: base64::engine::general_purpose::STANDARD.encode(bytes),
                mediatype: icon["mediatype"].as_str().unwrap_or_default().to_string(),
            })
        });
    let description = spec["description"].as_str().unwrap_or_default().to_string();
    (icon, description)
}

/// The first of a CSV's `spec.icon` entries as opm's `ClusterServiceVersion.GetIcons`
/// decodes them (Go's `[]registry.Icon`, data as `[]byte`): any malformed entry means no
/// icons at all, and an entry without data is still an icon.
pub fn first_icon_as_opm(spec: &Map<String, Value>) -> Option<Icon> {
    let Value::Array(icons) = spec.get("icon")? else {
        return None;
    };
    let no_fields = Map::new();
    let mut decoded = Vec::with_capacity(icons.len());
    for icon in icons {
        let fields = match icon {
            Value::Null => &no_fields,
            Value::Object(o) => o,
            _ => return None,
        };
        let mediatype = match go_json::get(fields, "mediatype") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return None,
        };
        let data = match go_json::get(fields, "base64data") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => go_json::decode_bytes(s).ok()?,
            Some(_) => return None,
        };
        decoded.push(Icon {
            base64data: base64::engine::general_purpose::STANDARD.encode(data),
            mediatype,
        });
    }
    decoded.into_iter().next()
}

/// opm's `bundle-object-to-csv-metadata` migration of one bundle: its `olm.bundle.object`
/// properties give way to one `olm.csv.metadata` from the CSV (what package listings need),
/// so installers pull the bundle image for the objects, as with most real catalogs.
pub fn migrate_to_csv_metadata(bundle: &mut Bundle) -> Result<(), BundleObjectError> {
    let csv = bundle_csv(bundle).ok_or_else(|| BundleObjectError::NoCsv {
        bundle: bundle.name.clone(),
    })?;
    let metadata = csv_metadata(&csv);
    bundle.properties.retain(|p| {
        p.type_ != PROP_BUNDLE_OBJECT && p.type_ != crate::catalog::model::fbc::PROP_CSV_METADATA
    });
    bundle
        .properties
        .push(crate::catalog::model::fbc::Property::new(
            crate::catalog::model::fbc::PROP_CSV_METADATA,
            metadata,
        ));
    Ok(())
}

/// The `olm.csv.metadata` value of a CSV: its metadata's annotations and labels and the
/// descriptive parts of its spec, under opm's field names, empty ones left out.
pub fn csv_metadata(csv: &Value) -> Value {
    let mut out = Map::new();
    let mut put = |key: &str, value: &Value| {
        let empty = match value {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        if !empty {
            out.insert(key.to_string(), value.clone());
        }
    };
    put("annotations", &csv["metadata"]["annotations"]);
    let spec = &csv["spec"];
    put("apiServiceDefinitions", &spec["apiservicedefinitions"]);
    put("crdDescriptions", &spec["customresourcedefinitions"]);
    put("description", &spec["description"]);
    put("displayName", &spec["displayName"]);
    put("installModes", &spec["installModes"]);
    put("keywords", &spec["keywords"]);
    put("labels", &csv["metadata"]["labels"]);
    put("links", &spec["links"]);
    put("maintainers", &spec["maintainers"]);
    put("maturity", &spec["maturity"]);
    put("minKubeVersion", &spec["minKubeVersion"]);
    put("nativeAPIs", &spec["nativeAPIs"]);
    put("provider", &spec["provider"]);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::fbc::{PROP_PACKAGE, Property};
    use serde_json::json;

    fn object(text: &str) -> Property {
        let data = base64::engine::general_purpose::STANDARD.encode(text);
        Property::new(PROP_BUNDLE_OBJECT, json!({ "data": data }))
    }

    #[test]
    fn served_objects_are_compact_json_of_the_same_data() {
        let cases = [
            // JSON, pretty: compacted as it is, keys kept in their order.
            (
                "{\n  \"kind\": \"ClusterServiceVersion\",\n  \"b\": \"x  y\", \"a\": 1}\n",
                true,
            ),
            (
                r#"{"kind":"CustomResourceDefinition","spec":{"names":[]}}"#,
                false,
            ),
            // Not a JSON object, or read differently as a tree: through the parser.
            ("kind: ClusterServiceVersion\nmetadata: {name: a}\n", true),
            (r#"{"kind":"Secret","kind":"ClusterServiceVersion"}"#, true),
            (r#"{"kind":7}"#, false),
            (r#"["ClusterServiceVersion"]"#, false),
        ];
        for (text, csv) in cases {
            let got = bundle_object_json(&object(text).value).unwrap();
            assert_eq!(got.is_csv, csv, "{text}");
            assert!(!got.json.contains('\n'), "{text}");
            let parsed: Value = serde_json::from_str(&got.json).unwrap();
            assert_eq!(
                parsed,
                decode_bundle_object(&object(text).value).unwrap(),
                "{text}"
            );
        }
        let pretty = bundle_object_json(&object(cases[0].0).value).unwrap();
        assert_eq!(
            pretty.json,
            r#"{"kind":"ClusterServiceVersion","b":"x  y","a":1}"#
        );
        assert!(bundle_object_json(&object("{not json: [").value).is_err());
    }

    #[test]
    fn migrating_a_bundle_replaces_its_objects_by_csv_metadata() {
        let mut bundle = Bundle {
            name: "x.v1".into(),
            properties: vec![
                Property::new(
                    PROP_PACKAGE,
                    json!({"packageName": "x", "version": "1.0.0"}),
                ),
                object(
                    r#"{"kind":"ClusterServiceVersion","metadata":{"annotations":{"a":"b"}},"spec":{"displayName":"X","keywords":[],"install":{}}}"#,
                ),
                object(r#"{"kind":"CustomResourceDefinition"}"#),
            ],
            ..Bundle::default()
        };
        migrate_to_csv_metadata(&mut bundle).unwrap();
        assert_eq!(bundle.properties.len(), 2);
        assert_eq!(
            bundle.properties[1].value,
            json!({"annotations": {"a": "b"}, "displayName": "X"})
        );
        let error = migrate_to_csv_metadata(&mut bundle)
            .unwrap_err()
            .to_string();
        assert!(error.contains("x.v1"), "{error}");
    }

    #[test]
    fn bundle_objects_are_base64_of_json_or_yaml() {
        let json = object(r#"{"kind":"ClusterServiceVersion"}"#);
        assert_eq!(
            decode_bundle_object(&json.value).unwrap(),
            json!({"kind": "ClusterServiceVersion"})
        );
        let yaml = object("kind: CustomResourceDefinition\n");
        assert_eq!(
            decode_bundle_object(&yaml.value).unwrap(),
            json!({"kind": "CustomResourceDefinition"})
        );
        // Go ignores newlines in base64; surrounding white space is tolerated too.
        let wrapped = json!({ "data": " eyJr\naW5kIjoiQ1NWIn0=\n" });
        assert_eq!(
            decode_bundle_object(&wrapped).unwrap(),
            json!({"kind": "CSV"})
        );
        assert_eq!(
            decode_bundle_object(&json!({})).unwrap_err().to_string(),
            "olm.bundle.object without data"
        );
        assert!(
            decode_bundle_object(&json!({"data": "!!"}))
                .unwrap_err()
                .to_string()
                .starts_with("olm.bundle.object data: ")
        );
    }

    #[test]
    fn the_csv_of_a_bundle_is_its_first_csv_object() {
        let mut bundle = Bundle {
            properties: vec![
                Property::new(
                    PROP_PACKAGE,
                    json!({"packageName": "p", "version": "1.0.0"}),
                ),
                Property::new(PROP_BUNDLE_OBJECT, json!({"data": "not base64"})),
                object("kind: CustomResourceDefinition\n"),
                object(r#"{"kind":"ClusterServiceVersion","metadata":{"name":"first"}}"#),
                object(r#"{"kind":"ClusterServiceVersion","metadata":{"name":"second"}}"#),
            ],
            ..Default::default()
        };
        assert_eq!(bundle_csv(&bundle).unwrap()["metadata"]["name"], "first");
        bundle.properties.truncate(3);
        assert_eq!(bundle_csv(&bundle), None);
    }

    #[test]
    fn package_display_takes_the_first_decodable_icon_and_the_description() {
        let csv = json!({"spec": {
            "description": "Does things.",
            "icon": [{"base64data": " aGVs bG8= ", "mediatype": "image/png"}, {"base64data": "x"}],
        }});
        let (icon, description) = package_display(&csv);
        assert_eq!(
            icon,
            Some(Icon {
                base64data: "aGVsbG8=".into(),
                mediatype: "image/png".into()
            })
        );
        assert_eq!(description, "Does things.");
        for icons in [
            json!([{"base64data": ""}]),
            json!([{"base64data": "!"}]),
            json!([]),
        ] {
            let (icon, _) = package_display(&json!({"spec": {"icon": icons}}));
            assert_eq!(icon, None, "{icons}");
        }
        assert_eq!(package_display(&json!({})), (None, String::new()));
    }

    #[test]
    fn first_icon_as_opm_decodes_every_entry_as_go_does() {
        let spec = |icons: Value| json!({ "icon": icons }).as_object().unwrap().clone();
        let icon = |data: &str, mediatype: &str| {
            Some(Icon {
                base64data: data.into(),
                mediatype: mediatype.into(),
            })
        };
        assert_eq!(
            first_icon_as_opm(&spec(json!([
                {"Base64Data": "aGVs\nbG8=", "MediaType": "image/png"},
                {"base64data": "", "mediatype": "x"}
            ]))),
            icon("aGVsbG8=", "image/png")
        );
        assert_eq!(first_icon_as_opm(&spec(json!([null]))), icon("", ""));
        assert_eq!(
            first_icon_as_opm(&spec(json!([{"base64data": ""}]))),
            icon("", "")
        );
        // One malformed entry anywhere: no icons at all.
        for icons in [
            json!([{"base64data": "aGk="}, {"base64data": "!"}]),
            json!([{"base64data": "aGk="}, {"mediatype": 1}]),
            json!([{"base64data": "aGk="}, "x"]),
            json!({"base64data": "aGk="}),
            json!([]),
        ] {
            assert_eq!(first_icon_as_opm(&spec(icons.clone())), None, "{icons}");
        }
        assert_eq!(first_icon_as_opm(&Map::new()), None);
    }
}
