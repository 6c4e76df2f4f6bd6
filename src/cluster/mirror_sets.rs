//! OpenShift's `ImageDigestMirrorSet` and `ImageTagMirrorSet` (`config.openshift.io/v1`),
//! the cluster-wide form of registries.conf mirrors that the nodes follow: while their CRDs
//! exist they are watched, and their rules are added to the mirror configuration every pull
//! of `olm run` reads ([`LiveMirrors`]). Every replica watches: every replica pulls.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::informers::ClusterInformers;
use crate::oci::mirrors::{LiveMirrors, MirrorSetRule};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Digest,
    Tag,
}

const KINDS: [Kind; 2] = [Kind::Digest, Kind::Tag];

impl Kind {
    fn kind(self) -> &'static str {
        match self {
            Kind::Digest => "ImageDigestMirrorSet",
            Kind::Tag => "ImageTagMirrorSet",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Digest => "imagedigestmirrorsets",
            Kind::Tag => "imagetagmirrorsets",
        }
    }

    fn crd(self) -> String {
        format!("{}.config.openshift.io", self.plural())
    }

    fn resource(self) -> ApiResource {
        ApiResource {
            group: "config.openshift.io".into(),
            version: "v1".into(),
            api_version: "config.openshift.io/v1".into(),
            kind: self.kind().into(),
            plural: self.plural().into(),
        }
    }

    /// The rules of one object's spec, in its order.
    fn rules(self, name: &str, spec: &Value) -> Vec<MirrorSetRule> {
        let field = match self {
            Kind::Digest => "imageDigestMirrors",
            Kind::Tag => "imageTagMirrors",
        };
        let entries = spec[field]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        entries
            .iter()
            .filter_map(|entry| {
                let source = entry["source"].as_str()?.trim();
                let mirrors = entry["mirrors"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                Some(MirrorSetRule {
                    source: source.to_string(),
                    mirrors: mirrors
                        .iter()
                        .filter_map(|m| m.as_str().map(|m| m.trim().to_string()))
                        .collect(),
                    by_digest: self == Kind::Digest,
                    mirrors_only: (entry["mirrorSourcePolicy"] == "NeverContactSource")
                        .then(|| format!("{}/{name}", self.kind())),
                })
            })
            .filter(|rule| !rule.source.is_empty())
            .collect()
    }
}

/// Runs until the process ends: watches the kinds whose CRDs exist, again each time that
/// set changes, and keeps `live` at the file's mirrors plus every object's rules.
pub async fn run(client: Client, cluster: Arc<ClusterInformers>, live: Arc<LiveMirrors>) {
    let (crds, touched) = cluster.crds.subscribe_touched();
    let mut touched = std::pin::pin!(touched);
    loop {
        let kinds = present(&crds);
        live.set_rules(&[]);
        let changed = async {
            while let Some(crd) = touched.next().await {
                if KINDS.iter().any(|k| k.crd() == crd.name_any()) && present(&crds) != kinds {
                    return;
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = watch(&client, &kinds, &live) => {}
            () = changed => {}
        }
    }
}

fn present(crds: &Store<PartialObjectMeta<CustomResourceDefinition>>) -> Vec<Kind> {
    KINDS
        .into_iter()
        .filter(|k| crds.get(&ObjectRef::new(&k.crd())).is_some())
        .collect()
}

/// Follows the objects of `kinds` (forever; nothing to do without any).
async fn watch(client: &Client, kinds: &[Kind], live: &LiveMirrors) {
    let streams = kinds.iter().map(|&kind| {
        let api = Api::<DynamicObject>::all_with(client.clone(), &kind.resource());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |event| (kind, event))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let mut objects: BTreeMap<(Kind, String), Vec<MirrorSetRule>> = BTreeMap::new();
    while let Some((kind, event)) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => objects.retain(|(k, _), _| *k != kind),
            Ok(watcher::Event::InitApply(o) | watcher::Event::Apply(o)) => {
                let name = o.name_any();
                let rules = kind.rules(&name, &o.data["spec"]);
                objects.insert((kind, name), rules);
            }
            Ok(watcher::Event::Delete(o)) => {
                objects.remove(&(kind, o.name_any()));
            }
            Ok(watcher::Event::InitDone) => {}
            Err(error) => {
                tracing::warn!(kind = kind.kind(), %error, "watching mirror sets");
                continue;
            }
        }
        let rules: Vec<MirrorSetRule> = objects.values().flatten().cloned().collect();
        tracing::debug!(rules = rules.len(), "mirror sets changed");
        live.set_rules(&rules);
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_follow_the_spec_in_order_and_name_never_contact_source() {
        let spec = serde_json::json!({"imageDigestMirrors": [
            {"source": "quay.io/olm-rs", "mirrors": ["mirror.corp/olm-rs", "backup.corp/olm-rs"]},
            {"source": "registry.example", "mirrors": ["mirror.corp/example"],
             "mirrorSourcePolicy": "NeverContactSource"},
            {"mirrors": ["no-source.corp"]},
        ]});
        let rules = Kind::Digest.rules("corp", &spec);
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].source, "quay.io/olm-rs");
        assert_eq!(
            rules[0].mirrors,
            ["mirror.corp/olm-rs", "backup.corp/olm-rs"]
        );
        assert!(rules[0].by_digest && rules[0].mirrors_only.is_none());
        assert_eq!(
            rules[1].mirrors_only.as_deref(),
            Some("ImageDigestMirrorSet/corp")
        );
        let tags = serde_json::json!({"imageTagMirrors": [
            {"source": "quay.io/olm-rs", "mirrors": ["mirror.corp/olm-rs"],
             "mirrorSourcePolicy": "AllowContactingSource"},
        ]});
        let rules = Kind::Tag.rules("tags", &tags);
        assert!(!rules[0].by_digest && rules[0].mirrors_only.is_none());
        assert!(
            Kind::Tag.rules("x", &spec).is_empty(),
            "another kind's field"
        );
    }
}
