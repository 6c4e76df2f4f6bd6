//! Image catalogs (`sourceType: grpc`, `spec.image`, no address): served in-process, with no
//! catalog pod. A round that is due resolves the tag with one manifest HEAD; only a new
//! digest is pulled (once per digest, into the on-disk cache) and loaded. An unchanged
//! digest changes nothing, so a steady poll writes nothing. Failures keep the last good
//! snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;

use super::context::{CatalogSourceContext, LoadRecord};
use super::load::{Loaded, Round, accept, next_check, poll_interval, read_streaming, stale};
use super::status::Connection;
use crate::api::{CatalogSource, CatalogSourceReason, PullCause};
use crate::cluster::pull_secrets::{AuthFailure, registry_auth};
use crate::controllers::context::Context;
use crate::oci::catalog::{origin, parse_origin};
use crate::oci::registry::{Options, PulledImage, Session, parse_reference, select_catalog};
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
    let due = cctx.state.last_load(source_ref).is_none_or(|record| {
        // The spec names another image.
        !record.origin.starts_with(&attempt) || stale(&record, poll, ctx)
    });
    if due {
        poll_once(source, source_ref, cctx, image).await;
    }

    let requeue_after = next_check(check_every, poll, cctx.state.last_load(source_ref));
    let serving = ctx
        .snapshots
        .get(source_ref)
        .and_then(|s| parse_origin(&s.origin).map(|(r, d)| (r.to_string(), d.to_string())))
        .filter(|(reference, _)| reference == image);
    let failure = cctx.state.last_load(source_ref).and_then(|r| r.failure);
    let mirror = cctx.state.mirror(source_ref);
    Round {
        connection: connection(image, serving, failure, mirror.as_deref()),
        config_map: None,
        spec_problem,
        requeue_after: Some(requeue_after),
    }
}

/// What the connection state says: the image served (`(reference, digest)`, if any), the
/// last check's failure, and the mirror it was resolved at.
fn connection(
    image: &str,
    serving: Option<(String, String)>,
    failure: Option<Failure>,
    mirror: Option<&str>,
) -> Connection {
    let from = mirror
        .map(|m| format!(" from mirror {m}"))
        .unwrap_or_default();
    match (serving, failure) {
        (Some((reference, digest)), None) => Connection::Ready {
            address: None,
            message: format!("image {reference} resolved to {digest}{from}; served in-process"),
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
    let Resolved {
        reference,
        known_as,
        session,
        digest,
        mirror,
    } = match resolve(source, source_ref, cctx, image).await {
        Ok(resolved) => resolved,
        Err(failure) => return record_failure(cctx, source_ref, failure, origin(image, "")),
    };
    cctx.state.set_mirror(source_ref, mirror);
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
    let pulled = session
        .pull_stored_as(
            &reference,
            &known_as,
            &ctx.settings.image_cache_dir,
            &select_catalog,
            Some(&digest),
        )
        .await;
    let pulled = match pulled {
        Ok(pulled) => pulled,
        Err(e) => {
            let message = format!("image {image}@{digest}: {e}");
            return record_failure(cctx, source_ref, (e.cause().into(), message), loaded_from);
        }
    };
    let described = format!("image {image}@{digest}");
    let loaded = read(&pulled, described, ctx).await;
    tracing::info!(catalogsource = %source_ref, image, %digest, "image catalog pulled");
    accept(source, source_ref, cctx, loaded_from, loaded, &[]).await;
}

/// Where the image was resolved: the reference there, its registry session with the pull
/// credentials for that host, the digest its tag names now, and the mirror (if one).
struct Resolved {
    reference: Reference,
    /// The image's own name (the cache keeps it under that).
    known_as: Reference,
    session: Arc<Session>,
    digest: String,
    mirror: Option<String>,
}

/// Resolves the image at each place the mirror configuration names, in order, until one
/// answers; a failure names every place tried.
async fn resolve(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    image: &str,
) -> Result<Resolved, Failure> {
    let settings = &cctx.shared.settings;
    let reference = parse_reference(image)
        .map_err(|e| (PullCause::InvalidImage.into(), format!("spec.image: {e}")))?;
    let options = Options {
        insecure: settings.insecure_registries.clone(),
        timeout: Some(settings.registry_timeout.max(Duration::from_secs(30))),
    };
    let attempts = settings
        .mirrors
        .current()
        .attempts(&reference, &options)
        .map_err(|e| (PullCause::Unreachable.into(), format!("image {image}: {e}")))?;
    let several = attempts.len() > 1;
    let mut failures = Vec::new();
    for attempt in attempts {
        match resolve_at(source, source_ref, cctx, &attempt).await {
            Ok((session, digest)) => {
                return Ok(Resolved {
                    reference: attempt.reference,
                    known_as: reference,
                    session,
                    digest,
                    mirror: attempt.mirror,
                });
            }
            Err((reason, message)) if several => {
                failures.push((reason, format!("{}: {message}", attempt.reference)));
            }
            Err((reason, message)) => failures.push((reason, message)),
        }
    }
    let reason = failures
        .last()
        .map(|f| f.0)
        .unwrap_or(PullCause::Unreachable.into());
    let tried: Vec<String> = failures.into_iter().map(|f| f.1).collect();
    Err((reason, format!("image {image}: {}", tried.join("; "))))
}

/// One place: credentials for its host, its session, the digest.
async fn resolve_at(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    attempt: &crate::oci::mirrors::Attempt,
) -> Result<(Arc<Session>, String), Failure> {
    let reference = &attempt.reference;
    let auth = pull_auth(source, source_ref, cctx, reference.resolve_registry())
        .await
        .map_err(|(cause, message)| (cause.into(), message))?;
    let session = cctx
        .state
        .image_session(source_ref, reference, auth, &attempt.options)
        .map_err(|e| (e.cause().into(), e.to_string()))?;
    let digest = session
        .resolve_digest(reference)
        .await
        .map_err(|e| (e.cause().into(), e.to_string()))?;
    Ok((session, digest))
}

/// Records a check that failed; the last good snapshot stays.
fn record_failure(
    cctx: &CatalogSourceContext,
    source_ref: &CatalogRef,
    failure: Failure,
    origin: String,
) {
    tracing::warn!(catalogsource = %source_ref, reason = failure.0.as_str(), message = %failure.1, "image catalog check failed");
    cctx.state.record_load(
        source_ref,
        LoadRecord {
            origin,
            at: Instant::now(),
            failure: Some(failure),
        },
    );
}

/// Reads the catalog of a pulled image off the async threads, one blob at a time.
async fn read(pulled: &PulledImage, described: String, ctx: &Context) -> Result<Loaded, Failure> {
    let configs = select_catalog(&pulled.labels)
        .ok()
        .flatten()
        .unwrap_or_default();
    let dir = pulled
        .rootfs
        .join(configs.strip_prefix("/").unwrap_or(&configs));
    let projection = ctx.snapshots.projection().cloned();
    tokio::task::spawn_blocking(move || {
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
    })
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
