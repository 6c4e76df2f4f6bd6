//! The ClusterServiceVersion controller: the phase machine that turns a CSV into a running,
//! correctly privileged operator, upgrades it by replacement, copies it into its target
//! namespaces, and cleans up after it.
//!
//! Each round gathers (caches: CSVs, OperatorGroups, the Deployments OLM made, namespaces,
//! copies, Subscriptions; reads: CRDs and ServiceAccounts by name), decides (pure:
//! [`phase`], [`requirements`], [`deployment`], [`rbac`], [`copies`]) and applies
//! (server-side apply under `olm-csv`; Deployments and RBAC only on install or drift,
//! copies only when their source changed, status only when it differs).

pub mod certs;
pub mod condition;
mod conflicts;
pub mod copier;
pub mod copies;
pub mod deployment;
mod names;
mod orphans;
pub mod phase;
pub mod rbac;
pub mod requirements;
pub mod serving;
pub mod webhooks;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::{OnceCell, mpsc};

use super::context::Context;
use super::kit::PanicError;
use super::kit::{
    self, ConditionStatus, KitState, ObjectKey, ReconcileError, Reconciler, apply_status,
};
use super::ownership::{
    DEPLOYMENT_SPEC_HASH_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL,
    owner_selector,
};
use crate::api::{
    ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, OPERATOR_LABEL_PREFIX,
    OperatorGroup, Subscription, SubscriptionConfig, check_install_modes,
};
use crate::controllers::host::Shutdown;
use phase::{GroupState, Health, Observation, Related, Step};

pub const CONTROLLER: &str = "csv";
pub const FIELD_MANAGER: &str = "olm-csv";
pub const FINALIZER: &str = "operators.coreos.com/csv-cleanup";
const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ClusterServiceVersion {namespace}/{name}: {step}: {error}")]
    Kube {
        namespace: String,
        name: String,
        step: &'static str,
        #[source]
        error: kube::Error,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { step, .. } => step,
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct CsvContext {
    pub shared: Arc<Context>,
    kit: KitState<ObjectKey>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    groups: Store<DeserializeGuard<OperatorGroup>>,
    deployments: Store<Deployment>,
    /// The ServiceAccounts OLM made for CSVs (labelled as a CSV's). A round asks each of its
    /// accounts here first, and the API server only for one not in it (a namespace's
    /// `default`, a user's own, or one just made): a CSV's rounds read them again and again.
    service_accounts: Store<PartialObjectMeta<ServiceAccount>>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    /// Every CSV's name, cluster-wide: the copies (by their `olm.copiedFrom` label), and
    /// the CSVs of other namespaces that a copy must never overwrite.
    csv_names: names::CsvNames,
    subscriptions: Store<DeserializeGuard<Subscription>>,
    /// CRDs' metadata (the shared watch), and what a GET found of each at a resourceVersion:
    /// a CSV with fifty CRDs, woken by each of them turning Established, reads each once
    /// per change instead of fifty times per wake-up.
    crd_meta: Store<PartialObjectMeta<CustomResourceDefinition>>,
    crd_states: std::sync::Mutex<HashMap<String, (CrdReadAt, requirements::CrdState)>>,
    server_version: OnceCell<String>,
    /// Roles, ClusterRoles and their bindings (the shared watches): what a CSV's accounts
    /// hold, and the Roles it spreads to its targets.
    rbac: RbacStores,
    /// Clients acting as a scoped OperatorGroup's service account (the whole install).
    scoped: crate::controllers::scoped::ScopedClients,
    /// CSVs to look at again because a related one (replaced or replacing) moved.
    related: mpsc::UnboundedSender<ObjectRef<DeserializeGuard<ClusterServiceVersion>>>,
    /// Source CSVs whose copies the copier looks at (after each round of a group member).
    copy_requests: mpsc::UnboundedSender<CsvRef>,
}

fn key(csv: &ClusterServiceVersion) -> (String, String) {
    (csv.namespace().unwrap_or_default(), csv.name_any())
}

fn now() -> Timestamp {
    kit::now()
}

impl Reconciler for CsvContext {
    /// Failed, with the reason in `status.reason`/`message` as for any CSV that cannot install.
    fn invalid_status(message: &str) -> Option<serde_json::Value> {
        let now = crate::controllers::kit::now().to_string();
        Some(serde_json::json!({
            "phase": "Failed",
            "reason": crate::api::CsvReason::SpecInvalidError.as_str(),
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        }))
    }

    type Object = ClusterServiceVersion;
    type Key = ObjectKey;
    type Error = Error;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    // Clients apply whole CSVs, status included (upstream's tests do, forced); upstream's
    // status updates never conflict with them, so ours take those fields over.
    const FORCE_STATUS: bool = true;

    crate::kit_accessors!(object_key);

    async fn sync(&self, csv: &ClusterServiceVersion) -> Result<Action, Error> {
        sync(csv, self).await
    }
}

struct Round<'a> {
    csv: &'a ClusterServiceVersion,
    ctx: &'a CsvContext,
    namespace: String,
    name: String,
}

impl Round<'_> {
    fn fail(&self, step: &'static str) -> impl FnOnce(kube::Error) -> Error + use<> {
        let (namespace, name) = (self.namespace.clone(), self.name.clone());
        move |error| Error::Kube {
            namespace,
            name,
            step,
            error,
        }
    }

    fn client(&self) -> kube::Client {
        self.ctx.shared.client.clone()
    }
}

struct RbacStores {
    roles: Store<Role>,
    role_bindings: Store<RoleBinding>,
    cluster_roles: Store<ClusterRole>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
}

impl RbacStores {
    async fn listed(&self) -> bool {
        use crate::controllers::kit::cache_ready::listed;
        listed(&self.roles).await
            && listed(&self.role_bindings).await
            && listed(&self.cluster_roles).await
            && listed(&self.cluster_role_bindings).await
    }

    /// The Roles and RoleBindings of `namespace` that carry the owner labels of CSV `name`
    /// there (not copies), sorted by name.
    fn owned(&self, name: &str, namespace: &str) -> (Vec<Arc<Role>>, Vec<Arc<RoleBinding>>) {
        let owned = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            let labels = meta.labels.as_ref();
            let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
            meta.namespace.as_deref() == Some(namespace)
                && label(OWNER_LABEL) == Some(name)
                && label(OWNER_NAMESPACE_LABEL) == Some(namespace)
                && label(OWNER_KIND_LABEL) == Some("ClusterServiceVersion")
                && label(crate::api::COPIED_FROM_LABEL).is_none()
        };
        let mut roles: Vec<Arc<Role>> = self
            .roles
            .state()
            .into_iter()
            .filter(|r| owned(&r.metadata))
            .collect();
        let mut bindings: Vec<Arc<RoleBinding>> = self
            .role_bindings
            .state()
            .into_iter()
            .filter(|b| owned(&b.metadata))
            .collect();
        roles.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        bindings.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        (roles, bindings)
    }
}

