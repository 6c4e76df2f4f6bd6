//! Bundle images, pulled in-process when the catalog has no inline objects for a bundle
//! (upstream runs an unpack Job per bundle and keeps the result in a ConfigMap). Gathering:
//! [`pull_bundle`] (pull into the digest-keyed cache, read the objects back). Deciding:
//! [`decide`] turns the failures of this round and the lookups already recorded into either
//! a plan that keeps waiting (`status.bundleLookups`, a `BundleLookupPending` condition per
//! bundle naming its image and the cause) or a failed plan, once the unpack timeout has
//! passed since the first failure or at once when the image can never do.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::api::{BundleLookup, InstallPlanCondition, PlannedBundle};
use crate::controllers::context::Context;
use crate::controllers::kit::{Cond, ConditionStatus};
use crate::oci::bundle::{bundle_objects, select_bundle};
use crate::oci::registry::{Options, Session, parse_reference};

/// The OperatorGroup annotation that sets the unpack timeout in its namespace (upstream's).
pub const ANNOTATION_UNPACK_TIMEOUT: &str = "operatorframework.io/bundle-unpack-timeout";
pub const LOOKUP_PENDING: &str = "BundleLookupPending";
pub const LOOKUP_FAILED: &str = "BundleLookupFailed";

/// Why a bundle image could not be had this round.
#[derive(Clone, Debug, PartialEq)]
pub struct PullFailure {
    /// Unauthorized, NotFound, Unreachable, InvalidImage, ….
    pub reason: &'static str,
    /// Names the image and the cause.
    pub message: String,
    /// Trying again cannot help (not a bundle image, another bundle than the catalog's).
    pub permanent: bool,
}

/// Pulls `image` (once per digest into the image cache) and reads the bundle's objects,
/// giving up after `limit`.
pub async fn pull_bundle(
    bundle: &PlannedBundle,
    image: &str,
    secrets: &[String],
    ctx: &Context,
    limit: Duration,
) -> Result<Vec<Value>, PullFailure> {
    let failure = |reason: &'static str, message: String, permanent: bool| PullFailure {
        reason,
        message: format!("bundle image {image}: {message}"),
        permanent,
    };
    let reference =
        parse_reference(image).map_err(|e| failure("InvalidReference", e.to_string(), true))?;
    let auth = crate::controllers::pull_secrets::registry_auth(
        &ctx.client,
        &bundle.catalog_namespace,
        secrets,
        reference.resolve_registry(),
    )
    .await
    .map_err(|(reason, message)| {
        failure(
            reason,
            format!("CatalogSource {}: {message}", bundle.catalog),
            false,
        )
    })?;
    let options = Options {
        insecure: ctx.settings.insecure_registries.clone(),
        timeout: Some(ctx.settings.registry_timeout.max(Duration::from_secs(30))),
    };
    let session = Session::new(&reference, auth, &options);
    let cache = &ctx.settings.image_cache_dir;
    let pulled = tokio::time::timeout(limit, session.pull(&reference, cache, &select_bundle, None))
        .await
        .map_err(|_| {
            failure(
                "Timeout",
                format!("the pull took longer than {limit:?}"),
                false,
            )
        })?
        .map_err(|e| {
            let cause = e.cause();
            failure(cause, e.to_string(), cause == "InvalidImage")
        })?;
    let (rootfs, name) = (pulled.rootfs.clone(), bundle.name.clone());
    let objects = tokio::task::spawn_blocking(move || bundle_objects(&rootfs, &name))
        .await
        .map_err(|e| failure("InvalidImage", format!("reading it failed: {e}"), true))?
        .map_err(|message| failure("InvalidImage", message, true))?;
    tracing::info!(bundle = %bundle.name, image, digest = %pulled.digest, "bundle image pulled");
    Ok(objects)
}

/// The unpack timeout of a namespace: its OperatorGroup's annotation when it parses.
pub fn unpack_timeout(annotation: Option<&str>, default: Duration) -> Duration {
    annotation
        .and_then(|text| crate::api::duration::parse_go_duration(text.trim()).ok())
        .unwrap_or(default)
}

/// How long this round's pull of `bundle` may take: what is left of the timeout since its
/// first failure (at least a second).
pub fn remaining(
    previous: &[BundleLookup],
    bundle: &str,
    now: Timestamp,
    timeout: Duration,
) -> Duration {
    let since = previous
        .iter()
        .find(|l| l.identifier == bundle)
        .and_then(|l| l.conditions.first()?.last_transition_time.clone());
    let waited = since.map_or(Duration::ZERO, |t| now.duration_since(t.0).unsigned_abs());
    timeout.saturating_sub(waited).max(Duration::from_secs(1))
}

/// What the round's failures make of the plan.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// Keep trying; these are the lookups to show.
    Wait(Vec<BundleLookup>),
    /// Give up: the plan fails with this message; these lookups show which one failed.
    Fail {
        message: String,
        lookups: Vec<BundleLookup>,
    },
}

