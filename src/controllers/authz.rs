//! Does a ServiceAccount already hold the rules a CSV declares? Answered from cached RBAC
//! objects the way the API server's RBAC authorizer would answer each request (upstream's
//! `RuleSatisfied`), so the CSV controller can report requirements without asking the API
//! server one SubjectAccessReview per verb and resource.
//!
//! Matching follows Kubernetes (`RuleAllows`, and `ruleCovers` of the escalation check, which
//! agree on single requests): a declared rule is broken down into atomic requests (verb ×
//! apiGroup × resource × resourceName, and verb × nonResourceURL) and each must be allowed by
//! some held rule. Only the held side has wildcards; a declared `*` is covered only by a held
//! `*`, because the API server refuses to let an account grant a `*` it does not hold.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::Value;

/// The wildcard of verbs, apiGroups, resources and nonResourceURLs.
const ALL: &str = "*";
/// The only group a roleRef may name; the API server ignores references to anything else.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Everything RBAC that the check reads, borrowed from caches: the slices are what kube
/// reflector `Store::state()` returns, so callers pass them without copying objects.
#[derive(Clone, Copy)]
pub struct RbacView<'a> {
    pub roles: &'a [Arc<Role>],
    pub role_bindings: &'a [Arc<RoleBinding>],
    pub cluster_roles: &'a [Arc<ClusterRole>],
    pub cluster_role_bindings: &'a [Arc<ClusterRoleBinding>],
}

/// The ServiceAccount whose rights are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

impl Account<'_> {
    /// The user name the API server authenticates the account's tokens as.
    fn user(self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// Whether a binding subject names this account. `binding_namespace` is the RoleBinding's
    /// namespace (None for a ClusterRoleBinding): a ServiceAccount subject without a namespace
    /// means the binding's own, and on a ClusterRoleBinding it matches nobody.
    fn is(self, subject: &Subject, binding_namespace: Option<&str>) -> bool {
        match subject.kind.as_str() {
            "ServiceAccount" => {
                let namespace = subject
                    .namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .or(binding_namespace);
                subject.name == self.name && namespace == Some(self.namespace)
            }
            "User" => subject.name == self.user(),
            "Group" => {
                // The groups every ServiceAccount token carries.
                matches!(
                    subject.name.as_str(),
                    "system:serviceaccounts" | "system:authenticated"
                ) || subject
                    .name
                    .strip_prefix("system:serviceaccounts:")
                    .is_some_and(|ns| ns == self.namespace)
            }
            _ => false,
        }
    }
}

/// The rules an account holds where one check applies: every ClusterRoleBinding's, plus, for a
/// namespace, the RoleBindings' of that namespace. Collected once so each declared rule costs
/// only rule matching.
pub struct Grants<'a> {
    rules: Vec<&'a PolicyRule>,
}

impl<'a> Grants<'a> {
    /// What `account` holds in `namespace` (Some: a namespaced rule, where RoleBindings of
    /// that namespace and ClusterRoleBindings count) or cluster-wide (None: ClusterRoleBindings
    /// only). A binding to a missing role contributes nothing, as in the authorizer.
    /// Aggregated ClusterRoles are read as stored: the controller-manager fills their rules.
    pub fn of(view: &RbacView<'a>, account: Account<'_>, namespace: Option<&str>) -> Self {
        let mut cluster_roles: HashSet<&str> = HashSet::new();
        let mut roles: HashSet<&str> = HashSet::new();
        for binding in view.cluster_role_bindings {
            let applies = subjects(binding.subjects.as_deref()).any(|s| account.is(s, None));
            if applies && refers_to(&binding.role_ref, "ClusterRole") {
                cluster_roles.insert(&binding.role_ref.name);
            }
        }
        if let Some(namespace) = namespace {
            let in_namespace = view
                .role_bindings
                .iter()
                .filter(|b| b.metadata.namespace.as_deref() == Some(namespace));
            for binding in in_namespace {
                if !subjects(binding.subjects.as_deref()).any(|s| account.is(s, Some(namespace))) {
                    continue;
                }
                // A RoleBinding to a ClusterRole grants its rules in this namespace only,
                // which holds here because only this namespace's bindings are read.
                let role_ref = &binding.role_ref;
                if refers_to(role_ref, "Role") {
                    roles.insert(&role_ref.name);
                } else if refers_to(role_ref, "ClusterRole") {
                    cluster_roles.insert(&role_ref.name);
                }
            }
        }
        let mut rules: Vec<&'a PolicyRule> = Vec::new();
        for role in view.roles {
            let name = role.metadata.name.as_deref().unwrap_or_default();
            if role.metadata.namespace.as_deref() == namespace && roles.contains(name) {
                rules.extend(role.rules.iter().flatten());
            }
        }
        for role in view.cluster_roles {
            let name = role.metadata.name.as_deref().unwrap_or_default();
            if cluster_roles.contains(name) {
                rules.extend(role.rules.iter().flatten());
            }
        }
        Grants { rules }
    }

