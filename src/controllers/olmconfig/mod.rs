//! The OLMConfig controller: OLM's cluster-wide settings, as upstream serves them.
//!
//! - The OLMConfig `cluster` is kept present: when there is none (at start, or after it was
//!   deleted) it is created with the `olm run` flags' settings (`--disable-copied-csvs`
//!   writes `disableCopiedCSVs: true`). An existing one is never changed by the flags.
//! - Its switches are read live: `disableCopiedCSVs` is handed to the copier through
//!   [`super::copied_csvs`] (the flag stands in only while there is no OLMConfig), and the
//!   copier, woken for every AllNamespaces operator when it moves, deletes or makes copies.
//! - Its status carries `DisabledCopiedCSVs` in upstream's words (`decide.rs`), about the
//!   operators of the namespaces this process watches.
//! - `packageServerSyncInterval` is accepted and stored, and sets nothing (see
//!   [`crate::api::Features`]).
//!
//! One per process, whatever the watched namespaces: the object is the cluster's.

mod apply;
mod context;
pub mod decide;
mod gather;
mod triggers;

pub use context::{CONTROLLER, Error, FIELD_MANAGER, OlmConfigContext};

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};

use super::context::Context;
use super::kit::{self, KitState, ObjectKey, ReconcileError, Reconciler, Shutdown};
use crate::api::{OLM_CONFIG_NAME, OlmConfig};
use crate::cluster::informers::Change;
use crate::controllers::kit::cache_ready::listed;

/// How soon a round whose caches are not listed yet looks again.
const NOT_READY_RECHECK: Duration = Duration::from_secs(1);

impl Reconciler for OlmConfigContext {
    type Object = OlmConfig;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;

    crate::kit_accessors!(object_key);

    async fn sync(&self, config: &OlmConfig) -> Result<Action, Error> {
        sync(config, self).await
    }
}

/// Gather, decide, apply: the switch handed on first (the copier waits for it), then the
/// status once every cache has listed.
async fn sync(config: &OlmConfig, ctx: &OlmConfigContext) -> Result<Action, Error> {
    let flag = ctx.shared.settings.disable_copied_csvs;
    let disabled = decide::switch(Some(&config.spec), flag);
    if ctx.shared.copied_csvs.set_disabled(disabled) {
        tracing::info!(
            disabled,
            "the OLMConfig switched the copied CSVs of AllNamespaces operators"
        );
    }
    let Some(observed) = gather::gather(config, ctx).await else {
        return Ok(Action::requeue(NOT_READY_RECHECK));
    };
    let decision = decide::decide(&observed);
    if let Some(status) = decide::status(config, decision.condition, kit::now()) {
        apply::write_status(ctx, config, &status).await?;
        let condition = &status.conditions[0];
        tracing::info!(
            status = condition.status,
            reason = condition.reason,
            holding_out = ?decision.holding_out,
            "OLMConfig {}",
            condition.type_
        );
    }
    Ok(Action::await_change())
}

/// Keeps the OLMConfig present: once the cache has listed, and after each deletion, a
/// missing one is created from the flags (failures retried with backoff); meanwhile the
/// flag is the switch.
async fn keep_present(
    ctx: Arc<OlmConfigContext>,
    changes: impl Stream<Item = Change<DeserializeGuard<OlmConfig>>> + Send + 'static,
) {
    if !listed(&ctx.configs).await {
        return;
    }
    let key = ObjectKey {
        namespace: String::new(),
        name: OLM_CONFIG_NAME.into(),
    };
    let mut deletions = std::pin::pin!(
        changes.filter(|c| { futures::future::ready(matches!(c, Change::Deleted(_))) })
    );
    loop {
        while ctx.configs.get(&triggers::config_ref()).is_none() {
            ctx.shared
                .copied_csvs
                .set_disabled(ctx.shared.settings.disable_copied_csvs);
            match apply::create(&ctx).await {
                Ok(()) => {
                    ctx.kit.backoff.reset(&key);
                    break;
                }
                Err(error) => {
                    ctx.shared
                        .metrics
                        .reconcile_failed(CONTROLLER, error.metric_label());
                    let delay = ctx.kit.backoff.next_delay(&key);
                    tracing::warn!(%error, retry_in = ?delay, "no OLMConfig, and none could be made");
                    tokio::time::sleep(delay).await;
                }
            }
        }
        if deletions.next().await.is_none() {
            return;
        }
    }
}

/// Runs the controller until `shutdown` (leader only, once per process).
pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let informers = &shared.informers.cluster;
    let (configs, changes) = informers.olm_configs.subscribe();
    let (_, deletions) = informers.olm_configs.subscribe();
    let (namespaces, _) = informers.namespaces.subscribe();
    // The rounds read every scope's groups and CSVs: started here if no other controller has.
    for scope in informers.scopes() {
        drop(scope.operator_groups.subscribe());
        drop(scope.csvs.subscribe());
    }
    let ctx = Arc::new(OlmConfigContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        configs: configs.clone(),
        namespaces,
    });
    let present = tokio::spawn(keep_present(Arc::clone(&ctx), deletions));
    let controller = Controller::for_shared_stream(triggers::spec_changes(changes), configs)
        .reconcile_on(triggers::settled(shared.copied_csvs.copy_changes()));
    kit::run(controller, ctx, shutdown).await;
    present.abort();
}
