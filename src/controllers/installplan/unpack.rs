//! Bundle images, pulled in-process for a plan's `bundleLookups` (upstream runs an unpack
//! Job per bundle and keeps the result in a ConfigMap). Gathering: [`pull_lookup`] (pull
//! into the digest-keyed cache, read the objects back). Deciding: [`decide_unpacked`] turns
//! the objects that arrived into steps and the failures of this round into either lookups
//! that keep waiting (a `BundleLookupPending` condition naming the image and the cause) or a
//! failed plan, once the unpack timeout has passed since the first failure or at once when
//! the image can never do.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use kube::api::Api;

use crate::api::{
    BundleLookup, CatalogSource, InstallPlanCondition, InstallPlanReason, InstallPlanStatus,
    PullCause,
};
use crate::controllers::context::Context;
use crate::controllers::kit::{Cond, ConditionStatus};
use crate::controllers::plan;
use crate::oci::bundle::{bundle_objects, select_bundle};
use crate::oci::registry::{Options, Session, parse_reference};

/// The OperatorGroup annotation that sets the unpack timeout in its namespace (upstream's).
pub const ANNOTATION_UNPACK_TIMEOUT: &str = "operatorframework.io/bundle-unpack-timeout";
/// The condition types of a bundle lookup (its reason is the pull's cause).
pub const LOOKUP_PENDING: &str = "BundleLookupPending";
pub const LOOKUP_FAILED: &str = "BundleLookupFailed";

/// Why a bundle image could not be had this round.
#[derive(Clone, Debug, PartialEq)]
pub struct PullFailure {
    /// Unauthorized, NotFound, Unreachable, InvalidImage, ….
    pub cause: PullCause,
    /// Names the image and the cause.
    pub message: String,
    /// Trying again cannot help (not a bundle image, another bundle than the catalog's).
    pub permanent: bool,
}

/// Pulls the lookup's image (once per digest into the image cache) with its catalog's pull
/// Secrets and reads the bundle's objects, giving up after `limit`.
pub async fn pull_lookup(
    lookup: &BundleLookup,
    ctx: &Context,
    limit: Duration,
) -> Result<Vec<Value>, PullFailure> {
    let image = lookup.path.as_str();
    let failure = |cause: PullCause, message: String, permanent: bool| PullFailure {
        cause,
        message: format!("bundle image {image}: {message}"),
        permanent,
    };
    let catalog = lookup
        .catalog_source_ref
        .name
        .as_deref()
        .unwrap_or_default();
    let catalog_namespace = lookup
        .catalog_source_ref
        .namespace
        .as_deref()
        .unwrap_or_default();
    if image.is_empty() {
        return Err(failure(
            PullCause::InvalidReference,
            "the lookup names no image".into(),
            true,
        ));
    }
    let reference = parse_reference(image)
        .map_err(|e| failure(PullCause::InvalidReference, e.to_string(), true))?;
    // The catalog's pull Secrets; a catalog gone since planning leaves an anonymous pull.
    let secrets = Api::<CatalogSource>::namespaced(ctx.client.clone(), catalog_namespace)
        .get_opt(catalog)
        .await
        .map_err(|e| {
            failure(
                PullCause::Unreachable,
                format!("reading CatalogSource {catalog}: {e}"),
                false,
            )
        })?
        .map(|source| source.spec.secrets)
        .unwrap_or_default();
    let options = Options {
        insecure: ctx.settings.insecure_registries.clone(),
        timeout: Some(ctx.settings.registry_timeout.max(Duration::from_secs(30))),
    };
    let mirrors = ctx.settings.mirrors.current();
    let attempts = (mirrors.attempts(&reference, &options))
        .map_err(|e| failure(PullCause::Unreachable, e.to_string(), false))?;
    let several = attempts.len() > 1;
    let mut failures: Vec<PullFailure> = Vec::new();
    let mut pulled = None;
    for attempt in &attempts {
        let target = (&attempt.reference, &reference);
        match pull_at(
            target,
            &attempt.options,
            ctx,
            (catalog, catalog_namespace),
            &secrets,
            limit,
        )
        .await
        {
            Ok(image) => {
                pulled = Some(image);
                break;
            }
            // An image that is not a bundle is that wherever it comes from.
            Err(f) if f.permanent => return Err(failure(f.cause, f.message, true)),
            Err(mut f) => {
                if several {
                    f.message = format!("{}: {}", attempt.reference, f.message);
                }
                failures.push(f);
            }
        }
    }
    let Some(pulled) = pulled else {
        let cause = failures.last().map_or(PullCause::Unreachable, |f| f.cause);
        let tried: Vec<String> = failures.into_iter().map(|f| f.message).collect();
        return Err(failure(cause, tried.join("; "), false));
    };
    let (rootfs, name) = (pulled.rootfs.clone(), lookup.identifier.clone());
    let objects = tokio::task::spawn_blocking(move || bundle_objects(&rootfs, &name))
        .await
        .map_err(|e| {
            failure(
                PullCause::InvalidImage,
                format!("reading it failed: {e}"),
                true,
            )
        })?
        .map_err(|refused| failure(PullCause::InvalidImage, refused.to_string(), true))?;
    tracing::info!(bundle = %lookup.identifier, image, digest = %pulled.digest, "bundle image pulled");
    Ok(objects)
}

