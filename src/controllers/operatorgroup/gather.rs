//! What a round reads: the caches, the group's ServiceAccount and the provided APIs' CRDs
//! (from the shared CRD cache, the API server only for one it has not seen).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::context::{Error, OperatorGroupContext, key, kube_error};
use super::status::{self, Gathered, NamespaceInfo};
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
    // Roles per API only once its CRD exists (they are owned by it). Its UID comes from
    // the shared CRD cache, read from the API server only when the cache has not seen it:
    // a CRD that many installs share was read once per group round, thousands of times.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let cached = ctx.shared.informers.cluster.crds.store();
    let mut crd_uids = BTreeMap::new();
    for api in status::provided_apis(&members) {
        let uid = match cached
            .get(&ObjectRef::new(&api.crd))
            .and_then(|crd| crd.metadata.uid.clone())
        {
            Some(uid) => Some(uid),
            None => crds
                .get_metadata_opt(&api.crd)
                .await
                .map_err(kube_error(group, "read_crd"))?
                .and_then(|crd| crd.metadata.uid),
        };
        if let Some(uid) = uid {
            crd_uids.insert(api.crd, uid);
        }
    }
    Ok(Gathered {
        namespaces,
        groups_in_namespace,
        service_account_uid,
        members,
        crd_uids,
    })
}
