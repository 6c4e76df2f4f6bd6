//! The Operators' components of the kinds the shared informers do not hold as an Operator
//! lists them (Deployments, ServiceAccounts, Services, Secrets, ConfigMaps, Roles,
//! RoleBindings, ClusterRoles, ClusterRoleBindings, Namespaces, APIServices, and CRDs, whose
//! shared informer has no conditions), kept from one watch per kind.
//!
//! They used to be listed by label, nine lists per Operator round. A thousand installs at
//! once made about 7,700 rounds and 69,000 label-selected lists, each of which the API
//! server answers by scanning every object of the kind in the cluster: quadratic in the
//! number of tenants. The watches deliver every object, but only those with an Operator's
//! label (`operators.coreos.com/<name>`) are kept, as a reference with the conditions of the
//! kinds that have them (`status.conditions` of Deployments, Services, Namespaces,
//! APIServices and CRDs; the others are watched as metadata only); a change to one wakes
//! the Operators whose reference changed. A CRD that a thousand installs share carries a
//! thousand labels, and each install adds one: only the Operator whose label came wakes,
//! not the thousand (nor on a change of the CRD's schema or annotations).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::core::{ClusterResourceScope, DeserializeGuard, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::components::{
    api_service_conditions, condition, deployment_conditions, namespace_conditions, reference,
    service_conditions,
};
use crate::api::{ComponentCondition, RichReference, operator_names};
use crate::cluster::api::api_in;

