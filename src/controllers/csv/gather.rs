//! The gather step of a round: the group, the Deployments to make and their health (with
//! the pods of those not ready), and the CSVs this one replaces or is replaced by.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use super::phase::{GroupState, Health, Observation, Related};
use crate::api::{
    ClusterServiceVersion, CsvPhase, CsvReason, InstallPlan, InstallPlanPhase,
    OPERATOR_LABEL_PREFIX, OperatorGroup, SubscriptionConfig,
};
use crate::cluster::ownership::{DEPLOYMENT_SPEC_HASH_LABEL, OWNER_LABEL, selector_matches};

use super::context::{Error, Round, now};
use super::deployment::Rollout;
use super::found::gather_requirements;
use super::{deployment, membership, mount, owned, pods, requirements, serving};

pub(super) const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
pub(super) const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
pub(super) const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";

/// What a round of the phase machine reads, and what the phase step observes of it.
pub(super) struct Gathered {
    pub(super) owner: owned::Owner,
    /// The strategy's Deployments as OLM makes them (name, body).
    pub(super) built: Vec<(String, Value)>,
    pub(super) judged: requirements::Judged,
    pub(super) observed: Observation,
    /// The certificates of the Deployments serving webhooks, and what to apply for them.
    pub(super) serving: serving::Serving,
    pub(super) serving_plan: serving::ServingPlan,
    /// What the cluster lacks of `serving_plan`.
    pub(super) shortfall: Option<serving::Shortfall>,
    /// The group's `serviceAccountName`: the whole install is made as that account.
    pub(super) scoped_account: Option<String>,
    /// The CSV's Roles and RoleBindings copied or lifted to its group's other targets.
    pub(super) spread: Vec<owned::Planned>,
}

/// The gather step: the group, the Deployments to make and their health, the requirements,
/// and the CSVs this one replaces or is replaced by.
pub(super) async fn gather(round: &Round<'_>) -> Result<Gathered, Error> {
    let (csv, ctx) = (round.csv, round.ctx);
    let (group, group_state) = group_of(round);
    let targets = match &group_state {
        GroupState::Member { targets, .. } => targets.clone(),
        _ => vec![],
    };
    let owner = owner_of(csv, group.as_ref(), &targets);
    let config = subscription_config(round);
    let serving = serving::gather(
        &round.client(),
        csv,
        &round.namespace,
        ctx.shared.settings.cert_validity,
        now(),
    )
    .await
    .map_err(round.fail("read_serving_certificates"))?;
    let (built, strategy_problem) =
        build_deployments(csv, &owner, config.as_ref(), &serving.mounts());
    let mut serving_plan = serving.plan(csv, &owner, group.as_ref());
    ctx.rbac.unshare(&mut serving_plan.before, &round.namespace);
    let shortfall = if serving.deployments.is_empty() {
        None
    } else {
        serving::missing(
            &round.client(),
            &round.name,
            &round.namespace,
            &serving_plan,
        )
        .await
        .map_err(round.fail("read_webhooks"))?
    };
    let judged = requirements::judge(csv, &gather_requirements(round).await?);
    let spread = ctx.rbac.spread(&owner, &targets, &serving_plan);
    let (replaces, replaced_by) = related(round);
    let serving_missing = shortfall.as_ref().map(|s| s.message().to_string());
    let (health, look_again) = health(
        round,
        &built,
        strategy_problem.is_some(),
        serving_missing.as_ref(),
    )
    .await;
    let observed = Observation {
        group: group_state,
        health,
        look_again,
        strategy_problem,
        webhook_problem: serving.problem.clone(),
        owner_conflict: serving.owner_conflict.clone(),
        not_upgradeable: not_upgradeable(round, replaces.as_ref()).await?,
        certs_due: serving.rotating(),
        certs_rotate_at: serving.rotate_at(),
        serving_missing,
        unmet: judged.unmet.clone(),
        replaces,
        replaced_by,
        now: now(),
        install_check_timeout: ctx.shared.settings.install_check_timeout,
    };
    Ok(Gathered {
        owner,
        built,
        judged,
        observed,
        serving,
        serving_plan,
        shortfall,
        scoped_account: group
            .as_ref()
            .and_then(crate::cluster::scoped::service_account)
            .map(str::to_string),
        spread,
    })
}

