//! What the CSV controller makes for an installed CSV besides the plan's steps, and whether
//! a written object's content changes (pure).
//!
//! - The OperatorCondition Role and RoleBinding named as the CSV, and the plan's Roles and
//!   RoleBindings lifted to ClusterRoles (AllNamespaces) or copied into the other target
//!   namespaces (Single/MultiNamespace): [`made`], from the names and rules the CSV
//!   controller itself uses ([`spread`]). The OperatorCondition itself is left out: it is
//!   no RBAC and upstream clients do not count it among the plan's objects.
//! - For a CSV that serves webhooks or API services, the serving objects ([`serving_of`]):
//!   per served Deployment its Service, certificate Secret, the Role and RoleBinding to read
//!   it and the two authentication bindings outside the namespace; the webhook
//!   configurations and APIServices.
//! - The rules those grant per ServiceAccount: [`grants`].
//! - Whether writing an object changes what it holds, beside its metadata: [`changes`].

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::rbac::{CLUSTER, Grant, KUBE_SYSTEM, NAMESPACE, Rbac};
use crate::api::{ClusterServiceVersion, ObjectRef, OperatorGroup};
use crate::controllers::plan::provided;
use crate::controllers::plan::rbac as plan_rbac;
use crate::controllers::plan::serving::{self, Stamp};
use crate::controllers::plan::spread;

/// The objects the CSV controller makes for `csv` in `namespace`, given its OperatorGroup's
/// `targets` (None: no group, nothing spread).
pub fn made(
    csv: &ClusterServiceVersion,
    namespace: &str,
    targets: Option<&[String]>,
) -> Vec<Value> {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let strategy = csv.spec.install.spec.clone().unwrap_or_default();
    let mut out: Vec<Value> = spread::condition_rbac(&name, namespace, &strategy).into();
    out.extend(serving_of(csv, namespace));
    let Some(targets) = targets else {
        return out;
    };
    let planned = plan_rbac::objects(csv, namespace);
    let of_kind = |kind: &str| -> Vec<Value> {
        planned
            .iter()
            .filter(|o| o["kind"] == kind)
            .cloned()
            .collect()
    };
    let roles: Vec<Role> = of_kind("Role")
        .into_iter()
        .filter_map(|o| serde_json::from_value(o).ok())
        .collect();
    let bindings: Vec<RoleBinding> = of_kind("RoleBinding")
        .into_iter()
        .filter_map(|o| serde_json::from_value(o).ok())
        .collect();
    let (roles, bindings): (Vec<&Role>, Vec<&RoleBinding>) =
        (roles.iter().collect(), bindings.iter().collect());
    out.extend(spread::spread(&roles, &bindings, namespace, targets));
    out
}

/// The serving objects the CSV controller makes for `csv` in `namespace` (none unless it
/// serves webhooks or API services), as it shapes them less what only it knows: the
/// certificate (the Secret's data, the CA bundles; reused while good, so an upgrade does
/// not change them) and the group's namespace selector of admission webhooks. The two
/// authentication bindings keep upstream's names (the CSV controller renames one only
/// where another namespace's install holds it).
fn serving_of(csv: &ClusterServiceVersion, namespace: &str) -> Vec<Value> {
    let stamp = Stamp::default();
    let mut out = Vec::new();
    for (deployment, ports) in serving::served(csv) {
        let (selector, account) = serving::pods(csv, &deployment);
        out.extend(serving::serving_objects(
            namespace,
            &deployment,
            &ports,
            &selector,
            account,
            &stamp,
        ));
    }
    let labels = &stamp.labels;
    out.extend(serving::admission_configurations(
        csv, namespace, labels, None, None,
    ));
    out.extend(serving::api_services(csv, namespace, labels, None));
    out.into_iter().map(|made| made.body).collect()
}

