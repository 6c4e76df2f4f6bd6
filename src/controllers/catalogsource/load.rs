//! Reading a CatalogSource's content, whatever the source: when a read is due, and how a
//! result becomes (or does not become) the snapshot in use. The sources themselves are
//! [`super::grpc`], [`super::image`] and [`super::config_map`].

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use super::context::{CatalogSourceContext, LoadRecord};
use super::status::{Connection, Content, ContentSummary};
use crate::api::duration::{HumanDuration, parse_go_duration};
use crate::api::{CatalogSource, CatalogSourceReason, ConfigMapResourceReference};
use crate::catalog::checks::validate::{Rule, validate};
use crate::catalog::content_digest;
use crate::catalog::model::fbc::{DeclarativeConfig, PROP_BUNDLE_OBJECT};
use crate::catalog::reading::load::LoadError;
use crate::controllers::context::Context;
use crate::controllers::metrics::CatalogLabels;
use crate::resolver::input::{Catalog, CatalogRef};
use crate::snapshots::{CatalogSnapshot, ChannelHeadTexts, LoadProjection, SnapshotCatalog};

/// Upstream's fallback when `registryPoll.interval` does not parse.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// What one round learned about the source.
pub struct Round {
    pub connection: Connection,
    pub config_map: Option<ConfigMapResourceReference>,
    pub spec_problem: Option<String>,
    /// None: nothing to do until the object (or its ConfigMap) changes.
    pub requeue_after: Option<Duration>,
}

/// `spec.updateStrategy.registryPoll.interval`, if set; a value that cannot be used falls
/// back to upstream's 15m, and the problem is reported on the object.
pub(super) fn poll_interval(source: &CatalogSource) -> (Option<Duration>, Option<String>) {
    let Some(text) = source
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.registry_poll.as_ref())
        .and_then(|p| p.interval.as_deref())
    else {
        return (None, None);
    };
    match parse_go_duration(text) {
        Ok(interval) => (Some(interval), None),
        // Upstream's words (clients compare them), with Go's parse error where Go has one.
        Err(error) => (
            Some(DEFAULT_POLL_INTERVAL),
            Some(format!(
                "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of {} instead. Error: {}",
                HumanDuration(DEFAULT_POLL_INTERVAL),
                crate::api::duration::go_syntax_error(text).unwrap_or_else(|| error.to_string())
            )),
        ),
    }
}

/// How long a failed load waits before the next try when nothing else changed.
fn retry_after_failure(ctx: &Context) -> Duration {
    ctx.settings.catalog_check_interval.saturating_mul(6)
}

/// Whether `record` is old enough to read again: the poll interval has passed, or a
/// failure's retry wait.
pub(super) fn stale(record: &LoadRecord, poll: Option<Duration>, ctx: &Context) -> bool {
    poll.is_some_and(|p| record.at.elapsed() >= p)
        || (record.failure.is_some() && record.at.elapsed() >= retry_after_failure(ctx))
}

/// When a polled source is looked at next: at the health-check interval, or sooner when the
/// next poll is due before.
pub(super) fn next_check(
    check_every: Duration,
    poll: Option<Duration>,
    last: Option<LoadRecord>,
) -> Duration {
    let mut requeue_after = check_every;
    if let (Some(poll), Some(record)) = (poll, last) {
        requeue_after = requeue_after.min(
            poll.saturating_sub(record.at.elapsed())
                .max(Duration::from_millis(100)),
        );
    }
    requeue_after
}

/// Content as read from a source.
pub(super) enum Loaded {
    /// The whole catalog, manifests and all (from a registry server or a ConfigMap).
    Whole(DeclarativeConfig),
    /// Read blob by blob ([`read_streaming`]): digest taken, channel heads kept (when
    /// packagemanifests are served), manifest data already dropped.
    Streamed {
        content: DeclarativeConfig,
        digest: String,
        channel_heads: ChannelHeadTexts,
    },
}

