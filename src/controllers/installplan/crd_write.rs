//! What a CRD step writes to a CRD that exists already.
//!
//! A CRD that many installs share (one operator subscribed in a thousand namespaces) is in
//! every one of their plans. Each plan adds only its Operator's label and its
//! `installed-alongside` annotation; the spec is the same. Applying the whole CRD each time
//! made every install a server-side apply of the full schema on one object, all at once:
//! the writes conflicted, the API server retried them until its timeout (504 after 34 s)
//! and the plans retried in turn. So a step now writes only what is missing:
//! - nothing, when the CRD already says everything the step would write;
//! - a merge patch of the labels and annotations it lacks (and of the stale alongside
//!   annotations, removed), when only metadata is missing;
//! - the whole CRD by server-side apply, as before, when its spec or other metadata differ.

use serde_json::{Map, Value, json};

use super::alongside::ANNOTATION_PREFIX;

/// What a CRD step writes to the existing CRD.
#[derive(Debug, PartialEq)]
pub enum CrdWrite {
    /// The CRD already says it all.
    Nothing,
    /// Only this metadata merge patch (labels and annotations added, stale alongside
    /// annotations set to null).
    Metadata(Value),
    /// The spec, or metadata a merge patch should not decide, differs: apply the whole CRD.
    Apply,
}

/// What writing `desired` (the step's CRD, with its labels and its full set of alongside
/// annotations) to `existing` (the CRD as the API server returned it) takes.
pub fn decide(desired: &Value, existing: &Value) -> CrdWrite {
    if !spec_matches(&desired["spec"], &existing["spec"]) {
        return CrdWrite::Apply;
    }
    let mut labels = Map::new();
    for (key, value) in entries(&desired["metadata"]["labels"]) {
        if existing["metadata"]["labels"].get(key) != Some(value) {
            labels.insert(key.clone(), value.clone());
        }
    }
    let mut annotations = Map::new();
    for (key, value) in entries(&desired["metadata"]["annotations"]) {
        if existing["metadata"]["annotations"].get(key) != Some(value) {
            // The manifest's own annotations changed: applied whole, as they are the
            // bundle's, not ours to merge.
            if !key.starts_with(ANNOTATION_PREFIX) {
                return CrdWrite::Apply;
            }
            annotations.insert(key.clone(), value.clone());
        }
    }
    for (key, _) in entries(&existing["metadata"]["annotations"]) {
        if key.starts_with(ANNOTATION_PREFIX)
            && desired["metadata"]["annotations"].get(key).is_none()
        {
            annotations.insert(key.clone(), Value::Null);
        }
    }
    if labels.is_empty() && annotations.is_empty() {
        return CrdWrite::Nothing;
    }
    let mut metadata = Map::new();
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    CrdWrite::Metadata(json!({ "metadata": metadata }))
}

/// The metadata writes of the steps that share one CRD, merged: a step adds what it lacks
/// to what is wanted, and whichever step has the turn writes everything wanted so far in
/// one merge patch. A thousand installs at once made a thousand steps queue for their turn
/// one write each, and the last plans finished minutes after their CSVs.
#[derive(Default)]
pub struct CrdBatch {
    wanted: std::sync::Mutex<Wanted>,
    /// The turn to write, and what the last write covered.
    pub turn: tokio::sync::Mutex<Written>,
}

#[derive(Default)]
struct Wanted {
    /// `metadata.labels` and `metadata.annotations` wanted, merged.
    metadata: Map<String, Value>,
    /// How many wants were added so far.
    generation: u64,
}

/// Whether the CRD `existing` already holds the spec of the step's CRD `desired` (but for
/// what the API server defaults): writing it changes its metadata at most.
pub fn spec_holds(desired: &Value, existing: &Value) -> bool {
    spec_matches(&desired["spec"], &existing["spec"])
}

/// What the last write of a [`CrdBatch`] covered.
#[derive(Default)]
pub struct Written {
    /// The wants it included (all up to this generation).
    pub generation: u64,
    /// Whether the CRD it returned was Established.
    pub established: bool,
}

