//! Catalogs a registry server serves (`sourceType: grpc`, `spec.address`): health-checked
//! every round, read again only when due. With `spec.image` and no address, the image is
//! served in-process instead ([`super::image`]).

use std::time::Duration;

use super::context::{CatalogSourceContext, LoadRecord};
use super::load::{Loaded, Round, accept, next_check, poll_interval, stale};
use super::status::{Connection, STATE_READY};
use crate::api::{CatalogSource, CatalogSourceReason};
use crate::controllers::context::Context;
use crate::registry::client::{LoadOptions, Manifests, RegistryClient};
use crate::resolver::input::CatalogRef;

pub async fn sync_grpc(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
) -> Round {
    let ctx = &cctx.shared;
    let check_every = ctx.settings.catalog_check_interval;
    let (poll, spec_problem) = poll_interval(source);
    let invalid = |message: String| Round {
        connection: Connection::InvalidSpec { message },
        config_map: None,
        spec_problem: spec_problem.clone(),
        requeue_after: Some(check_every),
    };
    let address = match (source.spec.address.as_deref().map(str::trim), &source.spec.image) {
        (Some(address), _) if !address.is_empty() => address.to_string(),
        // No catalog pod: the image is pulled and served in-process.
        (_, Some(image)) => return super::image::sync_image(source, source_ref, cctx, image).await,
        _ => return invalid("spec.address (host:port of a registry server) is required when spec.sourceType is grpc".into()),
    };
    let client = match cctx
        .state
        .client(source_ref, &address, ctx.settings.registry_timeout)
    {
        Ok(client) => client,
        Err(error) => return invalid(format!("spec.address {address:?}: {error}")),
    };
    if let Err(error) = client.check_health().await {
        return Round {
            connection: Connection::Failed {
                address: Some(address),
                reason: CatalogSourceReason::ConnectionFailed,
                message: error.to_string(),
            },
            config_map: None,
            spec_problem,
            requeue_after: Some(check_every),
        };
    }

    let last = cctx.state.last_load(source_ref);
    if load_due(source, &address, last.as_ref(), poll, ctx) {
        load(source, source_ref, cctx, &client, &address).await;
    }
    Round {
        connection: Connection::Ready {
            message: format!("registry server at {address} is serving"),
            address: Some(address),
        },
        config_map: None,
        spec_problem,
        requeue_after: Some(next_check(
            check_every,
            poll,
            cctx.state.last_load(source_ref),
        )),
    }
}

/// Whether to read the catalog from `address` again: never read, read from elsewhere, a
/// server that was not ready, or a last read that is stale.
fn load_due(
    source: &CatalogSource,
    address: &str,
    last: Option<&LoadRecord>,
    poll: Option<Duration>,
    ctx: &Context,
) -> bool {
    let was_ready = source
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|c| {
            c.last_observed_state == STATE_READY && c.address.as_deref() == Some(address)
        });
    last.is_none_or(|record| {
        record.origin != address
            // The server came back: it may be a new one with new content.
            || !was_ready
            || stale(record, poll, ctx)
    })
}

/// Reads the catalog from the server and hands it to [`accept`].
async fn load(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    client: &RegistryClient,
    address: &str,
) {
    let ctx = &cctx.shared;
    // What ListBundles sends is what resolution needs; manifests of image bundles stay
    // on the server (fetched with GetBundle when a bundle is installed), as upstream
    // keeps them out of the catalog operator. That keeps a snapshot small. Channel
    // heads' CSVs are fetched for packagemanifests (their descriptions are kept).
    let projection = ctx.snapshots.projection();
    let options = LoadOptions {
        manifests: if projection.is_some() {
            Manifests::ChannelHeads
        } else {
            Manifests::AsListed
        },
        condense_fetched: projection.map(|p| p.condense_fetched()),
        timeout: ctx.settings.catalog_load_timeout,
        ..LoadOptions::default()
    };
    let loaded = client
        .load_catalog_with(&options)
        .await
        .map_err(|e| (CatalogSourceReason::LoadFailed, e.to_string()));
    accept(
        source,
        source_ref,
        cctx,
        address.to_string(),
        loaded.map(Loaded::Whole),
        &[],
    )
    .await;
}