/// One place to pull a bundle image from (the image itself or a mirror): the catalog's
/// pull Secrets matched to that host, then the pull, bounded by `limit`, cached under the
/// name the catalog knows it by.
async fn pull_at(
    (reference, known_as): (&oci_client::Reference, &oci_client::Reference),
    options: &Options,
    ctx: &Context,
    (catalog, catalog_namespace): (&str, &str),
    secrets: &[String],
    limit: Duration,
) -> Result<crate::oci::registry::PulledImage, PullFailure> {
    let failure = |cause: PullCause, message: String, permanent: bool| PullFailure {
        cause,
        message,
        permanent,
    };
    let auth = crate::cluster::pull_secrets::registry_auth(
        &ctx.client,
        catalog_namespace,
        secrets,
        reference.resolve_registry(),
    )
    .await
    .map_err(|(cause, message)| {
        failure(cause, format!("CatalogSource {catalog}: {message}"), false)
    })?;
    let session = Session::new(reference, auth, options)
        .map_err(|e| failure(e.cause(), e.to_string(), false))?;
    let cache = &ctx.settings.image_cache_dir;
    let pull = session.pull_stored_as(reference, known_as, cache, &select_bundle, None);
    tokio::time::timeout(limit, pull)
        .await
        .map_err(|_| {
            failure(
                PullCause::Timeout,
                format!("the pull took longer than {limit:?}"),
                false,
            )
        })?
        .map_err(|e| {
            let cause = e.cause();
            failure(cause, e.to_string(), cause == PullCause::InvalidImage)
        })
}

/// The unpack timeout of a namespace: its OperatorGroup's annotation when it parses.
pub fn unpack_timeout(annotation: Option<&str>, default: Duration) -> Duration {
    annotation
        .and_then(|text| crate::api::duration::parse_go_duration(text.trim()).ok())
        .unwrap_or(default)
}

/// How long this round's pull of a lookup may take: what is left of the timeout since its
/// first failure (at least a second).
pub fn remaining(lookup: &BundleLookup, now: Timestamp, timeout: Duration) -> Duration {
    let since = lookup
        .conditions
        .first()
        .and_then(|c| c.last_transition_time.clone());
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
        InstallPlanReason::Pull(failure.cause),
        failure.message.clone(),
    )
    .into_install_plan(since.clone(), updated)
}

