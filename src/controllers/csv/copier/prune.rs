//! Copies whose source is gone, deleted.

use std::sync::Arc;
use std::time::Duration;

use super::context::CopierContext;
use super::write::delete_copy;
use crate::controllers::kit::cache_ready;

/// Copies whose source CSV is gone (deleted while OLM was down, or never cleaned up by an
/// older OLM) are deleted. Only sources in the watched scope are judged.
pub async fn prune_orphans(ctx: Arc<CopierContext>) {
    if !cache_ready::listed(&ctx.csvs).await || !ctx.names.listed().await {
        return;
    }
    let scope = ctx.shared.settings.watch_namespace.clone();
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let live = cache_ready::live_keys(&ctx.csvs);
        for copy in ctx.names.copies(None) {
            if scope.as_ref().is_some_and(|s| *s != copy.copied_from)
                || live.contains(&(copy.copied_from.clone(), copy.name.clone()))
            {
                continue;
            }
            if let Err(error) =
                delete_copy(ctx.shared.client.clone(), &copy.namespace, &copy.name).await
            {
                tracing::warn!(%error, copy = %copy.name, namespace = %copy.namespace, "could not delete an orphaned copied CSV");
            }
        }
    }
}
