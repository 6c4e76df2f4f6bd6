//! What every round of the OLMConfig controller shares: its context (caches), its error and
//! its constants. A leaf of the controller: the other files read these, and this file reads
//! none of them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::Store;

use crate::api::{OLM_CONFIG_NAME, OlmConfig};
use crate::controllers::context::Context;
use crate::controllers::kit::{KitState, ObjectKey, PanicError, ReconcileError};

pub const CONTROLLER: &str = "olmconfig";
pub const FIELD_MANAGER: &str = "olm-olmconfig";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating the OLMConfig {OLM_CONFIG_NAME}: {error}")]
    Create {
        #[source]
        error: kube::Error,
    },
    #[error("writing the status of the OLMConfig {OLM_CONFIG_NAME}: {error}")]
    WriteStatus {
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Create { .. } | Error::WriteStatus { .. } => "kube",
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct OlmConfigContext {
    pub shared: Arc<Context>,
    pub(super) kit: KitState<ObjectKey>,
    /// The OLMConfig `cluster` (the shared informer watches only it).
    pub(super) configs: Store<DeserializeGuard<OlmConfig>>,
    pub(super) namespaces: Store<PartialObjectMeta<Namespace>>,
}
