//! What a round reads: the caches, the group's ServiceAccount and the provided APIs' CRDs
//! (from the shared CRD cache, the API server only for one it has not seen).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
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
        if let Some(uid) = source_uid(ctx, client, group, &api.source).await? {
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

/// The UID of the CRD or APIService that defines a provided API, if it exists: from the
/// shared cache, else from the API server.
async fn source_uid(
    ctx: &OperatorGroupContext,
    client: &kube::Client,
    group: &OperatorGroup,
    source: &ApiSource,
) -> Result<Option<String>, Error> {
    let cluster = &ctx.shared.informers.cluster;
    let name = source.name();
    let cached = match source {
        ApiSource::Crd(_) => cluster.crds.store().get(&ObjectRef::new(name)),
        ApiSource::ApiService(_) => None,
    };
    let cached = cached
        .and_then(|o| o.metadata.uid.clone())
        .or_else(|| match source {
            ApiSource::ApiService(_) => cluster
                .owned_api_services
                .store()
                .get(&ObjectRef::new(name))
                .and_then(|o| o.metadata.uid.clone()),
            ApiSource::Crd(_) => None,
        });
    if let Some(uid) = cached {
        return Ok(Some(uid));
    }
    let uid = match source {
        ApiSource::Crd(_) => Api::<CustomResourceDefinition>::all(client.clone())
            .get_metadata_opt(name)
            .await
            .map_err(kube_error(group, "read_crd"))?
            .and_then(|o| o.metadata.uid),
        ApiSource::ApiService(_) => Api::<APIService>::all(client.clone())
            .get_metadata_opt(name)
            .await
            .map_err(kube_error(group, "read_api_service"))?
            .and_then(|o| o.metadata.uid),
    };
    Ok(uid)
}
