//! ConfigMap catalogs (`sourceType: configmap`, upstream's format): read again only when the
//! ConfigMap's resourceVersion moves, which the metadata watch tells without a GET.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use super::context::{CatalogSourceContext, Error};
use super::load::{Loaded, Round, accept};
use super::status::Connection;
use crate::api::{CatalogSource, CatalogSourceReason, ConfigMapResourceReference};
use crate::catalog::checks::validate::Rule;
use crate::catalog::configmap::from_configmap_data;
use crate::resolver::input::CatalogRef;

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
    let fresh = ConfigMapResourceReference {
        name: name.to_string(),
        namespace: source_ref.namespace.clone(),
        uid: watched.metadata.uid.clone(),
        resource_version: Some(loaded_version),
        last_update_time: Some(Time(now)),
    };
    let (reference, requeue_after) = next_reference(previous, fresh, now);
    Ok(Round {
        connection: Connection::Ready {
            address: None,
            message: format!("ConfigMap {}/{name} is readable", source_ref.namespace),
        },
        config_map: Some(reference),
        spec_problem: None,
        requeue_after,
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

/// What upstream's ConfigMap registry loads although a file-based catalog may not have it
/// (its loader never checked): package names that are not DNS-1123 labels, and two bundles
/// of a package with one version. Loaded with a warning in the log.
const CONFIG_MAP_TOLERATES: &[Rule] = &[Rule::PackageName, Rule::DuplicateVersion];
/// The reference the status shows: the previous one while the same version is loaded; a
/// new version's with its update time. Times are written in whole seconds, and clients
/// (upstream's test helpers among them) wait for a strictly later `lastUpdateTime`: a new
/// version read within the second of the previous update keeps the previous reference until
/// that second has passed (the returned wait brings the controller back then).
fn next_reference(
    previous: Option<&ConfigMapResourceReference>,
    fresh: ConfigMapResourceReference,
    now: Timestamp,
) -> (ConfigMapResourceReference, Option<std::time::Duration>) {
    let Some(previous) = previous.filter(|p| p.name == fresh.name) else {
        return (fresh, None);
    };
    if previous.resource_version == fresh.resource_version {
        return (previous.clone(), None);
    }
    let updated = previous.last_update_time.as_ref().map(|t| t.0.as_second());
    match updated {
        Some(second) if now.as_second() <= second => {
            let next = Timestamp::from_second(second + 1).unwrap_or(now);
            let wait = now.duration_until(next).unsigned_abs();
            (
                previous.clone(),
                Some(wait + std::time::Duration::from_millis(20)),
            )
        }
        _ => (fresh, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(version: &str, second: i64) -> ConfigMapResourceReference {
        ConfigMapResourceReference {
            name: "cm".into(),
            namespace: "ns".into(),
            uid: None,
            resource_version: Some(version.into()),
            last_update_time: Some(Time(Timestamp::from_second(second).unwrap())),
        }
    }

    #[test]
    fn a_new_version_is_stamped_strictly_later_than_the_last() {
        let at = |ms: i64| Timestamp::from_millisecond(ms).unwrap();
        let previous = reference("1", 100);
        // The same version: unchanged.
        let (same, wait) = next_reference(Some(&previous), reference("1", 101), at(101_000));
        assert_eq!((same, wait), (previous.clone(), None));
        // A new version within the same second: the old reference until the next second.
        let (kept, wait) = next_reference(Some(&previous), reference("2", 100), at(100_400));
        assert_eq!(kept, previous);
        assert_eq!(wait, Some(std::time::Duration::from_millis(620)));
        // Once the second has passed: the new version, later.
        let (moved, wait) = next_reference(Some(&previous), reference("2", 101), at(101_000));
        assert_eq!((moved.resource_version.as_deref(), wait), (Some("2"), None));
        // No previous reference, or another ConfigMap's: the new one at once.
        assert_eq!(
            next_reference(None, reference("2", 100), at(100_000)).1,
            None
        );
    }
}