impl RbacStores {
    /// The serving bindings outside the namespace, named so that no other install's is
    /// taken ([`webhooks::unshare`], from the caches).
    fn unshare(&self, planned: &mut [rbac::Planned], namespace: &str) {
        webhooks::unshare(planned, namespace, |kind, ns, name| match kind {
            "ClusterRoleBinding" => self
                .cluster_role_bindings
                .get(&ObjectRef::new(name))
                .map(|b| b.labels().clone()),
            _ => self
                .role_bindings
                .get(&ObjectRef::new(name).within(ns.unwrap_or_default()))
                .map(|b| b.labels().clone()),
        });
    }

    /// The copies and lifts of the CSV's Roles and RoleBindings to its group's `targets`
    /// ([`rbac::plan`]); the serving certificate's own Role stays where its Secret is.
    fn spread(
        &self,
        owner: &deployment::Owner,
        targets: &[String],
        serving: &serving::ServingPlan,
    ) -> Vec<rbac::Planned> {
        let (mut roles, bindings) = self.owned(&owner.csv, &owner.namespace);
        let serving_role = |name: Option<&str>| {
            serving
                .before
                .iter()
                .chain(&serving.after)
                .any(|p| p.kind == "Role" && name == Some(p.name.as_str()))
        };
        roles.retain(|role| !serving_role(role.metadata.name.as_deref()));
        let roles: Vec<&Role> = roles.iter().map(AsRef::as_ref).collect();
        let bindings: Vec<&RoleBinding> = bindings
            .iter()
            .map(AsRef::as_ref)
            .filter(|b| {
                b.role_ref.kind == "ClusterRole"
                    || roles
                        .iter()
                        .any(|r| r.metadata.name.as_deref() == Some(b.role_ref.name.as_str()))
            })
            .collect();
        rbac::plan(&roles, &bindings, owner, targets)
    }
}

impl CsvContext {
    /// Every cache has been listed once: before that a missing group or Deployment is not
    /// missing, only not yet seen (deciding on it would fail a healthy CSV after a restart).
    async fn caches_ready(&self) -> bool {
        crate::controllers::kit::cache_ready::listed(&self.groups).await
            && crate::controllers::kit::cache_ready::listed(&self.deployments).await
            && crate::controllers::kit::cache_ready::listed(&self.namespaces).await
            && self.csv_names.listed().await
            && crate::controllers::kit::cache_ready::listed(&self.subscriptions).await
            && crate::controllers::kit::cache_ready::listed(&self.csvs).await
            && self.rbac.listed().await
    }
}

async fn sync(csv: &ClusterServiceVersion, ctx: &CsvContext) -> Result<Action, Error> {
    if !ctx.caches_ready().await {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let (namespace, name) = key(csv);
    let round = Round {
        csv,
        ctx,
        namespace,
        name,
    };
    if csv.metadata.deletion_timestamp.is_some() {
        cleanup(&round).await?;
        return Ok(Action::await_change());
    }
    ensure_finalizer(&round).await?;
    let gathered = gather(&round).await?;

    // Decide (through the phases that wait for nothing), apply.
    let (passed, from) = phase::pass_through(
        csv.status.as_ref(),
        &gathered.observed,
        &gathered.judged.statuses,
        now(),
    );
    let current = from.as_ref().or(csv.status.as_ref());
    let mut step = phase::decide(current, &gathered.observed);
    // The certificates in the Secrets; a fresh one only once it was applied.
    let mut certs = (!gathered.serving.rotating())
        .then(|| gathered.serving.status_times())
        .flatten();
    if step.install && gathered.observed.strategy_problem.is_none() {
        let first = current.and_then(|s| s.phase) == Some(CsvPhase::InstallReady);
        // Waiting for an APIService to turn Available is no reason to apply again.
        let serving_drift = gathered.serving.rotating()
            || matches!(gathered.shortfall, Some(serving::Shortfall::Absent(_)));
        if first
            || serving_drift
            || drifted(&round, &gathered.built)
            || spread_missing(&ctx.rbac, &gathered.spread)
        {
            let strategy = csv.spec.install.spec.clone().unwrap_or_default();
            let mut rbac = gathered.spread.clone();
            rbac.extend(condition::plan(&gathered.owner, &strategy));
            let applied = install(
                &round,
                &rbac,
                &gathered.built,
                &gathered.serving_plan,
                gathered.scoped_account.as_deref(),
                !phase::never_installed(csv.status.as_ref()),
            )
            .await;
            if applied.is_ok() {
                certs = gathered.serving.status_times();
            }
            step = phase::after_install(step, applied);
        }
    }
    write_status(
        &round,
        current,
        &passed,
        &step,
        gathered.judged.statuses,
        certs,
    )
    .await?;
    if let GroupState::Member { .. } = &gathered.observed.group {
        // The copier reads the status back from the cache once the watch delivers it.
        let _ = ctx
            .copy_requests
            .send(ObjectRef::new(&round.name).within(&round.namespace));
    }
    if step.delete {
        delete_replaced(&round).await?;
    }
    Ok(step
        .requeue_after
        .map_or_else(Action::await_change, Action::requeue))
}

/// The cleanup finalizer, added once (as an own write: the next round must see it).
async fn ensure_finalizer(round: &Round<'_>) -> Result<(), Error> {
    if round.csv.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": ClusterServiceVersion::api_version(&()),
        "kind": ClusterServiceVersion::kind(&()),
        "metadata": { "name": round.name, "finalizers": [FINALIZER] },
    });
    let written = csv_api(round)
        .patch(
            &round.name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(round.fail("add_finalizer"))?;
    round.ctx.kit.own_writes.wrote(
        ObjectKey::of(&round.csv.metadata),
        written.metadata.resource_version.as_deref(),
    );
    Ok(())
}

/// What a round of the phase machine reads, and what the phase step observes of it.
struct Gathered {
    owner: deployment::Owner,
    /// The strategy's Deployments as OLM makes them (name, body).
    built: Vec<(String, Value)>,
    judged: requirements::Judged,
    observed: Observation,
    /// The certificates of the Deployments serving webhooks, and what to apply for them.
    serving: serving::Serving,
    serving_plan: serving::ServingPlan,
    /// What the cluster lacks of `serving_plan`.
    shortfall: Option<serving::Shortfall>,
    /// The group's `serviceAccountName`: the whole install is made as that account.
    scoped_account: Option<String>,
    /// The CSV's Roles and RoleBindings copied or lifted to its group's other targets.
    spread: Vec<rbac::Planned>,
}