/// `failed`: this round's failures, each lookup as the plan shows it now (its Pending
/// condition's transition time is when the first failure was seen).
pub fn decide(
    failed: &[(BundleLookup, PullFailure)],
    now: Timestamp,
    timeout: Duration,
) -> Decision {
    let mut lookups = Vec::new();
    let mut give_up = None;
    for (lookup, failure) in failed {
        let before = lookup
            .conditions
            .iter()
            .find(|c| c.type_.as_deref() == Some(LOOKUP_PENDING));
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
                lookup.identifier,
                lookup
                    .catalog_source_ref
                    .namespace
                    .as_deref()
                    .unwrap_or_default(),
                lookup
                    .catalog_source_ref
                    .name
                    .as_deref()
                    .unwrap_or_default(),
                failure.message
            );
            if expired && !failure.permanent {
                message.push_str(&format!(
                    " (still failing after the bundle unpack timeout of {timeout:?})"
                ));
            }
            give_up = Some(message);
        }
        let mut lookup = lookup.clone();
        lookup.conditions = vec![lookup_condition(type_, failure, &since, updated)];
        lookups.push(lookup);
    }
    match give_up {
        Some(message) => Decision::Fail { message, lookups },
        None => Decision::Wait(lookups),
    }
}

/// What a round of pulls makes of the plan.
#[derive(Debug, PartialEq)]
pub enum Unpacked {
    /// The status to show: steps of the bundles that arrived, lookups still waiting.
    Next(InstallPlanStatus),
    Fail {
        status: InstallPlanStatus,
        reason: InstallPlanReason,
        message: String,
    },
}

