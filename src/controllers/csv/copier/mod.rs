//! The copier: writes the copied CSVs of settled source CSVs, off the install path.
//!
//! Copies cost two writes per target namespace (the object, then its status): for an
//! AllNamespaces operator on a large cluster that is hundreds of writes. Done inside the
//! phase machine's round they delayed every other install behind them; here they run on
//! their own queue and context, a few sources at a time, fed by the phase machine's rounds,
//! by changes to the copies themselves, by namespaces coming and going, and by the
//! copied-CSV switch (the OLMConfig's, read live: [`crate::controllers::copied_csvs`]).

pub mod context;
pub mod copies;
pub mod names;
mod prune;
mod watch;
mod write;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::controller::{self, Action, applier};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use self::context::{CopierContext, CopyError, FIELD_MANAGER, Source};
use self::names::CsvNames;
use super::index::{CsvIndex, CsvRef};
use super::membership::group_of;
use super::phase::GroupState;
use crate::api::ClusterServiceVersion;
use crate::controllers::context::Context;
use crate::controllers::copied_csvs::CopiesView;
use crate::controllers::kit::{self, KitState, ObjectKey, Reconciler, Shutdown};

pub use write::delete_copy;

/// Source CSVs whose copies are written at the same time.
const SOURCES_AT_ONCE: u16 = 4;

/// What the phase machine holds of the copier: every CSV's name (its cleanup deletes a
/// deleted CSV's copies) and the queue it asks for a source's copies on.
pub struct Copies {
    pub names: CsvNames,
    pub requests: mpsc::UnboundedSender<CsvRef>,
}

/// The copier, started and not yet running.
pub struct Copier {
    ctx: Arc<CopierContext>,
    requests: BoxStream<'static, CsvRef>,
}

/// The copier's context and queue, over the shared informers and a metadata watch of its
/// own; `index` is the CSV controller's (the CSVs of a namespace).
pub fn start(shared: &Arc<Context>, index: Arc<CsvIndex>) -> (Copies, Copier) {
    let informers = &shared.informers;
    let (groups, _) = informers.operator_groups.subscribe();
    let (namespaces, namespace_changes) = informers.cluster.namespaces.subscribe_touched();
    let (csvs, _) = informers.csvs.subscribe();
    let (names, changed_copies) = watch::watch_csv_names(shared.client.clone());
    // A copy of one of this scope's operators changed: the OLMConfig's status looks again.
    let (switch, scope) = (
        Arc::clone(&shared.copied_csvs),
        shared.settings.watch_namespace.clone(),
    );
    let changed_copies = changed_copies.inspect(move |source: &CsvRef| {
        if scope.is_none() || source.namespace == scope {
            switch.copies_changed();
        }
    });
    let wakes = futures::stream::select(namespace_changes.map(drop), shared.copied_csvs.switched());
    let (requests, asked) = mpsc::unbounded_channel();
    let requests_stream = futures::stream::select(
        UnboundedReceiverStream::new(asked),
        futures::stream::select(
            changed_copies,
            watch::all_namespaces_sources(wakes, groups.clone(), csvs.clone(), index),
        ),
    );
    let ctx = Arc::new(CopierContext {
        shared: Arc::clone(shared),
        kit: KitState::default(),
        csvs,
        groups,
        namespaces,
        names: names.clone(),
    });
    let copier = Copier {
        ctx,
        requests: requests_stream.boxed(),
    };
    (Copies { names, requests }, copier)
}

impl Copier {
    /// Runs until shutdown: one round per source CSV asked for, and the orphans' pruner.
    pub async fn run(self, shutdown: Shutdown) {
        let pruner = tokio::spawn(prune::prune_orphans(Arc::clone(&self.ctx)));
        let registrar = tokio::spawn(register_names(Arc::clone(&self.ctx)));
        let queue = self
            .requests
            .map(Ok::<_, std::convert::Infallible>)
            .take_until(shutdown.requested());
        let csvs = self.ctx.csvs.clone();
        applier(
            |source, ctx| Box::pin(kit::reconcile::<CopierContext>(source, ctx)),
            kit::error_policy::<CopierContext>,
            self.ctx,
            csvs,
            queue,
            controller::Config::default().concurrency(SOURCES_AT_ONCE),
        )
        .for_each(|result| async move {
            match result {
                // A source deleted before its turn: nothing to copy.
                Ok(_) | Err(controller::Error::ObjectNotFound(_)) => {}
                Err(error) => tracing::warn!(%error, "copied CSVs"),
            }
        })
        .await;
        pruner.abort();
        registrar.abort();
    }
}

/// Makes the names known to the process once listed (the OLMConfig's status reads them).
async fn register_names(ctx: Arc<CopierContext>) {
    if ctx.names.listed().await {
        ctx.shared.copied_csvs.register(Arc::new(ctx.names.clone()));
    }
}

impl CopiesView for CsvNames {
    fn copies_of(&self, source_namespace: &str, name: &str) -> Vec<String> {
        self.copies(Some((source_namespace, name)))
            .into_iter()
            .map(|copy| copy.namespace)
            .collect()
    }

    fn holds(&self, namespace: &str, name: &str) -> bool {
        self.get(namespace, name).is_some()
    }
}

impl Reconciler for CopierContext {
    type Object = ClusterServiceVersion;
    type Key = ObjectKey;
    type Error = CopyError;
    const CONTROLLER: &'static str = "csv-copies";
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    /// The phase machine reports unreadable CSVs already.
    const REPORTS_INVALID: bool = false;

    fn shared(&self) -> &Context {
        &self.shared
    }

    fn kit(&self) -> &KitState<ObjectKey> {
        &self.kit
    }

    fn key(meta: &ObjectMeta) -> ObjectKey {
        ObjectKey::of(meta)
    }

    async fn sync(&self, csv: &ClusterServiceVersion) -> Result<Action, CopyError> {
        if csv.metadata.deletion_timestamp.is_some() {
            // The phase machine's cleanup deletes the copies.
            return Ok(Action::await_change());
        }
        if !self.caches_ready().await {
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        let source = Source::new(csv, self);
        let (_, state) = group_of(csv, &source.namespace, &self.groups, &self.shared);
        if let GroupState::Member { targets, .. } = state {
            // Read once the caches are: the OLMConfig's switch, live.
            let disabled = self
                .shared
                .copied_csvs
                .disabled()
                .unwrap_or(self.shared.settings.disable_copied_csvs);
            write::sync(&source, &targets, disabled).await?;
        }
        Ok(Action::await_change())
    }
}
