//! Shared informers: one watch and one cache per kind and scope, however many controllers
//! read that kind.
//!
//! CSVs, OperatorGroups, Subscriptions, InstallPlans, CatalogSources, Namespaces and CRDs are
//! each read by two or three controllers. Each [`Informer`] lists and watches its kind once
//! and hands every subscriber the same [`Store`] plus a stream of what changed (applied and
//! deleted objects, as the shared `Arc`s the store holds). An informer starts with its first
//! subscriber, so a standby replica, which runs only the catalog cache, watches only what
//! that cache reads. A subscriber that comes after the first list is handed the listed
//! objects first, so it reconciles everything as if it had listed itself.
//!
//! Unlike kube-runtime's shared reflectors (`store_shared`), deletions are passed on: the
//! OperatorGroup controller recomputes its targets when a namespace goes, the Subscription
//! controller re-resolves when a CSV goes. Each subscriber's channel is bounded; one that
//! lags relists, with the deletions it missed (see [`super::fanout`]).

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

pub use super::fanout::Change;
use super::fanout::{self, Feed};
use super::ownership::OWNER_KIND_LABEL;
use crate::api::{
    COPIED_FROM_LABEL, CatalogSource, ClusterServiceVersion, InstallPlan, OLM_CONFIG_NAME,
    OlmConfig, Operator, OperatorCondition, OperatorGroup, Subscription,
};
use crate::cluster::api::api_in;

type Driver = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// One list+watch of `K`, shared.
pub struct Informer<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    kind: &'static str,
    store: Store<K>,
    listed: Arc<AtomicBool>,
    subscribers: Arc<Mutex<Vec<Feed<K>>>>,
    /// The watch, until the first subscriber starts it.
    driver: Mutex<Option<Driver>>,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()>
        + Lookup<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn new(kind: &'static str, api: Api<K>, config: watcher::Config) -> Self {
        Self::with_managed_fields(kind, api, config, true)
    }

    /// As [`Informer::new`], keeping no `managedFields` (`keep` false): what the readers
    /// of a kind never look at, and most of its size (RBAC: 20 of 29 MB on a cluster with
    /// the community catalog installed).
    fn with_managed_fields(
        kind: &'static str,
        api: Api<K>,
        config: watcher::Config,
        keep: bool,
    ) -> Self {
        let (store, writer) = reflector::store();
        let listed = Arc::new(AtomicBool::new(false));
        let subscribers: Arc<Mutex<Vec<Feed<K>>>> = Arc::default();
        let driver: Driver = {
            let (listed, subscribers) = (Arc::clone(&listed), Arc::clone(&subscribers));
            Box::new(move || {
                let events =
                    watcher(api, config)
                        .default_backoff()
                        .modify(move |object: &mut K| {
                            if !keep {
                                object.meta_mut().managed_fields = None;
                            }
                        });
                Box::pin(drive(kind, events, writer, listed, subscribers))
            })
        };
        Informer {
            kind,
            store,
            listed,
            subscribers,
            driver: Mutex::new(Some(driver)),
        }
    }

    /// The shared cache and a stream of its changes from now on (everything listed so far
    /// comes first). Starts the watch on first use.
    pub fn subscribe(&self) -> (Store<K>, impl Stream<Item = Change<K>> + Send + 'static) {
        let changes = {
            let mut subscribers = self
                .subscribers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let listed = self.listed.load(Ordering::Acquire);
            let (feed, changes) =
                fanout::channel(self.kind, self.store.clone(), listed, fanout::CAPACITY);
            subscribers.push(feed);
            changes
        };
        let driver = self
            .driver
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(driver) = driver {
            tracing::debug!(kind = self.kind, "starting a shared watch");
            tokio::spawn(driver());
        }
        (self.store.clone(), changes)
    }

    /// The shared cache alone, as far as a subscriber has started the watch (empty before).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// What `subscribe` hands on, as the `Arc`s a controller's shared streams take.
    pub fn subscribe_touched(&self) -> (Store<K>, impl Stream<Item = Arc<K>> + Send + 'static) {
        let (store, changes) = self.subscribe();
        (store, changes.map(Change::object))
    }
}

