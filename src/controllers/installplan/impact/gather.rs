//! What the preview reads: each step's object (a plan too large for etcd carries some by
//! reference to its catalog), the CSVs they replace, the CRDs they change with the custom
//! resources a new schema must accept, which objects exist, and the cluster's RBAC.
//!
//! Nearly everything comes from the shared informers, so a first install costs about
//! one request beyond the status write: a GET for what no informer holds (a ServiceAccount
//! OLM did not label, a Service or ConfigMap of the bundle). CRDs are read whole only when
//! they exist and may differ; custom resources only for a version whose schema changes.
//! An upgrade also reads whole, one GET each, the existing objects it writes over that no
//! cache holds (RBAC comes from the caches), to say whether their content changes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::reflector::{ObjectRef as CacheRef, Store};
use serde_json::{Value, json};

use super::crds::{self, CrdFound, OnCluster};
use super::decide::{self, Found};
use super::made::Group;
use super::rbac::Rbac;
use crate::api::{ClusterServiceVersion, ObjectRef, Step};
use crate::cluster::informers::Informers;
use crate::controllers::installplan::admit::step_gvk;
use crate::controllers::installplan::apply::existing_resources;
use crate::controllers::installplan::context::InstallPlanContext;
use crate::controllers::installplan::crd_write::{self, CrdWrite};
use crate::controllers::installplan::decide::established;
use crate::controllers::installplan::error::{Disposition, StepError};
use crate::controllers::installplan::execute::groups_in;
use crate::controllers::installplan::step;
use crate::controllers::kit::cache_ready::listed;
use crate::controllers::plan::steps::{KIND_CRD, KIND_CSV};

/// How long a round waits for the shared caches to list (at start-up); then it is retried.
const LISTED_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// A step's object could not be had (its manifest, or its bundle from the catalog).
    #[error(transparent)]
    Step(Box<StepError>),
    #[error("ClusterServiceVersion {name} of the plan does not parse: {source}")]
    Csv {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// The shared caches have not listed yet (their watches are retrying).
    #[error("the shared caches have not listed the cluster within {0:?}")]
    NotListed(Duration),
    #[error("reading {what}: {source}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl PreviewError {
    /// Whether trying again may succeed (the API server or the catalog busy or away).
    pub fn transient(&self) -> bool {
        match self {
            PreviewError::Step(e) => e.disposition() != Disposition::Refuse,
            PreviewError::Csv { .. } => false,
            PreviewError::NotListed(_) => true,
            PreviewError::Read {
                source: kube::Error::Api(status),
                ..
            } => status.code == 429 || status.code >= 500,
            PreviewError::Read { .. } => true,
        }
    }
}

impl From<StepError> for PreviewError {
    fn from(error: StepError) -> Self {
        PreviewError::Step(Box::new(error))
    }
}

fn read(what: impl Into<String>) -> impl FnOnce(kube::Error) -> PreviewError {
    let what = what.into();
    move |source| PreviewError::Read { what, source }
}

/// Starts the informers the preview reads, so that their caches fill even where no other
/// controller reads them (the change streams are not needed: dropped at once).
pub fn start(informers: &Informers) {
    drop(informers.csvs.subscribe());
    drop(informers.subscriptions.subscribe());
    drop(informers.owned_deployments.subscribe());
    drop(informers.owned_service_accounts.subscribe());
    let cluster = &informers.cluster;
    drop(cluster.crds.subscribe());
    drop(cluster.rbac.roles.subscribe());
    drop(cluster.rbac.role_bindings.subscribe());
    drop(cluster.rbac.cluster_roles.subscribe());
    drop(cluster.rbac.cluster_role_bindings.subscribe());
}

