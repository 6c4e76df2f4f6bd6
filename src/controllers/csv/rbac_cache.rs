//! The shared RBAC caches as the CSV controller reads them: what a CSV's accounts hold,
//! and the Roles it spreads to its group's targets.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::cluster::ownership::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

use super::{owned, rbac, serving, webhooks};

pub(super) struct RbacStores {
    pub(super) roles: Store<Role>,
    pub(super) role_bindings: Store<RoleBinding>,
    pub(super) cluster_roles: Store<ClusterRole>,
    pub(super) cluster_role_bindings: Store<ClusterRoleBinding>,
}

impl RbacStores {
    pub(super) async fn listed(&self) -> bool {
        use crate::controllers::kit::cache_ready::listed;
        listed(&self.roles).await
            && listed(&self.role_bindings).await
            && listed(&self.cluster_roles).await
            && listed(&self.cluster_role_bindings).await
    }

    /// The Roles and RoleBindings of `namespace` that carry the owner labels of CSV `name`
    /// there (not copies), sorted by name.
    pub(super) fn owned(
        &self,
        name: &str,
        namespace: &str,
    ) -> (Vec<Arc<Role>>, Vec<Arc<RoleBinding>>) {
        let owned = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            let labels = meta.labels.as_ref();
            let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
            meta.namespace.as_deref() == Some(namespace)
                && label(OWNER_LABEL) == Some(name)
                && label(OWNER_NAMESPACE_LABEL) == Some(namespace)
                && label(OWNER_KIND_LABEL) == Some("ClusterServiceVersion")
                && label(crate::api::COPIED_FROM_LABEL).is_none()
        };
        let mut roles: Vec<Arc<Role>> = self
            .roles
            .state()
            .into_iter()
            .filter(|r| owned(&r.metadata))
            .collect();
        let mut bindings: Vec<Arc<RoleBinding>> = self
            .role_bindings
            .state()
            .into_iter()
            .filter(|b| owned(&b.metadata))
            .collect();
        roles.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        bindings.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        (roles, bindings)
    }
}

impl RbacStores {
    /// The serving bindings outside the namespace, named so that no other install's is
    /// taken ([`webhooks::unshare`], from the caches).
    pub(super) fn unshare(&self, planned: &mut [owned::Planned], namespace: &str) {
        webhooks::unshare(planned, namespace, |kind, ns, name| match kind {
            "ClusterRoleBinding" => self
                .cluster_role_bindings
                .get(&ObjectRef::new(name))
                .map(|b| b.labels().clone()),
            _ => self
                .role_bindings
                .get(&ObjectRef::new(name).within(ns.unwrap_or_default()))
                .map(|b| b.labels().clone()),
        });
    }

    /// The copies and lifts of the CSV's Roles and RoleBindings to its group's `targets`
    /// ([`rbac::plan`]); the serving certificate's own Role stays where its Secret is.
    pub(super) fn spread(
        &self,
        owner: &owned::Owner,
        targets: &[String],
        serving: &serving::ServingPlan,
    ) -> Vec<owned::Planned> {
        let (mut roles, bindings) = self.owned(&owner.csv, &owner.namespace);
        let serving_role = |name: Option<&str>| {
            serving
                .before
                .iter()
                .chain(&serving.after)
                .any(|p| p.kind == "Role" && name == Some(p.name.as_str()))
        };
        roles.retain(|role| !serving_role(role.metadata.name.as_deref()));
        let roles: Vec<&Role> = roles.iter().map(AsRef::as_ref).collect();
        let bindings: Vec<&RoleBinding> = bindings
            .iter()
            .map(AsRef::as_ref)
            .filter(|b| {
                b.role_ref.kind == "ClusterRole"
                    || roles
                        .iter()
                        .any(|r| r.metadata.name.as_deref() == Some(b.role_ref.name.as_str()))
            })
            .collect();
        rbac::plan(&roles, &bindings, owner, targets)
    }
}

/// Whether a copy or lift of the CSV's RBAC is not in the caches (a target namespace came,
/// or someone deleted one).
pub(super) fn spread_missing(stores: &RbacStores, spread: &[owned::Planned]) -> bool {
    spread.iter().any(|p| {
        let (ns, name) = (p.namespace.as_deref(), p.name.as_str());
        match p.kind {
            "Role" => !cached(&stores.roles, ns, name),
            "RoleBinding" => !cached(&stores.role_bindings, ns, name),
            "ClusterRole" => !cached(&stores.cluster_roles, ns, name),
            _ => !cached(&stores.cluster_role_bindings, ns, name),
        }
    })
}

pub(super) fn cached<K>(store: &Store<K>, namespace: Option<&str>, name: &str) -> bool
where
    K: kube::runtime::reflector::Lookup<DynamicType = ()> + Clone + 'static,
{
    let at = ObjectRef::<K>::new(name);
    store
        .get(&match namespace {
            Some(ns) => at.within(ns),
            None => at,
        })
        .is_some()
}