/// The kinds kept here, as (apiVersion, kind); a component's kind is its index. With the
/// informers' kinds (CSVs, Subscriptions, InstallPlans, OperatorConditions: `super::gather`)
/// they are upstream's component kinds (`componentLists` in operator-lifecycle-manager's
/// `pkg/controller/operators/components.go`).
const KINDS: [(&str, &str); 12] = [
    ("apps/v1", "Deployment"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("v1", "Namespace"),
    ("apiregistration.k8s.io/v1", "APIService"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
];
const ALL_LISTED: u16 = (1 << KINDS.len()) - 1;
/// CRDs are listed a few at a time: their schemas make them the largest objects there are
/// (megabytes each), and a whole list at once would be all of them in memory together.
const CRD_PAGE: u32 = 10;
/// How long a round waits for every kind's first list.
const LIST_PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// One object: its kind's index, namespace ("" when cluster-scoped) and name.
type Key = (usize, Box<str>, Box<str>);

/// What one watch event says of one object.
struct Seen {
    key: Key,
    /// The Operators its labels name.
    operators: Vec<String>,
    conditions: Vec<ComponentCondition>,
}

#[derive(Default)]
struct State {
    /// Per Operator, its components and their conditions.
    by_operator: HashMap<String, BTreeMap<Key, Vec<ComponentCondition>>>,
    /// Per labelled object, the Operators it was last seen naming.
    named: HashMap<Key, Vec<String>>,
    /// Per kind, the objects a (re)list in progress has delivered.
    listing: HashMap<usize, HashSet<Key>>,
}

impl State {
    /// Records `seen`; returns the Operators whose components changed.
    fn observe(&mut self, seen: Seen) -> Vec<String> {
        let Seen {
            key,
            operators,
            conditions,
        } = seen;
        let mut woken = self.forget_for(&key, |name| !operators.contains(name));
        for name in &operators {
            let components = self.by_operator.entry(name.clone()).or_default();
            if components.get(&key) != Some(&conditions) {
                components.insert(key.clone(), conditions.clone());
                woken.push(name.clone());
            }
        }
        if operators.is_empty() {
            self.named.remove(&key);
        } else {
            self.named.insert(key, operators);
        }
        woken
    }

    /// Drops `key` from the Operators it named that `drop` picks; returns them.
    fn forget_for(&mut self, key: &Key, drop: impl Fn(&String) -> bool) -> Vec<String> {
        let Some(before) = self.named.get(key) else {
            return Vec::new();
        };
        let dropped: Vec<String> = before.iter().filter(|n| drop(n)).cloned().collect();
        for name in &dropped {
            if let Some(components) = self.by_operator.get_mut(name) {
                components.remove(key);
                if components.is_empty() {
                    self.by_operator.remove(name);
                }
            }
        }
        dropped
    }

    /// Forgets `key` altogether (deleted, or missing from a relist).
    fn forget(&mut self, key: &Key) -> Vec<String> {
        let woken = self.forget_for(key, |_| true);
        self.named.remove(key);
        woken
    }

    /// Takes one event of kind `kind`; returns the Operators whose components changed.
    fn apply(&mut self, kind: usize, event: watcher::Event<Seen>) -> Vec<String> {
        match event {
            watcher::Event::Init => {
                self.listing.insert(kind, HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(seen) => {
                // Only labelled objects can be forgotten at the end of the list.
                if !seen.operators.is_empty() {
                    self.listing
                        .entry(kind)
                        .or_default()
                        .insert(seen.key.clone());
                }
                self.observe(seen)
            }
            watcher::Event::InitDone => {
                let listed = self.listing.remove(&kind).unwrap_or_default();
                let gone: Vec<Key> = self
                    .named
                    .keys()
                    .filter(|key| key.0 == kind && !listed.contains(*key))
                    .cloned()
                    .collect();
                gone.iter().flat_map(|key| self.forget(key)).collect()
            }
            watcher::Event::Apply(seen) => self.observe(seen),
            watcher::Event::Delete(seen) => self.forget(&seen.key),
        }
    }
}

/// The labelled components, shared by the Operator controller's rounds; written only by
/// the watches.
#[derive(Clone)]
pub struct Labelled {
    state: Arc<RwLock<State>>,
    /// One bit per kind whose first list is in.
    listed: watch::Sender<u16>,
}

impl Labelled {
    /// Starts one watch per kind (namespaced kinds in `scope` only, when it is set). Each
    /// Operator whose components change is sent on `wakes`. The watches end when the
    /// returned tasks are aborted.
    pub fn start(
        client: &Client,
        scope: Option<&str>,
        wakes: mpsc::UnboundedSender<String>,
    ) -> (Self, Vec<JoinHandle<()>>) {
        let labelled = Labelled {
            state: Arc::default(),
            listed: watch::Sender::new(0),
        };
        let tasks = vec![
            labelled.watch_full(
                0,
                api_in(client, scope),
                wakes.clone(),
                deployment_conditions,
            ),
            labelled.watch_metadata::<ServiceAccount>(1, api_in(client, scope), wakes.clone()),
            labelled.watch_full(2, api_in(client, scope), wakes.clone(), service_conditions),
            labelled.watch_metadata::<Secret>(3, api_in(client, scope), wakes.clone()),
            labelled.watch_metadata::<ConfigMap>(4, api_in(client, scope), wakes.clone()),
            labelled.watch_metadata::<Role>(5, api_in(client, scope), wakes.clone()),
            labelled.watch_metadata::<RoleBinding>(6, api_in(client, scope), wakes.clone()),
            labelled.watch_metadata::<ClusterRole>(7, Api::all(client.clone()), wakes.clone()),
            labelled.watch_metadata::<ClusterRoleBinding>(
                8,
                Api::all(client.clone()),
                wakes.clone(),
            ),
            labelled.watch_full::<Namespace>(
                9,
                Api::all(client.clone()),
                wakes.clone(),
                namespace_conditions,
            ),
            labelled.watch_full::<APIService>(
                10,
                Api::all(client.clone()),
                wakes.clone(),
                api_service_conditions,
            ),
            labelled.watch_crds(Api::all(client.clone()), wakes),
        ];
        (labelled, tasks)
    }

    /// The components labelled for the Operator `name`, once every kind has listed (or
    /// after [`LIST_PATIENCE`]: a kind that cannot be watched leaves its components out
    /// rather than stopping every Operator's status; they come in with its list).
    pub async fn components(&self, name: &str) -> Vec<RichReference> {
        let mut listed = self.listed.subscribe();
        let all = listed.wait_for(|listed| *listed == ALL_LISTED);
        if tokio::time::timeout(LIST_PATIENCE, all).await.is_err() {
            tracing::warn!(
                operator = name,
                "not every component kind has listed yet; status written without them"
            );
        }
        let state = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state
            .by_operator
            .get(name)
            .into_iter()
            .flatten()
            .map(|((kind, namespace, name), conditions)| {
                let (api_version, kind) = KINDS[*kind];
                reference(api_version, kind, Some(namespace), name, conditions.clone())
            })
            .collect()
    }

    /// Takes one event of kind `kind` and wakes whom it concerns.
    fn take(
        &self,
        kind: usize,
        event: watcher::Event<Seen>,
        wakes: &mpsc::UnboundedSender<String>,
    ) {
        let done = matches!(event, watcher::Event::InitDone);
        let woken = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .apply(kind, event);
        for name in woken {
            let _ = wakes.send(name);
        }
        if done {
            self.listed.send_modify(|listed| *listed |= 1 << kind);
        }
    }

    fn watch_metadata<K>(
        &self,
        kind: usize,
        api: Api<PartialObjectMeta<K>>,
        wakes: mpsc::UnboundedSender<String>,
    ) -> JoinHandle<()>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        self.watch(kind, api, any(), wakes, move |o| {
            seen(kind, &o.metadata, Vec::new())
        })
    }

    /// Watches whole objects of kind `kind`, for the conditions `conditions` reads; one
    /// that does not deserialize is kept by its metadata, without conditions.
    fn watch_full<K>(
        &self,
        kind: usize,
        api: Api<DeserializeGuard<K>>,
        wakes: mpsc::UnboundedSender<String>,
        conditions: fn(&K) -> Vec<ComponentCondition>,
    ) -> JoinHandle<()>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        self.watch(kind, api, any(), wakes, move |guarded| match &guarded.0 {
            Ok(object) => seen(kind, object.meta(), conditions(object)),
            Err(invalid) => seen(kind, &invalid.metadata, Vec::new()),
        })
    }

    /// Watches CRDs for their labels and conditions, [`CRD_PAGE`] a list page (a consistent
    /// list: pages are honoured only then).
    fn watch_crds(
        &self,
        api: Api<DeserializeGuard<CrdConditions>>,
        wakes: mpsc::UnboundedSender<String>,
    ) -> JoinHandle<()> {
        let config = watcher::Config::default().page_size(CRD_PAGE);
        self.watch(11, api, config, wakes, |guarded| match &guarded.0 {
            Ok(crd) => seen(11, &crd.metadata, crd.conditions()),
            Err(invalid) => seen(11, &invalid.metadata, Vec::new()),
        })
    }

    /// Watches `api` as kind `kind`, each object read by `read`; errors back off.
    fn watch<T>(
        &self,
        kind: usize,
        api: Api<T>,
        config: watcher::Config,
        wakes: mpsc::UnboundedSender<String>,
        read: impl Fn(T) -> Seen + Send + 'static,
    ) -> JoinHandle<()>
    where
        T: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
        T::DynamicType: Default,
    {
        let this = self.clone();
        // A private watch: the kinds labelled for Operators are found at run time (any
        // kind, by label), which the typed shared informers cannot hold.
        let events = watcher(api, config).default_backoff();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => this.take(kind, map_event(event, &read), &wakes),
                    Err(error) => {
                        tracing::warn!(kind = KINDS[kind].1, %error, "watch failed; retrying");
                    }
                }
            }
        })
    }
}