/// What every object made for the CSV carries of it.
fn owner_of(
    csv: &ClusterServiceVersion,
    group: Option<&OperatorGroup>,
    targets: &[String],
) -> owned::Owner {
    owned::Owner {
        csv: csv.name_any(),
        namespace: csv.namespace().unwrap_or_default(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
        annotations: pod_annotations(csv, group, targets),
        operator_labels: csv
            .labels()
            .iter()
            .filter(|(key, _)| key.starts_with(OPERATOR_LABEL_PREFIX))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    }
}

/// The CSV this one replaces (when it is there) and the one replacing it, with their phases.
fn related(round: &Round<'_>) -> (Option<Related>, Option<Related>) {
    let related = |csv: &ClusterServiceVersion| Related {
        name: csv.name_any(),
        phase: csv
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default(),
        writing: writing(&round.ctx.plans, &round.namespace, &csv.name_any()),
    };
    let csvs = &round.ctx.csvs;
    let replaces = round.csv.spec.replaces.as_deref();
    let replaces = replaces
        .filter(|r| !r.is_empty() && *r != round.name)
        .and_then(|name| csvs.get(&ObjectRef::new(name).within(&round.namespace)))
        .and_then(|g| {
            g.0.as_ref()
                .ok()
                .filter(|old| round.csv.replaces_now(old))
                .map(&related)
        });
    // From the store itself, not the index: the index follows the store a step behind, and
    // the round a replacement's change wakes must see that replacement.
    let replaced_by = csvs
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .find(|other| {
            other.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                && other.replaces_now(round.csv)
                && other.metadata.deletion_timestamp.is_none()
        })
        .map(&related);
    (replaces, replaced_by)
}

/// Whether an InstallPlan of `namespace` that creates the CSV `name` is still running its
/// steps (Installing). Read only for a CSV with a related one, not every round.
fn writing(plans: &Store<DeserializeGuard<InstallPlan>>, namespace: &str, name: &str) -> bool {
    plans
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .any(|plan| {
            plan.metadata.namespace.as_deref() == Some(namespace)
                && plan.metadata.deletion_timestamp.is_none()
                && plan
                    .spec
                    .cluster_service_version_names
                    .iter()
                    .any(|n| n == name)
                && plan.status.as_ref().map(|s| s.phase) == Some(InstallPlanPhase::Installing)
        })
}

/// Why the CSV it replaces says it may not be upgraded yet (its OperatorCondition), for a
/// CSV not yet past Pending.
async fn not_upgradeable(
    round: &Round<'_>,
    replaces: Option<&Related>,
) -> Result<Option<String>, Error> {
    let phase = round.csv.status.as_ref().and_then(|s| s.phase);
    let (Some(old), None | Some(CsvPhase::Pending | CsvPhase::None)) = (replaces, phase) else {
        return Ok(None);
    };
    let conditions: Api<crate::api::OperatorCondition> =
        Api::namespaced(round.client(), &round.namespace);
    let condition = conditions
        .get_opt(&old.name)
        .await
        .map_err(round.fail("read_operator_condition"))?;
    Ok(condition
        .and_then(|condition| crate::api::upgradeable(&condition).err())
        .map(|why| why.to_string()))
}

/// How the strategy's Deployments stand, and the serving objects the cluster lacks; and,
/// when their pods are to be asked later, when to look again.
///
/// Pods are read only where they tell something: the pods of a Deployment that is ours but
/// not available and has made no progress for [`PODS_ASKED_AFTER`] or is past its deadline
/// (which pod fails, and why), and those of an Available one while the CSV is
/// Installing or Failed (a container that exits at once is Ready for a moment after each
/// restart, and its Deployment Available). A Succeeded CSV whose Deployments are Available
/// costs no call. Listed by the Deployment's selector, in its namespace: no Pod watch.
async fn health(
    round: &Round<'_>,
    built: &[(String, Value)],
    strategy_problem: bool,
    serving_missing: Option<&String>,
) -> (Health, Option<Duration>) {
    if built.is_empty() && !strategy_problem {
        return match serving_missing {
            Some(missing) => (Health::NotReady(missing.clone()), None),
            None => (Health::Ready, None),
        };
    }
    let mut look_again: Option<Duration> = None;
    let mut healths = Vec::with_capacity(built.len());
    for (name, body) in built {
        let (health, left) = deployment_health(round, name, body).await;
        if let Some(left) = left {
            look_again = Some(look_again.map_or(left, |s| s.min(left)));
        }
        healths.push(health);
    }
    let health = match (deployment::combined(healths), serving_missing) {
        (Health::Ready, Some(missing)) => Health::NotReady(missing.clone()),
        (health, _) => health,
    };
    (health, look_again)
}

/// How Deployment `name` (built as `body`) stands, its pods asked where they tell
/// something (see [`health`]); and, when it is Available but a pod of it restarted too
/// recently to count, when that pod will have run long enough.
async fn deployment_health(
    round: &Round<'_>,
    name: &str,
    body: &Value,
) -> (Health, Option<Duration>) {
    let check_restarts = may_succeed_now(round.csv.status.as_ref());
    let first_rollout = installing(round.csv.status.as_ref());
    let found = round
        .ctx
        .deployments
        .get(&ObjectRef::new(name).within(&round.namespace));
    let rollout = deployment::rollout(
        name,
        found.as_deref(),
        &round.name,
        deployment::spec_hash(body),
    );
    let Some(found) = found
        .as_deref()
        .filter(|_| rollout.pods_tell() || rollout == Rollout::Ready && check_restarts)
    else {
        return (deployment::health(name, rollout, None), None);
    };
    // A first rollout that moved a moment ago: its pods would only say that they start.
    // (A Deployment that breaks under a Succeeded CSV is asked at once: its pod's words go
    // into the Failed entry of the CSV's history.)
    if let Rollout::Waiting(_) = rollout
        && first_rollout
        && let Some(left) = PODS_ASKED_AFTER
            .checked_sub(deployment::quiet_for(found, now()))
            .filter(|left| !left.is_zero())
    {
        return (deployment::health(name, rollout, None), Some(left));
    }
    let pods = deployment_pods(round, name, found).await;
    let mine = pods::of_deployment(name, &pods);
    let unsettled = pods::unsettled(&mine, now(), pods::SETTLE_AFTER_RESTART);
    if rollout.pods_tell() {
        // A container may be running again by the time its crash reaches the Deployment:
        // then its restart is the story.
        let story = pods::first_unhealthy(&mine).or(unsettled.map(|(story, _)| story));
        return (deployment::health(name, rollout, story.as_deref()), None);
    }
    match (unsettled, pods::first_unhealthy(&mine)) {
        (Some((story, left)), _) => (deployment::unsettled(name, &story), Some(left)),
        // The Deployment's Available lags a container that exited again since: its pod
        // already says so (looked at again shortly, as nothing else wakes the CSV).
        (None, Some(story)) => (deployment::unsettled(name, &story), Some(RELOOK_UNHEALTHY)),
        (None, None) => (Health::Ready, None),
    }
}

/// How long a waiting rollout must have made no progress before its pods are asked why: a
/// healthy install is over by then, and costs no list of pods.
const PODS_ASKED_AFTER: Duration = Duration::from_secs(10);

/// When to look again at an Available Deployment whose pod says it is not healthy.
const RELOOK_UNHEALTHY: Duration = Duration::from_secs(5);

/// Whether the CSV has not yet succeeded or failed: its Deployments are rolling out for
/// the first time.
fn installing(status: Option<&crate::api::ClusterServiceVersionStatus>) -> bool {
    let phase = status.and_then(|s| s.phase);
    !matches!(
        phase,
        Some(CsvPhase::Succeeded | CsvPhase::Failed | CsvPhase::Replacing | CsvPhase::Deleting)
    )
}

/// Whether the phase machine moves the CSV to Succeeded as soon as its Deployments are
/// ready: Installing, or Failed for their health.
fn may_succeed_now(status: Option<&crate::api::ClusterServiceVersionStatus>) -> bool {
    let Some(status) = status else {
        return false;
    };
    let reason = CsvReason::read_back(status.reason.as_deref());
    match status.phase {
        Some(CsvPhase::Installing) => true,
        Some(CsvPhase::Failed) => matches!(
            reason,
            CsvReason::ComponentUnhealthy | CsvReason::InstallCheckFailed
        ),
        _ => false,
    }
}

/// The pods of Deployment `name`, listed by its selector. They only add detail to the
/// health a Deployment shows: a failed list is logged and the round goes on without them.
async fn deployment_pods(round: &Round<'_>, name: &str, found: &Deployment) -> Vec<Pod> {
    let selector = &found.spec.selector;
    let labels = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    let api: Api<Pod> = Api::namespaced(round.client(), &round.namespace);
    match api.list(&ListParams::default().labels(&labels)).await {
        Ok(listed) => listed
            .items
            .into_iter()
            .filter(|pod| selector_matches(selector, pod.labels()))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, deployment = name, csv = %round.name, namespace = %round.namespace,
                "cannot list the pods of a deployment");
            Vec::new()
        }
    }
}

