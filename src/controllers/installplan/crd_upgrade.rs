//! CRD upgrade safety, checked before a plan's CRD step replaces an existing CRD: no
//! version the API server has stored objects in may disappear, and every existing custom
//! resource must validate against the new schema of each version that stays served.

use std::collections::BTreeSet;

use serde_json::Value;

use super::error::StepError;

/// CRD upgrade safety, part one: every version the API server has stored objects in must
/// still be in the new CRD.
pub fn check_stored_versions(existing: &Value, new: &Value) -> Result<(), StepError> {
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let kept: BTreeSet<&str> = new["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for stored in existing["status"]["storedVersions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let stored = stored.as_str().unwrap_or_default();
        if !kept.contains(stored) {
            return Err(StepError::StoredVersionDropped {
                crd: name.to_string(),
                version: stored.to_string(),
            });
        }
    }
    Ok(())
}

/// The versions in `existing`'s `status.storedVersions` that `new` does not serve (no
/// longer defined, or defined but unserved): objects stored in them can no longer be read.
pub fn stored_versions_unserved(existing: &Value, new: &Value) -> Vec<String> {
    let served: BTreeSet<String> = served_schemas(new).into_iter().map(|(v, _)| v).collect();
    existing["status"]["storedVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|stored| !served.contains(*stored))
        .map(str::to_string)
        .collect()
}

/// The existing objects (as the API server lists them) that `schema` refuses, judged one by
/// one as they are asked for: each object's `namespace/name` (or name) and its problems.
pub fn refused<'a>(
    schema: &'a Value,
    objects: &'a [Value],
) -> impl Iterator<Item = (String, Vec<String>)> + 'a {
    objects.iter().filter_map(move |object| {
        let mut problems = Vec::new();
        validate(schema, object, "", &mut problems);
        (!problems.is_empty()).then(|| (object_name(object), problems))
    })
}

/// `namespace/name` of a custom resource, or the name of a cluster-scoped one.
pub fn object_name(object: &Value) -> String {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    match meta["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// The served versions of a CRD with their schemas.
pub fn served_schemas(crd: &Value) -> Vec<(String, Value)> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(false))
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v["schema"]["openAPIV3Schema"].clone(),
            )
        })
        .collect()
}

/// CRD upgrade safety, part two: an existing custom resource against the new version's
/// structural schema (types, required, enum, bounds, nested properties and items). Returns
/// the problems, each with its path.
pub fn validate(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    if !schema.is_object() || problems.len() >= 10 {
        return;
    }
    if !check_type(schema, value, path, problems) {
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        problems.push(format!(
            "{path}: {value} is not one of {}",
            Value::Array(allowed.clone())
        ));
    }
    check_bounds(schema, value, path, problems);
    if let Some(map) = value.as_object() {
        validate_object(schema, map, path, problems);
    }
    if let Some(items) = value.as_array() {
        validate_items(schema, items, path, problems);
    }
}

/// Null, int-or-string and `type`; false when the value is not checked further (it is
/// null, int-or-string, or of the wrong type).
fn check_type(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) -> bool {
    if value.is_null() {
        if schema["nullable"].as_bool() != Some(true) && schema.get("type").is_some() {
            problems.push(format!("{path}: null is not allowed"));
        }
        return false;
    }
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            problems.push(format!("{path}: must be an integer or a string"));
        }
        return false;
    }
    let Some(t) = schema["type"].as_str() else {
        return true;
    };
    let fits = match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    if !fits {
        problems.push(format!(
            "{path}: expected {t}, found {}",
            crate::catalog::model::fbc::json_kind(value)
        ));
    }
    fits
}

