//! Schema helpers for fields whose upstream schema is deliberately open.
//!
//! Upstream OLM keeps unknown fields for embedded Kubernetes objects (a CSV's DeploymentSpec,
//! manifests inside InstallPlan steps, descriptor values). Mirroring that matters: a closed
//! schema would make the API server silently prune fields of real operators' objects.

use schemars::{Schema, SchemaGenerator, json_schema};

/// An object whose fields the API server keeps as they are.
pub fn preserved_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// An optional list of objects whose fields the API server keeps as they are.
pub fn preserved_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
    })
}

/// Any JSON value (upstream: `json.RawMessage`), e.g. a descriptor's `value`.
pub fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A string → string map.
pub fn string_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "type": "string" },
    })
}

/// `intstr.IntOrString`.
pub fn int_or_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
    })
}

/// A plain string. Upstream's Go constants (phases, approval, install mode types, source
/// types) are not CRD enums, so any string is stored; our Rust enums interpret them.
pub fn plain_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string" })
}

/// A list of strings with set semantics (`x-kubernetes-list-type: set`).
pub fn string_set(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "string" },
        "x-kubernetes-list-type": "set",
    })
}

/// Conditions keyed by `type` (`x-kubernetes-list-type: map`): with server-side apply each
/// field manager owns the condition types it sets, so two writers never remove each other's.
pub fn conditions_by_type<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<T>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}