impl CrdBatch {
    fn wanted(&self) -> std::sync::MutexGuard<'_, Wanted> {
        self.wanted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a [`CrdWrite::Metadata`] patch to what is wanted; returns its generation.
    pub fn want(&self, patch: &Value) -> u64 {
        let mut wanted = self.wanted();
        merge_metadata(&mut wanted.metadata, patch);
        wanted.generation += 1;
        wanted.generation
    }

    /// Takes everything wanted, as one merge patch, and the generation it covers.
    pub fn take(&self) -> (Value, u64) {
        let mut wanted = self.wanted();
        let metadata = std::mem::take(&mut wanted.metadata);
        (json!({ "metadata": metadata }), wanted.generation)
    }

    /// Puts back what a failed write took, for the next turn.
    pub fn put_back(&self, patch: &Value) {
        merge_metadata(&mut self.wanted().metadata, patch);
    }
}

/// Merges `patch`'s labels and annotations into `into`. A value wins over a removal (null):
/// one step may think an alongside annotation stale that another step is adding.
fn merge_metadata(into: &mut Map<String, Value>, patch: &Value) {
    for field in ["labels", "annotations"] {
        for (key, value) in entries(&patch["metadata"][field]) {
            let merged = into
                .entry(field)
                .or_insert_with(|| Value::Object(Map::new()));
            let Some(merged) = merged.as_object_mut() else {
                continue;
            };
            if value.is_null() && merged.get(key).is_some_and(|v| !v.is_null()) {
                continue;
            }
            merged.insert(key.clone(), value.clone());
        }
    }
}

/// Per CRD, the step content last found already in it: a CRD read (or applied) Established
/// whose spec and manifest annotations were a step's, at a UID and generation. A step with
/// the same content, on a CRD the shared metadata cache shows at the same UID and
/// generation, then decides from that cache alone. At a thousand installs of one operator
/// the shared CRD grows to 130 KB (a label and an annotation per install), and a GET of it
/// per plan, hundreds at once, queued on the API server for up to a minute, long enough for
/// plans to fail.
#[derive(Default)]
pub struct SpecVerdicts(std::sync::Mutex<std::collections::HashMap<String, Verdict>>);

#[derive(Clone, Debug, PartialEq)]
struct Verdict {
    uid: String,
    generation: i64,
    content: u64,
}