/// Everything the preview of `steps` in `namespace` needs.
pub async fn gather(
    steps: &[Step],
    namespace: &str,
    ctx: &InstallPlanContext,
) -> Result<Found, PreviewError> {
    let informers = &ctx.shared.informers;
    tokio::time::timeout(LISTED_WAIT, wait_listed(informers))
        .await
        .map_err(|_| PreviewError::NotListed(LISTED_WAIT))?;
    let mut objects = Vec::with_capacity(steps.len());
    for s in steps {
        let mut object = step::object_of(s, namespace, ctx).await?;
        // Hand-written manifests may leave out what the step's resource says.
        let gvk = step_gvk(&s.resource, &object);
        object["apiVersion"] = json!(gvk.api_version());
        object["kind"] = json!(gvk.kind);
        object["metadata"]["name"] = json!(s.resource.name);
        objects.push(object);
    }
    let csvs = replaced_csvs(steps, &objects, namespace, informers)?;
    let mut crds = Vec::new();
    for (s, object) in steps.iter().zip(&objects) {
        if s.resource.kind == KIND_CRD {
            crds.push(crd_found(object, ctx).await?);
        }
    }
    let group = namespace_group(namespace, ctx).await;
    let targets = group
        .as_ref()
        .and_then(|g| Some(g.group.status.as_ref()?.namespaces.clone()));
    let touched = decide::touched(
        &objects,
        &csvs,
        namespace,
        targets.as_deref(),
        group.as_ref(),
    );
    let mut existing = BTreeSet::new();
    for r in touched.written.iter().chain(&touched.going) {
        if exists(r, ctx).await? {
            existing.insert(r.clone());
        }
    }
    // Only an upgrade reads what it writes over (a first install finds nothing there, and
    // what it shares with other installs counts as updated unread).
    let upgrade = csvs.iter().any(|(_, old)| old.is_some());
    let mut live = BTreeMap::new();
    for r in touched.written.iter().filter(|r| existing.contains(*r)) {
        if let Some(object) = live_object(r, upgrade, ctx).await? {
            live.insert(r.clone(), object);
        }
    }
    let rbac = &informers.cluster.rbac;
    Ok(Found {
        namespace: namespace.to_string(),
        objects,
        csvs,
        crds,
        existing,
        live,
        targets,
        group,
        rbac: Rbac {
            roles: rbac.roles.store().state(),
            role_bindings: rbac.role_bindings.store().state(),
            cluster_roles: rbac.cluster_roles.store().state(),
            cluster_role_bindings: rbac.cluster_role_bindings.store().state(),
        },
    })
}

async fn wait_listed(informers: &Informers) {
    let (cluster, rbac) = (&informers.cluster, &informers.cluster.rbac);
    listed(&informers.csvs.store()).await;
    listed(&informers.subscriptions.store()).await;
    listed(&informers.owned_deployments.store()).await;
    listed(&informers.owned_service_accounts.store()).await;
    listed(&cluster.crds.store()).await;
    listed(&rbac.roles.store()).await;
    listed(&rbac.role_bindings.store()).await;
    listed(&rbac.cluster_roles.store()).await;
    listed(&rbac.cluster_role_bindings.store()).await;
}

/// Each CSV step's CSV with the one it replaces (`spec.replaces`), when that is in the
/// namespace.
fn replaced_csvs(
    steps: &[Step],
    objects: &[Value],
    namespace: &str,
    informers: &Informers,
) -> Result<Vec<(ClusterServiceVersion, Option<ClusterServiceVersion>)>, PreviewError> {
    let store = informers.csvs.store();
    let mut out = Vec::new();
    for (s, object) in steps.iter().zip(objects) {
        if s.resource.kind != KIND_CSV {
            continue;
        }
        let csv: ClusterServiceVersion =
            serde_json::from_value(object.clone()).map_err(|source| PreviewError::Csv {
                name: s.resource.name.clone(),
                source,
            })?;
        let old = csv.spec.replaces.as_deref().and_then(|name| {
            let cached = store.get(&CacheRef::new(name).within(namespace))?;
            cached.0.as_ref().ok().cloned()
        });
        out.push((csv, old));
    }
    Ok(out)
}

