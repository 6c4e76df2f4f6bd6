//! A rendered bundle's `relatedImages`, derived from its CSV as `opm render` derives them.

use std::collections::HashSet;

use serde_json::Value;

use crate::catalog::model::fbc::RelatedImage;
use crate::catalog::text::go_json;

/// The related images of a bundle, as opm renders them:
/// - the CSV's `spec.relatedImages` as listed, repeated or empty entries included;
/// - the bundle image, unless the list names it;
/// - each distinct image of the deployments' containers and init containers that the list
///   does not name, without a name (an empty image too), when the install strategy is
///   `deployment`. The operator image annotation (`containerImage`) plays no part.
///
/// opm reads these fields into Go structs, so their names match without regard to case.
/// In the order listed, then containers, then the bundle image (opm sorts by image; the
/// order is not part of the catalog's meaning, and `catalog/` keeps its order).
pub fn related_images(csv: &Value, bundle_image: &str) -> Vec<RelatedImage> {
    let spec = field(csv, "spec");
    let mut out: Vec<RelatedImage> = items(field(spec, "relatedImages"))
        .map(|r| RelatedImage {
            name: text(field(r, "name")),
            image: text(field(r, "image")),
        })
        .collect();
    let mut named: HashSet<String> = out.iter().map(|r| r.image.clone()).collect();
    // Checked against the list alone: a container running the bundle image lists it again,
    // as opm does.
    let bundle = !bundle_image.is_empty() && !named.contains(bundle_image);
    for image in operator_images(spec) {
        if named.insert(image.clone()) {
            out.push(unnamed(image));
        }
    }
    if bundle {
        out.push(unnamed(bundle_image.to_string()));
    }
    out
}

/// The images of the pods the CSV's deployments run; none for another install strategy.
fn operator_images(spec: &Value) -> Vec<String> {
    let install = field(spec, "install");
    if field(install, "strategy").as_str() != Some("deployment") {
        return Vec::new();
    }
    let mut images = Vec::new();
    for deployment in items(field(field(install, "spec"), "deployments")) {
        let pod = field(field(field(deployment, "spec"), "template"), "spec");
        for key in ["containers", "initContainers"] {
            images.extend(items(field(pod, key)).map(|c| text(field(c, "image"))));
        }
    }
    images
}

fn unnamed(image: String) -> RelatedImage {
    RelatedImage {
        name: String::new(),
        image,
    }
}

/// The field Go's JSON decoding reads (see [`go_json::get`]); null when absent.
fn field<'a>(value: &'a Value, key: &str) -> &'a Value {
    value
        .as_object()
        .and_then(|map| go_json::get(map, key))
        .unwrap_or(&Value::Null)
}

fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

/// A string field; anything else reads as Go's zero value.
fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const OPERATOR: &str = "quay.io/x/operator:1";
    const BUNDLE: &str = "quay.io/x/bundle:1";

    fn csv(related: Value, pod: Value) -> Value {
        json!({"kind": "ClusterServiceVersion", "spec": {
            "relatedImages": related,
            "install": {"strategy": "deployment", "spec": {"deployments": [
                {"name": "d", "spec": {"template": {"spec": pod}}}
            ]}}
        }})
    }

    fn pairs(images: &[RelatedImage]) -> Vec<(&str, &str)> {
        images
            .iter()
            .map(|r| (r.name.as_str(), r.image.as_str()))
            .collect()
    }

    #[test]
    fn listed_entries_are_kept_as_listed() {
        let related = json!([
            {"name": "manager", "image": OPERATOR},
            {"name": "", "image": OPERATOR},
            {"name": "manager", "image": OPERATOR},
            {"name": "no-image"},
        ]);
        let pod = json!({"containers": [{"image": OPERATOR}]});
        let images = related_images(&csv(related, pod), BUNDLE);
        assert_eq!(
            pairs(&images),
            [
                ("manager", OPERATOR),
                ("", OPERATOR),
                ("manager", OPERATOR),
                ("no-image", ""),
                ("", BUNDLE),
            ]
        );
    }

    #[test]
    fn unlisted_container_images_are_added_without_a_name() {
        let pod = json!({
            "containers": [{"image": OPERATOR}, {"name": "no-image"}],
            "initContainers": [{"image": "quay.io/x/init:1"}, {"image": OPERATOR}],
        });
        let mut spec = csv(Value::Null, pod);
        // A second deployment running the same image adds nothing.
        let first = spec["spec"]["install"]["spec"]["deployments"][0].clone();
        spec["spec"]["install"]["spec"]["deployments"]
            .as_array_mut()
            .unwrap()
            .push(first);
        assert_eq!(
            pairs(&related_images(&spec, "")),
            [("", OPERATOR), ("", ""), ("", "quay.io/x/init:1")]
        );
    }

    #[test]
    fn listed_images_and_the_bundle_image_are_not_repeated_but_a_container_may_repeat_it() {
        let related = json!([{"name": "op", "image": OPERATOR}, {"name": "none", "image": ""}]);
        let pod = json!({"containers": [{"image": OPERATOR}, {"name": "no-image"}]});
        assert_eq!(
            pairs(&related_images(&csv(related, pod), BUNDLE)),
            [("op", OPERATOR), ("none", ""), ("", BUNDLE)]
        );
        let pod = json!({"containers": [{"image": BUNDLE}]});
        assert_eq!(
            pairs(&related_images(&csv(json!([]), pod), BUNDLE)),
            [("", BUNDLE), ("", BUNDLE)]
        );
        let related = json!([{"name": "b", "image": BUNDLE}]);
        let pod = json!({"containers": [{"image": BUNDLE}]});
        assert_eq!(
            pairs(&related_images(&csv(related, pod), BUNDLE)),
            [("b", BUNDLE)]
        );
    }

    #[test]
    fn only_the_deployment_strategy_has_images_and_the_annotation_has_none() {
        let mut spec = csv(Value::Null, json!({"containers": [{"image": OPERATOR}]}));
        spec["metadata"] = json!({"annotations": {"containerImage": "quay.io/x/other:1"}});
        assert_eq!(pairs(&related_images(&spec, "")), [("", OPERATOR)]);
        spec["spec"]["install"]["strategy"] = json!("other");
        assert!(related_images(&spec, "").is_empty());
    }

    #[test]
    fn field_names_match_without_regard_to_case() {
        let related = json!([{"NAME": "op", "Image": OPERATOR}]);
        let pod = json!({"Containers": [{"IMAGE": "quay.io/x/other:1"}]});
        assert_eq!(
            pairs(&related_images(&csv(related, pod), "")),
            [("op", OPERATOR), ("", "quay.io/x/other:1")]
        );
    }
}