/// An object made by the CSV controller, by its own namespace (none: cluster-scoped).
pub fn made_ref(object: &Value) -> ObjectRef {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    ObjectRef {
        api_version: text(&object["apiVersion"]),
        kind: text(&object["kind"]),
        namespace: object["metadata"]["namespace"].as_str().map(str::to_string),
        name: text(&object["metadata"]["name"]),
    }
}

/// The rules `objects` grant to ServiceAccounts of `namespace` through their bindings (each
/// binding to a role among `objects`, or to one of the cluster's, such as
/// `system:auth-delegator` or the authentication reader in `kube-system`): a RoleBinding's
/// in Namespace scope (in `kube-system`: [`KUBE_SYSTEM`]; elsewhere none counted), a
/// ClusterRoleBinding's in Cluster scope.
pub fn grants(objects: &[Value], namespace: &str, rbac: &Rbac) -> Vec<Grant> {
    let mut roles: BTreeMap<(String, String, String), (Vec<PolicyRule>, bool)> = BTreeMap::new();
    for o in objects
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
    {
        let rules = serde_json::from_value(o["rules"].clone()).unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let own = o["kind"] == "Role" && o["rules"] == spread::condition_rules(name);
        roles.insert(
            role_key(o, &o["kind"], &o["metadata"]["name"]),
            (rules, own),
        );
    }
    let mut out = Vec::new();
    for binding in objects {
        let bound_in = binding["metadata"]["namespace"]
            .as_str()
            .unwrap_or(namespace);
        let scope = match binding["kind"].as_str() {
            Some("RoleBinding") if bound_in == namespace => NAMESPACE,
            Some("RoleBinding") if bound_in == "kube-system" => KUBE_SYSTEM,
            Some("ClusterRoleBinding") => CLUSTER,
            _ => continue,
        };
        let role_ref = &binding["roleRef"];
        let key = role_key(binding, &role_ref["kind"], &role_ref["name"]);
        let Some((rules, own)) = roles.get(&key).cloned().or_else(|| on_cluster(&key, rbac)) else {
            continue;
        };
        for subject in binding["subjects"].as_array().into_iter().flatten() {
            let in_namespace = subject["namespace"].as_str().unwrap_or(bound_in) == namespace;
            if subject["kind"] != "ServiceAccount" || !in_namespace {
                continue;
            }
            let sa = subject["name"].as_str().unwrap_or_default();
            out.extend(
                rules
                    .iter()
                    .map(|r| (sa.to_string(), scope, r.clone(), own)),
            );
        }
    }
    out
}

/// The rules of the cluster's role `key` (never OLM's OperatorCondition grant).
fn on_cluster(key: &(String, String, String), rbac: &Rbac) -> Option<(Vec<PolicyRule>, bool)> {
    let (namespace, kind, name) = key;
    let named = |meta: &ObjectMeta| meta.name.as_deref() == Some(name.as_str());
    let rules = match kind.as_str() {
        "ClusterRole" => rbac
            .cluster_roles
            .iter()
            .find(|r| named(&r.metadata))?
            .rules
            .clone(),
        "Role" => rbac
            .roles
            .iter()
            .find(|r| named(&r.metadata) && r.metadata.namespace.as_ref() == Some(namespace))?
            .rules
            .clone(),
        _ => return None,
    };
    Some((rules.unwrap_or_default(), false))
}

/// A role by namespace (that of `at` for a Role, none for a ClusterRole), kind and name.
fn role_key(at: &Value, kind: &Value, name: &Value) -> (String, String, String) {
    let kind = kind.as_str().unwrap_or_default().to_string();
    let namespace = match kind.as_str() {
        "Role" => at["metadata"]["namespace"].as_str().unwrap_or_default(),
        _ => "",
    };
    let name = name.as_str().unwrap_or_default().to_string();
    (namespace.to_string(), kind, name)
}

