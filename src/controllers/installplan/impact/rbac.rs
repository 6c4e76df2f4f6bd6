//! Rules added and removed per ServiceAccount between the CSVs a plan installs and the CSVs
//! they replace, and which added rules the account's RBAC does not already allow.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};

use crate::api::{AccountImpact, ClusterServiceVersion, RuleChange};
use crate::controllers::authz::{Account, Grants, RbacView};

/// `RuleChange.scope` of a CSV's `permissions` (a Role in the operator's namespace).
pub const NAMESPACE: &str = "Namespace";
/// `RuleChange.scope` of a CSV's `clusterPermissions` (a ClusterRole).
pub const CLUSTER: &str = "Cluster";
/// `RuleChange.scope` of the authentication reader a served Deployment's account is bound
/// to in `kube-system` (a Role there).
pub const KUBE_SYSTEM: &str = "Namespace kube-system";

/// One rule granted to a ServiceAccount (by name, in the plan's namespace), with its scope,
/// and whether it is the grant OLM makes for every CSV on its own OperatorCondition.
pub type Grant = (String, &'static str, PolicyRule, bool);

/// The cluster's RBAC as the shared caches held it when the preview was gathered.
#[derive(Default)]
pub struct Rbac {
    pub roles: Vec<Arc<Role>>,
    pub role_bindings: Vec<Arc<RoleBinding>>,
    pub cluster_roles: Vec<Arc<ClusterRole>>,
    pub cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
}

impl Rbac {
    fn view(&self) -> RbacView<'_> {
        RbacView {
            roles: &self.roles,
            role_bindings: &self.role_bindings,
            cluster_roles: &self.cluster_roles,
            cluster_role_bindings: &self.cluster_role_bindings,
        }
    }
}

/// Per account, its rules keyed by scope and normalised text (so that two CSVs declaring
/// the same rule with verbs in another order agree).
/// Each rule with whether it is OLM's OperatorCondition grant.
type Declared = BTreeMap<String, BTreeMap<(&'static str, String), (PolicyRule, bool)>>;

/// The rule changes of every account the `new` or `old` CSVs name, in `namespace`, with
/// what the CSV controller grants besides for each side (`made`: the OperatorCondition
/// Role, lifted ClusterRoles); an added rule is an escalation when `rbac` does not already
/// allow it to the account (namespaced rules judged in `namespace`, cluster rules
/// cluster-wide). The OperatorCondition grant of the new CSV is marked renewed where the
/// account had the old CSV's: the same right, on the successor's condition, which OLM
/// grants every CSV (else every upgrade would hold under `holdNewPermissions`).
pub fn changes(
    new: &[&ClusterServiceVersion],
    old: &[&ClusterServiceVersion],
    namespace: &str,
    rbac: &Rbac,
    made: (&[Grant], &[Grant]),
) -> Vec<AccountImpact> {
    let (new, old) = (declared(new, made.0), declared(old, made.1));
    let view = rbac.view();
    let accounts: BTreeSet<&String> = new.keys().chain(old.keys()).collect();
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for sa in accounts {
        let (now, before) = (new.get(sa).unwrap_or(&empty), old.get(sa).unwrap_or(&empty));
        let account = Account {
            namespace,
            name: sa,
        };
        let namespaced = Grants::of(&view, account, Some(namespace));
        let system = Grants::of(&view, account, Some("kube-system"));
        let cluster = Grants::of(&view, account, None);
        let had_condition = before.values().any(|(_, own)| *own);
        let added: Vec<RuleChange> = now
            .iter()
            .filter(|(key, _)| !before.contains_key(key))
            .map(|((scope, _), (rule, own))| {
                let grants = match *scope {
                    CLUSTER => &cluster,
                    KUBE_SYSTEM => &system,
                    _ => &namespaced,
                };
                let mut added = change(scope, rule, !grants.allows(rule));
                added.renewed = *own && had_condition;
                added
            })
            .collect();
        let removed: Vec<RuleChange> = before
            .iter()
            .filter(|(key, _)| !now.contains_key(key))
            .map(|((scope, _), (rule, _))| change(scope, rule, false))
            .collect();
        if !added.is_empty() || !removed.is_empty() {
            out.push(AccountImpact {
                service_account: format!("{namespace}/{sa}"),
                added,
                removed,
            });
        }
    }
    out
}

fn change(scope: &str, rule: &PolicyRule, escalation: bool) -> RuleChange {
    RuleChange {
        scope: scope.to_string(),
        rule: serde_json::to_value(rule).unwrap_or_default(),
        escalation,
        renewed: false,
    }
}

/// The rules `csvs` declare and `made` grants, per account.
fn declared(csvs: &[&ClusterServiceVersion], made: &[Grant]) -> Declared {
    let mut out = Declared::new();
    for (sa, scope, rule, own) in made {
        let rule = normalised(rule);
        let key = serde_json::to_string(&rule).unwrap_or_default();
        out.entry(sa.clone())
            .or_default()
            .insert((scope, key), (rule, *own));
    }
    for csv in csvs {
        let Some(strategy) = &csv.spec.install.spec else {
            continue;
        };
        let scoped = [
            (NAMESPACE, &strategy.permissions),
            (CLUSTER, &strategy.cluster_permissions),
        ];
        for (scope, permissions) in scoped {
            for permission in permissions {
                let rules = out
                    .entry(permission.service_account_name.clone())
                    .or_default();
                for rule in &permission.rules {
                    let rule = normalised(rule);
                    let key = serde_json::to_string(&rule).unwrap_or_default();
                    rules.entry((scope, key)).or_insert((rule, false));
                }
            }
        }
    }
    out
}

/// `rule` with each list sorted and deduplicated, and empty optional lists left out: the
/// same permission however it is written.
pub fn normalised(rule: &PolicyRule) -> PolicyRule {
    fn sorted(list: &[String]) -> Vec<String> {
        let set: BTreeSet<&String> = list.iter().collect();
        set.into_iter().cloned().collect()
    }
    let optional =
        |list: &Option<Vec<String>>| list.as_deref().filter(|l| !l.is_empty()).map(sorted);
    PolicyRule {
        api_groups: optional(&rule.api_groups),
        non_resource_urls: optional(&rule.non_resource_urls),
        resource_names: optional(&rule.resource_names),
        resources: optional(&rule.resources),
        verbs: sorted(&rule.verbs),
    }
}
