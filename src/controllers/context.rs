//! The one Context every controller shares: the client, one event Recorder (it aggregates
//! repeated events into series, so there must be only one), metrics, the catalog snapshots
//! and the process-wide settings.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::catalogsource::CatalogSourceState;
use super::metrics::Metrics;
use super::snapshots::CatalogSnapshots;

/// The field manager of every server-side apply `olm run` sends.
pub const FIELD_MANAGER: &str = "olm";

#[derive(Clone, Debug)]
pub struct Settings {
    /// Catalogs here are visible to every namespace (upstream's `olm` by default).
    pub global_catalog_namespace: String,
    /// How often a CatalogSource's server (or ConfigMap) is checked.
    pub catalog_check_interval: Duration,
    /// Deadline for one registry health check or catalog load.
    pub registry_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            global_catalog_namespace: "olm".into(),
            catalog_check_interval: Duration::from_secs(10),
            registry_timeout: Duration::from_secs(5),
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub snapshots: Arc<CatalogSnapshots>,
    pub settings: Settings,
    pub catalog_sources: CatalogSourceState,
}

impl Context {
    pub fn new(
        client: Client,
        instance: String,
        metrics: Arc<Metrics>,
        snapshots: Arc<CatalogSnapshots>,
        settings: Settings,
    ) -> Self {
        let reporter = Reporter {
            controller: "olm".into(),
            instance: Some(instance),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            snapshots,
            settings,
            catalog_sources: CatalogSourceState::default(),
        }
    }

    /// Publishes an Event; a failure to record one is logged, never fatal.
    pub async fn event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(%error, reason, object = ?regarding.name, "could not record an event");
        }
    }
}
