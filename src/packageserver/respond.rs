//! What the API answers, as the Kubernetes API machinery shapes it: lists, Tables
//! (server-side printing: NAME, CATALOG, AGE), PartialObjectMetadata, Status errors.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Value, json};

use super::listed;
use super::listed::Visible;
use super::manifest::{GROUP, Metadata, PackageManifest};

/// The representation a client asked for in `Accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Object,
    Table,
    Metadata,
}

impl Format {
    pub fn of(headers: &HeaderMap) -> Format {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        // The first acceptable choice wins; protobuf is not spoken, so skip those.
        for choice in accept.split(',') {
            let choice = choice.trim();
            if !(choice.starts_with("application/json") || choice.starts_with("*/*")) {
                continue;
            }
            if choice.contains("as=Table") {
                return Format::Table;
            }
            if choice.contains("as=PartialObjectMetadata") {
                return Format::Metadata;
            }
            return Format::Object;
        }
        Format::Object
    }
}

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    json_bytes_response(status, body.to_string().into_bytes())
}

/// A body already serialized as JSON (bytes, or a body that writes them).
pub fn json_bytes_response(status: StatusCode, body: impl Into<axum::body::Body>) -> Response {
    let mut response = (status, body.into()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A `metav1.Status` failure.
pub fn status(code: StatusCode, reason: &str, message: String, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    json_response(code, &body)
}

pub fn not_found(name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("packagemanifests.{GROUP} \"{name}\" not found"),
        Some(json!({"name": name, "group": GROUP, "kind": "packagemanifests"})),
    )
}

pub fn bad_request(message: String) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message, None)
}

pub fn method_not_allowed() -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource".into(),
        Some(json!({"group": GROUP, "kind": "packagemanifests"})),
    )
}

pub fn unauthorized() -> Response {
    status(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "Unauthorized".into(),
        None,
    )
}

pub fn forbidden(user: &str, verb: &str, namespace: Option<&str>, name: Option<&str>) -> Response {
    let scope = match namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".into(),
    };
    let what = match name {
        Some(name) => format!("packagemanifests.{GROUP} \"{name}\""),
        None => format!("packagemanifests.{GROUP}"),
    };
    status(
        StatusCode::FORBIDDEN,
        "Forbidden",
        format!(
            "{what} is forbidden: User \"{user}\" cannot {verb} resource \"packagemanifests\" in API group \"{GROUP}\"{scope}"
        ),
        Some(json!({"name": name.unwrap_or_default(), "group": GROUP, "kind": "packagemanifests"})),
    )
}

pub fn internal(message: String) -> Response {
    status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        message,
        None,
    )
}

/// One manifest as `format` asks (a Table of one row for tables).
pub fn object(
    manifest: &PackageManifest,
    format: Format,
    now: k8s_openapi::jiff::Timestamp,
) -> Value {
    match format {
        Format::Object => serde_json::to_value(manifest).unwrap_or(Value::Null),
        Format::Metadata => partial_metadata(manifest, &manifest.metadata.namespace),
        Format::Table => table(&[(manifest, &manifest.metadata.namespace)], None, now, true),
    }
}

/// A list as `format` asks, of manifests each with the namespace it is shown in, written
/// from their pre-serialized JSON (see `super::listed`): whole objects stream out in chunks;
/// Tables (what `kubectl get packagemanifests -A` asks for, a row per package) and metadata
/// lists are each item's metadata JSON with a few small fields around it.
pub fn list(
    items: Vec<Visible>,
    resource_version: u64,
    format: Format,
    now: k8s_openapi::jiff::Timestamp,
) -> Response {
    let json = match format {
        Format::Object => {
            let body = listed::ListBody::new(items, resource_version);
            return json_bytes_response(StatusCode::OK, axum::body::Body::new(body));
        }
        Format::Metadata => metadata_list_json(&items, resource_version),
        Format::Table => table_list_json(&items, resource_version, now),
    };
    json_bytes_response(StatusCode::OK, json)
}

