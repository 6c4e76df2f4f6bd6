//! API handles in a scope: one namespace, or all of them.

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::api::Api;

/// An API for namespaced `K` in `scope` (all namespaces when None).
pub fn api_in<K>(client: &kube::Client, scope: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match scope {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}