/// The gather step: the group, the Deployments to make and their health, the requirements,
/// and the CSVs this one replaces or is replaced by.
async fn gather(round: &Round<'_>) -> Result<Gathered, Error> {
    let (csv, ctx) = (round.csv, round.ctx);
    let (group, group_state) = group_of(round);
    let targets = match &group_state {
        GroupState::Member { targets, .. } => targets.clone(),
        _ => vec![],
    };
    let owner = deployment::Owner {
        csv: round.name.clone(),
        namespace: round.namespace.clone(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
        annotations: pod_annotations(csv, group.as_ref(), &targets),
        operator_labels: csv
            .labels()
            .iter()
            .filter(|(key, _)| key.starts_with(OPERATOR_LABEL_PREFIX))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    };
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
    let found = gather_requirements(round).await?;
    let judged = requirements::judge(csv, &found);
    let spread = ctx.rbac.spread(&owner, &targets, &serving_plan);
    let related = |name: &str| {
        ctx.csvs
            .get(&ObjectRef::new(name).within(&round.namespace))
            .and_then(|g| g.0.as_ref().ok().cloned())
    };
    let replaces = csv
        .spec
        .replaces
        .as_deref()
        .filter(|r| !r.is_empty() && *r != round.name)
        .and_then(related)
        .map(|old| Related {
            name: old.name_any(),
            phase: old.status.and_then(|s| s.phase).unwrap_or_default(),
        });
    let not_upgradeable = match (&replaces, csv.status.as_ref().and_then(|s| s.phase)) {
        (Some(old), None | Some(CsvPhase::Pending | CsvPhase::None)) => {
            let conditions: Api<crate::api::OperatorCondition> =
                Api::namespaced(round.client(), &round.namespace);
            conditions
                .get_opt(&old.name)
                .await
                .map_err(round.fail("read_operator_condition"))?
                .and_then(|condition| crate::api::upgradeable(&condition).err())
        }
        _ => None,
    };
    let replaced_by = ctx
        .csvs
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .find(|other| {
            other.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                && other.spec.replaces.as_deref() == Some(round.name.as_str())
                && other.metadata.deletion_timestamp.is_none()
        })
        .map(|new| Related {
            name: new.name_any(),
            phase: new
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .unwrap_or_default(),
        });
    let healths: Vec<Health> = built
        .iter()
        .map(|(name, body)| {
            let found = ctx
                .deployments
                .get(&ObjectRef::new(name).within(&round.namespace));
            deployment::health(
                name,
                found.as_deref(),
                &round.name,
                deployment::spec_hash(body),
            )
        })
        .collect();
    let mut health = if built.is_empty() && strategy_problem.is_none() {
        Health::Ready
    } else {
        deployment::combined(healths)
    };
    let serving_missing = shortfall.as_ref().map(|s| s.message().to_string());
    if let (Health::Ready, Some(missing)) = (&health, &serving_missing) {
        health = Health::NotReady(missing.clone());
    }
    let observed = Observation {
        group: group_state,
        health,
        strategy_problem,
        webhook_problem: serving.problem.clone(),
        owner_conflict: serving.owner_conflict.clone(),
        not_upgradeable,
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
            .and_then(crate::controllers::scoped::service_account)
            .map(str::to_string),
        spread,
    })
}

/// Whether a Deployment the strategy lists is missing, not ours, or not what we would make.
fn drifted(round: &Round<'_>, built: &[(String, Value)]) -> bool {
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

/// Whether a copy or lift of the CSV's RBAC is not in the caches (a target namespace came,
/// or someone deleted one).
fn spread_missing(stores: &RbacStores, spread: &[rbac::Planned]) -> bool {
    spread.iter().any(|p| {
        let (ns, name) = (p.namespace.as_deref(), p.name.as_str());
        match p.kind {
            "Role" => !cached(&stores.roles, ns, name),
            "RoleBinding" => !cached(&stores.role_bindings, ns, name),
            "ClusterRole" => !cached(&stores.cluster_roles, ns, name),
            _ => !cached(&stores.cluster_role_bindings, ns, name),
        }
    })
}

fn cached<K>(store: &Store<K>, namespace: Option<&str>, name: &str) -> bool
where
    K: kube::runtime::reflector::Lookup<DynamicType = ()> + Clone + 'static,
{
    let at = ObjectRef::<K>::new(name);
    store
        .get(&match namespace {
            Some(ns) => at.within(ns),
            None => at,
        })
        .is_some()
}

/// A replaced CSV whose replacement succeeded goes.
async fn delete_replaced(round: &Round<'_>) -> Result<(), Error> {
    match csv_api(round)
        .delete(&round.name, &DeleteParams::default())
        .await
    {
        Ok(_) => {
            tracing::info!(csv = %round.name, namespace = %round.namespace, "deleted the replaced ClusterServiceVersion");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(round.fail("delete_replaced")(error)),
    }
}

fn csv_api(round: &Round) -> Api<ClusterServiceVersion> {
    Api::namespaced(round.client(), &round.namespace)
}

/// The CSV's OperatorGroup and what it means for the install modes.
fn group_of(round: &Round) -> (Option<OperatorGroup>, GroupState) {
    let groups: Vec<OperatorGroup> = round
        .ctx
        .groups
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|g| g.metadata.namespace.as_deref() == Some(round.namespace.as_str()))
        .cloned()
        .collect();
    match groups.as_slice() {
        [] => (None, GroupState::NoGroup),
        [group] => {
            let state = match &group.status {
                None => GroupState::Waiting,
                Some(status) if status.namespaces.is_empty() && status.last_updated.is_none() => {
                    GroupState::Waiting
                }
                Some(status) if status.namespaces.is_empty() => GroupState::NoTargets,
                Some(status) => match check_install_modes(
                    &round.csv.spec.install_modes,
                    &round.namespace,
                    &status.namespaces,
                ) {
                    // A copy only mirrors its source: its APIs are the source's.
                    Ok(()) if round.csv.is_copy() => GroupState::Member {
                        group: group.name_any(),
                        targets: status.namespaces.clone(),
                    },
                    Ok(()) => match owner_conflict(round, &status.namespaces) {
                        Some(message) => GroupState::OwnerConflict(message),
                        None if conflicts::static_group_refuses(round.csv, group) => {
                            GroupState::StaticApis
                        }
                        None => GroupState::Member {
                            group: group.name_any(),
                            targets: status.namespaces.clone(),
                        },
                    },
                    Err(message) => GroupState::Unsupported(message),
                },
            };
            (Some(group.clone()), state)
        }
        many => (None, GroupState::TooMany(many.len())),
    }
}

/// Another group meeting this CSV's targets that provides one of its APIs first.
fn owner_conflict(round: &Round, targets: &[String]) -> Option<String> {
    // Every watched namespace counts, not only this scope's.
    let scopes = round.ctx.shared.informers.cluster.scopes();
    let groups: Vec<_> = scopes
        .iter()
        .flat_map(|s| s.operator_groups.store().state())
        .collect();
    let csvs: Vec<_> = scopes.iter().flat_map(|s| s.csvs.store().state()).collect();
    conflicts::owner_conflict(
        round.csv,
        &round.namespace,
        targets,
        groups.iter().filter_map(|g| g.0.as_ref().ok()),
        csvs.iter().filter_map(|c| c.0.as_ref().ok()),
    )
}

/// The CSV's annotations plus the group's (computed here rather than read back from the
/// CSV, so a Deployment never starts with stale target namespaces).
fn pod_annotations(
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
fn subscription_config(round: &Round) -> Option<SubscriptionConfig> {
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
fn build_deployments(
    csv: &ClusterServiceVersion,
    owner: &deployment::Owner,
    config: Option<&SubscriptionConfig>,
    mounts: &BTreeMap<String, webhooks::Mount>,
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
            Err(problem) => return (vec![], Some(problem)),
        }
    }
    (built, None)
}

/// Which version of a CRD a [`requirements::CrdState`] was read from.
#[derive(Debug, PartialEq)]
struct CrdReadAt {
    resource_version: String,
    uid: Option<String>,
    generation: Option<i64>,
}

impl CrdReadAt {
    fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        CrdReadAt {
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            generation: meta.generation,
        }
    }

    /// Whether `state`, read at `self`, still holds for the CRD now watched at `now`: the
    /// same version; or, once read Established with its names accepted, the same CRD and
    /// spec (generation). A CRD that many installs share changes with every install (its
    /// labels and alongside annotations), and reading it again each time was, for a
    /// thousand installs, thousands of GETs of an object grown to hundreds of KiB.
    fn still_holds(&self, state: &requirements::CrdState, now: &CrdReadAt) -> bool {
        self == now
            || (state.established
                && state.names_accepted
                && self.uid == now.uid
                && self.generation == now.generation)
    }
}

