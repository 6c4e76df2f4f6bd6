//! The webhooks' answers, pure: AdmissionReview and ConversionReview in, the review with
//! its response out.

use base64::Engine;
use serde_json::{Value, json};

/// The label the mutating webhook adds.
pub const MUTATED_LABEL: &str = "webhook-test.olm-rs.io/mutated";
/// The `spec.color` the validating webhook refuses.
pub const FORBIDDEN_COLOR: &str = "forbidden";

fn admission(review: &Value, response: Value) -> Value {
    let mut response = response;
    response["uid"] = review["request"]["uid"].clone();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

/// Adds [`MUTATED_LABEL`] to the object, as a JSON patch.
pub fn mutate(review: &Value) -> Value {
    let object = &review["request"]["object"];
    let patch = if object["metadata"]["labels"].is_object() {
        let path = format!("/metadata/labels/{}", MUTATED_LABEL.replace('/', "~1"));
        json!([{"op": "add", "path": path, "value": "true"}])
    } else {
        json!([{"op": "add", "path": "/metadata/labels", "value": {MUTATED_LABEL: "true"}}])
    };
    let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
    admission(
        review,
        json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}),
    )
}

/// Refuses an object whose `spec.color` is [`FORBIDDEN_COLOR`], saying so.
pub fn validate(review: &Value) -> Value {
    let object = &review["request"]["object"];
    if object["spec"]["color"] == FORBIDDEN_COLOR {
        let name = review["request"]["name"].as_str().unwrap_or_default();
        let message = format!(
            "widget {name}: the color {FORBIDDEN_COLOR:?} is refused by webhook-test-operator"
        );
        return admission(
            review,
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": message}}),
        );
    }
    admission(review, json!({"allowed": true}))
}

/// Each object in the desired version: v1 `spec.color` is v2 `spec.colour`.
pub fn convert(review: &Value) -> Value {
    let desired = review["request"]["desiredAPIVersion"]
        .as_str()
        .unwrap_or_default();
    let converted: Vec<Value> = review["request"]["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|object| convert_one(object, desired))
        .collect();
    json!({
        "apiVersion": review["apiVersion"],
        "kind": "ConversionReview",
        "response": {
            "uid": review["request"]["uid"],
            "convertedObjects": converted,
            "result": {"status": "Success"},
        },
    })
}

fn convert_one(object: &Value, desired: &str) -> Value {
    let mut object = object.clone();
    let (from, to) = if desired.ends_with("/v2") {
        ("color", "colour")
    } else {
        ("colour", "color")
    };
    if let Some(spec) = object["spec"].as_object_mut()
        && let Some(value) = spec.remove(from)
    {
        spec.insert(to.to_string(), value);
    }
    object["apiVersion"] = json!(desired);
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded_patch(answer: &Value) -> Value {
        let patch = answer["response"]["patch"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn mutation_adds_the_label_with_or_without_labels() {
        let bare = json!({"request": {"uid": "u1", "object": {"metadata": {"name": "a"}}}});
        let answer = mutate(&bare);
        assert_eq!(answer["response"]["uid"], "u1");
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(
            decoded_patch(&answer),
            json!([{"op": "add", "path": "/metadata/labels", "value": {MUTATED_LABEL: "true"}}])
        );
        let labelled =
            json!({"request": {"uid": "u2", "object": {"metadata": {"labels": {"x": "y"}}}}});
        assert_eq!(
            decoded_patch(&mutate(&labelled))[0]["path"],
            "/metadata/labels/webhook-test.olm-rs.io~1mutated"
        );
    }

    #[test]
    fn validation_refuses_the_forbidden_color_only() {
        let review = |color: &str| json!({"request": {"uid": "u", "name": "w", "object": {"spec": {"color": color}}}});
        assert_eq!(validate(&review("blue"))["response"]["allowed"], true);
        let refused = validate(&review(FORBIDDEN_COLOR));
        assert_eq!(refused["response"]["allowed"], false);
        assert_eq!(
            refused["response"]["status"]["message"],
            "widget w: the color \"forbidden\" is refused by webhook-test-operator"
        );
    }

    #[test]
    fn conversion_renames_the_field_both_ways() {
        let review = |desired: &str, object: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "request": {
                "uid": "u", "desiredAPIVersion": desired, "objects": [object]}})
        };
        let v1 =
            json!({"apiVersion": "webhook-test.olm-rs.io/v1", "spec": {"color": "red", "size": 3}});
        let up = convert(&review("webhook-test.olm-rs.io/v2", v1.clone()));
        assert_eq!(up["response"]["result"]["status"], "Success");
        let v2 = up["response"]["convertedObjects"][0].clone();
        assert_eq!(
            v2,
            json!({"apiVersion": "webhook-test.olm-rs.io/v2", "spec": {"colour": "red", "size": 3}})
        );
        let down = convert(&review("webhook-test.olm-rs.io/v1", v2));
        assert_eq!(down["response"]["convertedObjects"][0], v1);
    }
}