/// The decide step of unpacking (pure): `unpacked` lookups with their objects become steps;
/// `failed` ones wait or fail the plan. When the last lookup is resolved an Installing plan's
/// retry clock starts (unpacking has its own timeout).
pub fn decide_unpacked(
    namespace: &str,
    current: &InstallPlanStatus,
    unpacked: Vec<(BundleLookup, Vec<Value>)>,
    failed: &[(BundleLookup, PullFailure)],
    now: Timestamp,
    timeout: Duration,
) -> Unpacked {
    let mut new_steps = Vec::new();
    for (lookup, objects) in unpacked {
        match plan::steps_of_unpacked(namespace, &lookup, objects) {
            Ok(steps) => new_steps.extend(steps),
            Err(error) => {
                return Unpacked::Fail {
                    status: current.clone(),
                    reason: InstallPlanReason::InstallComponentFailed,
                    message: error.to_string(),
                };
            }
        }
    }
    let mut next = current.clone();
    next.plan = plan::merge_steps(next.plan, new_steps);
    match decide(failed, now, timeout) {
        Decision::Wait(lookups) => {
            next.message = lookups
                .iter()
                .filter_map(|l| l.conditions.first()?.message.clone())
                .next()
                .map(|m| format!("waiting for bundle images: {m}"));
            if lookups.is_empty() && next.phase == crate::api::InstallPlanPhase::Installing {
                next.start_time = Some(Time(now));
            }
            next.bundle_lookups = lookups;
            Unpacked::Next(next)
        }
        Decision::Fail { message, lookups } => Unpacked::Fail {
            status: InstallPlanStatus {
                bundle_lookups: lookups,
                ..current.clone()
            },
            reason: InstallPlanReason::BundleLookupFailed,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use serde_json::json;

    use super::*;
    use crate::api::{InstallPlanPhase, PlannedBundle};

    const IMAGE: &str = "127.0.0.1:5000/at-bundle:v0.3.0";

    fn lookup() -> BundleLookup {
        BundleLookup {
            path: IMAGE.into(),
            identifier: "at.v0.3.0".into(),
            replaces: "at.v0.2.0".into(),
            catalog_source_ref: ObjectReference {
                name: Some("images".into()),
                namespace: Some("ns".into()),
                ..ObjectReference::default()
            },
            conditions: Vec::new(),
            properties: Some(
                json!({"properties": [
                    {"type": "olm.package", "value": {"packageName": "at", "version": "0.3.0"}},
                    {"type": "olm.gvk", "value": {"group": "at.example.com", "kind": "At", "version": "v1"}},
                ]})
                .to_string(),
            ),
        }
    }

    fn failure(permanent: bool, message: &str) -> PullFailure {
        PullFailure {
            cause: if permanent {
                PullCause::InvalidImage
            } else {
                PullCause::Unreachable
            },
            message: message.into(),
            permanent,
        }
    }

    #[test]
    fn transient_failures_wait_until_the_timeout_counted_from_the_first() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let timeout = Duration::from_secs(60);
        let Decision::Wait(first) = decide(&[(lookup(), failure(false, "down"))], t0, timeout)
        else {
            panic!("waits")
        };
        let condition = &first[0].conditions[0];
        assert_eq!(condition.type_.as_deref(), Some(LOOKUP_PENDING));
        assert_eq!(condition.message.as_deref(), Some("down"));
        assert_eq!(first[0].path, IMAGE);
        assert_eq!(first[0].replaces, "at.v0.2.0");

        // The same failure later: nothing changes (no status write), and the next pull may
        // take what is left of the timeout.
        let t1 = Timestamp::from_second(1_030).unwrap();
        assert_eq!(remaining(&first[0], t1, timeout), Duration::from_secs(30));
        let again = [(first[0].clone(), failure(false, "down"))];
        let Decision::Wait(second) = decide(&again, t1, timeout) else {
            panic!("still waits")
        };
        assert_eq!(second, first);

        let t2 = Timestamp::from_second(1_061).unwrap();
        match decide(&[(second[0].clone(), failure(false, "down"))], t2, timeout) {
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
        let failed = [(lookup(), failure(true, "not a bundle image"))];
        assert!(matches!(
            decide(&failed, now, Duration::from_secs(600)),
            Decision::Fail { .. }
        ));
        let default = Duration::from_secs(600);
        assert_eq!(unpack_timeout(Some("5s"), default), Duration::from_secs(5));
        assert_eq!(unpack_timeout(Some("nonsense"), default), default);
        assert_eq!(unpack_timeout(None, default), default);
    }

    fn at_objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                   "metadata": {"name": "at.v0.3.0"},
                   "spec": {"displayName": "At", "install": {"strategy": "deployment"}}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "ats.at.example.com"}, "spec": {}}),
        ]
    }

    #[test]
    fn an_unpacked_lookup_becomes_steps_in_upstreams_order_and_starts_the_clock() {
        let t = Timestamp::from_second(2_000).unwrap();
        let dependency = PlannedBundle {
            name: "kmm.v1".into(),
            catalog: "images".into(),
            catalog_namespace: "ns".into(),
            ..PlannedBundle::default()
        };
        let current = InstallPlanStatus {
            phase: InstallPlanPhase::Installing,
            plan: vec![plan::steps::generated_subscription_step(
                "kmm-sub",
                "ns",
                &dependency,
            )],
            bundle_lookups: vec![lookup()],
            ..InstallPlanStatus::default()
        };
        let Unpacked::Next(next) = decide_unpacked(
            "ns",
            &current,
            vec![(lookup(), at_objects())],
            &[],
            t,
            Duration::from_secs(60),
        ) else {
            panic!("steps")
        };
        let kinds: Vec<&str> = next.plan.iter().map(|s| s.resource.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "Subscription"
            ]
        );
        let csv: Value =
            serde_json::from_str(next.plan[0].resource.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(csv["spec"]["replaces"], "at.v0.2.0");
        assert_eq!(csv["metadata"]["namespace"], "ns");
        let properties = csv["metadata"]["annotations"][crate::api::ANNOTATION_PROPERTIES]
            .as_str()
            .unwrap();
        assert!(
            properties.contains(r#""packageName":"at""#) && properties.contains("olm.gvk"),
            "{properties}"
        );
        assert!(next.bundle_lookups.is_empty());
        assert_eq!(next.start_time, Some(Time(t)));
        assert_eq!(next.message, None);
    }

    #[test]
    fn a_lookup_without_its_package_fails_the_plan_naming_the_bundle() {
        let mut broken = lookup();
        broken.properties = Some(r#"{"properties":[]}"#.into());
        let outcome = decide_unpacked(
            "ns",
            &InstallPlanStatus::default(),
            vec![(broken, at_objects())],
            &[],
            Timestamp::from_second(1).unwrap(),
            Duration::from_secs(60),
        );
        let Unpacked::Fail {
            message, reason, ..
        } = outcome
        else {
            panic!("fails: {outcome:?}")
        };
        assert_eq!(reason, InstallPlanReason::InstallComponentFailed);
        assert!(
            message.contains("at.v0.3.0") && message.contains("olm.package"),
            "{message}"
        );
    }
}