/// Whether a Deployment the strategy lists is missing, not ours, or not what we would make.
pub(super) fn drifted(round: &Round<'_>, built: &[(String, Value)]) -> bool {
    built.iter().any(|(name, body)| {
        let found = round
            .ctx
            .deployments
            .get(&ObjectRef::new(name).within(&round.namespace));
        found.is_none_or(|d| {
            let labels = d.labels();
            labels.get(OWNER_LABEL) != Some(&round.name)
                || labels.get(DEPLOYMENT_SPEC_HASH_LABEL).map(String::as_str)
                    != deployment::spec_hash(body)
        })
    })
}

/// The CSV's OperatorGroup and what it means for the install modes.
pub(super) fn group_of(round: &Round) -> (Option<OperatorGroup>, GroupState) {
    membership::group_of(
        round.csv,
        &round.namespace,
        &round.ctx.groups,
        &round.ctx.shared,
    )
}

/// The CSV's annotations plus the group's (computed here rather than read back from the
/// CSV, so a Deployment never starts with stale target namespaces).
pub(super) fn pod_annotations(
    csv: &ClusterServiceVersion,
    group: Option<&OperatorGroup>,
    targets: &[String],
) -> BTreeMap<String, String> {
    let mut annotations = csv.annotations().clone();
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    if let Some(group) = group {
        annotations.insert(OPERATOR_GROUP_ANNOTATION.into(), group.name_any());
        annotations.insert(
            OPERATOR_NAMESPACE_ANNOTATION.into(),
            group.namespace().unwrap_or_default(),
        );
        annotations.insert(TARGET_NAMESPACES_ANNOTATION.into(), targets.join(","));
    }
    annotations
}