/// One CRD as the requirements see it: from the cache of GETs while it still holds
/// ([`CrdReadAt::still_holds`]), else read again (None: absent).
async fn crd_state(
    round: &Round<'_>,
    crds: &Api<CustomResourceDefinition>,
    name: &str,
) -> Result<Option<requirements::CrdState>, Error> {
    let watched = round
        .ctx
        .crd_meta
        .get(&ObjectRef::new(name))
        .map(|m| CrdReadAt::of(&m.metadata));
    let states = || {
        round
            .ctx
            .crd_states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(now) = &watched
        && let Some((read_at, state)) = states().get(name)
        && read_at.still_holds(state, now)
    {
        return Ok(Some(state.clone()));
    }
    let Some(crd) = crds.get_opt(name).await.map_err(round.fail("read_crd"))? else {
        states().remove(name);
        return Ok(None);
    };
    let conditions = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let is_true = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && ConditionStatus::True.is(&c.status))
    };
    let state = requirements::CrdState {
        uid: crd.metadata.uid.clone().unwrap_or_default(),
        established: is_true("Established"),
        names_accepted: is_true("NamesAccepted"),
        served_versions: crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect(),
    };
    if crd.metadata.resource_version.is_some() {
        states().insert(
            name.to_string(),
            (CrdReadAt::of(&crd.metadata), state.clone()),
        );
    }
    Ok(Some(state))
}

async fn gather_requirements(round: &Round<'_>) -> Result<requirements::Found, Error> {
    let csv = round.csv;
    let crds: Api<CustomResourceDefinition> = Api::all(round.client());
    let mut found = requirements::Found::default();
    let descriptions = csv
        .spec
        .customresourcedefinitions
        .clone()
        .unwrap_or_default();
    for (list, out) in [
        (&descriptions.owned, &mut found.owned),
        (&descriptions.required, &mut found.required),
    ] {
        for description in list {
            out.push(crd_state(round, &crds, &description.name).await?);
        }
    }
    let requires_crds = !descriptions.required.is_empty();
    if requires_crds && phase::never_installed(csv.status.as_ref()) {
        let state = round.ctx.csvs.state();
        let others = state
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .filter(|other| {
                other.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                    && other.metadata.name.as_deref() != Some(round.name.as_str())
            });
        found.providers_pending = requirements::providers_pending(csv, others);
    }
    for gvk in &csv.spec.native_apis {
        let group_version = if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        };
        let resources = if gvk.group.is_empty() {
            round.client().list_core_api_resources(&gvk.version).await
        } else {
            round
                .client()
                .list_api_group_resources(&group_version)
                .await
        };
        found.native.push(
            resources
                .map(|list| list.resources.iter().any(|r| r.kind == gvk.kind))
                .unwrap_or(false),
        );
    }
    if csv.spec.min_kube_version.is_some() {
        let version = round
            .ctx
            .server_version
            .get_or_try_init(|| async {
                round
                    .client()
                    .apiserver_version()
                    .await
                    .map(|info| info.git_version)
            })
            .await
            .map_err(round.fail("read_server_version"))?;
        found.server_version = Some(version.clone());
    }
    let required_api_services = csv
        .spec
        .apiservicedefinitions
        .as_ref()
        .map(|d| d.required.clone())
        .unwrap_or_default();
    if !required_api_services.is_empty() {
        let api: Api<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService> =
            Api::all(round.client());
        for description in required_api_services {
            let name = format!("{}.{}", description.version, description.group);
            let found_service = api
                .get_opt(&name)
                .await
                .map_err(round.fail("read_api_service"))?;
            found
                .required_api_services
                .push(found_service.and_then(|a| {
                    let available = a
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter()
                                .any(|c| c.type_ == "Available" && c.status == "True")
                        });
                    available.then(|| a.metadata.uid.clone().unwrap_or_default())
                }));
        }
    }
    let strategy = csv.spec.install.spec.clone().unwrap_or_default();
    let mut accounts: Vec<String> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.clone())
        .collect();
    accounts.sort();
    accounts.dedup();
    let sa_api: Api<ServiceAccount> = Api::namespaced(round.client(), &round.namespace);
    let stores = &round.ctx.rbac;
    let (roles, role_bindings) = (stores.roles.state(), stores.role_bindings.state());
    let (cluster_roles, cluster_role_bindings) = (
        stores.cluster_roles.state(),
        stores.cluster_role_bindings.state(),
    );
    let view = crate::controllers::authz::RbacView {
        roles: &roles,
        role_bindings: &role_bindings,
        cluster_roles: &cluster_roles,
        cluster_role_bindings: &cluster_role_bindings,
    };
    for sa in accounts {
        let cached = round
            .ctx
            .service_accounts
            .get(&ObjectRef::new(&sa).within(&round.namespace))
            .map(|m| PartialObjectMeta::clone(&m));
        let exists = sa == "default"
            || match cached {
                Some(_) => true,
                None => sa_api
                    .get_metadata_opt(&sa)
                    .await
                    .map_err(round.fail("read_service_account"))?
                    .is_some(),
            };
        found.service_accounts.push(account_found(
            &view,
            &strategy,
            &round.namespace,
            sa,
            exists,
        ));
    }
    Ok(found)
}