/// Whether writing `desired` over `live` changes its content: a top-level field other than
/// apiVersion, kind, metadata and status that `desired` sets and `live` holds otherwise.
/// What `live` holds beyond `desired` (fields the API server defaults) is no change.
pub fn changes(desired: &Value, live: &Value) -> bool {
    let Some(fields) = desired.as_object() else {
        return false;
    };
    fields
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .any(|(key, value)| !holds(&live[key.as_str()], value))
}

/// Whether `live` holds `wanted`: every field of an object (an absent one holds an empty or
/// null value), each item of a list of the same length, a scalar equal.
fn holds(live: &Value, wanted: &Value) -> bool {
    match (live, wanted) {
        (_, Value::Null) => true,
        (Value::Null, Value::Array(w)) => w.is_empty(),
        (Value::Null, Value::Object(w)) => w.is_empty(),
        (Value::Object(l), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| holds(l.get(k).unwrap_or(&Value::Null), v)),
        (Value::Array(l), Value::Array(w)) => {
            l.len() == w.len() && l.iter().zip(w).all(|(l, w)| holds(l, w))
        }
        (Value::Number(l), Value::Number(w)) => l.as_f64() == w.as_f64(),
        _ => live == wanted,
    }
}

/// Whether the Deployment `name` of the `new` CSVs changes: its spec as the new CSV
/// declares it differs from the old CSV's (or the old declares none), or the CSVs'
/// annotations differ (the CSV controller puts them on the pod template). Compared as the
/// CSVs declare them: what the CSV controller injects besides (env, the group's
/// annotations) is the same for both versions, so the live spec changes exactly then.
pub fn deployment_changes(
    name: &str,
    csvs: &[(ClusterServiceVersion, Option<ClusterServiceVersion>)],
) -> bool {
    fn spec<'a>(csv: Option<&'a ClusterServiceVersion>, name: &str) -> Option<&'a Value> {
        super::csvs::deployments(csv)
            .find(|d| d.name == name)
            .map(|d| &d.spec)
    }
    csvs.iter()
        .any(|(new, old)| match (spec(Some(new), name), old) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(after), Some(old)) => {
                spec(Some(old), name) != Some(after)
                    || old.metadata.annotations != new.metadata.annotations
            }
        })
}

/// The OperatorGroup of the plan's namespace and its member CSVs (no copies), as read.
#[derive(Clone, Debug)]
pub struct Group {
    pub group: OperatorGroup,
    pub members: Vec<ClusterServiceVersion>,
}

/// The ClusterRoles the OperatorGroup controller writes once `csvs` (each new CSV with the
/// one it replaces) are installed, named and built as it does ([`provided`]): the group's
/// aggregated roles over the APIs its members provide then (the replaced CSVs gone, the new
/// ones in; an existing member's once its checks ran, as the controller counts them), and
/// the per-API roles of each API a new CSV provides. That controller never deletes a
/// per-API role when no CSV provides its API any more (the role is owned by the CRD or
/// APIService and goes with it), so none goes here either.
pub fn group_made(
    group: &Group,
    csvs: &[(ClusterServiceVersion, Option<ClusterServiceVersion>)],
) -> Vec<Value> {
    let name = |csv: &ClusterServiceVersion| csv.metadata.name.clone();
    let leaving: Vec<Option<String>> = csvs
        .iter()
        .flat_map(|(new, old)| [Some(name(new)), old.as_ref().map(name)])
        .flatten()
        .collect();
    let staying = group.members.iter().filter(|member| {
        member.status.as_ref().is_some_and(|s| s.phase.is_some())
            && !leaving.contains(&name(member))
    });
    let new = || csvs.iter().map(|(new, _)| new);
    let after = provided::provided_apis(staying.chain(new()));
    let mut roles = provided::group_cluster_roles(&group.group, &after);
    // Owned by what defines the API, whose UID the preview need not know: the owner is
    // metadata, which no comparison reads.
    for api in provided::provided_apis(new()) {
        roles.extend(provided::api_cluster_roles(&api, ""));
    }
    roles.iter().map(provided::cluster_role_body).collect()
}