fn lookup_condition(
    type_: &str,
    failure: &PullFailure,
    since: &Time,
    updated: Time,
) -> InstallPlanCondition {
    Cond::new(
        type_,
        ConditionStatus::True,
        failure.reason,
        failure.message.clone(),
    )
    .into_install_plan(since.clone(), updated)
}

/// `failed`: this round's failures (bundle, image, failure); `previous`: the lookups the
/// plan shows now (their Pending condition's transition time is when the first failure
/// was seen).
pub fn decide(
    failed: &[(PlannedBundle, String, PullFailure)],
    previous: &[BundleLookup],
    now: Timestamp,
    timeout: Duration,
) -> Decision {
    let mut lookups = Vec::new();
    let mut give_up = None;
    for (bundle, image, failure) in failed {
        let before = previous
            .iter()
            .find(|l| l.identifier == bundle.name && l.path == *image)
            .and_then(|l| {
                l.conditions
                    .iter()
                    .find(|c| c.type_.as_deref() == Some(LOOKUP_PENDING))
            });
        let since = before
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        // The update time moves only with the message, so a steady failure writes nothing.
        let updated = match before {
            Some(c) if c.message.as_deref() == Some(&failure.message) => {
                c.last_update_time.clone().unwrap_or(Time(now))
            }
            _ => Time(now),
        };
        let waited = now.duration_since(since.0).unsigned_abs();
        let expired = waited >= timeout;
        let type_ = if failure.permanent || expired {
            LOOKUP_FAILED
        } else {
            LOOKUP_PENDING
        };
        if type_ == LOOKUP_FAILED && give_up.is_none() {
            let mut message = format!(
                "bundle {} from catalog {}/{}: {}",
                bundle.name, bundle.catalog_namespace, bundle.catalog, failure.message
            );
            if expired && !failure.permanent {
                message.push_str(&format!(
                    " (still failing after the bundle unpack timeout of {timeout:?})"
                ));
            }
            give_up = Some(message);
        }
        lookups.push(BundleLookup {
            path: image.clone(),
            identifier: bundle.name.clone(),
            replaces: bundle.replaces.clone().unwrap_or_default(),
            catalog_source_ref: ObjectReference {
                name: Some(bundle.catalog.clone()),
                namespace: Some(bundle.catalog_namespace.clone()),
                ..ObjectReference::default()
            },
            conditions: vec![lookup_condition(type_, failure, &since, updated)],
            properties: None,
        });
    }
    match give_up {
        Some(message) => Decision::Fail { message, lookups },
        None => Decision::Wait(lookups),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned() -> PlannedBundle {
        PlannedBundle {
            name: "at.v0.3.0".into(),
            package: "at".into(),
            catalog: "images".into(),
            catalog_namespace: "ns".into(),
            ..PlannedBundle::default()
        }
    }

    fn failure(permanent: bool, message: &str) -> PullFailure {
        PullFailure {
            reason: if permanent {
                "InvalidImage"
            } else {
                "Unreachable"
            },
            message: message.into(),
            permanent,
        }
    }

    const IMAGE: &str = "127.0.0.1:5000/at-bundle:v0.3.0";

    #[test]
    fn transient_failures_wait_until_the_timeout_counted_from_the_first() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let failed = vec![(planned(), IMAGE.to_string(), failure(false, "down"))];
        let Decision::Wait(first) = decide(&failed, &[], t0, Duration::from_secs(60)) else {
            panic!("waits")
        };
        let condition = &first[0].conditions[0];
        assert_eq!(condition.type_.as_deref(), Some(LOOKUP_PENDING));
        assert_eq!(condition.message.as_deref(), Some("down"));
        assert_eq!(first[0].path, IMAGE);

        // The same failure later: nothing changes (no status write).
        let t1 = Timestamp::from_second(1_030).unwrap();
        let Decision::Wait(second) = decide(&failed, &first, t1, Duration::from_secs(60)) else {
            panic!("still waits")
        };
        assert_eq!(second, first);

        let t2 = Timestamp::from_second(1_061).unwrap();
        match decide(&failed, &second, t2, Duration::from_secs(60)) {
            Decision::Fail { message, lookups } => {
                assert!(
                    message.contains("bundle at.v0.3.0 from catalog ns/images"),
                    "{message}"
                );
                assert!(message.contains("unpack timeout of 60s"), "{message}");
                assert_eq!(
                    lookups[0].conditions[0].type_.as_deref(),
                    Some(LOOKUP_FAILED)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn permanent_failures_fail_at_once_and_annotations_set_the_timeout() {
        let now = Timestamp::from_second(1_000).unwrap();
        let failed = vec![(
            planned(),
            IMAGE.to_string(),
            failure(true, "not a bundle image"),
        )];
        assert!(matches!(
            decide(&failed, &[], now, Duration::from_secs(600)),
            Decision::Fail { .. }
        ));
        let default = Duration::from_secs(600);
        assert_eq!(unpack_timeout(Some("5s"), default), Duration::from_secs(5));
        assert_eq!(unpack_timeout(Some("nonsense"), default), default);
        assert_eq!(unpack_timeout(None, default), default);
    }
}