/// Which of the rules `strategy` declares for `sa` the account holds: namespaced rules in
/// the CSV's `namespace`, cluster rules cluster-wide (upstream's `permissionStatus`).
fn account_found(
    view: &crate::controllers::authz::RbacView<'_>,
    strategy: &crate::api::StrategyDetailsDeployment,
    namespace: &str,
    sa: String,
    exists: bool,
) -> requirements::AccountFound {
    use crate::controllers::authz::{Account, Grants};
    let account = Account {
        namespace,
        name: &sa,
    };
    let held = |scope: Option<&str>, list: &[crate::api::StrategyDeploymentPermissions]| {
        let grants = Grants::of(view, account, scope);
        requirements::rules_of(list, &sa)
            .map(|rule| grants.allows(rule))
            .collect::<Vec<bool>>()
    };
    let namespaced = held(Some(namespace), &strategy.permissions);
    let cluster = held(None, &strategy.cluster_permissions);
    requirements::AccountFound {
        name: sa.clone(),
        exists,
        namespaced,
        cluster,
    }
}

fn resource_of(kind: &str) -> ApiResource {
    match kind {
        "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
        "Role" => ApiResource::erase::<Role>(&()),
        "RoleBinding" => ApiResource::erase::<RoleBinding>(&()),
        "ClusterRole" => ApiResource::erase::<ClusterRole>(&()),
        "ClusterRoleBinding" => ApiResource::erase::<ClusterRoleBinding>(&()),
        "ClusterServiceVersion" => ApiResource::erase::<ClusterServiceVersion>(&()),
        "OperatorCondition" => ApiResource::erase::<crate::api::OperatorCondition>(&()),
        "APIService" => ApiResource::erase::<
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        >(&()),
        "Secret" => ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
        "Service" => ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
        "CustomResourceDefinition" => ApiResource::erase::<CustomResourceDefinition>(&()),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => ApiResource::from_gvk(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        ),
        _ => ApiResource::erase::<Deployment>(&()),
    }
}

fn dynamic_api(client: kube::Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = resource_of(kind);
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    }
}

fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Applies the RBAC, then the Deployments, then (with `sweep`) deletes what this CSV made
/// before and no longer lists. Each group's requests go out together: they do not depend on
/// each other (a binding may name a Role that is still being written). `Err` carries the API
/// server's message for the CSV.
async fn install(
    round: &Round<'_>,
    rbac: &[rbac::Planned],
    deployments: &[(String, Value)],
    serving: &serving::ServingPlan,
    scoped_account: Option<&str>,
    sweep: bool,
) -> Result<(), String> {
    // A scoped group's install is written as its account, every object of it (upstream's
    // attenuated install strategy): the group's admin bounds what its operators get.
    let client = match scoped_account {
        Some(account) => round
            .ctx
            .scoped
            .acting_as(&round.namespace, account)
            .await
            .map_err(|e| e.to_string())?,
        None => round.client(),
    };
    // Objects OLM made from the CSV are the CSV's: take fields over from anyone else.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // The serving certificate, its Service and RBAC before the pods that mount it.
    apply_planned(&client, &params, &serving.before).await?;
    apply_planned(&client, &params, rbac).await?;
    futures::future::try_join_all(deployments.iter().map(|(name, body)| {
        let api = dynamic_api(client.clone(), "Deployment", Some(&round.namespace));
        let params = &params;
        async move {
            api.patch(name, params, &Patch::Apply(body))
                .await
                .map_err(|e| format!("Deployment {name}: {}", api_message(&e)))
        }
    }))
    .await?;
    apply_planned(&client, &params, &serving.after).await?;
    futures::future::try_join_all(serving.conversions.iter().map(|(crd, conversion)| {
        let api = dynamic_api(client.clone(), "CustomResourceDefinition", None);
        let params = &params;
        let body = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": crd },
            "spec": { "conversion": conversion },
        });
        async move {
            api.patch(crd, params, &Patch::Apply(&body))
                .await
                .map_err(|e| format!("conversion webhook of CRD {crd}: {}", api_message(&e)))
        }
    }))
    .await?;
    if !sweep {
        return Ok(());
    }
    let mut desired: HashSet<(String, Option<String>, String)> = rbac
        .iter()
        .chain(&serving.before)
        .chain(&serving.after)
        .map(|p| (p.kind.into(), p.namespace.clone(), p.name.clone()))
        .collect();
    desired.extend(deployments.iter().map(|(name, _)| {
        (
            "Deployment".into(),
            Some(round.namespace.clone()),
            name.clone(),
        )
    }));

    // Garbage: what carries this CSV's owner labels but is no longer planned.
    let selector = owner_selector("ClusterServiceVersion", &round.name, &round.namespace);
    let mut kinds = vec![
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ];
    // Only CSVs that serve webhooks or API services (now or before an update) made these.
    if webhooks::serves_anything(round.csv)
        || round
            .csv
            .status
            .as_ref()
            .is_some_and(|s| s.certs_last_updated.is_some())
    {
        kinds.extend([
            "Service",
            "Secret",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "APIService",
        ]);
    }
    // What this CSV made is OLM's to find and remove, whoever it was written as.
    let client = round.client();
    let listed = futures::future::try_join_all(kinds.iter().map(|&kind| {
        let scope =
            matches!(kind, "Deployment" | "Service" | "Secret").then_some(round.namespace.as_str());
        let api = dynamic_api(client.clone(), kind, scope);
        let params = ListParams::default().labels(&selector);
        async move {
            api.list_metadata(&params)
                .await
                .map(|list| (kind, list.items))
                .map_err(|e| format!("listing {kind}s: {}", api_message(&e)))
        }
    }))
    .await?;
    for (kind, items) in listed {
        for object in items {
            let key = (
                kind.to_string(),
                object.metadata.namespace.clone(),
                object.name_any(),
            );
            // Only what this controller wrote: a user's object that carries the CSV's owner
            // labels (upstream's tests label their own Roles so) is not ours to delete.
            let written_by_us = object
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER));
            if desired.contains(&key) || !written_by_us || adopted_grant(&object.metadata) {
                continue;
            }
            let api = dynamic_api(client.clone(), kind, object.metadata.namespace.as_deref());
            match api
                .delete(&object.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {
                    tracing::info!(kind, name = %object.name_any(), csv = %round.name, "deleted what the CSV no longer lists");
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => {
                    return Err(format!(
                        "deleting {kind} {}: {}",
                        object.name_any(),
                        api_message(&e)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// RBAC of a CSV's permissions that this controller made when it still made it (before
/// plans did): kept as it stands, the account's grant, until the CSV goes. Its copies and
/// lifts are this controller's to remove.
fn adopted_grant(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    let labels = meta.labels.as_ref();
    let has = |key: &str| labels.is_some_and(|l| l.contains_key(key));
    has(super::ownership::PERMISSIONS_HASH_LABEL)
        && !has(crate::api::COPIED_FROM_LABEL)
        && !has(rbac::LIFTED_LABEL)
}

/// Applies `planned` all at once: they do not depend on each other (a binding may name a
/// Role that is still being written). `Err` carries the API server's message.
async fn apply_planned(
    client: &kube::Client,
    params: &PatchParams,
    planned: &[rbac::Planned],
) -> Result<(), String> {
    futures::future::try_join_all(planned.iter().map(|planned| {
        let api = dynamic_api(client.clone(), planned.kind, planned.namespace.as_deref());
        async move {
            api.patch(&planned.name, params, &Patch::Apply(&planned.body))
                .await
                .map_err(|e| format!("{} {}: {}", planned.kind, planned.name, api_message(&e)))
        }
    }))
    .await
    .map(drop)
}

/// The status fields this controller writes (cleanup is not its own).
fn owned_fields(status: &ClusterServiceVersionStatus) -> ClusterServiceVersionStatus {
    ClusterServiceVersionStatus {
        cleanup: None,
        ..status.clone()
    }
}

/// Writes the status `step` leads to from `current` (the object's status, or where the
/// `passed` steps took it this round); nothing when it is unchanged.
async fn write_status(
    round: &Round<'_>,
    current: Option<&ClusterServiceVersionStatus>,
    passed: &[Step],
    step: &Step,
    requirement_status: Vec<crate::api::RequirementStatus>,
    certs: Option<(Timestamp, Timestamp)>,
) -> Result<(), Error> {
    let mut desired = phase::next_status(current, step, requirement_status, now());
    if let Some((issued, rotate_at)) = certs {
        desired.certs_last_updated =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(issued));
        desired.certs_rotate_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            rotate_at,
        ));
    }
    let stored = round.csv.status.as_ref();
    if stored.map(owned_fields) == Some(owned_fields(&desired)) {
        return Ok(());
    }
    apply_status(round.ctx, round.csv, &owned_fields(&desired))
        .await
        .map_err(round.fail("write_status"))?;
    for passed in passed {
        transition_event(round, passed);
    }
    if phase::is_transition(current, step) {
        transition_event(round, step);
        // The CSVs this one replaces or is replaced by wait on its phase.
        let mut related: Vec<String> = round.csv.spec.replaces.iter().cloned().collect();
        related.extend(
            round
                .ctx
                .csvs
                .state()
                .iter()
                .filter_map(|g| g.0.as_ref().ok())
                .filter(|o| {
                    o.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                        && o.spec.replaces.as_deref() == Some(round.name.as_str())
                })
                .map(kube::ResourceExt::name_any),
        );
        // A `replaces` that was never installed (a fresh install) has nothing to wake.
        related.retain(|name| {
            round
                .ctx
                .csvs
                .get(&ObjectRef::new(name).within(&round.namespace))
                .is_some()
        });
        for name in related {
            let _ = round
                .ctx
                .related
                .send(ObjectRef::new(&name).within(&round.namespace));
        }
    }
    Ok(())
}

/// The Event of one phase transition.
fn transition_event(round: &Round<'_>, step: &Step) {
    let type_ = if step.phase == CsvPhase::Failed {
        EventType::Warning
    } else {
        EventType::Normal
    };
    round.ctx.shared.event(
        &round.csv.object_ref(&()),
        type_,
        step.reason.as_str(),
        "Sync",
        format!("{:?}: {}", step.phase, step.message),
    );
}

/// Deletes what owner references cannot: cluster-scoped RBAC, RBAC in other namespaces, and
/// the copies; then releases the finalizer. CRDs and custom resources are never touched.
async fn cleanup(round: &Round<'_>) -> Result<(), Error> {
    if !round.csv.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let client = round.client();
    let selector = owner_selector("ClusterServiceVersion", &round.name, &round.namespace);
    for kind in [
        "ClusterRoleBinding",
        "ClusterRole",
        "RoleBinding",
        "Role",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
    ] {
        let api = dynamic_api(client.clone(), kind, None);
        let listed = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(round.fail("list_for_cleanup"))?;
        for object in listed.items {
            let api = dynamic_api(client.clone(), kind, object.metadata.namespace.as_deref());
            match api
                .delete(&object.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(error) => return Err(round.fail("cleanup")(error)),
            }
        }
    }
    // Conversion goes back to None, unless a CSV replacing this one serves it now.
    let replaced = round.ctx.csvs.state().iter().any(|g| {
        g.0.as_ref().is_ok_and(|other| {
            other.metadata.namespace.as_deref() == Some(round.namespace.as_str())
                && other.spec.replaces.as_deref() == Some(round.name.as_str())
        })
    });
    if !replaced {
        let crds = dynamic_api(client.clone(), "CustomResourceDefinition", None);
        for (crd, _) in webhooks::conversions(round.csv, &round.namespace, &BTreeMap::new()) {
            // A merge patch drops the whole webhook (other managers own parts of it too,
            // and None with any webhook field left is invalid).
            let patch = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
            if let Err(error) = crds
                .patch(&crd, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!(%error, crd, "cannot set the conversion of a deleted CSV's CRD to None");
            }
        }
    }
    for copy in round
        .ctx
        .csv_names
        .copies(Some((&round.namespace, &round.name)))
    {
        copier::delete_copy(client.clone(), &copy.namespace, &round.name)
            .await
            .map_err(round.fail("delete_copy"))?;
    }
    // Only ours goes; the resourceVersion makes a concurrent change a conflict, not a loss.
    let remaining: Vec<&String> = round
        .csv
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .collect();
    let patch = json!({
        "metadata": {
            "finalizers": remaining,
            "resourceVersion": round.csv.resource_version(),
        }
    });
    match csv_api(round)
        .patch(&round.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => return Err(round.fail("remove_finalizer")(error)),
    }
    tracing::info!(csv = %round.name, namespace = %round.namespace, "cleaned up after a deleted ClusterServiceVersion");
    Ok(())
}

type CsvRef = ObjectRef<DeserializeGuard<ClusterServiceVersion>>;

fn csvs_where(
    csvs: &Store<DeserializeGuard<ClusterServiceVersion>>,
    keep: impl Fn(&ClusterServiceVersion) -> bool,
) -> Vec<CsvRef> {
    csvs.state()
        .iter()
        .filter(|g| g.0.as_ref().is_ok_and(&keep))
        .map(|g| ObjectRef::from_obj(g.as_ref()))
        .collect()
}

pub async fn run(shared: Arc<Context>, shutdown: Shutdown) {
    let informers = &shared.informers;
    let (groups, group_changes) = informers.operator_groups.subscribe_touched();
    let (deployments, deployment_changes) = watch_owned::<Deployment>(kit::scoped_api(&shared));
    let (service_accounts, account_changes) =
        watch_owned::<PartialObjectMeta<ServiceAccount>>(kit::scoped_api(&shared));
    let (namespaces, namespace_changes) = informers.cluster.namespaces.subscribe_touched();
    let (csv_names, changed_copies) = copier::watch_csv_names(shared.client.clone());
    let (subscriptions, subscription_changes) = informers.subscriptions.subscribe_touched();
    let (crd_meta, crd_changes) = informers.cluster.crds.subscribe_touched();
    // The shared CSV informer leaves copies out (the copier watches every CSV's name above).
    let (csvs, csv_changes) = informers.csvs.subscribe_touched();
    // A replaced CSV moves on when its replacement's phase does. Its round must read the
    // replacement from the cache, so the cache's own change triggers it: a wake-up sent
    // right after the replacement's status write could find the cache a step behind, and
    // leave the old CSV Replacing until something else moved.
    let (_, replacement_changes) = informers.csvs.subscribe_touched();
    // A CSV waiting for the CSV that provides a CRD it requires goes on when that one moves.
    let (_, provider_changes) = informers.csvs.subscribe_touched();
    let (rbac, rbac_wakes) = rbac_watch(&informers.cluster.rbac);
    let (related_tx, related_rx) = mpsc::unbounded_channel();
    let (copy_tx, copy_rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(CsvContext {
        shared: Arc::clone(&shared),
        kit: KitState::default(),
        csvs: csvs.clone(),
        groups: groups.clone(),
        deployments,
        service_accounts,
        namespaces,
        csv_names,
        subscriptions,
        crd_meta,
        crd_states: std::sync::Mutex::default(),
        server_version: OnceCell::new(),
        rbac,
        scoped: crate::controllers::scoped::ScopedClients::default(),
        related: related_tx,
        copy_requests: copy_tx,
    });
    let pruner = tokio::spawn(copier::prune_orphans(Arc::clone(&ctx)));
    let api_service_pruner = tokio::spawn(orphans::prune_api_services(Arc::clone(&ctx)));

    // The copier's queue: the phase machine's rounds, changes to copies, namespaces that
    // come or go (they change the copies of AllNamespaces operators).
    let copy_requests = futures::stream::select(
        tokio_stream::wrappers::UnboundedReceiverStream::new(copy_rx),
        futures::stream::select(
            changed_copies,
            copier::all_namespaces_sources(namespace_changes, groups, csvs.clone()),
        ),
    );
    let copier = tokio::spawn(copier::run(
        Arc::clone(&ctx),
        copy_requests,
        shutdown.clone(),
    ));

    let crd_triggers = CrdTriggers {
        ctx: Arc::clone(&ctx),
        generations: std::sync::Mutex::default(),
    };
    let (for_groups, for_crds, for_subs, for_replaced, for_conditions, for_dependents) = (
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
        csvs.clone(),
    );
    let controller = Controller::for_shared_stream(csv_changes, csvs)
        .watches_shared_stream(group_changes, move |group| {
            let ns = group.meta().namespace.clone();
            csvs_where(&for_groups, |csv| csv.metadata.namespace == ns)
        })
        .watches_stream(deployment_changes, |deployment: Deployment| {
            owner_csv(deployment.labels())
        })
        .reconcile_on(rbac_wakes)
        // An account of the CSV's that goes (or comes back) is a requirement that changed.
        .watches_stream(
            account_changes,
            |account: PartialObjectMeta<ServiceAccount>| owner_csv(account.labels()),
        )
        .watches_shared_stream(replacement_changes, move |csv| {
            let csv = csv.0.as_ref().ok()?;
            let replaces = csv.spec.replaces.as_deref().filter(|r| !r.is_empty())?;
            let old = ObjectRef::new(replaces).within(csv.metadata.namespace.as_deref()?);
            // Only a CSV that is there: the first of a chain replaces one long gone.
            for_replaced.get(&old).map(|_| old)
        })
        .watches_shared_stream(provider_changes, move |provider| {
            let Ok(provider) = provider.0.as_ref() else {
                return Vec::new();
            };
            let owned: Vec<&str> = provider
                .spec
                .customresourcedefinitions
                .iter()
                .flat_map(|c| c.owned.iter().map(|d| d.name.as_str()))
                .collect();
            if owned.is_empty() {
                return Vec::new();
            }
            let ns = provider.metadata.namespace.clone();
            csvs_where(&for_dependents, |csv| {
                csv.metadata.namespace == ns
                    && phase::never_installed(csv.status.as_ref())
                    && csv
                        .spec
                        .customresourcedefinitions
                        .as_ref()
                        .is_some_and(|c| {
                            c.required.iter().any(|d| owned.contains(&d.name.as_str()))
                        })
            })
        })
        // An owned APIService that becomes Available (or stops being) moves its CSV.
        .watches(
            Api::<
                PartialObjectMeta<
                    k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
                >,
            >::all(shared.client.clone()),
            watcher::Config::default()
                .labels(&format!("{OWNER_KIND_LABEL}=ClusterServiceVersion"))
                .any_semantic(),
            |service| owner_csv(service.labels()),
        )
        // An OperatorCondition that changes may release the CSV that replaces its own.
        .watches(
            kit::scoped_api::<DeserializeGuard<crate::api::OperatorCondition>>(&shared),
            watcher::Config::default().any_semantic(),
            move |condition| {
                let (name, ns) = (condition.name_any(), condition.namespace());
                csvs_where(&for_conditions, |csv| {
                    csv.metadata.namespace == ns && csv.spec.replaces.as_deref() == Some(&name)
                })
            },
        )
        .watches_shared_stream(subscription_changes, move |sub| {
            let ns = sub.meta().namespace.clone();
            csvs_where(&for_subs, |csv| csv.metadata.namespace == ns)
        })
        .watches_shared_stream(crd_changes, move |crd| {
            let name = crd.name_any();
            let wake = crd_triggers.wake(&crd);
            csvs_where(&for_crds, |csv| {
                let woken = match wake {
                    CrdWake::Everyone => true,
                    CrdWake::Unsettled => csv
                        .status
                        .as_ref()
                        .is_none_or(|s| s.phase != Some(CsvPhase::Succeeded)),
                    CrdWake::No => false,
                };
                woken
                    && csv
                        .spec
                        .customresourcedefinitions
                        .as_ref()
                        .is_some_and(|c| c.owned.iter().chain(&c.required).any(|d| d.name == name))
            })
        })
        .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(
            related_rx,
        ));
    kit::run(controller, ctx, shutdown).await;
    let _ = copier.await;
    pruner.abort();
    api_service_pruner.abort();
}

/// The shared RBAC caches, and the CSVs their changes wake: RBAC labelled as a CSV's (its
/// plan's steps, its copies) wakes that CSV; a grant made otherwise is seen by the
/// unmet-requirements backstop.
fn rbac_watch(
    informers: &crate::controllers::informers::RbacInformers,
) -> (
    RbacStores,
    impl futures::Stream<Item = ObjectRef<DeserializeGuard<ClusterServiceVersion>>> + Send + 'static,
) {
    use futures::StreamExt;
    fn wakes<K: kube::Resource + Send + Sync + 'static>(
        changes: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    ) -> futures::stream::BoxStream<'static, ObjectRef<DeserializeGuard<ClusterServiceVersion>>>
    {
        changes
            .flat_map(|o| {
                futures::stream::iter(owner_csv(
                    o.meta().labels.as_ref().unwrap_or(&BTreeMap::new()),
                ))
            })
            .boxed()
    }
    let (roles, role_changes) = informers.roles.subscribe_touched();
    let (role_bindings, role_binding_changes) = informers.role_bindings.subscribe_touched();
    let (cluster_roles, cluster_role_changes) = informers.cluster_roles.subscribe_touched();
    let (cluster_role_bindings, cluster_role_binding_changes) =
        informers.cluster_role_bindings.subscribe_touched();
    let stores = RbacStores {
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
    };
    let all = futures::stream::select_all([
        wakes(role_changes),
        wakes(role_binding_changes),
        wakes(cluster_role_changes),
        wakes(cluster_role_binding_changes),
    ]);
    (stores, all)
}

/// Which CSVs a CRD's change wakes. Every install annotates the CRDs it brings
/// (`installed-alongside`), so a CRD that a hundred operators own changes a hundred times in
/// a burst of installs; waking every owner each time re-ran every CSV's round (a GET of the
/// CRD and of its ServiceAccounts) dozens of times per install. The watch sees metadata
/// only, so what changed is told apart by what the CSVs last read of the CRD
/// ([`CsvContext::crd_states`]): every owner wakes when the CRD comes, goes or its spec
/// changes (its generation); the owners not yet Succeeded also wake on any other change
/// until a round has read the CRD Established with its names accepted (what they wait for);
/// after that, annotation and status churn wakes no one.
#[derive(Debug, PartialEq)]
enum CrdWake {
    Everyone,
    Unsettled,
    No,
}

struct CrdTriggers {
    ctx: Arc<CsvContext>,
    generations: std::sync::Mutex<HashMap<String, i64>>,
}

impl CrdTriggers {
    fn wake(&self, crd: &PartialObjectMeta<CustomResourceDefinition>) -> CrdWake {
        let name = crd.name_any();
        let mut generations = self
            .generations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.ctx.crd_meta.get(&ObjectRef::new(&name)).is_none() {
            generations.remove(&name);
            return crd_wake(false, false, false);
        }
        let generation = crd.metadata.generation.unwrap_or_default();
        let spec_changed = generations.insert(name.clone(), generation) != Some(generation);
        let read_ready = self
            .ctx
            .crd_states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&name)
            .is_some_and(|(_, state)| state.established && state.names_accepted);
        crd_wake(true, spec_changed, read_ready)
    }
}