    /// Whether every request `wanted` expands to is allowed by some held rule. A rule that
    /// expands to nothing (no verbs, or no apiGroups or resources and no nonResourceURLs) asks
    /// for nothing and is satisfied, as in Kubernetes' `Covers`; the API server rejects such a
    /// rule when the Role carrying it is created, which is where it gets reported.
    pub fn allows(&self, wanted: &PolicyRule) -> bool {
        let names: Vec<Option<&str>> = match wanted.resource_names.as_deref() {
            None | Some([]) => vec![None],
            Some(names) => names.iter().map(|n| Some(n.as_str())).collect(),
        };
        let groups = strings(wanted.api_groups.as_deref());
        let resources = strings(wanted.resources.as_deref());
        let urls = strings(wanted.non_resource_urls.as_deref());
        wanted.verbs.iter().all(|verb| {
            let resource_requests = groups.iter().all(|group| {
                resources.iter().all(|resource| {
                    names.iter().all(|&name| {
                        self.rules
                            .iter()
                            .any(|held| allows_resource(held, verb, group, resource, name))
                    })
                })
            });
            resource_requests
                && urls
                    .iter()
                    .all(|url| self.rules.iter().any(|held| allows_url(held, verb, url)))
        })
    }
}

/// Indices into `wanted` of the rules `account` does not fully hold (see [`Grants::of`] for
/// what `namespace` selects). The rules are matched one request at a time, so a declared rule
/// may be covered by several held rules together.
pub fn unmet_rules(
    view: &RbacView<'_>,
    account: Account<'_>,
    namespace: Option<&str>,
    wanted: &[PolicyRule],
) -> Vec<usize> {
    let grants = Grants::of(view, account, namespace);
    wanted
        .iter()
        .enumerate()
        .filter(|(_, rule)| !grants.allows(rule))
        .map(|(i, _)| i)
        .collect()
}

