//! Reading a CatalogSource's content: when to read it, from where, and how a result becomes
//! (or does not become) the snapshot in use.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use super::status::{Connection, Content, ContentSummary, STATE_READY};
use super::{CatalogSourceContext, Error, LoadRecord};
use crate::api::duration::{HumanDuration, parse_go_duration};
use crate::api::{CatalogSource, CatalogSourceReason, ConfigMapResourceReference};
use crate::catalog::checks::validate::{Rule, validate};
use crate::catalog::configmap::from_configmap_data;
use crate::catalog::content_digest;
use crate::catalog::model::fbc::{DeclarativeConfig, PROP_BUNDLE_OBJECT};
use crate::catalog::reading::load::LoadError;
use crate::controllers::context::Context;
use crate::controllers::metrics::CatalogLabels;
use crate::registry::client::{LoadOptions, Manifests};
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
pub(super) fn retry_after_failure(ctx: &Context) -> Duration {
    ctx.settings.catalog_check_interval.saturating_mul(6)
}

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
        Err(message) => return invalid(format!("spec.address {address:?}: {message}")),
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

    let was_ready = source
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|c| {
            c.last_observed_state == STATE_READY && c.address.as_deref() == Some(address.as_str())
        });
    let last = cctx.state.last_load(source_ref);
    let due = match &last {
        None => true,
        Some(record) => {
            record.origin != address
                // The server came back: it may be a new one with new content.
                || !was_ready
                || poll.is_some_and(|p| record.at.elapsed() >= p)
                || (record.failure.is_some() && record.at.elapsed() >= retry_after_failure(ctx))
        }
    };
    if due {
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
            address.clone(),
            loaded.map(Loaded::Whole),
            &[],
        )
        .await;
    }
    let mut requeue_after = check_every;
    if let (Some(poll), Some(record)) = (poll, cctx.state.last_load(source_ref)) {
        requeue_after = requeue_after.min(
            poll.saturating_sub(record.at.elapsed())
                .max(Duration::from_millis(100)),
        );
    }
    Round {
        connection: Connection::Ready {
            message: format!("registry server at {address} is serving"),
            address: Some(address),
        },
        config_map: None,
        spec_problem,
        requeue_after: Some(requeue_after),
    }
}

/// A ConfigMap catalog: its resourceVersion comes from the metadata watch (no GET at steady
/// state); the data is fetched and parsed only when that version was not read yet.
pub async fn sync_config_map(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    now: Timestamp,
) -> Result<Round, Error> {
    let not_found = |name: &str| Round {
        connection: Connection::Failed {
            address: None,
            reason: CatalogSourceReason::ConfigMapNotFound,
            message: format!("ConfigMap {}/{name} not found", source_ref.namespace),
        },
        config_map: None,
        spec_problem: None,
        requeue_after: None,
    };
    let Some(name) = source
        .spec
        .config_map
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
    else {
        return Ok(Round {
            connection: Connection::InvalidSpec {
                message: "spec.configMap is required when spec.sourceType is configmap".into(),
            },
            config_map: None,
            spec_problem: None,
            requeue_after: None,
        });
    };
    // The first round may come before the ConfigMap watch has listed; "not found" must mean
    // not found.
    let _ = crate::controllers::kit::cache_ready::listed(&cctx.config_maps).await;
    let Some(watched) = cctx
        .config_maps
        .get(&ObjectRef::new(name).within(&source_ref.namespace))
    else {
        return Ok(not_found(name));
    };
    let watched_version = match ensure_owner(source, source_ref, &watched, cctx).await? {
        Some(version) => version,
        None => watched
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default(),
    };
    let seen = cctx
        .state
        .last_load(source_ref)
        .is_some_and(|record| record.origin == config_map_origin(name, &watched_version));
    if !seen && !read_config_map(source, source_ref, cctx, name).await? {
        // Gone between the watch event and the GET: the watch brings the deletion next.
        return Ok(not_found(name));
    }
    // The reference moves (with its update time) only when a new version was read.
    let loaded_version = cctx
        .state
        .last_load(source_ref)
        .and_then(|r| r.origin.rsplit_once('@').map(|(_, v)| v.to_string()))
        .unwrap_or(watched_version);
    let previous = source
        .status
        .as_ref()
        .and_then(|s| s.config_map_reference.as_ref());
    let reference = match previous {
        Some(p)
            if p.name == name && p.resource_version.as_deref() == Some(loaded_version.as_str()) =>
        {
            p.clone()
        }
        _ => ConfigMapResourceReference {
            name: name.to_string(),
            namespace: source_ref.namespace.clone(),
            uid: watched.metadata.uid.clone(),
            resource_version: Some(loaded_version),
            last_update_time: Some(Time(now)),
        },
    };
    Ok(Round {
        connection: Connection::Ready {
            address: None,
            message: format!("ConfigMap {}/{name} is readable", source_ref.namespace),
        },
        config_map: Some(reference),
        spec_problem: None,
        requeue_after: None,
    })
}