/// [`CrdTriggers`]' decision: `present` in the watch, its generation new to us, and last
/// read Established with its names accepted.
fn crd_wake(present: bool, spec_changed: bool, read_ready: bool) -> CrdWake {
    match (present, spec_changed, read_ready) {
        (false, _, _) | (true, true, _) => CrdWake::Everyone,
        (true, false, false) => CrdWake::Unsettled,
        (true, false, true) => CrdWake::No,
    }
}

/// The CSV that `labels` name as their owner.
fn owner_csv(
    labels: &BTreeMap<String, String>,
) -> Vec<ObjectRef<DeserializeGuard<ClusterServiceVersion>>> {
    match (labels.get(OWNER_LABEL), labels.get(OWNER_NAMESPACE_LABEL)) {
        (Some(name), Some(ns)) => vec![ObjectRef::new(name).within(ns)],
        _ => vec![],
    }
}

/// The objects of kind `K` that OLM made for CSVs (labelled as a CSV's), without their
/// managed fields (a Deployment's are a few KiB, and only this controller reads them).
fn watch_owned<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let config = watcher::Config::default()
        .any_semantic()
        .labels(&format!("{OWNER_KIND_LABEL}=ClusterServiceVersion"));
    let objects = watcher(api, config).modify(|o: &mut K| o.meta_mut().managed_fields = None);
    let changes = reflector::reflector(writer, objects)
        .default_backoff()
        .touched_objects();
    (store, changes)
}

