//! A Module's status from the nodes: how many match its selector. Nothing is loaded, so no
//! node is desired or available for the module loader or the device plugin.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

/// `spec.selector` of a Module: node labels, all of which a node must carry.
pub fn selector(module: &Value) -> BTreeMap<String, String> {
    module["spec"]["selector"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// How many of `nodes` carry every label of `selector` (an empty selector selects all).
pub fn matching<'a>(
    selector: &BTreeMap<String, String>,
    nodes: impl IntoIterator<Item = &'a Node>,
) -> usize {
    nodes
        .into_iter()
        .filter(|node| {
            let labels = node.metadata.labels.as_ref();
            selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count()
}

/// The status KMM's manager writes, as far as a stand-in that loads nothing can say it.
pub fn desired(matching: usize) -> Value {
    let daemonset = json!({
        "nodesMatchingSelectorNumber": matching,
        "desiredNumber": 0,
        "availableNumber": 0,
    });
    json!({ "moduleLoader": daemonset, "devicePlugin": daemonset })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn node(labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_node_matches_when_it_carries_every_label_of_the_selector() {
        let module = json!({"spec": {"selector": {"role": "worker", "zone": "a"}}});
        let nodes = [
            node(&[("role", "worker"), ("zone", "a"), ("extra", "x")]),
            node(&[("role", "worker"), ("zone", "b")]),
            node(&[("role", "worker")]),
        ];
        assert_eq!(matching(&selector(&module), &nodes), 1);
        assert_eq!(matching(&selector(&json!({"spec": {}})), &nodes), 3);
    }

    #[test]
    fn status_counts_matches_and_promises_nothing_loaded() {
        let status = desired(2);
        assert_eq!(status["moduleLoader"]["nodesMatchingSelectorNumber"], 2);
        assert_eq!(status["moduleLoader"]["availableNumber"], 0);
        assert_eq!(status["devicePlugin"]["desiredNumber"], 0);
    }
}