/// A CRD step's CRD as on the cluster, and the custom resources to check against it. The
/// metadata cache says whether it exists and whether the executor already knows it to
/// hold this content; only otherwise is it read whole.
async fn crd_found(new: &Value, ctx: &InstallPlanContext) -> Result<CrdFound, PreviewError> {
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let absent = CrdFound {
        new: new.clone(),
        on_cluster: OnCluster::Absent,
        listed: Vec::new(),
    };
    let store = ctx.shared.informers.cluster.crds.store();
    let Some(cached) = store.get(&CacheRef::new(name)) else {
        return Ok(absent);
    };
    let meta = &cached.metadata;
    if ctx
        .crd_verdicts
        .holds(name, meta.uid.as_deref(), meta.generation, new)
    {
        return Ok(CrdFound {
            on_cluster: OnCluster::Unchanged,
            ..absent
        });
    }
    let api: Api<CustomResourceDefinition> = Api::all(ctx.shared.client.clone());
    let what = format!("CustomResourceDefinition {name}");
    let Some(found) = api.get_opt(name).await.map_err(read(what.clone()))? else {
        return Ok(absent);
    };
    let existing = serde_json::to_value(&found).unwrap_or_default();
    // Holding the spec, only metadata would change (the manifest's own annotations, which
    // the executor applies whole): no CRD change, and no object updated.
    let spec_held = established(&existing) && crd_write::spec_holds(new, &existing);
    if holds_step(new, &existing, ctx) || spec_held {
        return Ok(CrdFound {
            on_cluster: OnCluster::Unchanged,
            ..absent
        });
    }
    let mut listed = Vec::new();
    for version in crds::versions_to_check(&existing, new) {
        let objects = existing_resources(new, &version, &ctx.shared.client)
            .await
            .map_err(read(format!("the {version} objects of {what}")))?;
        listed.push((version, objects));
    }
    Ok(CrdFound {
        on_cluster: OnCluster::Found(existing),
        listed,
        ..absent
    })
}

/// Whether the established CRD `existing` holds the spec (and own annotations) of the
/// step's CRD `new`; remembered as the executor remembers it, so that the previews of a
/// burst of installs sharing the CRD read it once, not once per plan.
fn holds_step(new: &Value, existing: &Value, ctx: &InstallPlanContext) -> bool {
    let holds = established(existing) && crd_write::decide(new, existing) != CrdWrite::Apply;
    if holds {
        let meta = &existing["metadata"];
        let (uid, generation) = (meta["uid"].as_str(), meta["generation"].as_i64());
        let name = new["metadata"]["name"].as_str().unwrap_or_default();
        let content = crd_write::content_digest(new);
        ctx.crd_verdicts.record(name, uid, generation, content);
    }
    holds
}

/// Whether `r` exists: from the informer of its kind, else asked of the API server.
async fn exists(r: &ObjectRef, ctx: &InstallPlanContext) -> Result<bool, PreviewError> {
    let informers = &ctx.shared.informers;
    let rbac = &informers.cluster.rbac;
    let (ns, name) = (r.namespace.as_deref(), r.name.as_str());
    let found = match r.kind.as_str() {
        KIND_CSV => cached(&informers.csvs.store(), ns, name),
        KIND_CRD => cached(&informers.cluster.crds.store(), None, name),
        "Subscription" => cached(&informers.subscriptions.store(), ns, name),
        "Role" => cached(&rbac.roles.store(), ns, name),
        "RoleBinding" => cached(&rbac.role_bindings.store(), ns, name),
        "ClusterRole" => cached(&rbac.cluster_roles.store(), None, name),
        "ClusterRoleBinding" => cached(&rbac.cluster_role_bindings.store(), None, name),
        // Only OLM's are cached; one someone else made is adopted by the CSV controller.
        "Deployment" => cached(&informers.owned_deployments.store(), ns, name),
        "ServiceAccount" if cached(&informers.owned_service_accounts.store(), ns, name) => true,
        "ServiceAccount" => {
            let api: Api<ServiceAccount> =
                Api::namespaced(ctx.shared.client.clone(), ns.unwrap_or_default());
            let got = api.get_metadata_opt(name).await;
            got.map_err(read(format!("ServiceAccount {name}")))?
                .is_some()
        }
        _ => asked(r, ctx).await?,
    };
    Ok(found)
}