/// Makes the CatalogSource an owner of its ConfigMap, as upstream does (neither controller
/// nor blocking), so that deleting the catalog deletes its ConfigMap: the same name created
/// again then starts from a new ConfigMap too. The leader only, once; returns the
/// ConfigMap's new resourceVersion when it wrote.
async fn ensure_owner(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    watched: &kube::core::PartialObjectMeta<ConfigMap>,
    cctx: &CatalogSourceContext,
) -> Result<Option<String>, Error> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::Resource;
    let Some(uid) = source.metadata.uid.clone() else {
        return Ok(None);
    };
    let mut owners = watched
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    if owners.iter().any(|o| o.uid == uid) || !cctx.shared.is_leader() {
        return Ok(None);
    }
    owners.push(OwnerReference {
        api_version: CatalogSource::api_version(&()).into_owned(),
        kind: CatalogSource::kind(&()).into_owned(),
        name: source_ref.name.clone(),
        uid,
        controller: Some(false),
        block_owner_deletion: Some(false),
    });
    let name = watched.metadata.name.clone().unwrap_or_default();
    // The resourceVersion makes a concurrent change of the owners fail instead of losing it.
    let patch = serde_json::json!({"metadata": {
        "ownerReferences": owners,
        "resourceVersion": watched.metadata.resource_version,
    }});
    let api: Api<ConfigMap> = Api::namespaced(cctx.shared.client.clone(), &source_ref.namespace);
    match api
        .patch_metadata(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
    {
        Ok(patched) => Ok(patched.metadata.resource_version),
        // Changed or gone since the watch saw it: the watch brings the next round.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(None),
        Err(error) => Err(Error::OwnConfigMap {
            source_ref: source_ref.clone(),
            config_map: name,
            error,
        }),
    }
}

/// Reads a new version of a ConfigMap catalog and hands it to [`accept`]; false when the
/// ConfigMap is gone.
async fn read_config_map(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    name: &str,
) -> Result<bool, Error> {
    let api: Api<ConfigMap> = Api::namespaced(cctx.shared.client.clone(), &source_ref.namespace);
    let config_map = api
        .get_opt(name)
        .await
        .map_err(|error| Error::ReadConfigMap {
            source_ref: source_ref.clone(),
            config_map: name.to_string(),
            error,
        })?;
    let Some(config_map) = config_map else {
        return Ok(false);
    };
    // The origin names the version read, even if it moved since the watch event.
    let read_version = config_map
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let data = config_map.data.unwrap_or_default();
    let described = format!("ConfigMap {}/{name}", source_ref.namespace);
    let loaded = tokio::task::spawn_blocking(move || {
        from_configmap_data(&data).map_err(|e| {
            (
                CatalogSourceReason::InvalidConfigMap,
                format!("{described}: {e}"),
            )
        })
    })
    .await
    .unwrap_or_else(|join| {
        Err((
            CatalogSourceReason::InvalidConfigMap,
            format!("parsing the ConfigMap failed: {join}"),
        ))
    });
    let origin = config_map_origin(name, &read_version);
    let loaded = loaded.map(Loaded::Whole);
    accept(
        source,
        source_ref,
        cctx,
        origin,
        loaded,
        CONFIG_MAP_TOLERATES,
    )
    .await;
    Ok(true)
}

fn config_map_origin(name: &str, resource_version: &str) -> String {
    format!("configmap {name}@{resource_version}")
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

/// What upstream's ConfigMap registry loads although a file-based catalog may not have it
/// (its loader never checked): package names that are not DNS-1123 labels, and two bundles
/// of a package with one version. Loaded with a warning in the log.
pub(super) const CONFIG_MAP_TOLERATES: &[Rule] = &[Rule::PackageName, Rule::DuplicateVersion];

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

/// Validates freshly read content and makes it the snapshot if it differs from the one in
/// use; a failure is recorded and the last good snapshot stays. Validation and the digest
/// are CPU work: they run on the blocking pool, away from the threads that renew the Lease.
pub(super) async fn accept(
    source: &CatalogSource,
    source_ref: &CatalogRef,
    cctx: &CatalogSourceContext,
    origin: String,
    loaded: Result<Loaded, (CatalogSourceReason, String)>,
    tolerated: &'static [Rule],
) {
    let ctx = &cctx.shared;
    ctx.metrics
        .catalog_loads
        .get_or_create(&labels(source_ref))
        .inc();
    let projection = ctx.snapshots.projection().cloned();
    let checked = tokio::task::spawn_blocking(move || {
        let (mut content, digest) = match loaded? {
            Loaded::Whole(content) => (content, None),
            Loaded::Streamed {
                content,
                digest,
                channel_heads,
            } => (content, Some((digest, channel_heads))),
        };
        let (tolerated, problems): (Vec<_>, Vec<_>) = validate(&content)
            .into_iter()
            .partition(|p| tolerated.contains(&p.rule));
        for problem in &tolerated {
            tracing::warn!(%problem, "loaded anyway, as upstream loads such a catalog");
        }
        if !problems.is_empty() {
            let shown: Vec<String> = problems.iter().take(5).map(ToString::to_string).collect();
            let more = problems.len().saturating_sub(shown.len());
            let mut message = format!("catalog does not validate: {}", shown.join("; "));
            if more > 0 {
                message.push_str(&format!(" (and {more} more)"));
            }
            return Err((CatalogSourceReason::InvalidCatalog, message));
        }
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
        Ok((content, digest, channel_heads))
    })
    .await
    .unwrap_or_else(|join| {
        Err((
            CatalogSourceReason::LoadFailed,
            format!("checking the catalog failed: {join}"),
        ))
    });
    let failure = match checked {
        Ok((content, digest, channel_heads)) => {
            let current = ctx.snapshots.get(source_ref);
            if current.as_ref().is_none_or(|s| s.digest != digest) {
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
                    origin: origin.clone(),
                    loaded_at: Timestamp::now(),
                    channel_heads,
                });
            }
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