/// The `config` of a Subscription in the namespace for this CSV's package: one whose
/// status names the CSV, or whose package the CSV's name starts with (`<package>.v…`).
pub(super) fn subscription_config(round: &Round) -> Option<SubscriptionConfig> {
    let subscriptions = round.ctx.subscriptions.state();
    let name = round.name.as_str();
    subscriptions
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|s| s.metadata.namespace.as_deref() == Some(round.namespace.as_str()))
        .find(|s| {
            let status = s.status.as_ref();
            status.and_then(|st| st.installed_csv.as_deref()) == Some(name)
                || status.and_then(|st| st.current_csv.as_deref()) == Some(name)
                || name
                    .strip_prefix(s.spec.name.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
        .and_then(|s| s.spec.config.clone())
}

/// The Deployments to apply, by name, or why the strategy cannot be used.
pub(super) fn build_deployments(
    csv: &ClusterServiceVersion,
    owner: &owned::Owner,
    config: Option<&SubscriptionConfig>,
    mounts: &BTreeMap<String, mount::Mount>,
) -> (Vec<(String, Value)>, Option<String>) {
    if csv.spec.install.strategy != "deployment" {
        return (
            vec![],
            Some(format!(
                "unsupported install strategy {:?} (only \"deployment\")",
                csv.spec.install.strategy
            )),
        );
    }
    let Some(strategy) = &csv.spec.install.spec else {
        return (vec![], Some("the deployment strategy has no spec".into()));
    };
    let mut built = Vec::new();
    for spec in &strategy.deployments {
        match deployment::build(spec, owner, config, mounts.get(&spec.name)) {
            Ok(body) => built.push((spec.name.clone(), body)),
            Err(problem) => return (vec![], Some(problem.to_string())),
        }
    }
    (built, None)
}