/// The OperatorGroup of `namespace`, when it has exactly one, with its member CSVs (no
/// copies) from the cache.
async fn namespace_group(namespace: &str, ctx: &InstallPlanContext) -> Option<Group> {
    let [group] = <[_; 1]>::try_from(groups_in(namespace, ctx).await).ok()?;
    let members = ctx
        .shared
        .informers
        .csvs
        .store()
        .state()
        .iter()
        .filter_map(|csv| csv.0.as_ref().ok())
        .filter(|csv| csv.metadata.namespace.as_deref() == Some(namespace) && !csv.is_copy())
        .cloned()
        .collect();
    Some(Group { group, members })
}

/// The existing object `r` as on the cluster, for judging whether writing it changes it:
/// RBAC from the caches, other kinds asked of the API server for an upgrade only; None for
/// kinds judged otherwise (CSVs, CRDs, Deployments) or not read.
async fn live_object(
    r: &ObjectRef,
    upgrade: bool,
    ctx: &InstallPlanContext,
) -> Result<Option<Value>, PreviewError> {
    let rbac = &ctx.shared.informers.cluster.rbac;
    let (ns, name) = (r.namespace.as_deref(), r.name.as_str());
    Ok(match r.kind.as_str() {
        KIND_CSV | KIND_CRD | "Deployment" => None,
        "Role" => whole(&rbac.roles.store(), ns, name),
        "RoleBinding" => whole(&rbac.role_bindings.store(), ns, name),
        "ClusterRole" => whole(&rbac.cluster_roles.store(), None, name),
        "ClusterRoleBinding" => whole(&rbac.cluster_role_bindings.store(), None, name),
        _ if upgrade => read_whole(r, ctx).await?,
        _ => None,
    })
}

/// `r` read whole from the API server; None when absent or its kind is not served.
async fn read_whole(
    r: &ObjectRef,
    ctx: &InstallPlanContext,
) -> Result<Option<Value>, PreviewError> {
    let Some(api) = dynamic_api(r, ctx).await? else {
        return Ok(None);
    };
    let found = api.get_opt(&r.name).await;
    let found = found.map_err(read(format!("{} {}", r.kind, r.name)))?;
    Ok(found.and_then(|o| serde_json::to_value(o).ok()))
}

/// The API of `r`'s kind, in its namespace when namespaced; None when not served.
async fn dynamic_api(
    r: &ObjectRef,
    ctx: &InstallPlanContext,
) -> Result<Option<Api<DynamicObject>>, PreviewError> {
    let (group, version) = r
        .api_version
        .split_once('/')
        .unwrap_or(("", &r.api_version));
    let gvk = GroupVersionKind::gvk(group, version, &r.kind);
    let Some((resource, caps)) = step::discover(&gvk, ctx).await? else {
        return Ok(None);
    };
    Ok(Some(match (caps.scope, &r.namespace) {
        (Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(ctx.shared.client.clone(), ns, &resource)
        }
        _ => Api::all_with(ctx.shared.client.clone(), &resource),
    }))
}

/// The object `name` of a cache, whole.
fn whole<K>(store: &Store<K>, namespace: Option<&str>, name: &str) -> Option<Value>
where
    K: kube::runtime::reflector::Lookup<DynamicType = ()> + Clone + serde::Serialize + 'static,
{
    let at = CacheRef::<K>::new(name);
    let at = match namespace {
        Some(ns) => at.within(ns),
        None => at,
    };
    store.get(&at).and_then(|o| serde_json::to_value(&*o).ok())
}

fn cached<K>(store: &Store<K>, namespace: Option<&str>, name: &str) -> bool
where
    K: kube::runtime::reflector::Lookup<DynamicType = ()> + Clone + 'static,
{
    let at = CacheRef::<K>::new(name);
    let at = match namespace {
        Some(ns) => at.within(ns),
        None => at,
    };
    store.get(&at).is_some()
}

/// Whether `r` exists, asked of the API server (a kind no informer holds); a kind not
/// served has no objects.
async fn asked(r: &ObjectRef, ctx: &InstallPlanContext) -> Result<bool, PreviewError> {
    let Some(api) = dynamic_api(r, ctx).await? else {
        return Ok(false);
    };
    let what = format!("{} {}", r.kind, r.name);
    Ok(api
        .get_metadata_opt(&r.name)
        .await
        .map_err(read(what))?
        .is_some())
}