/// A number's minimum and maximum, a string's length.
fn check_bounds(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    if let Some(n) = value.as_f64() {
        if schema["minimum"].as_f64().is_some_and(|m| n < m) {
            problems.push(format!(
                "{path}: {n} is less than the minimum {}",
                schema["minimum"]
            ));
        }
        if schema["maximum"].as_f64().is_some_and(|m| n > m) {
            problems.push(format!(
                "{path}: {n} is more than the maximum {}",
                schema["maximum"]
            ));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if schema["minLength"].as_u64().is_some_and(|m| len < m) {
            problems.push(format!("{path}: shorter than {}", schema["minLength"]));
        }
        if schema["maxLength"].as_u64().is_some_and(|m| len > m) {
            problems.push(format!("{path}: longer than {}", schema["maxLength"]));
        }
    }
}

/// An object's required fields, then each field against its property's schema (or
/// `additionalProperties`).
fn validate_object(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    path: &str,
    problems: &mut Vec<String>,
) {
    for required in schema["required"].as_array().into_iter().flatten() {
        if let Some(key) = required.as_str()
            && !map.contains_key(key)
        {
            problems.push(format!("{path}.{key}: required"));
        }
    }
    let properties = schema["properties"].as_object();
    // The top level's apiVersion, kind and metadata are the API server's business.
    let top = path.is_empty() || path == "<root>";
    for (key, child) in map {
        if top && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_path = format!("{path}.{key}");
        match properties.and_then(|p| p.get(key)) {
            Some(child_schema) => validate(child_schema, child, &child_path, problems),
            None => {
                if let Some(extra) = schema.get("additionalProperties") {
                    if extra.is_object() {
                        validate(extra, child, &child_path, problems);
                    } else if extra == &Value::Bool(false) {
                        problems.push(format!("{child_path}: not allowed"));
                    }
                }
                // Other unknown fields are pruned by the API server, not refused.
            }
        }
    }
}

/// The fields of `value` that `schema` does not know and the API server would prune, as
/// paths (at most 10): a rollback to such a schema loses them, since the server prunes
/// what it reads from storage too. Fields under `x-kubernetes-preserve-unknown-fields`,
/// an embedded resource's apiVersion, kind and metadata, and the top level's, are kept;
/// the top level's `status` is not checked (its operator writes it again).
pub fn pruned(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if !schema.is_object() || out.len() >= 10 {
        return;
    }
    if let Some(items) = value.as_array()
        && schema["items"].is_object()
    {
        for (i, item) in items.iter().enumerate() {
            pruned(&schema["items"], item, &format!("{path}[{i}]"), out);
        }
    }
    let Some(map) = value.as_object() else {
        return;
    };
    let keep_unknown = schema["x-kubernetes-preserve-unknown-fields"] == true;
    let embedded = schema["x-kubernetes-embedded-resource"] == true;
    let top = path.is_empty();
    for (key, child) in map {
        let envelope = matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
        if (envelope && (top || embedded)) || (top && key == "status") {
            continue;
        }
        let child_path = format!("{path}.{key}");
        match (
            schema["properties"].get(key),
            &schema["additionalProperties"],
        ) {
            (Some(child_schema), _) => pruned(child_schema, child, &child_path, out),
            (None, extra) if extra.is_object() => pruned(extra, child, &child_path, out),
            (None, extra) if keep_unknown || extra == &Value::Bool(true) => {}
            (None, _) => {
                if out.len() < 10 {
                    out.push(child_path);
                }
            }
        }
    }
}

/// An array's length bounds, then each item against `items`.
fn validate_items(schema: &Value, items: &[Value], path: &str, problems: &mut Vec<String>) {
    if schema["minItems"]
        .as_u64()
        .is_some_and(|m| (items.len() as u64) < m)
    {
        problems.push(format!("{path}: fewer than {} items", schema["minItems"]));
    }
    if schema["maxItems"]
        .as_u64()
        .is_some_and(|m| (items.len() as u64) > m)
    {
        problems.push(format!("{path}: more than {} items", schema["maxItems"]));
    }
    if schema["items"].is_object() {
        for (i, item) in items.iter().enumerate() {
            validate(&schema["items"], item, &format!("{path}[{i}]"), problems);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stored_versions_may_not_be_dropped() {
        let existing = json!({"status": {"storedVersions": ["v1alpha1", "v1"]}});
        let new = json!({"metadata": {"name": "things.example.com"}, "spec": {"versions": [{"name": "v1"}]}});
        let error = check_stored_versions(&existing, &new)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("things.example.com")
                && error.contains("v1alpha1")
                && error.contains("data loss"),
            "{error}"
        );
        let keep = json!({"metadata": {"name": "t"}, "spec": {"versions": [{"name": "v1"}, {"name": "v1alpha1"}]}});
        assert!(check_stored_versions(&existing, &keep).is_ok());
    }

    #[test]
    fn fields_an_older_schema_does_not_know_are_pruned() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "mode": {"type": "string"},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "properties": {"spec": {"type": "object"}}},
                }},
            }
        });
        let value = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"mode": "fast", "extra": "lost", "items": [{"a": "x", "b": "y"}],
                     "labels": {"any": "kept"}, "free": {"anything": {"deep": 1}},
                     "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"c": 1}}},
            "status": {"ready": true}});
        let mut out = Vec::new();
        pruned(&schema, &value, "", &mut out);
        assert_eq!(
            out,
            [".spec.extra", ".spec.items[0].b", ".spec.template.spec.c"]
        );
    }

    #[test]
    fn existing_resources_are_validated_against_the_new_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["replicas"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
                        "mode": {"type": "string", "enum": ["fast", "slow"]},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    }
                }
            }
        });
        let check = |value: Value| {
            let mut problems = Vec::new();
            validate(&schema, &value, "", &mut problems);
            problems
        };
        let ok = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"replicas": 2, "mode": "fast", "tags": ["a"], "port": "http", "labels": {"a": "b"}, "unknown": 1}});
        assert_eq!(check(ok), Vec::<String>::new());
        let bad = json!({"spec": {"mode": "medium", "tags": ["a", "b", 3], "port": 1.5, "labels": {"a": 1}}});
        let problems = check(bad);
        assert_eq!(
            problems,
            [
                ".spec.replicas: required",
                ".spec.labels.a: expected string, found a number",
                ".spec.mode: \"medium\" is not one of [\"fast\",\"slow\"]",
                ".spec.port: must be an integer or a string",
                ".spec.tags: more than 2 items",
                ".spec.tags[2]: expected string, found a number",
            ]
        );
        assert_eq!(
            check(json!({"spec": {"replicas": 9}})),
            [".spec.replicas: 9 is more than the maximum 5"]
        );
    }
}
