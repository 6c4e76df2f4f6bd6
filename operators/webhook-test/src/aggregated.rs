//! A minimal aggregated API, served when OLM owns an APIService for this Deployment
//! (`spec.apiservicedefinitions.owned`): discovery of `aggregated.webhook-test.olm-rs.io/v1alpha1`
//! and a read-only list of one `Gadget` per namespace, naming the pod that served it. It
//! trusts the aggregator and checks no client certificate: a test API, nothing to protect.

use axum::Json;
use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use serde_json::{Value, json};

pub const GROUP: &str = "aggregated.webhook-test.olm-rs.io";
pub const VERSION: &str = "v1alpha1";

pub fn router() -> Router {
    let base = format!("/apis/{GROUP}/{VERSION}");
    Router::new()
        .route(&base, get(|| async { Json(discovery()) }))
        .route(
            &format!("{base}/gadgets"),
            get(|| async { Json(gadgets(None)) }),
        )
        .route(
            &format!("{base}/namespaces/{{namespace}}/gadgets"),
            get(|Path(namespace): Path<String>| async move { Json(gadgets(Some(&namespace))) }),
        )
        .route("/healthz", get(|| async { "ok" }))
}

fn discovery() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [{
            "name": "gadgets", "singularName": "gadget", "namespaced": true,
            "kind": "Gadget", "verbs": ["list"],
        }],
    })
}

/// One Gadget in `namespace` (the operator's own namespace across all), naming this pod.
fn gadgets(namespace: Option<&str>) -> Value {
    let pod = std::env::var("POD_NAME").unwrap_or_default();
    let own = std::env::var("POD_NAMESPACE").unwrap_or_default();
    let namespace = namespace.unwrap_or(&own);
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "GadgetList",
        "metadata": {"resourceVersion": "1"},
        "items": [{
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": "Gadget",
            "metadata": {"name": "gadget", "namespace": namespace},
            "spec": {"servedBy": pod},
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_names_the_one_resource() {
        let list = discovery();
        assert_eq!(
            list["groupVersion"],
            "aggregated.webhook-test.olm-rs.io/v1alpha1"
        );
        assert_eq!(list["resources"][0]["name"], "gadgets");
        let gadgets = gadgets(Some("ns"));
        assert_eq!(gadgets["items"][0]["metadata"]["namespace"], "ns");
        assert_eq!(gadgets["kind"], "GadgetList");
    }
}
