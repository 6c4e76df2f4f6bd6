//! The one Context every controller shares: the client, one event Recorder (it aggregates
//! repeated events into series, so there must be only one), metrics, the catalog snapshots,
//! the process-wide settings, the copied-CSV switch, and whether this replica leads.
//!
//! Events are published in the background, in order, by one task (as client-go's
//! broadcaster does): a reconcile never waits for an Event to be written.
//!
//! A controller's own state lives in its own module, in a context of its own that holds an
//! `Arc<Context>`; nothing controller-specific belongs here.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::{mpsc, watch};

use crate::cluster::informers::Informers;
use crate::controllers::copied_csvs::CopiedCsvs;
use crate::controllers::metrics::Metrics;
use crate::snapshots::CatalogSnapshots;

#[derive(Clone, Debug)]
pub struct Settings {
    /// Catalogs here are visible to every namespace (upstream's `olm` by default).
    pub global_catalog_namespace: String,
    /// The namespace this set of controllers watches (None: all namespaces). `olm run
    /// --watch-namespace a,b` runs one set of controllers per namespace, each scoped to one.
    pub watch_namespace: Option<String>,
    /// How often a CatalogSource's registry server is health-checked.
    pub catalog_check_interval: Duration,
    /// Deadline for one registry health check (a load waits at least 30 s per answer).
    pub registry_timeout: Duration,
    /// Deadline for one whole catalog load from a registry server.
    pub catalog_load_timeout: Duration,
    /// How long an InstallPlan step keeps being retried before the plan fails (upstream's
    /// `--install-plan-retry-timeout`).
    pub install_plan_retry_timeout: Duration,
    /// How long a CSV may stay Installing with unready Deployments before it fails with
    /// InstallCheckFailed (upstream: 5 minutes, fixed).
    pub install_check_timeout: Duration,
    /// How long the serving certificates of webhooks and API services are valid.
    pub cert_validity: Duration,
    /// How long an InstallPlan keeps trying to pull a bundle image before it fails
    /// (upstream's `--bundle-unpack-timeout`; the OperatorGroup annotation
    /// `operatorframework.io/bundle-unpack-timeout` overrides it per namespace).
    pub bundle_unpack_timeout: Duration,
    /// `--disable-copied-csvs`: what the OLMConfig OLM creates when there is none says
    /// (`spec.features.disableCopiedCSVs`). The switch in effect is the OLMConfig's, read
    /// live ([`Context::copied_csvs`]); an existing OLMConfig is never changed by the flag.
    pub disable_copied_csvs: bool,
    /// Where image catalogs (and bundle images) are pulled to, one directory per digest.
    pub image_cache_dir: std::path::PathBuf,
    /// Registries (`host:port`) reached over plain HTTP; loopback always is.
    pub insecure_registries: Vec<String>,
    /// Registry mirrors for every pull: registries.conf, and the cluster's
    /// ImageDigestMirrorSets and ImageTagMirrorSets as they change.
    pub mirrors: std::sync::Arc<crate::oci::mirrors::LiveMirrors>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            global_catalog_namespace: "olm".into(),
            watch_namespace: None,
            catalog_check_interval: Duration::from_secs(10),
            registry_timeout: Duration::from_secs(5),
            catalog_load_timeout: crate::registry::limits::DEFAULT_LOAD_TIMEOUT,
            install_plan_retry_timeout: Duration::from_secs(60),
            install_check_timeout: Duration::from_secs(300),
            cert_validity: Duration::from_secs(730 * 24 * 3600),
            bundle_unpack_timeout: Duration::from_secs(600),
            disable_copied_csvs: false,
            image_cache_dir: std::env::temp_dir().join("olm-rs-images"),
            insecure_registries: Vec::new(),
            mirrors: std::sync::Arc::default(),
        }
    }
}

pub struct Context {
    pub client: Client,
    events: mpsc::UnboundedSender<(Event, ObjectReference)>,
    pub metrics: Arc<Metrics>,
    pub snapshots: Arc<CatalogSnapshots>,
    pub settings: Settings,
    /// One watch per kind read by several controllers, for this context's scope.
    pub informers: Arc<Informers>,
    /// The copied-CSV switch and the copies, shared by every scope of the process.
    pub copied_csvs: Arc<CopiedCsvs>,
    leading: watch::Receiver<bool>,
}

impl Context {
    /// The context of `client`, reading through `informers` (built by the caller, which
    /// starts nothing). The returned future publishes the Events, in order: the caller
    /// spawns it.
    pub fn new(
        client: Client,
        informers: Arc<Informers>,
        instance: String,
        metrics: Arc<Metrics>,
        snapshots: Arc<CatalogSnapshots>,
        settings: Settings,
        leading: watch::Receiver<bool>,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let reporter = Reporter {
            controller: "olm".into(),
            instance: Some(instance),
        };
        let recorder = Recorder::new(client.clone(), reporter);
        let (events, queue) = mpsc::unbounded_channel();
        let context = Context {
            events,
            informers,
            client,
            metrics,
            snapshots,
            settings,
            copied_csvs: Arc::default(),
            leading,
        };
        (context, publish_events(recorder, queue))
    }

    /// The same process-wide parts (one Recorder, metrics, snapshots, copied-CSV switch,
    /// leadership) for controllers scoped to another namespace.
    pub fn scoped_to(&self, namespace: Option<String>, informers: Arc<Informers>) -> Context {
        Context {
            informers,
            client: self.client.clone(),
            events: self.events.clone(),
            metrics: Arc::clone(&self.metrics),
            snapshots: Arc::clone(&self.snapshots),
            settings: Settings {
                watch_namespace: namespace,
                ..self.settings.clone()
            },
            copied_csvs: Arc::clone(&self.copied_csvs),
            leading: self.leading.clone(),
        }
    }

    /// Whether this replica holds the leader Lease now. Controllers that run on every
    /// replica (the catalog cache) write status and Events only while this is true.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Yields once each time this replica becomes the leader: a controller that ran as a
    /// standby re-reconciles everything then, to write what it held back.
    pub fn leadership_gained(&self) -> impl Stream<Item = ()> + Send + 'static {
        futures::stream::unfold(
            (self.leading.clone(), false),
            |(mut leading, mut was)| async move {
                loop {
                    let now = *leading.borrow_and_update();
                    if now && !was {
                        return Some(((), (leading, true)));
                    }
                    was = now;
                    leading.changed().await.ok()?;
                }
            },
        )
    }

    /// Queues an Event for publishing (leader only); a failure to record one is logged,
    /// never fatal.
    pub fn event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        if !self.is_leader() {
            return;
        }
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(truncate_note(note)),
            action: action.into(),
            secondary: None,
        };
        // Fails only when the publisher is gone, at shutdown.
        let _ = self.events.send((event, regarding.clone()));
    }
}

/// Publishes queued Events one at a time, in the order they were queued.
async fn publish_events(
    recorder: Recorder,
    mut queue: mpsc::UnboundedReceiver<(Event, ObjectReference)>,
) {
    while let Some((event, regarding)) = queue.recv().await {
        if let Err(error) = recorder.publish(&event, &regarding).await {
            tracing::warn!(%error, reason = event.reason, object = ?regarding.name, "could not record an event");
        }
    }
}

/// Event notes are capped at 1 kB by the API server.
pub fn truncate_note(mut note: String) -> String {
    const LIMIT: usize = 1000;
    if note.len() > LIMIT {
        let mut end = LIMIT;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}