/// Room for the items' metadata and `per_item` bytes more each.
fn list_buffer(items: &[Visible], per_item: usize) -> Vec<u8> {
    let bytes: usize = items
        .iter()
        .map(|v| v.listed.metadata_written_len(v.namespace()) + per_item)
        .sum();
    Vec::with_capacity(bytes + 1024)
}

const PARTIAL_OBJECT_METADATA_HEAD: &[u8] =
    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

/// What `serde_json::to_vec` gives of [`PartialObjectMetadataList`], with each item's
/// metadata copied from its JSON rather than serialized again.
fn metadata_list_json(items: &[Visible], resource_version: u64) -> Vec<u8> {
    let mut out = list_buffer(items, PARTIAL_OBJECT_METADATA_HEAD.len() + 2);
    out.extend_from_slice(
        br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":"#,
    );
    write_json(&mut out, &ListMeta::at(Some(resource_version)));
    out.extend_from_slice(br#","items":["#);
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(PARTIAL_OBJECT_METADATA_HEAD);
        v.listed.write_metadata(v.namespace(), &mut out);
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    out
}

/// What `serde_json::to_vec` gives of [`Table`], with each row's object (its metadata)
/// copied from the manifest's JSON rather than serialized again.
fn table_list_json(
    items: &[Visible],
    resource_version: u64,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<u8> {
    let mut out = list_buffer(items, 160);
    out.extend_from_slice(br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":"#);
    write_json(&mut out, &ListMeta::at(Some(resource_version)));
    out.extend_from_slice(br#","columnDefinitions":"#);
    write_json(&mut out, &COLUMNS);
    out.extend_from_slice(br#","rows":["#);
    // A catalog's packages share its creationTimestamp: each age is worked out once.
    let mut last_age: Option<(Option<&str>, String)> = None;
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let m = &v.manifest;
        let created = m.metadata.creation_timestamp.as_deref();
        let row_age = match last_age.take() {
            Some((at, known)) if at == created => known,
            _ => age(created, now),
        };
        out.extend_from_slice(br#"{"cells":"#);
        write_json(
            &mut out,
            &(
                &m.metadata.name,
                &m.status.catalog_source_display_name,
                &row_age,
            ),
        );
        last_age = Some((created, row_age));
        out.extend_from_slice(br#","object":"#);
        out.extend_from_slice(PARTIAL_OBJECT_METADATA_HEAD);
        v.listed.write_metadata(v.namespace(), &mut out);
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b"]}");
    out
}

fn write_json(out: &mut Vec<u8>, value: &impl Serialize) {
    serde_json::to_writer(out, value).expect("writing to a Vec cannot fail");
}

const META_API_VERSION: &str = "meta.k8s.io/v1";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<String>,
}

impl ListMeta {
    fn at(resource_version: Option<u64>) -> ListMeta {
        ListMeta {
            resource_version: resource_version.map(|rv| rv.to_string()),
        }
    }
}

/// A manifest's metadata as shown in a namespace (a global catalog's packages appear in
/// the namespace asked for): copied only when that differs from its own.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartialObjectMetadata<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Cow<'a, Metadata>,
}

impl<'a> PartialObjectMetadata<'a> {
    fn of(manifest: &'a PackageManifest, namespace: &str) -> Self {
        let metadata = if manifest.metadata.namespace == namespace {
            Cow::Borrowed(&manifest.metadata)
        } else {
            let mut shown = manifest.metadata.clone();
            shown.namespace = namespace.to_string();
            Cow::Owned(shown)
        };
        PartialObjectMetadata {
            kind: "PartialObjectMetadata",
            api_version: META_API_VERSION,
            metadata,
        }
    }
}

/// What [`metadata_list_json`] writes, as serde would (the tests' reference).
#[cfg(test)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartialObjectMetadataList<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: ListMeta,
    items: Vec<PartialObjectMetadata<'a>>,
}

fn partial_metadata(manifest: &PackageManifest, namespace: &str) -> Value {
    serde_json::to_value(PartialObjectMetadata::of(manifest, namespace))
        .expect("metadata always serializes")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Table<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: ListMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    column_definitions: Option<&'static [Column; 3]>,
    rows: Vec<Row<'a>>,
}

#[derive(Serialize)]
struct Row<'a> {
    /// Name, Catalog, Age.
    cells: (&'a str, &'a str, String),
    object: PartialObjectMetadata<'a>,
}

#[derive(Serialize)]
struct Column {
    name: &'static str,
    #[serde(rename = "type")]
    type_: &'static str,
    format: &'static str,
    description: &'static str,
    priority: u8,
}

/// Upstream's printer: Name, Catalog (the CatalogSource's display name), Age.
const COLUMNS: [Column; 3] = [
    Column {
        name: "Name",
        type_: "string",
        format: "name",
        description: "Name must be unique within a namespace.",
        priority: 0,
    },
    Column {
        name: "Catalog",
        type_: "string",
        format: "",
        description: "The source catalog for this package",
        priority: 0,
    },
    Column {
        name: "Age",
        type_: "string",
        format: "",
        description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
        priority: 0,
    },
];

impl<'a> Table<'a> {
    fn of(
        items: &[(&'a PackageManifest, &str)],
        resource_version: Option<u64>,
        now: k8s_openapi::jiff::Timestamp,
        with_columns: bool,
    ) -> Table<'a> {
        Table {
            kind: "Table",
            api_version: META_API_VERSION,
            metadata: ListMeta::at(resource_version),
            column_definitions: with_columns.then_some(&COLUMNS),
            rows: items
                .iter()
                .map(|(m, ns)| Row {
                    cells: cells(m, now),
                    object: PartialObjectMetadata::of(m, ns),
                })
                .collect(),
        }
    }
}

/// A row's Name, Catalog and Age.
fn cells(m: &PackageManifest, now: k8s_openapi::jiff::Timestamp) -> (&str, &str, String) {
    (
        &m.metadata.name,
        &m.status.catalog_source_display_name,
        age(m.metadata.creation_timestamp.as_deref(), now),
    )
}

/// A Table of `items` (each with the namespace it is shown in), as a JSON value: one
/// object or a watch event's (lists are written straight from [`Table`]).
pub fn table(
    items: &[(&PackageManifest, &str)],
    resource_version: Option<u64>,
    now: k8s_openapi::jiff::Timestamp,
    with_columns: bool,
) -> Value {
    serde_json::to_value(Table::of(items, resource_version, now, with_columns))
        .expect("a Table always serializes")
}

/// kubectl's short human durations ("45s", "5m", "3h", "12d", "2y").
pub fn age(created: Option<&str>, now: k8s_openapi::jiff::Timestamp) -> String {
    let Some(created) = created.and_then(|c| c.parse::<k8s_openapi::jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let secs = now.as_second() - created.as_second();
    human_duration(secs.max(0))
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    let minutes = secs / 60;
    let hours = secs / 3600;
    if secs < 60 * 2 {
        format!("{secs}s")
    } else if minutes < 10 {
        let s = secs % 60;
        if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        }
    } else if minutes < 60 * 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let d = (hours / 24) % 365;
        if d == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{d}d", hours / 24 / 365)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_representation() {
        let mut h = HeaderMap::new();
        assert_eq!(Format::of(&h), Format::Object);
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"));
        assert_eq!(Format::of(&h), Format::Table);
        h.insert(header::ACCEPT, HeaderValue::from_static("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"));
        assert_eq!(Format::of(&h), Format::Metadata);
    }

    fn manifest() -> PackageManifest {
        let mut all = crate::packageserver::manifest::fixtures::our_manifests();
        let mut m = all.remove("reverse-words").unwrap();
        m.metadata.resource_version = "7".into();
        m
    }

    #[test]
    fn tables_and_metadata_show_a_manifest_in_the_namespace_asked_for() {
        let m = manifest();
        let now: k8s_openapi::jiff::Timestamp = "2026-01-01T00:02:30Z".parse().unwrap();
        let metadata = |ns: &str| {
            // The labels stay the catalog's wherever its packages are shown.
            let labels = serde_json::to_value(&m.metadata.labels).unwrap();
            assert_eq!(labels["catalog-namespace"], "olm");
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {
                    "name": "reverse-words",
                    "namespace": ns,
                    "resourceVersion": "7",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": labels,
                },
            })
        };
        for ns in ["olm", "team-a"] {
            let table = table(&[(&m, ns)], Some(9), now, true);
            assert_eq!(table["kind"], "Table");
            assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
            assert_eq!(table["metadata"], json!({"resourceVersion": "9"}));
            let columns: Vec<&str> = table["columnDefinitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap())
                .collect();
            assert_eq!(columns, ["Name", "Catalog", "Age"]);
            assert_eq!(
                table["rows"],
                json!([{
                    "cells": ["reverse-words", "Community Operators", "2m30s"],
                    "object": metadata(ns),
                }])
            );
            assert_eq!(partial_metadata(&m, ns), metadata(ns));
        }
        // A watch event's Table after the first carries no columns; no resourceVersion, no
        // list metadata.
        let later = table(&[(&m, "olm")], None, now, false);
        assert_eq!(later["metadata"], json!({}));
        assert!(later.get("columnDefinitions").is_none());
    }

    #[test]
    fn tables_and_metadata_lists_are_written_as_serde_writes_them() {
        use std::sync::Arc;

        use crate::packageserver::listed::ListedJson;
        let now: k8s_openapi::jiff::Timestamp = "2026-01-01T00:02:30Z".parse().unwrap();
        let all: Vec<PackageManifest> = crate::packageserver::manifest::fixtures::our_manifests()
            .into_values()
            .enumerate()
            .map(|(i, mut m)| {
                // Served manifests carry a resourceVersion (added after their JSON was
                // made) and no channels.
                let listed = ListedJson::of(&m).with_resource_version(&format!("{}", i + 3));
                m.metadata.resource_version = format!("{}", i + 3);
                m.status.channels.clear();
                (m, listed)
            })
            .map(|(m, listed)| {
                let written = {
                    let mut out = Vec::new();
                    listed.write_metadata("x", &mut out);
                    out
                };
                let mut expected = m.clone();
                expected.metadata.namespace = "x".into();
                assert_eq!(written, serde_json::to_vec(&expected.metadata).unwrap());
                assert_eq!(listed.metadata_written_len("x"), written.len());
                m
            })
            .collect();
        assert!(all.len() >= 4);
        for shown in ["olm", "team-a", "with\"quote\u{1}\n"] {
            let shown_arc: Arc<str> = Arc::from(shown);
            let items: Vec<Visible> = all
                .iter()
                .map(|m| {
                    // As the store makes it: JSON first, its resourceVersion added after.
                    let mut unversioned = m.clone();
                    unversioned.metadata.resource_version.clear();
                    let listed = ListedJson::of(&unversioned)
                        .with_resource_version(&m.metadata.resource_version);
                    Visible::new(Arc::new(m.clone()), Arc::new(listed), &shown_arc)
                })
                .collect();
            let pairs: Vec<(&PackageManifest, &str)> =
                all.iter().map(|m| (m, items[0].namespace())).collect();
            assert_eq!(items[0].namespace(), shown);
            let table = table_list_json(&items, 42, now);
            let expected = serde_json::to_vec(&Table::of(&pairs, Some(42), now, true)).unwrap();
            assert_eq!(
                String::from_utf8(table).unwrap(),
                String::from_utf8(expected).unwrap()
            );
            let list = metadata_list_json(&items, 42);
            let expected = serde_json::to_vec(&PartialObjectMetadataList {
                kind: "PartialObjectMetadataList",
                api_version: META_API_VERSION,
                metadata: ListMeta::at(Some(42)),
                items: pairs
                    .iter()
                    .map(|(m, ns)| PartialObjectMetadata::of(m, ns))
                    .collect(),
            })
            .unwrap();
            assert_eq!(
                String::from_utf8(list).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
        // No items: still a Table (with its columns) and a list.
        let empty: Value = serde_json::from_slice(&table_list_json(&[], 1, now)).unwrap();
        assert_eq!(empty["rows"], json!([]));
        assert_eq!(empty["columnDefinitions"].as_array().unwrap().len(), 3);
        let empty: Value = serde_json::from_slice(&metadata_list_json(&[], 1)).unwrap();
        assert_eq!(empty["items"], json!([]));
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400), "3d");
        assert_eq!(
            age(None, k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            "<unknown>"
        );
    }
}