/// Keeps the store current and passes each change to every live subscriber. A first list
/// (and every relist) is passed on once it is complete, as the store swaps it in: each
/// subscriber relists, with what the new list no longer holds as deletions.
async fn drive<K>(
    kind: &'static str,
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    mut writer: reflector::store::Writer<K>,
    listed: Arc<AtomicBool>,
    subscribers: Arc<Mutex<Vec<Feed<K>>>>,
) where
    K: Lookup<DynamicType = ()> + Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let store = writer.as_reader();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                // default_backoff() has waited already; the watch goes on.
                tracing::warn!(kind, %error, "watch failed; retrying");
                continue;
            }
        };
        // No reader of the shared caches looks at managed fields (the copier reads them from
        // a metadata watch of its own), and they often outweigh an object's spec.
        let event = event.modify(|object| object.meta_mut().managed_fields = None);
        let before = matches!(event, watcher::Event::InitDone).then(|| store.state());
        writer.apply_watcher_event(&event);
        let change = match event {
            watcher::Event::Apply(object) => {
                let Some(object) = store.get(&reflector::ObjectRef::from_obj(&object)) else {
                    continue;
                };
                Change::Applied(object)
            }
            watcher::Event::Delete(object) => Change::Deleted(Arc::new(object)),
            watcher::Event::InitDone => {
                listed.store(true, Ordering::Release);
                let vanished = vanished(before.unwrap_or_default(), &store);
                let subscribers = subscribers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                subscribers.iter().for_each(|feed| feed.relist(&vanished));
                continue;
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => continue,
        };
        subscribers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|feed| feed.offer(&change));
    }
}

/// The objects of a former list that the store no longer holds (or holds as another
/// object of the same name, made again in the gap).
fn vanished<K>(before: Vec<Arc<K>>, store: &Store<K>) -> Vec<Arc<K>>
where
    K: Lookup<DynamicType = ()> + Clone + 'static,
{
    before
        .into_iter()
        .filter(|object| {
            store
                .get(&reflector::ObjectRef::from_obj(object.as_ref()))
                .is_none_or(|now| now.uid() != object.uid())
        })
        .collect()
}

/// The informers of one scope (a watched namespace, or all); cluster-scoped kinds are
/// shared by every scope.
pub struct Informers {
    pub csvs: Informer<DeserializeGuard<ClusterServiceVersion>>,
    pub operator_groups: Informer<DeserializeGuard<OperatorGroup>>,
    pub subscriptions: Informer<DeserializeGuard<Subscription>>,
    pub install_plans: Informer<DeserializeGuard<InstallPlan>>,
    pub catalog_sources: Informer<DeserializeGuard<CatalogSource>>,
    pub operator_conditions: Informer<DeserializeGuard<OperatorCondition>>,
    /// The Deployments and ServiceAccounts OLM made for CSVs (labelled as a CSV's): the CSV
    /// controller's, by its owner labels.
    pub owned_deployments: Informer<Deployment>,
    pub owned_service_accounts: Informer<PartialObjectMeta<ServiceAccount>>,
    /// The serving-certificate Secrets OLM made for CSVs, metadata only: one edited or
    /// deleted by someone else wakes its CSV, which checks and reissues the certificate.
    pub owned_secrets: Informer<PartialObjectMeta<Secret>>,
    pub cluster: Arc<ClusterInformers>,
}

pub struct ClusterInformers {
    pub namespaces: Informer<PartialObjectMeta<Namespace>>,
    pub crds: Informer<PartialObjectMeta<CustomResourceDefinition>>,
    pub operators: Informer<DeserializeGuard<Operator>>,
    /// The OLMConfig `cluster`, OLM's settings (the only one OLM reads).
    pub olm_configs: Informer<DeserializeGuard<OlmConfig>>,
    /// The APIServices OLM made for CSVs (labelled as a CSV's), metadata only.
    pub owned_api_services: Informer<PartialObjectMeta<APIService>>,
    /// RBAC, for what a CSV's accounts already hold (its requirements) and the Roles a CSV
    /// spreads to its targets.
    pub rbac: RbacInformers,
    /// Every scope's informers, for the few checks that span the watched namespaces
    /// (OperatorGroups meeting across namespaces).
    scopes: Mutex<Vec<Weak<Informers>>>,
}

pub struct RbacInformers {
    pub roles: Informer<Role>,
    pub role_bindings: Informer<RoleBinding>,
    pub cluster_roles: Informer<ClusterRole>,
    pub cluster_role_bindings: Informer<ClusterRoleBinding>,
}

impl RbacInformers {
    /// Rules, subjects and labels are read; managed fields never are.
    fn new(client: &Client) -> Self {
        let config = || watcher::Config::default().any_semantic();
        RbacInformers {
            roles: Informer::with_managed_fields("Role", Api::all(client.clone()), config(), false),
            role_bindings: Informer::with_managed_fields(
                "RoleBinding",
                Api::all(client.clone()),
                config(),
                false,
            ),
            cluster_roles: Informer::with_managed_fields(
                "ClusterRole",
                Api::all(client.clone()),
                config(),
                false,
            ),
            cluster_role_bindings: Informer::with_managed_fields(
                "ClusterRoleBinding",
                Api::all(client.clone()),
                config(),
                false,
            ),
        }
    }
}