/// A rule as one line of JSON for status messages, the way upstream prints it (its Go JSON
/// field order, empty lists left out), so messages read the same on both implementations.
pub fn describe(rule: &PolicyRule) -> String {
    let fields = [
        ("verbs", Some(rule.verbs.as_slice())),
        ("apiGroups", rule.api_groups.as_deref()),
        ("resources", rule.resources.as_deref()),
        ("resourceNames", rule.resource_names.as_deref()),
        ("nonResourceURLs", rule.non_resource_urls.as_deref()),
    ];
    let parts: Vec<String> = fields
        .into_iter()
        .filter_map(|(key, values)| values.filter(|v| !v.is_empty()).map(|v| (key, v)))
        .map(|(key, values)| format!("\"{key}\":{}", Value::from(values)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn subjects(subjects: Option<&[Subject]>) -> impl Iterator<Item = &Subject> {
    subjects.unwrap_or_default().iter()
}

fn strings(values: Option<&[String]>) -> &[String] {
    values.unwrap_or_default()
}

/// Whether a roleRef names a role of `kind`; like the authorizer, other groups resolve to
/// nothing.
fn refers_to(role_ref: &RoleRef, kind: &str) -> bool {
    role_ref.kind == kind && role_ref.api_group.as_deref() == Some(RBAC_GROUP)
}

/// Whether a held list allows one requested value: an exact match or the wildcard.
fn has(held: Option<&[String]>, value: &str) -> bool {
    strings(held).iter().any(|h| h == ALL || h == value)
}

/// One resource request (`name` None: a request not about one named object, such as list or
/// create) against one held rule, as Kubernetes' `RuleAllows` decides it.
fn allows_resource(
    held: &PolicyRule,
    verb: &str,
    group: &str,
    resource: &str,
    name: Option<&str>,
) -> bool {
    let names = strings(held.resource_names.as_deref());
    let name_allowed = names.is_empty() || name.is_some_and(|n| names.iter().any(|h| h == n));
    has(Some(held.verbs.as_slice()), verb)
        && has(held.api_groups.as_deref(), group)
        && resource_allowed(strings(held.resources.as_deref()), resource)
        && name_allowed
}

/// `*` allows every resource and `*/<sub>` that subresource of every resource. Kubernetes
/// has no `<resource>/*`: such a held entry only matches a declared `<resource>/*` literally.
fn resource_allowed(held: &[String], resource: &str) -> bool {
    let any_parent = resource
        .split_once('/')
        .map(|(_, sub)| format!("{ALL}/{sub}"));
    held.iter()
        .any(|h| h == ALL || h == resource || any_parent.as_deref() == Some(h.as_str()))
}

/// One non-resource request against one held rule: a held URL ending in `*` allows every
/// path it prefixes (so `*` alone allows all).
fn allows_url(held: &PolicyRule, verb: &str, url: &str) -> bool {
    has(Some(held.verbs.as_slice()), verb)
        && strings(held.non_resource_urls.as_deref())
            .iter()
            .any(|h| h == url || (h.ends_with('*') && url.starts_with(h.trim_end_matches('*'))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const ACCOUNT: Account<'static> = Account {
        namespace: "ops",
        name: "op-sa",
    };

    fn list(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: list(verbs),
            api_groups: Some(list(groups)),
            resources: Some(list(resources)),
            ..PolicyRule::default()
        }
    }

    fn named(mut rule: PolicyRule, names: &[&str]) -> PolicyRule {
        rule.resource_names = Some(list(names));
        rule
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: list(verbs),
            non_resource_urls: Some(list(urls)),
            ..PolicyRule::default()
        }
    }

    fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: namespace.map(str::to_owned),
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        }
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: Some(RBAC_GROUP.into()),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn subject(kind: &str, namespace: Option<&str>, name: &str) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(str::to_owned),
            ..Subject::default()
        }
    }

    fn sa() -> Subject {
        subject("ServiceAccount", Some("ops"), "op-sa")
    }

    /// Fixtures: what the cluster holds; `view()` borrows them.
    #[derive(Default)]
    struct Cluster {
        roles: Vec<Arc<Role>>,
        role_bindings: Vec<Arc<RoleBinding>>,
        cluster_roles: Vec<Arc<ClusterRole>>,
        cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
    }

    impl Cluster {
        fn role(mut self, namespace: &str, name: &str, rules: Vec<PolicyRule>) -> Self {
            self.roles.push(Arc::new(Role {
                metadata: meta(Some(namespace), name),
                rules: Some(rules),
            }));
            self
        }

        fn cluster_role(mut self, name: &str, rules: Vec<PolicyRule>) -> Self {
            self.cluster_roles.push(Arc::new(ClusterRole {
                metadata: meta(None, name),
                rules: Some(rules),
                ..ClusterRole::default()
            }));
            self
        }

        fn binding(mut self, namespace: &str, to: RoleRef, subject: Subject) -> Self {
            self.role_bindings.push(Arc::new(RoleBinding {
                metadata: meta(Some(namespace), "b"),
                role_ref: to,
                subjects: Some(vec![subject]),
            }));
            self
        }

        fn cluster_binding(mut self, to: &str, subject: Subject) -> Self {
            self.cluster_role_bindings
                .push(Arc::new(ClusterRoleBinding {
                    metadata: meta(None, "cb"),
                    role_ref: role_ref("ClusterRole", to),
                    subjects: Some(vec![subject]),
                }));
            self
        }

        fn view(&self) -> RbacView<'_> {
            RbacView {
                roles: &self.roles,
                role_bindings: &self.role_bindings,
                cluster_roles: &self.cluster_roles,
                cluster_role_bindings: &self.cluster_role_bindings,
            }
        }

        /// The unmet indices of `wanted` for the test account.
        fn unmet(&self, namespace: Option<&str>, wanted: &[PolicyRule]) -> Vec<usize> {
            unmet_rules(&self.view(), ACCOUNT, namespace, wanted)
        }
    }

    /// A cluster where the account holds `held` through a Role in `ops`.
    fn holding(held: Vec<PolicyRule>) -> Cluster {
        Cluster::default()
            .role("ops", "r", held)
            .binding("ops", role_ref("Role", "r"), sa())
    }

    #[test]
    fn wildcards_on_the_held_side_match_anything() {
        let cluster = holding(vec![rule(&["*"], &["*"], &["*"])]);
        let wanted = [
            rule(&["get", "delete"], &["", "apps"], &["pods", "deployments"]),
            rule(&["*"], &["*"], &["*"]),
        ];
        assert!(cluster.unmet(Some("ops"), &wanted).is_empty());
    }

    #[test]
    fn wildcards_on_the_wanted_side_are_literal() {
        let cluster = holding(vec![rule(&["get", "list"], &["apps"], &["deployments"])]);
        let wanted = [
            rule(&["*"], &["apps"], &["deployments"]),
            rule(&["get"], &["*"], &["deployments"]),
            rule(&["get"], &["apps"], &["*"]),
            rule(&["get", "list"], &["apps"], &["deployments"]),
        ];
        assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![0, 1, 2]);
    }

    #[test]
    fn every_combination_must_be_held() {
        let cluster = holding(vec![
            rule(&["get"], &[""], &["pods"]),
            rule(&["list"], &[""], &["pods", "services"]),
        ]);
        let wanted = [
            rule(&["get", "list"], &[""], &["pods"]),
            rule(&["get", "list"], &[""], &["pods", "services"]),
        ];
        assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![1]);
    }

    #[test]
    fn resource_names_narrow_what_is_held() {
        let cluster = holding(vec![named(
            rule(&["get"], &[""], &["configmaps"]),
            &["a", "b"],
        )]);
        let wanted = [
            named(rule(&["get"], &[""], &["configmaps"]), &["a", "b"]),
            named(rule(&["get"], &[""], &["configmaps"]), &["a", "c"]),
            rule(&["get"], &[""], &["configmaps"]),
        ];
        assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![1, 2]);
        // A held rule without names covers named requests.
        let cluster = holding(vec![rule(&["get"], &[""], &["configmaps"])]);
        assert!(cluster.unmet(Some("ops"), &wanted).is_empty());
    }

    #[test]
    fn subresources() {
        let cluster = holding(vec![rule(&["update"], &["apps"], &["*/scale"])]);
        let wanted = [
            rule(&["update"], &["apps"], &["deployments/scale"]),
            rule(&["update"], &["apps"], &["deployments/status"]),
            rule(&["update"], &["apps"], &["deployments"]),
            rule(&["update"], &["apps"], &["*/scale"]),
        ];
        assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![1, 2]);
        // Kubernetes has no `<resource>/*` wildcard; only `*` covers every subresource.
        let cluster = holding(vec![rule(&["update"], &["apps"], &["deployments/*"])]);
        assert_eq!(cluster.unmet(Some("ops"), &wanted[..1]), vec![0]);
        let cluster = holding(vec![rule(&["update"], &["apps"], &["*"])]);
        assert!(cluster.unmet(Some("ops"), &wanted).is_empty());
    }

    #[test]
    fn non_resource_urls() {
        let cluster = Cluster::default()
            .cluster_role(
                "metrics",
                vec![
                    url_rule(&["get"], &["/metrics", "/api/*"]),
                    url_rule(&["*"], &["/healthz"]),
                ],
            )
            .cluster_binding("metrics", sa());
        let wanted = [
            url_rule(&["get"], &["/metrics", "/api/v1/x", "/healthz"]),
            url_rule(&["post"], &["/healthz"]),
            url_rule(&["post"], &["/metrics"]),
            url_rule(&["get"], &["/apis"]),
            url_rule(&["get"], &["/metrics/extra"]),
        ];
        assert_eq!(cluster.unmet(None, &wanted), vec![2, 3, 4]);
        let cluster = Cluster::default()
            .cluster_role("all", vec![url_rule(&["get"], &["*"])])
            .cluster_binding("all", sa());
        assert!(cluster.unmet(None, &wanted[..1]).is_empty());
    }

    #[test]
    fn group_subjects() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        for group in [
            "system:serviceaccounts",
            "system:serviceaccounts:ops",
            "system:authenticated",
        ] {
            let cluster = Cluster::default()
                .cluster_role("view", wanted.to_vec())
                .cluster_binding("view", subject("Group", None, group));
            assert!(cluster.unmet(Some("ops"), &wanted).is_empty(), "{group}");
        }
        for group in ["system:serviceaccounts:other", "system:masters"] {
            let cluster = Cluster::default()
                .cluster_role("view", wanted.to_vec())
                .cluster_binding("view", subject("Group", None, group));
            assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![0], "{group}");
        }
    }

    #[test]
    fn user_subject() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        let cluster = Cluster::default()
            .cluster_role("view", wanted.to_vec())
            .cluster_binding(
                "view",
                subject("User", None, "system:serviceaccount:ops:op-sa"),
            );
        assert!(cluster.unmet(None, &wanted).is_empty());
        let cluster = Cluster::default()
            .cluster_role("view", wanted.to_vec())
            .cluster_binding("view", subject("User", None, "op-sa"));
        assert_eq!(cluster.unmet(None, &wanted), vec![0]);
    }

    #[test]
    fn service_account_subject_namespace() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        // On a RoleBinding an empty namespace means the binding's.
        let cluster = Cluster::default()
            .role("ops", "r", wanted.to_vec())
            .binding(
                "ops",
                role_ref("Role", "r"),
                subject("ServiceAccount", None, "op-sa"),
            );
        assert!(cluster.unmet(Some("ops"), &wanted).is_empty());
        // On a ClusterRoleBinding it matches nobody; another namespace's account is another.
        for sa in [
            subject("ServiceAccount", None, "op-sa"),
            subject("ServiceAccount", Some("other"), "op-sa"),
        ] {
            let cluster = Cluster::default()
                .cluster_role("view", wanted.to_vec())
                .cluster_binding("view", sa);
            assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![0]);
        }
    }

    #[test]
    fn role_binding_to_cluster_role_is_scoped_to_its_namespace() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        let cluster = Cluster::default()
            .cluster_role("view", wanted.to_vec())
            .binding("ops", role_ref("ClusterRole", "view"), sa());
        assert!(cluster.unmet(Some("ops"), &wanted).is_empty());
        assert_eq!(cluster.unmet(Some("other"), &wanted), vec![0]);
        // A cluster rule is never satisfied by a RoleBinding.
        assert_eq!(cluster.unmet(None, &wanted), vec![0]);
    }

    #[test]
    fn cluster_role_binding_counts_in_every_namespace() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        let cluster = Cluster::default()
            .cluster_role("view", wanted.to_vec())
            .cluster_binding("view", sa());
        for namespace in [Some("ops"), Some("other"), None] {
            assert!(cluster.unmet(namespace, &wanted).is_empty());
        }
    }

    #[test]
    fn a_role_binding_reads_its_own_namespace_only() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        // The Role of the same name in another namespace does not count.
        let cluster = Cluster::default()
            .role("other", "r", wanted.to_vec())
            .binding("ops", role_ref("Role", "r"), sa());
        assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![0]);
    }

    #[test]
    fn missing_roles_contribute_nothing() {
        let wanted = [rule(&["get"], &[""], &["pods"])];
        let cluster = Cluster::default()
            .binding("ops", role_ref("Role", "gone"), sa())
            .binding("ops", role_ref("ClusterRole", "gone"), sa())
            .cluster_binding("gone", sa())
            .cluster_role("other", wanted.to_vec());
        assert_eq!(cluster.unmet(Some("ops"), &wanted), vec![0]);
    }

    #[test]
    fn rules_asking_for_nothing_are_satisfied() {
        let wanted = [rule(&[], &[""], &["pods"]), rule(&["get"], &[], &["pods"])];
        assert!(Cluster::default().unmet(Some("ops"), &wanted).is_empty());
    }

    #[test]
    fn describe_renders_upstreams_json() {
        assert_eq!(
            describe(&rule(&["get"], &[""], &["pods"])),
            r#"{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}"#
        );
        assert_eq!(
            describe(&named(rule(&["get"], &["a\"b"], &["x"]), &["n"])),
            r#"{"verbs":["get"],"apiGroups":["a\"b"],"resources":["x"],"resourceNames":["n"]}"#
        );
        assert_eq!(
            describe(&url_rule(&["get"], &["/metrics"])),
            r#"{"verbs":["get"],"nonResourceURLs":["/metrics"]}"#
        );
        assert_eq!(describe(&PolicyRule::default()), "{}");
    }
}
