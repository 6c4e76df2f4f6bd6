//! What every round of the CSV controller shares: its context (caches, clients), the
//! round itself, and its error.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::{OnceCell, mpsc};

use crate::api::{ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::controllers::context::Context;
use crate::controllers::kit::{self, KitState, ObjectKey};

use super::copier::Copies;
use super::index::CsvIndex;
use super::rbac_cache::RbacStores;
use super::requirements::{self, CrdReadAt};

pub const CONTROLLER: &str = "csv";
pub const FIELD_MANAGER: &str = "olm-csv";
pub const FINALIZER: &str = "operators.coreos.com/csv-cleanup";
pub use super::error::Error;

pub struct CsvContext {
    pub shared: Arc<Context>,
    pub(super) kit: KitState<ObjectKey>,
    pub(super) csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    /// The CSVs by namespace and CRD, for the mappers and the copier.
    pub(super) index: Arc<CsvIndex>,
    pub(super) groups: Store<DeserializeGuard<OperatorGroup>>,
    pub(super) deployments: Store<Deployment>,
    /// The ServiceAccounts OLM made for CSVs (labelled as a CSV's). A round asks each of its
    /// accounts here first, and the API server only for one not in it (a namespace's
    /// `default`, a user's own, or one just made): a CSV's rounds read them again and again.
    pub(super) service_accounts: Store<PartialObjectMeta<ServiceAccount>>,
    pub(super) namespaces: Store<PartialObjectMeta<Namespace>>,
    /// The copier's names of every CSV (a deleted CSV's copies go with it) and its queue
    /// (after each round of a group member).
    pub(super) copies: Copies,
    pub(super) subscriptions: Store<DeserializeGuard<Subscription>>,
    /// A replaced CSV stays until the plan that wrote its replacement has run every step.
    pub(super) plans: Store<DeserializeGuard<InstallPlan>>,
    /// CRDs' metadata (the shared watch), and what a GET found of each at a resourceVersion:
    /// a CSV with fifty CRDs, woken by each of them turning Established, reads each once
    /// per change instead of fifty times per wake-up.
    pub(super) crd_meta: Store<PartialObjectMeta<CustomResourceDefinition>>,
    pub(super) crd_states: std::sync::Mutex<HashMap<String, (CrdReadAt, requirements::CrdState)>>,
    pub(super) server_version: OnceCell<String>,
    /// Roles, ClusterRoles and their bindings (the shared watches): what a CSV's accounts
    /// hold, and the Roles it spreads to its targets.
    pub(super) rbac: RbacStores,
    /// Clients acting as a scoped OperatorGroup's service account (the whole install).
    pub(super) scoped: crate::cluster::scoped::ScopedClients,
    /// CSVs to look at again because a related one (replaced or replacing) moved.
    pub(super) related: mpsc::UnboundedSender<ObjectRef<DeserializeGuard<ClusterServiceVersion>>>,
}

pub(super) fn key(csv: &ClusterServiceVersion) -> (String, String) {
    (csv.namespace().unwrap_or_default(), csv.name_any())
}

pub(super) fn now() -> Timestamp {
    kit::now()
}

pub(super) struct Round<'a> {
    pub(super) csv: &'a ClusterServiceVersion,
    pub(super) ctx: &'a CsvContext,
    pub(super) namespace: String,
    pub(super) name: String,
}

impl Round<'_> {
    pub(super) fn fail(&self, step: &'static str) -> impl FnOnce(kube::Error) -> Error + use<> {
        let (namespace, name) = (self.namespace.clone(), self.name.clone());
        move |error| Error::Kube {
            namespace,
            name,
            step,
            error,
        }
    }

    pub(super) fn client(&self) -> kube::Client {
        self.ctx.shared.client.clone()
    }
}

impl CsvContext {
    /// Every cache has been listed once: before that a missing group or Deployment is not
    /// missing, only not yet seen (deciding on it would fail a healthy CSV after a restart).
    pub(super) async fn caches_ready(&self) -> bool {
        crate::controllers::kit::cache_ready::listed(&self.groups).await
            && crate::controllers::kit::cache_ready::listed(&self.deployments).await
            && crate::controllers::kit::cache_ready::listed(&self.namespaces).await
            && self.copies.names.listed().await
            && crate::controllers::kit::cache_ready::listed(&self.subscriptions).await
            && crate::controllers::kit::cache_ready::listed(&self.plans).await
            && crate::controllers::kit::cache_ready::listed(&self.csvs).await
            && self.rbac.listed().await
    }
}

pub(super) fn csv_api(round: &Round) -> Api<ClusterServiceVersion> {
    Api::namespaced(round.client(), &round.namespace)
}

pub(super) use super::index::CsvRef;