impl ClusterInformers {
    pub fn new(client: &Client) -> Self {
        let config = || watcher::Config::default().any_semantic();
        ClusterInformers {
            namespaces: Informer::new("Namespace", Api::all(client.clone()), config()),
            crds: Informer::new(
                "CustomResourceDefinition",
                Api::all(client.clone()),
                config(),
            ),
            operators: Informer::new("Operator", Api::all(client.clone()), config()),
            olm_configs: Informer::new(
                "OLMConfig",
                Api::all(client.clone()),
                config().fields(&format!("metadata.name={OLM_CONFIG_NAME}")),
            ),
            owned_api_services: Informer::new(
                "APIService",
                Api::all(client.clone()),
                config().labels(&format!("{OWNER_KIND_LABEL}=ClusterServiceVersion")),
            ),
            rbac: RbacInformers::new(client),
            scopes: Mutex::default(),
        }
    }

    /// Registers a scope's informers (see [`ClusterInformers::scopes`]).
    pub fn add_scope(&self, scope: &Arc<Informers>) {
        self.scopes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::downgrade(scope));
    }

    /// The informers of every live scope.
    pub fn scopes(&self) -> Vec<Arc<Informers>> {
        self.scopes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

impl Informers {
    pub fn new(client: &Client, scope: Option<&str>, cluster: Arc<ClusterInformers>) -> Self {
        let config = || watcher::Config::default().any_semantic();
        let owned = || config().labels(&format!("{OWNER_KIND_LABEL}=ClusterServiceVersion"));
        Informers {
            // Copied CSVs are read by the copier alone, from a metadata watch of its own.
            csvs: Informer::new(
                "ClusterServiceVersion",
                api_in(client, scope),
                config().labels(&format!("!{COPIED_FROM_LABEL}")),
            ),
            operator_groups: Informer::new("OperatorGroup", api_in(client, scope), config()),
            subscriptions: Informer::new("Subscription", api_in(client, scope), config()),
            install_plans: Informer::new("InstallPlan", api_in(client, scope), config()),
            catalog_sources: Informer::new("CatalogSource", api_in(client, scope), config()),
            operator_conditions: Informer::new(
                "OperatorCondition",
                api_in(client, scope),
                config(),
            ),
            owned_deployments: Informer::new("Deployment", api_in(client, scope), owned()),
            owned_service_accounts: Informer::new("ServiceAccount", api_in(client, scope), owned()),
            owned_secrets: Informer::new("Secret", api_in(client, scope), owned()),
            cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    use super::*;

    fn config_map(name: &str, version: &str) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.into());
        map.metadata.namespace = Some("ns".into());
        map.metadata.resource_version = Some(version.into());
        map
    }

    async fn next(changes: &mut (impl Stream<Item = Change<ConfigMap>> + Unpin)) -> String {
        let change = tokio::time::timeout(Duration::from_secs(5), changes.next())
            .await
            .expect("a change")
            .expect("an open stream");
        match change {
            Change::Applied(o) => format!("+{}", o.metadata.name.clone().unwrap_or_default()),
            Change::Deleted(o) => format!("-{}", o.metadata.name.clone().unwrap_or_default()),
        }
    }

    type Script = mpsc::UnboundedSender<watcher::Event<ConfigMap>>;
    type Feeds = Arc<Mutex<Vec<Feed<ConfigMap>>>>;

    /// An informer's driver whose watch is scripted (events sent on the returned sender).
    fn scripted() -> (Script, Store<ConfigMap>, Feeds) {
        let (store, writer) = reflector::store::<ConfigMap>();
        let subscribers: Feeds = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(
            "ConfigMap",
            UnboundedReceiverStream::new(rx).map(Ok),
            writer,
            Arc::new(AtomicBool::new(false)),
            Arc::clone(&subscribers),
        ));
        (tx, store, subscribers)
    }

    fn subscriber(
        store: &Store<ConfigMap>,
        subscribers: &Feeds,
        capacity: usize,
    ) -> impl Stream<Item = Change<ConfigMap>> + Unpin {
        let (feed, changes) = fanout::channel("ConfigMap", store.clone(), false, capacity);
        subscribers.lock().unwrap().push(feed);
        Box::pin(changes)
    }

    /// Waits until the store holds just these names (the driver has taken the events).
    async fn holds(store: &Store<ConfigMap>, names: &[&str]) {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let mut held: Vec<String> = store.state().iter().map(|m| m.name_any()).collect();
                held.sort();
                if held == names {
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the driver takes the events");
    }

    fn list(tx: &Script, maps: &[ConfigMap]) {
        tx.send(watcher::Event::Init).unwrap();
        for map in maps {
            tx.send(watcher::Event::InitApply(map.clone())).unwrap();
        }
        tx.send(watcher::Event::InitDone).unwrap();
    }

    /// Every subscriber sees the list once complete, then each change including
    /// deletions; a dropped subscriber is forgotten.
    #[tokio::test]
    async fn every_subscriber_sees_the_list_then_each_change_including_deletions() {
        use watcher::Event::*;
        let (tx, store, subscribers) = scripted();
        let mut early = subscriber(&store, &subscribers, 8);
        list(&tx, &[config_map("a", "1")]);
        assert_eq!(next(&mut early).await, "+a");
        tx.send(Apply(config_map("b", "2"))).unwrap();
        assert_eq!(next(&mut early).await, "+b");
        tx.send(Delete(config_map("a", "3"))).unwrap();
        assert_eq!(next(&mut early).await, "-a");
        assert_eq!(store.state().len(), 1, "the store follows the watch");

        drop(early);
        tx.send(Apply(config_map("c", "4"))).unwrap();
        tokio::time::timeout(Duration::from_secs(5), async {
            while !subscribers.lock().unwrap().is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the dropped subscriber is removed");
    }

    /// A subscriber that lags past its channel is not sent more; once it has drained
    /// what was sent it relists: the deletions it missed, then the whole store.
    #[tokio::test]
    async fn a_lagging_subscriber_relists_with_the_deletions_it_missed() {
        use watcher::Event::*;
        let (tx, store, subscribers) = scripted();
        let mut slow = subscriber(&store, &subscribers, 2);
        list(&tx, &[config_map("a", "1")]);
        assert_eq!(next(&mut slow).await, "+a");
        // Two fill the channel; the third is dropped, so is the deletion of `a`.
        for (name, version) in [("b", "2"), ("c", "3"), ("d", "4")] {
            tx.send(Apply(config_map(name, version))).unwrap();
        }
        tx.send(Delete(config_map("a", "5"))).unwrap();
        holds(&store, &["b", "c", "d"]).await;
        assert_eq!(next(&mut slow).await, "+b");
        assert_eq!(next(&mut slow).await, "+c");
        assert_eq!(
            next(&mut slow).await,
            "-a",
            "the missed deletion comes first"
        );
        let mut relisted = vec![];
        for _ in 0..3 {
            relisted.push(next(&mut slow).await);
        }
        relisted.sort();
        assert_eq!(relisted, ["+b", "+c", "+d"]);
        // Caught up: changes come one by one again.
        tx.send(Apply(config_map("e", "6"))).unwrap();
        assert_eq!(next(&mut slow).await, "+e");
    }

    /// A relist after a watch gap hands on what vanished in the gap as deletions,
    /// including an object deleted and made again under the same name.
    #[tokio::test]
    async fn a_relist_after_a_gap_carries_the_deletions_in_the_gap() {
        let (tx, store, subscribers) = scripted();
        let mut changes = subscriber(&store, &subscribers, 8);
        let mut remade = config_map("b", "2");
        remade.metadata.uid = Some("first".into());
        list(&tx, &[config_map("a", "1"), remade.clone()]);
        let mut first = vec![next(&mut changes).await, next(&mut changes).await];
        first.sort();
        assert_eq!(first, ["+a", "+b"]);
        remade.metadata.uid = Some("second".into());
        list(&tx, &[remade]);
        let mut second = vec![];
        for _ in 0..3 {
            second.push(next(&mut changes).await);
        }
        second.sort();
        assert_eq!(second, ["+b", "-a", "-b"]);
    }

    #[tokio::test]
    async fn a_late_subscriber_is_handed_what_was_listed() {
        let client_free = Informer::<ConfigMap> {
            kind: "ConfigMap",
            store: {
                let (store, mut writer) = reflector::store::<ConfigMap>();
                writer.apply_watcher_event(&watcher::Event::Init);
                writer.apply_watcher_event(&watcher::Event::InitApply(config_map("a", "1")));
                writer.apply_watcher_event(&watcher::Event::InitDone);
                store
            },
            listed: Arc::new(AtomicBool::new(true)),
            subscribers: Arc::default(),
            driver: Mutex::new(None),
        };
        let (store, changes) = client_free.subscribe();
        let mut changes = std::pin::pin!(changes);
        assert_eq!(next(&mut changes).await, "+a");
        assert_eq!(store.state().len(), 1);
        assert_eq!(client_free.subscribers.lock().unwrap().len(), 1);
    }
}
