//! What the API answers, as the Kubernetes API machinery shapes it: lists, Tables
//! (server-side printing: NAME, CATALOG, AGE), PartialObjectMetadata, Status errors.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::listed;
use super::manifest::{GROUP, PackageManifest};
use super::store::Visible;

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

/// A list as `format` asks, of manifests each with the namespace it is shown in. Full
/// objects come from their pre-serialized JSON (`listed`); see `super::listed`.
pub fn list(
    items: Vec<Visible>,
    resource_version: u64,
    format: Format,
    now: k8s_openapi::jiff::Timestamp,
) -> Response {
    let shown = || -> Vec<(&PackageManifest, &str)> {
        items
            .iter()
            .map(|v| (&*v.manifest, v.namespace()))
            .collect()
    };
    let body = match format {
        Format::Object => {
            let body = listed::ListBody::new(items, resource_version);
            return json_bytes_response(StatusCode::OK, axum::body::Body::new(body));
        }
        Format::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version.to_string()},
            "items": shown().into_iter().map(|(m, ns)| partial_metadata(m, ns)).collect::<Vec<_>>(),
        }),
        Format::Table => table(&shown(), Some(resource_version), now, true),
    };
    json_response(StatusCode::OK, &body)
}

fn partial_metadata(manifest: &PackageManifest, namespace: &str) -> Value {
    let mut metadata = json!(manifest.metadata);
    metadata["namespace"] = json!(namespace);
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
    })
}

/// Upstream's printer: Name, Catalog (the CatalogSource's display name), Age.
pub fn table(
    items: &[(&PackageManifest, &str)],
    resource_version: Option<u64>,
    now: k8s_openapi::jiff::Timestamp,
    with_columns: bool,
) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|(m, ns)| {
            json!({
                "cells": [m.metadata.name, m.status.catalog_source_display_name, age(m.metadata.creation_timestamp.as_deref(), now)],
                "object": partial_metadata(m, ns),
            })
        })
        .collect();
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "rows": rows,
    });
    if let Some(rv) = resource_version {
        table["metadata"]["resourceVersion"] = json!(rv.to_string());
    }
    if with_columns {
        table["columnDefinitions"] = json!([
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Catalog", "type": "string", "format": "", "description": "The source catalog for this package", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ]);
    }
    table
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