/// Reads the file-based catalog at `root` one blob at a time, keeping what a snapshot keeps:
/// each blob's digest is taken and (with the snapshots' [`LoadProjection`], when one is
/// registered) what it keeps of the blob taken before its manifests are
/// dropped (their data made `null`, as `olm catalog validate` reads them), so a catalog of
/// any size passes through in the memory of its largest blob plus what the snapshot holds.
pub(super) fn read_streaming(
    root: &std::path::Path,
    projection: Option<&dyn LoadProjection>,
) -> Result<Loaded, LoadError> {
    use crate::catalog::reading::digest::ContentDigest;
    use crate::catalog::reading::load::{LoadOptions as FileOptions, for_each_blob};
    let mut digest = ContentDigest::default();
    let mut kept = projection.map(LoadProjection::streaming);
    let mut content = DeclarativeConfig::default();
    for file in crate::catalog::reading::files::catalog_files(root)? {
        for_each_blob(&file, FileOptions::default(), |mut blob| {
            digest.add(&blob);
            if let Some(kept) = kept.as_mut() {
                kept.add(&blob);
            }
            for bundle in &mut blob.bundles {
                for p in bundle
                    .properties
                    .iter_mut()
                    .filter(|p| p.type_ == PROP_BUNDLE_OBJECT)
                {
                    p.value = serde_json::Value::Null;
                }
            }
            content.merge(blob);
            Ok::<_, LoadError>(())
        })?;
    }
    let channel_heads =
        kept.map_or_else(ChannelHeadTexts::default, |kept| kept.finish(&mut content));
    Ok(Loaded::Streamed {
        content,
        digest: digest.finish(),
        channel_heads,
    })
}

/// Why content was not taken: a reason for the condition, and a message.
type Failure = (CatalogSourceReason, String);

/// Validates freshly read content and makes it the snapshot if it differs from the one in
/// use; a failure is recorded and the last good snapshot stays. Validation and the digest
/// are CPU work: they run on the blocking pool, away from the threads that renew the Lease.
pub(super) async fn accept(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    origin: String,
    loaded: Result<Loaded, Failure>,
    tolerated: &'static [Rule],
) {
    let ctx = &cctx.shared;
    ctx.metrics
        .catalog_loads
        .get_or_create(&labels(source_ref))
        .inc();
    let projection = ctx.snapshots.projection().cloned();
    let checked = tokio::task::spawn_blocking(move || check(loaded?, tolerated, projection))
        .await
        .unwrap_or_else(|join| {
            Err((
                CatalogSourceReason::LoadFailed,
                format!("checking the catalog failed: {join}"),
            ))
        });
    let failure = match checked {
        Ok(checked) => {
            serve(source, source_ref, ctx, checked, &origin);
            None
        }
        Err((reason, message)) => {
            tracing::warn!(catalogsource = %source_ref, reason = reason.as_str(), %message, "catalog content rejected; keeping the last good snapshot");
            Some((reason, message))
        }
    };
    cctx.state.record_load(
        source_ref,
        LoadRecord {
            origin,
            at: Instant::now(),
            failure,
        },
    );
}

/// Content that validated, as a snapshot keeps it.
struct Checked {
    content: DeclarativeConfig,
    digest: String,
    channel_heads: ChannelHeadTexts,
}

/// Validates `loaded` (but for the `tolerated` rules), takes its digest and what the
/// `projection` keeps, and drops its manifests.
fn check(
    loaded: Loaded,
    tolerated: &[Rule],
    projection: Option<std::sync::Arc<dyn LoadProjection>>,
) -> Result<Checked, Failure> {
    let (mut content, digest) = match loaded {
        Loaded::Whole(content) => (content, None),
        Loaded::Streamed {
            content,
            digest,
            channel_heads,
        } => (content, Some((digest, channel_heads))),
    };
    validate_loaded(&content, tolerated)?;
    let (digest, channel_heads) = match digest {
        Some(streamed) => streamed,
        None => {
            // The digest covers the manifests; the snapshot does not keep them (see below).
            let digest = content_digest(&content);
            // What packagemanifests show of the channel heads' CSVs outlives the manifests.
            let channel_heads =
                projection.map_or_else(ChannelHeadTexts::default, |p| p.keep(&mut content));
            (digest, channel_heads)
        }
    };
    drop_manifests(&mut content);
    Ok(Checked {
        content,
        digest,
        channel_heads,
    })
}