#[cfg(test)]
mod tests {
    use super::{CrdReadAt, CrdWake, adopted_grant, crd_wake, rbac, requirements::CrdState};

    #[test]
    fn rbac_made_before_plans_made_it_is_kept_and_only_copies_and_lifts_are_swept() {
        let meta =
            |labels: &[(&str, &str)]| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            };
        let hash = (crate::controllers::ownership::PERMISSIONS_HASH_LABEL, "h");
        // The account's grant, made by this controller before plans made RBAC: adopted.
        assert!(adopted_grant(&meta(&[hash])));
        // Its copies and lifts, and the serving certificate's RBAC (no hash): this
        // controller's to remove when no longer planned.
        assert!(!adopted_grant(&meta(&[
            hash,
            (crate::api::COPIED_FROM_LABEL, "op")
        ])));
        assert!(!adopted_grant(&meta(&[hash, (rbac::LIFTED_LABEL, "true")])));
        assert!(!adopted_grant(&meta(&[])));
    }

    #[test]
    fn a_crd_read_ready_is_not_read_again_for_metadata_churn() {
        let at = |rv: &str, uid: &str, generation| CrdReadAt {
            resource_version: rv.into(),
            uid: Some(uid.into()),
            generation: Some(generation),
        };
        let state = |ready| CrdState {
            uid: "u".into(),
            established: ready,
            names_accepted: ready,
            served_versions: vec!["v1".into()],
        };
        let read = at("10", "u", 1);
        // The version read: holds, ready or not.
        assert!(read.still_holds(&state(false), &at("10", "u", 1)));
        // Labels or annotations written since: holds once it was read ready.
        assert!(read.still_holds(&state(true), &at("11", "u", 1)));
        assert!(!read.still_holds(&state(false), &at("11", "u", 1)));
        // A new spec, or another CRD of the same name: read again.
        assert!(!read.still_holds(&state(true), &at("12", "u", 2)));
        assert!(!read.still_holds(&state(true), &at("13", "other", 1)));
    }

    #[test]
    fn annotation_churn_wakes_no_one_once_the_crd_was_read_ready() {
        // Gone, or a new spec: every owner re-checks.
        assert_eq!(crd_wake(false, false, true), CrdWake::Everyone);
        assert_eq!(crd_wake(true, true, true), CrdWake::Everyone);
        // Another change before any round saw it Established: those still waiting.
        assert_eq!(crd_wake(true, false, false), CrdWake::Unsettled);
        // After: an annotation or status write wakes no one.
        assert_eq!(crd_wake(true, false, true), CrdWake::No);
    }
}