/// Lists served from the API server's cache, whole.
fn any() -> watcher::Config {
    watcher::Config::default().any_semantic()
}

/// A CRD as far as an Operator lists it: its metadata and conditions. The schema, most of a
/// CRD's bytes, is skipped while reading and never held.
#[derive(Clone, Debug, Deserialize)]
struct CrdConditions {
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<CrdStatus>,
}

#[derive(Clone, Debug, Deserialize)]
struct CrdStatus {
    #[serde(default)]
    conditions: Option<Vec<CustomResourceDefinitionCondition>>,
}

impl CrdConditions {
    fn conditions(&self) -> Vec<ComponentCondition> {
        let conditions = self
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten());
        conditions
            .map(|c| {
                let (reason, message) = (c.reason.as_deref(), c.message.as_deref());
                let time = c.last_transition_time.as_ref();
                condition(&c.type_, &c.status, reason, message, time)
            })
            .collect()
    }
}

impl Resource for CrdConditions {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind((): &()) -> std::borrow::Cow<'_, str> {
        CustomResourceDefinition::kind(&())
    }

    fn group((): &()) -> std::borrow::Cow<'_, str> {
        CustomResourceDefinition::group(&())
    }

    fn version((): &()) -> std::borrow::Cow<'_, str> {
        CustomResourceDefinition::version(&())
    }

    fn plural((): &()) -> std::borrow::Cow<'_, str> {
        CustomResourceDefinition::plural(&())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn seen(kind: usize, meta: &ObjectMeta, conditions: Vec<ComponentCondition>) -> Seen {
    let operators = operator_names(meta.labels.iter().flatten());
    Seen {
        key: (
            kind,
            meta.namespace.as_deref().unwrap_or_default().into(),
            meta.name.as_deref().unwrap_or_default().into(),
        ),
        conditions: if operators.is_empty() {
            Vec::new()
        } else {
            conditions
        },
        operators,
    }
}

