//! What a round reads: the caches, the group's ServiceAccount and the provided APIs' CRDs
//! (from the shared CRD cache, the API server only for one it has not seen).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::context::{Error, OperatorGroupContext, key, kube_error};
use super::status::{self, ApiSource, Gathered, NamespaceInfo};
use crate::api::{ClusterServiceVersion, OperatorGroup};

/// What a round reads: the caches, the group's ServiceAccount and the provided APIs' CRDs.
pub(super) async fn gather(
    group: &OperatorGroup,
    ctx: &OperatorGroupContext,
) -> Result<Gathered, Error> {
    let (namespace, _) = key(group);
    let client = &ctx.shared.client;
    let namespaces: Vec<NamespaceInfo> = ctx
        .namespaces
        .state()
        .iter()
        .map(|ns| NamespaceInfo {
            name: ns.name_any(),
            labels: ns.labels().clone(),
        })
        .collect();
    let groups_in_namespace = ctx
        .groups
        .state()
        .iter()
        .filter(|g| g.meta().namespace.as_deref() == Some(namespace.as_str()))
        .count();
    let service_account_uid = match group.spec.service_account_name.as_deref() {
        Some(sa) if !sa.is_empty() => Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
            .get_opt(sa)
            .await
            .map_err(kube_error(group, "read_service_account"))?
            .and_then(|sa| sa.metadata.uid),
        _ => None,
    };
    let members: Vec<ClusterServiceVersion> = ctx
        .csvs
        .state()
        .iter()
        .filter(|csv| csv.meta().namespace.as_deref() == Some(namespace.as_str()))
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|csv| !csv.is_copy())
        .cloned()
        .collect();
    // Roles per API only once its CRD or APIService exists (they are owned by it). Its UID
    // comes from the shared caches, read from the API server only when a cache has not
    // seen it: a CRD that many installs share was read once per group round, thousands of
    // times.
    let mut source_uids = BTreeMap::new();
    for api in status::provided_apis(&members) {
        if let Some(uid) = source_uid(ctx, client, group, &api.source, &members).await? {
            source_uids.insert(api.source, uid);
        }
    }
    Ok(Gathered {
        namespaces,
        groups_in_namespace,
        service_account_uid,
        members,
        source_uids,
    })
}

/// The UID of what defines a provided API, if it may own the API's roles. A CRD: when it
/// exists (shared cache, else the API server). An APIService: only one OLM made for a member
/// CSV (its owner labels name it; from the cache of those): a CSV may claim any group, and
/// the built-in `v1.` for the core group always exists, so the name alone would let a tenant
/// who may write a CSV have `view` aggregate, say, Secrets.
async fn source_uid(
    ctx: &OperatorGroupContext,
    client: &kube::Client,
    group: &OperatorGroup,
    source: &ApiSource,
    members: &[ClusterServiceVersion],
) -> Result<Option<String>, Error> {
    let cluster = &ctx.shared.informers.cluster;
    let name = source.name();
    if let ApiSource::ApiService(_) = source {
        let Some(service) = cluster
            .owned_api_services
            .store()
            .get(&ObjectRef::new(name))
        else {
            return Ok(None);
        };
        let (namespace, _) = key(group);
        return Ok(made_for_member(service.labels(), &namespace, members)
            .then(|| service.metadata.uid.clone())
            .flatten());
    }
    let cached = cluster.crds.store().get(&ObjectRef::new(name));
    if let Some(uid) = cached.and_then(|o| o.metadata.uid.clone()) {
        return Ok(Some(uid));
    }
    Ok(Api::<CustomResourceDefinition>::all(client.clone())
        .get_metadata_opt(name)
        .await
        .map_err(kube_error(group, "read_crd"))?
        .and_then(|o| o.metadata.uid))
}

/// Whether owner `labels` name one of `members` (CSVs of `namespace`).
fn made_for_member(
    labels: &BTreeMap<String, String>,
    namespace: &str,
    members: &[ClusterServiceVersion],
) -> bool {
    use crate::cluster::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
    labels.get(OWNER_KIND_LABEL).map(String::as_str) == Some("ClusterServiceVersion")
        && labels.get(OWNER_NAMESPACE_LABEL).map(String::as_str) == Some(namespace)
        && labels.get(OWNER_LABEL).is_some_and(|owner| {
            members
                .iter()
                .any(|m| m.metadata.name.as_ref() == Some(owner))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_api_service_made_for_a_member_owns_roles() {
        let member = ClusterServiceVersion::new("op.v1", Default::default());
        let labels = |kind: &str, ns: &str, name: &str| {
            BTreeMap::from([
                ("olm.owner.kind".to_string(), kind.to_string()),
                ("olm.owner.namespace".to_string(), ns.to_string()),
                ("olm.owner".to_string(), name.to_string()),
            ])
        };
        let members = [member];
        assert!(made_for_member(
            &labels("ClusterServiceVersion", "ns", "op.v1"),
            "ns",
            &members
        ));
        // The built-in `v1.` has no owner labels; another namespace's or CSV's is not ours.
        assert!(!made_for_member(&BTreeMap::new(), "ns", &members));
        assert!(!made_for_member(
            &labels("ClusterServiceVersion", "other", "op.v1"),
            "ns",
            &members
        ));
        assert!(!made_for_member(
            &labels("ClusterServiceVersion", "ns", "op.v2"),
            "ns",
            &members
        ));
    }
}
