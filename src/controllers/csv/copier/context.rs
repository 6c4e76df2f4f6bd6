//! What the copier's rounds share: its caches, its error, and one source CSV's round.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::Store;

use super::names::CsvNames;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::controllers::context::Context;
use crate::controllers::kit::cache_ready::listed;
use crate::controllers::kit::{KitState, ObjectKey};

/// The field manager of copies (the CSV controller's: copies written by an older OLM stay
/// ours).
pub const FIELD_MANAGER: &str = "olm-csv";

/// The copier's rounds fail as the phase machine's do, on the source CSV.
pub use crate::controllers::csv::error::Error as CopyError;

pub struct CopierContext {
    pub shared: Arc<Context>,
    pub kit: KitState<ObjectKey>,
    /// The source CSVs (the shared informer, which leaves copies out).
    pub csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    pub groups: Store<DeserializeGuard<OperatorGroup>>,
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// Every CSV's name, cluster-wide: the copies, and the CSVs a copy must not overwrite.
    pub names: CsvNames,
}

impl CopierContext {
    /// Every cache has been listed once (until then a namespace or copy not seen is not
    /// missing), and the copied-CSV switch read.
    pub async fn caches_ready(&self) -> bool {
        listed(&self.groups).await
            && listed(&self.namespaces).await
            && self.names.listed().await
            && listed(&self.csvs).await
            && self.shared.copied_csvs.known().await
    }
}

/// One source CSV's round.
pub struct Source<'a> {
    pub csv: &'a ClusterServiceVersion,
    pub ctx: &'a CopierContext,
    pub namespace: String,
    pub name: String,
}

impl<'a> Source<'a> {
    pub fn new(csv: &'a ClusterServiceVersion, ctx: &'a CopierContext) -> Self {
        Source {
            csv,
            ctx,
            namespace: csv.namespace().unwrap_or_default(),
            name: csv.name_any(),
        }
    }

    pub fn fail(&self, step: &'static str) -> impl FnOnce(kube::Error) -> CopyError + use<> {
        let (namespace, name) = (self.namespace.clone(), self.name.clone());
        move |error| CopyError::Kube {
            namespace,
            name,
            step,
            error,
        }
    }

    pub fn client(&self) -> kube::Client {
        self.ctx.shared.client.clone()
    }
}