/// `event` with each object it carries turned into what it says.
fn map_event<K>(event: watcher::Event<K>, f: impl Fn(K) -> Seen) -> watcher::Event<Seen> {
    match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, operators: &[&str]) -> Seen {
        Seen {
            key: (3, "ns".into(), name.into()),
            operators: operators.iter().map(ToString::to_string).collect(),
            conditions: Vec::new(),
        }
    }

    fn names(state: &State, operator: &str) -> Vec<String> {
        state
            .by_operator
            .get(operator)
            .into_iter()
            .flatten()
            .map(|(key, _)| key.2.to_string())
            .collect()
    }

    #[test]
    fn only_labelled_objects_are_kept_and_each_change_wakes_its_operators() {
        let mut state = State::default();
        // Unlabelled: nothing kept, nobody woken.
        assert!(
            state
                .apply(3, watcher::Event::Apply(secret("plain", &[])))
                .is_empty()
        );
        assert!(state.named.is_empty());
        // Labelled for two Operators.
        let woken = state.apply(3, watcher::Event::Apply(secret("s", &["a", "b"])));
        assert_eq!(woken, ["a", "b"]);
        assert_eq!(names(&state, "a"), ["s"]);
        // Seen again unchanged: nobody.
        assert!(
            state
                .apply(3, watcher::Event::Apply(secret("s", &["a", "b"])))
                .is_empty()
        );
        // One label removed: that Operator, and it no longer lists it.
        assert_eq!(
            state.apply(3, watcher::Event::Apply(secret("s", &["b"]))),
            ["a"]
        );
        assert!(names(&state, "a").is_empty());
        assert!(!state.by_operator.contains_key("a"));
        // A Deployment's conditions changing wakes its Operator.
        let mut deployment = Seen {
            key: (0, "ns".into(), "d".into()),
            operators: vec!["b".into()],
            conditions: Vec::new(),
        };
        assert_eq!(state.apply(0, watcher::Event::Apply(deployment)), ["b"]);
        deployment = Seen {
            key: (0, "ns".into(), "d".into()),
            operators: vec!["b".into()],
            conditions: vec![ComponentCondition {
                type_: "Available".into(),
                status: "True".into(),
                ..ComponentCondition::default()
            }],
        };
        assert_eq!(state.apply(0, watcher::Event::Apply(deployment)), ["b"]);
        // Deleted: its Operators.
        assert_eq!(
            state.apply(3, watcher::Event::Delete(secret("s", &["b"]))),
            ["b"]
        );
        assert_eq!(names(&state, "b"), ["d"]);
    }

    #[test]
    fn a_shared_crd_wakes_only_the_operators_whose_reference_changed() {
        let crd = |operators: &[&str], established: &str| Seen {
            key: (11, "".into(), "apps.example.com".into()),
            operators: operators.iter().map(ToString::to_string).collect(),
            conditions: vec![ComponentCondition {
                type_: "Established".into(),
                status: established.into(),
                ..ComponentCondition::default()
            }],
        };
        let mut state = State::default();
        let mut apply = |seen| {
            let mut woken = state.apply(11, watcher::Event::Apply(seen));
            woken.sort();
            woken
        };
        assert_eq!(apply(crd(&["app.a", "app.b"], "False")), ["app.a", "app.b"]);
        // Another install adds its label: that Operator alone.
        assert_eq!(apply(crd(&["app.a", "app.b", "app.c"], "False")), ["app.c"]);
        // Its schema or annotations changed (nothing an Operator lists): nobody.
        assert!(apply(crd(&["app.a", "app.b", "app.c"], "False")).is_empty());
        // Established: every Operator listing it.
        assert_eq!(
            apply(crd(&["app.a", "app.b", "app.c"], "True")),
            ["app.a", "app.b", "app.c"]
        );
        // A label removed: its Operator.
        assert_eq!(apply(crd(&["app.b", "app.c"], "True")), ["app.a"]);
    }

    #[test]
    fn a_crd_is_read_for_its_labels_and_conditions_only() {
        let crd: CrdConditions = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "apps.example.com", "labels": {"operators.coreos.com/app.ns": ""}},
            "spec": {"group": "example.com", "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": "2026-11-28T10:00:00Z"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
            ]},
        }))
        .unwrap();
        let seen = seen(11, &crd.metadata, crd.conditions());
        assert_eq!(seen.operators, ["app.ns"]);
        let types: Vec<&str> = seen.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["NamesAccepted", "Established"]);
        assert_eq!(
            seen.conditions[1].reason.as_deref(),
            Some("InitialNamesAccepted")
        );
        assert_eq!(CrdConditions::plural(&()), "customresourcedefinitions");
        assert_eq!(CrdConditions::api_version(&()), KINDS[11].0);
    }

    #[test]
    fn a_relist_forgets_what_it_no_longer_delivers_of_its_kind() {
        let mut state = State::default();
        state.apply(3, watcher::Event::Apply(secret("kept", &["a"])));
        state.apply(3, watcher::Event::Apply(secret("gone", &["a"])));
        let other_kind = Seen {
            key: (4, "ns".into(), "cm".into()),
            operators: vec!["a".into()],
            conditions: Vec::new(),
        };
        state.apply(4, watcher::Event::Apply(other_kind));
        state.apply(3, watcher::Event::Init);
        assert!(
            state
                .apply(3, watcher::Event::InitApply(secret("kept", &["a"])))
                .is_empty()
        );
        assert_eq!(state.apply(3, watcher::Event::InitDone), ["a"]);
        assert_eq!(names(&state, "a"), ["kept", "cm"]);
    }
}
