//! The namespaces an operator watches. OLM writes the OperatorGroup's target namespaces
//! into the `olm.targetNamespaces` annotation (comma-separated; empty for all namespaces)
//! and the CSV passes it on as `WATCH_NAMESPACE`.

use kube::{Api, Client, Resource};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    All,
    /// Sorted, without duplicates, never empty.
    Only(Vec<String>),
}

impl Namespaces {
    /// `""` → all; `"a"` → one; `"a,b"` → a list (blanks around names ignored).
    pub fn parse(value: &str) -> Namespaces {
        let mut names: Vec<String> = value
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            Namespaces::All
        } else {
            Namespaces::Only(names)
        }
    }

    /// One watch scope per namespace (None: the whole cluster). An operator with
    /// namespaced RBAC cannot watch across namespaces, so a list gets one watch each.
    pub fn scopes(&self) -> Vec<Option<String>> {
        match self {
            Namespaces::All => vec![None],
            Namespaces::Only(names) => names.iter().cloned().map(Some).collect(),
        }
    }
}

impl std::fmt::Display for Namespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Namespaces::All => f.write_str("all namespaces"),
            Namespaces::Only(names) => f.write_str(&names.join(",")),
        }
    }
}

/// The Api of `K` in one watch scope.
pub fn api<K>(client: &Client, scope: &Option<String>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_all_namespaces() {
        assert_eq!(Namespaces::parse(""), Namespaces::All);
        assert_eq!(Namespaces::parse(" , "), Namespaces::All);
        assert_eq!(Namespaces::All.scopes(), vec![None]);
    }

    #[test]
    fn one_namespace_or_a_list() {
        assert_eq!(Namespaces::parse("a"), Namespaces::Only(vec!["a".into()]));
        let list = Namespaces::parse("b, a,b,");
        assert_eq!(list, Namespaces::Only(vec!["a".into(), "b".into()]));
        assert_eq!(list.scopes(), vec![Some("a".into()), Some("b".into())]);
        assert_eq!(list.to_string(), "a,b");
    }
}