/// The catalog's problems but for the `tolerated` ones (logged), the first five named.
fn validate_loaded(content: &DeclarativeConfig, tolerated: &[Rule]) -> Result<(), Failure> {
    let (tolerated, problems): (Vec<_>, Vec<_>) = validate(content)
        .into_iter()
        .partition(|p| tolerated.contains(&p.rule));
    for problem in &tolerated {
        tracing::warn!(%problem, "loaded anyway, as upstream loads such a catalog");
    }
    if problems.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = problems.iter().take(5).map(ToString::to_string).collect();
    let more = problems.len().saturating_sub(shown.len());
    let mut message = format!("catalog does not validate: {}", shown.join("; "));
    if more > 0 {
        message.push_str(&format!(" (and {more} more)"));
    }
    Err((CatalogSourceReason::InvalidCatalog, message))
}

/// Makes `checked` the snapshot of `source`, unless the one in use has its digest.
fn serve(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    ctx: &Context,
    checked: Checked,
    origin: &str,
) {
    let Checked {
        content,
        digest,
        channel_heads,
    } = checked;
    let current = ctx.snapshots.get(source_ref);
    if current.as_ref().is_some_and(|s| s.digest == digest) {
        return;
    }
    let labels = labels(source_ref);
    ctx.metrics.catalog_updates.get_or_create(&labels).inc();
    ctx.metrics
        .catalog_bundles
        .get_or_create(&labels)
        .set(i64::try_from(content.bundles.len()).unwrap_or(i64::MAX));
    tracing::info!(
        catalogsource = %source_ref,
        packages = content.packages.len(),
        bundles = content.bundles.len(),
        %digest,
        "catalog content loaded"
    );
    ctx.snapshots.insert(CatalogSnapshot {
        catalog: SnapshotCatalog::pack(Catalog {
            name: source_ref.name.clone(),
            namespace: source_ref.namespace.clone(),
            priority: source.spec.priority.unwrap_or(0),
            content,
        }),
        digest,
        origin: origin.to_string(),
        loaded_at: Timestamp::now(),
        channel_heads,
    });
}

/// Snapshots are for resolution, which reads properties and channels only. The manifests
/// (`olm.bundle.object`, the bulk of a catalog) stay with the source: the registry server
/// answers GetBundle, the ConfigMap is in the API server. Keeping them would cost tens of
/// KiB per bundle for every catalog in the cluster. Package icons and descriptions go too:
/// nothing reads them from a snapshot (packagemanifests show the channel heads' CSVs, kept
/// apart), and an icon is often the largest part of a package. Related images go as well:
/// nothing that installs reads them (a CSV names its own images).
fn drop_manifests(content: &mut DeclarativeConfig) {
    for package in &mut content.packages {
        package.icon = None;
        package.description = String::new();
    }
    for bundle in &mut content.bundles {
        bundle.properties.retain(|p| p.type_ != PROP_BUNDLE_OBJECT);
        bundle.properties.shrink_to_fit();
        bundle.related_images = Vec::new();
    }
}

/// What the conditions should say about the content, from the last load and the snapshot.
pub fn content_of(source_ref: &CatalogRef, cctx: &CatalogSourceContext) -> Content {
    let snapshot = cctx
        .shared
        .snapshots
        .get(source_ref)
        .map(|s| ContentSummary {
            packages: s.catalog.content.packages.len(),
            bundles: s.catalog.content.bundles.len(),
            digest: s.digest.clone(),
        });
    match (
        cctx.state.last_load(source_ref).and_then(|r| r.failure),
        snapshot,
    ) {
        (Some((reason, message)), last_good) => Content::Failed {
            reason,
            message,
            last_good,
        },
        (None, Some(summary)) => Content::Loaded(summary),
        (None, None) => Content::NotLoaded,
    }
}

fn labels(source_ref: &CatalogRef) -> CatalogLabels {
    CatalogLabels {
        namespace: source_ref.namespace.clone(),
        name: source_ref.name.clone(),
    }
}

pub fn forget_metrics(source_ref: &CatalogRef, ctx: &Context) {
    let labels = labels(source_ref);
    ctx.metrics.catalog_bundles.remove(&labels);
    ctx.metrics.catalog_loads.remove(&labels);
    ctx.metrics.catalog_updates.remove(&labels);
}