impl SpecVerdicts {
    fn verdicts(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Verdict>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the CRD `name` at `uid` and `generation`, Established, holds the step
    /// content `content` (see [`content_digest`]).
    pub fn record(&self, name: &str, uid: Option<&str>, generation: Option<i64>, content: u64) {
        let (Some(uid), Some(generation)) = (uid, generation) else {
            return;
        };
        self.verdicts().insert(
            name.to_string(),
            Verdict {
                uid: uid.to_string(),
                generation,
                content,
            },
        );
    }

    /// Whether the CRD `name`, seen at `uid` and `generation`, is known to hold `desired`'s
    /// content, Established.
    pub fn holds(
        &self,
        name: &str,
        uid: Option<&str>,
        generation: Option<i64>,
        desired: &Value,
    ) -> bool {
        self.verdicts().get(name).is_some_and(|v| {
            Some(v.uid.as_str()) == uid
                && Some(v.generation) == generation
                && v.content == content_digest(desired)
        })
    }
}

/// A digest of what a CRD step applies whole: its spec and the manifest's own annotations
/// (not the alongside annotations, nor the labels, which a merge patch adds).
pub fn content_digest(desired: &Value) -> u64 {
    let own_annotations: Map<String, Value> = entries(&desired["metadata"]["annotations"])
        .filter(|(key, _)| !key.starts_with(ANNOTATION_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let text = serde_json::to_string(&(&desired["spec"], own_annotations)).unwrap_or_default();
    crate::cluster::ownership::fnv64(&[text.as_bytes()])
}

fn entries(map: &Value) -> impl Iterator<Item = (&String, &Value)> {
    map.as_object().into_iter().flatten()
}

/// `value` with every number as a float: a CRD read as typed (k8s-openapi's
/// `JSONSchemaProps` holds `minimum`, `maximum`, `multipleOf` as f64) says `1.0` where
/// its manifest says `1`, the same to the API server.
pub fn numbers_as_floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| value.clone(), Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        _ => value.clone(),
    }
}

/// Whether the stored `live` spec is the `desired` one, but for the fields the API server
/// defaults when a manifest leaves them out and how numbers are written.
fn spec_matches(desired: &Value, live: &Value) -> bool {
    let (desired, live) = (numbers_as_floats(desired), numbers_as_floats(live));
    let (Some(desired), Some(live)) = (desired.as_object(), live.as_object()) else {
        return false;
    };
    let mut live = live.clone();
    // `desired` is a Map here, whose indexing panics on a missing key: a CRD without
    // `spec.names` is the API server's to refuse, not a reason to stop.
    let names = desired.get("names").unwrap_or(&Value::Null);
    let kind = names["kind"].as_str().unwrap_or_default();
    let defaults = [
        ("conversion", json!({"strategy": "None"})),
        ("preserveUnknownFields", json!(false)),
    ];
    for (field, default) in defaults {
        if !desired.contains_key(field) && live.get(field) == Some(&default) {
            live.remove(field);
        }
    }
    if let (Some(Value::Object(names)), Some(wanted)) = (live.get_mut("names"), names.as_object()) {
        let name_defaults = [
            ("singular", kind.to_lowercase()),
            ("listKind", format!("{kind}List")),
        ];
        for (field, default) in name_defaults {
            if !wanted.contains_key(field)
                && names.get(field).and_then(Value::as_str) == Some(&default)
            {
                names.remove(field);
            }
        }
    }
    &live == desired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::installplan::alongside::key;

    fn crd(labels: Value, annotations: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "apps.example.com", "labels": labels, "annotations": annotations},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "apps", "kind": "App"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        })
    }

    /// The CRD as the API server returns it: defaults filled in, status and other fields.
    fn stored(mut crd: Value) -> Value {
        crd["spec"]["conversion"] = json!({"strategy": "None"});
        crd["spec"]["names"]["singular"] = json!("app");
        crd["spec"]["names"]["listKind"] = json!("AppList");
        crd["metadata"]["resourceVersion"] = json!("42");
        crd["metadata"]["labels"]["someone.else/label"] = json!("x");
        crd["status"] = json!({"conditions": [{"type": "Established", "status": "True"}]});
        crd
    }

    #[test]
    fn a_verdict_holds_for_the_same_content_at_the_same_uid_and_generation_only() {
        let verdicts = SpecVerdicts::default();
        let name = "apps.example.com";
        let step = crd(
            json!({"a": ""}),
            json!({"owner": "x", key("ns", "a.v1"): "ns/a.v1"}),
        );
        assert!(
            !verdicts.holds(name, Some("u"), Some(1), &step),
            "nothing recorded"
        );
        verdicts.record(name, Some("u"), Some(1), content_digest(&step));
        assert!(verdicts.holds(name, Some("u"), Some(1), &step));
        // Another install's step: its own label and alongside annotation, the same content.
        let other = crd(
            json!({"b": ""}),
            json!({"owner": "x", key("ns2", "a.v1"): "ns2/a.v1"}),
        );
        assert!(verdicts.holds(name, Some("u"), Some(1), &other));
        // A new spec (generation), a CRD made again (UID), other content: read again.
        assert!(!verdicts.holds(name, Some("u"), Some(2), &step));
        assert!(!verdicts.holds(name, Some("v"), Some(1), &step));
        assert!(!verdicts.holds(name, None, None, &step));
        let mut respec = step;
        respec["spec"]["scope"] = json!("Cluster");
        assert!(!verdicts.holds(name, Some("u"), Some(1), &respec));
        let reannotated = crd(json!({"a": ""}), json!({"owner": "y"}));
        assert!(!verdicts.holds(name, Some("u"), Some(1), &reannotated));
    }

    #[test]
    fn a_crd_that_says_it_all_is_not_written() {
        let alongside = json!({ key("a", "csv"): "a/csv" });
        let desired = crd(
            json!({"olm.managed": "true", "operators.coreos.com/app.a": ""}),
            alongside,
        );
        assert_eq!(
            decide(&desired, &stored(desired.clone())),
            CrdWrite::Nothing
        );
    }

    #[test]
    fn another_install_adds_only_its_label_and_annotation() {
        let first = crd(
            json!({"olm.managed": "true", "operators.coreos.com/app.a": ""}),
            json!({ key("a", "csv"): "a/csv", key("gone", "csv"): "gone/csv" }),
        );
        let second = crd(
            json!({"olm.managed": "true", "operators.coreos.com/app.b": ""}),
            json!({ key("a", "csv"): "a/csv", key("b", "csv"): "b/csv" }),
        );
        assert_eq!(
            decide(&second, &stored(first)),
            CrdWrite::Metadata(json!({"metadata": {
                "labels": {"operators.coreos.com/app.b": ""},
                "annotations": {key("b", "csv"): "b/csv", key("gone", "csv"): null},
            }}))
        );
    }

    #[test]
    fn wants_are_merged_into_one_write_and_a_value_beats_a_removal() {
        let batch = CrdBatch::default();
        let first = batch.want(&json!({"metadata": {
            "labels": {"operators.coreos.com/app.a": ""},
            "annotations": {"k-a": "a/csv", "k-b": null},
        }}));
        let second = batch.want(&json!({"metadata": {
            "labels": {"operators.coreos.com/app.b": ""},
            "annotations": {"k-b": "b/csv"},
        }}));
        assert_eq!((first, second), (1, 2));
        let (patch, generation) = batch.take();
        assert_eq!(generation, 2);
        assert_eq!(
            patch,
            json!({"metadata": {
                "labels": {"operators.coreos.com/app.a": "", "operators.coreos.com/app.b": ""},
                "annotations": {"k-a": "a/csv", "k-b": "b/csv"},
            }})
        );
        // Taken: nothing left; a failed write puts it back for the next turn.
        assert_eq!(batch.take().0, json!({"metadata": {}}));
        batch.put_back(&patch);
        assert_eq!(batch.take(), (patch, 2));
    }

    #[test]
    fn a_changed_spec_or_manifest_annotation_is_applied_whole() {
        let desired = crd(json!({"olm.managed": "true"}), json!({"tool/version": "2"}));
        let mut old_schema = stored(desired.clone());
        old_schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"] =
            json!({"spec": {"type": "object"}});
        assert_eq!(decide(&desired, &old_schema), CrdWrite::Apply);
        assert!(!spec_holds(&desired, &old_schema));
        let mut old_annotation = stored(desired.clone());
        old_annotation["metadata"]["annotations"]["tool/version"] = json!("1");
        assert_eq!(decide(&desired, &old_annotation), CrdWrite::Apply);
        // Applied whole, but only its metadata changes: the spec (with what the API server
        // defaults) is held already, so the preview sees no CRD change.
        assert!(spec_holds(&desired, &old_annotation));
        // A number read back as a float (typed reads) is the same number.
        let mut floats = stored(desired.clone());
        let mut whole = desired.clone();
        let props = &mut whole["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        *props = json!({"replicas": {"type": "integer", "minimum": 1}});
        floats["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"] =
            json!({"replicas": {"type": "integer", "minimum": 1.0}});
        assert!(spec_holds(&whole, &floats));
        // A conversion the manifest sets, or a field the API server would not default,
        // is compared as it is.
        let mut converted = stored(desired.clone());
        converted["spec"]["conversion"] = json!({"strategy": "Webhook"});
        assert_eq!(decide(&desired, &converted), CrdWrite::Apply);
        let mut other_singular = stored(desired.clone());
        other_singular["spec"]["names"]["singular"] = json!("application");
        assert_eq!(decide(&desired, &other_singular), CrdWrite::Apply);
    }
}
