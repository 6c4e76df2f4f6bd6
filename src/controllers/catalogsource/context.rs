//! What every round of the CatalogSource controller shares: its context, the state it keeps
//! per CatalogSource between rounds, and its error. Below the controller (`super`) and the
//! loaders, which read and record through it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;

use crate::api::CatalogSourceReason;
use crate::controllers::context::Context;
use crate::controllers::kit::{KitState, PanicError, ReconcileError};
use crate::registry::client::{ClientError, RegistryClient};
use crate::resolver::input::CatalogRef;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CatalogSource {source_ref}: reading ConfigMap {config_map}: {error}")]
    ReadConfigMap {
        source_ref: CatalogRef,
        config_map: String,
        #[source]
        error: kube::Error,
    },
    #[error(
        "CatalogSource {source_ref}: adding it to the owners of ConfigMap {config_map}: {error}"
    )]
    OwnConfigMap {
        source_ref: CatalogRef,
        config_map: String,
        #[source]
        error: kube::Error,
    },
    #[error(
        "CatalogSource {source_ref}: setting spec.image to {image} (olm.catalogImageTemplate): {error}"
    )]
    WriteImage {
        source_ref: CatalogRef,
        image: String,
        #[source]
        error: kube::Error,
    },
    #[error("CatalogSource {source_ref}: writing status: {error}")]
    WriteStatus {
        source_ref: CatalogRef,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::ReadConfigMap { .. } => "read_configmap",
            Error::OwnConfigMap { .. } => "own_configmap",
            Error::WriteImage { .. } => "write_image",
            Error::WriteStatus { .. } => "write_status",
            Error::Panicked(_) => "panic",
        }
    }
}

/// This controller's own context: the shared one plus what only it keeps.
pub struct CatalogSourceContext {
    pub shared: Arc<Context>,
    pub(super) state: CatalogSourceState,
    pub(super) kit: KitState<CatalogRef>,
    /// Metadata of the ConfigMaps in the watched namespaces: a ConfigMap catalog is re-read
    /// only when its resourceVersion moves, with no periodic GET.
    pub(super) config_maps: Store<PartialObjectMeta<ConfigMap>>,
    /// The API server's version for `olm.catalogImageTemplate`, read once it is needed.
    pub(super) kube_version: tokio::sync::OnceCell<(u64, u64, u64)>,
}

/// What the controller remembers per CatalogSource between rounds (in memory only).
#[derive(Default)]
pub struct CatalogSourceState {
    sources: Mutex<HashMap<CatalogRef, SourceState>>,
}

#[derive(Default)]
struct SourceState {
    /// The object this state is of: one deleted and created again under its name is a new
    /// object, read from scratch.
    uid: Option<String>,
    client: Option<Arc<RegistryClient>>,
    /// Image catalogs: the registry session (its auth handshake done once), while the
    /// registry and credentials stay the same.
    image_session: Option<(
        String,
        oci_client::secrets::RegistryAuth,
        Arc<crate::oci::registry::Session>,
    )>,
    last_load: Option<LoadRecord>,
    /// Image catalogs: the mirror host the image was last resolved at (None: its own).
    mirror: Option<String>,
}

/// The last attempt to read a catalog's content.
#[derive(Clone, Debug)]
pub(crate) struct LoadRecord {
    /// What was read: the address, or the ConfigMap name and resourceVersion.
    pub origin: String,
    pub at: Instant,
    /// `(reason, message)` when it failed; the snapshot (if any) is then older.
    pub failure: Option<(CatalogSourceReason, String)>,
}

impl CatalogSourceState {
    fn with<T>(&self, source: &CatalogRef, f: impl FnOnce(&mut SourceState) -> T) -> T {
        let mut map = self
            .sources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(map.entry(source.clone()).or_default())
    }

    /// The client for `address`, reusing its connection while the address stays the same.
    pub(super) fn client(
        &self,
        source: &CatalogRef,
        address: &str,
        timeout: Duration,
    ) -> Result<Arc<RegistryClient>, ClientError> {
        self.with(source, |state| {
            if let Some(client) = &state.client
                && client.address() == address
            {
                return Ok(Arc::clone(client));
            }
            let client = Arc::new(RegistryClient::new(address, timeout)?);
            state.client = Some(Arc::clone(&client));
            Ok(client)
        })
    }

    /// The registry session for an image catalog, reused while the registry and the
    /// credentials stay the same (a new session would redo the `/v2/` handshake every poll).
    pub(super) fn image_session(
        &self,
        source: &CatalogRef,
        reference: &oci_client::Reference,
        auth: oci_client::secrets::RegistryAuth,
        options: &crate::oci::registry::Options,
    ) -> Result<Arc<crate::oci::registry::Session>, crate::oci::registry::RegistryError> {
        let registry = reference.resolve_registry().to_string();
        self.with(source, |state| {
            if let Some((r, a, session)) = &state.image_session
                && *r == registry
                && *a == auth
            {
                return Ok(Arc::clone(session));
            }
            let session = Arc::new(crate::oci::registry::Session::new(
                reference,
                auth.clone(),
                options,
            )?);
            state.image_session = Some((registry, auth, Arc::clone(&session)));
            Ok(session)
        })
    }

    /// Records that `uid` is the object under `source`'s name; true when the state was of
    /// an earlier object of that name and has been forgotten.
    pub(super) fn claim(&self, source: &CatalogRef, uid: Option<&str>) -> bool {
        self.with(source, |state| {
            let earlier = state.uid.is_some() && state.uid.as_deref() != uid;
            if earlier {
                *state = SourceState::default();
            }
            state.uid = uid.map(str::to_string);
            earlier
        })
    }

    pub(crate) fn set_mirror(&self, source: &CatalogRef, mirror: Option<String>) {
        self.with(source, |state| state.mirror = mirror);
    }

    pub(crate) fn mirror(&self, source: &CatalogRef) -> Option<String> {
        self.with(source, |state| state.mirror.clone())
    }

    pub(crate) fn last_load(&self, source: &CatalogRef) -> Option<LoadRecord> {
        self.with(source, |state| state.last_load.clone())
    }

    pub(crate) fn record_load(&self, source: &CatalogRef, record: LoadRecord) {
        self.with(source, |state| state.last_load = Some(record));
    }

    pub(super) fn retain(&self, live: &HashSet<CatalogRef>) {
        let mut map = self
            .sources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|source, _| live.contains(source));
    }
}
