//! Image catalogs (`sourceType: grpc`, `spec.image`, no address): served in-process, with no
//! catalog pod. A round that is due resolves the tag with one manifest HEAD; only a new
//! digest is pulled (once per digest, into the on-disk cache) and loaded. An unchanged
//! digest changes nothing, so a steady poll writes nothing. Failures keep the last good
//! snapshot.

use std::time::{Duration, Instant};

use oci_client::secrets::RegistryAuth;

use super::load::{Round, accept, poll_interval, read_streaming, retry_after_failure};
use super::status::Connection;
use super::{CatalogSourceContext, LoadRecord};
use crate::api::{CatalogSource, CatalogSourceReason, PullCause};
use crate::controllers::pull_secrets::{AuthFailure, registry_auth};
use crate::oci::catalog::{origin, parse_origin};
use crate::oci::registry::{Options, parse_reference, select_catalog};
use crate::resolver::input::CatalogRef;

/// Why an image catalog could not be read: a reason for the condition, and a message that
/// names the image.
type Failure = (CatalogSourceReason, String);

pub async fn sync_image(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    image: &str,
) -> Round {
    let ctx = &cctx.shared;
    let check_every = ctx.settings.catalog_check_interval;
    let (poll, spec_problem) = poll_interval(source);
    let image = image.trim();
    let attempt = origin(image, "");
    let last = cctx.state.last_load(source_ref);
    let due = match &last {
        None => true,
        Some(record) => {
            // The spec names another image.
            !record.origin.starts_with(&attempt)
                || poll.is_some_and(|p| record.at.elapsed() >= p)
                || (record.failure.is_some() && record.at.elapsed() >= retry_after_failure(ctx))
        }
    };
    if due {
        poll_once(source, source_ref, cctx, image).await;
    }

    let mut requeue_after = check_every;
    if let (Some(poll), Some(record)) = (poll, cctx.state.last_load(source_ref)) {
        requeue_after = requeue_after.min(
            poll.saturating_sub(record.at.elapsed())
                .max(Duration::from_millis(100)),
        );
    }
    let serving = ctx
        .snapshots
        .get(source_ref)
        .and_then(|s| parse_origin(&s.origin).map(|(r, d)| (r.to_string(), d.to_string())))
        .filter(|(reference, _)| reference == image);
    let failure = cctx.state.last_load(source_ref).and_then(|r| r.failure);
    let connection = match (serving, failure) {
        (Some((reference, digest)), None) => Connection::Ready {
            address: None,
            message: format!("image {reference} resolved to {digest}; served in-process"),
        },
        (Some((reference, digest)), Some((_, message))) => Connection::Ready {
            address: None,
            message: format!(
                "serving the last good image {reference}@{digest} in-process; the latest check \
                 failed: {message}"
            ),
        },
        (None, Some((reason, message))) => Connection::Failed {
            address: None,
            reason,
            message,
        },
        (None, None) => Connection::Failed {
            address: None,
            reason: CatalogSourceReason::NotPulled,
            message: format!("image {image} is not pulled yet"),
        },
    };
    Round {
        connection,
        config_map: None,
        spec_problem,
        requeue_after: Some(requeue_after),
    }
}

/// One check of the registry: HEAD, and a pull and load only for a digest not in use.
async fn poll_once(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    image: &str,
) {
    let ctx = &cctx.shared;
    let fail = |failure: Failure, origin: String| {
        tracing::warn!(catalogsource = %source_ref, reason = failure.0.as_str(), message = %failure.1, "image catalog check failed");
        cctx.state.record_load(
            source_ref,
            LoadRecord {
                origin,
                at: Instant::now(),
                failure: Some(failure),
            },
        );
    };
    let reference = match parse_reference(image) {
        Ok(reference) => reference,
        Err(e) => {
            return fail(
                (PullCause::InvalidImage.into(), format!("spec.image: {e}")),
                origin(image, ""),
            );
        }
    };
    let auth = match pull_auth(source, source_ref, cctx, reference.resolve_registry()).await {
        Ok(auth) => auth,
        Err((cause, message)) => {
            return fail(
                (cause.into(), format!("image {image}: {message}")),
                origin(image, ""),
            );
        }
    };
    let options = Options {
        insecure: ctx.settings.insecure_registries.clone(),
        timeout: Some(ctx.settings.registry_timeout.max(Duration::from_secs(30))),
    };
    let session = cctx
        .state
        .image_session(source_ref, &reference, auth, &options);
    let digest = match session.resolve_digest(&reference).await {
        Ok(digest) => digest,
        Err(e) => {
            let message = format!("image {image}: {e}");
            return fail((e.cause().into(), message), origin(image, ""));
        }
    };
    let loaded_from = origin(image, &digest);
    let in_use = ctx
        .snapshots
        .get(source_ref)
        .is_some_and(|s| s.origin == loaded_from);
    if in_use {
        // The same image: nothing to pull, load or write.
        cctx.state.record_load(
            source_ref,
            LoadRecord {
                origin: loaded_from,
                at: Instant::now(),
                failure: None,
            },
        );
        return;
    }
    let cache = ctx.settings.image_cache_dir.clone();
    let pulled = match session
        .pull(&reference, &cache, &select_catalog, Some(&digest))
        .await
    {
        Ok(pulled) => pulled,
        Err(e) => {
            let message = format!("image {image}@{digest}: {e}");
            return fail((e.cause().into(), message), loaded_from);
        }
    };
    let configs = select_catalog(&pulled.labels)
        .ok()
        .flatten()
        .unwrap_or_default();
    let dir = pulled
        .rootfs
        .join(configs.strip_prefix("/").unwrap_or(&configs));
    let described = format!("image {image}@{digest}");
    let projection = cctx.shared.snapshots.projection().cloned();
    let loaded = tokio::task::spawn_blocking(move || {
        read_streaming(&dir, projection.as_deref()).map_err(|e| {
            (
                CatalogSourceReason::InvalidCatalog,
                format!("{described}: {e}"),
            )
        })
    })
    .await
    .unwrap_or_else(|join| {
        Err((
            CatalogSourceReason::LoadFailed,
            format!("loading the catalog failed: {join}"),
        ))
    });
    tracing::info!(catalogsource = %source_ref, image, %digest, "image catalog pulled");
    accept(source, source_ref, cctx, loaded_from, loaded, &[]).await;
}

/// Credentials from `spec.secrets` for the catalog image's registry.
async fn pull_auth(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    registry: &str,
) -> Result<RegistryAuth, AuthFailure> {
    registry_auth(
        &cctx.shared.client,
        &source_ref.namespace,
        &source.spec.secrets,
        registry,
    )
    .await
}
