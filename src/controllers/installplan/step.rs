//! One step, start to end: what it writes (its manifest, or its object read back from the
//! catalog), where (discovery), what exists, the decision ([`super::decide`]) and the
//! applier ([`super::apply`]).

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Scope};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::admit::{self, step_gvk};
use super::context::InstallPlanContext;
use super::crd_write;
use super::decide::{self, StepAction};
use super::error::StepError;
use super::{alongside, apply};
use crate::api::{ClusterServiceVersion, Step, StepStatus};
use crate::controllers::plan::steps::{self as plan_steps, KIND_CRD, KIND_CSV};

/// How one step went.
pub enum Applied {
    Done(StepStatus),
    /// Not an error: its API is not served yet (a CRD being established).
    Waiting,
}

/// Where a step writes: as `client` (the group's account, or OLM), while what exists is
/// read as OLM (a scoped group's account need not be able to read).
struct Target {
    writes: Api<DynamicObject>,
    reads: Api<DynamicObject>,
}

/// Carries out `step` of a plan in `namespace`, writing as `client`. `csv_uids`: the UIDs
/// of CSVs met so far this round, for owner references.
pub async fn run(
    step: &Step,
    namespace: &str,
    client: &Client,
    csv_uids: &mut BTreeMap<String, String>,
    ctx: &InstallPlanContext,
) -> Result<Applied, StepError> {
    let r = &step.resource;
    let object = object_of(step, namespace, ctx).await?;
    let gvk = step_gvk(r, &object);
    // A kind off upstream's list is refused once the API server serves it; unserved, it is
    // not found on the cluster and retried, as upstream's executor does.
    let Some((resource, caps)) = discover(&gvk, ctx).await? else {
        // Not served (yet): its CRD may be on its way; retried until the retry timeout.
        return Err(StepError::NotServed {
            kind: r.kind.clone(),
            name: r.name.clone(),
            group: gvk.group,
            version: gvk.version,
            served_kind: gvk.kind,
        });
    };
    if let Some(refused) = admit::unsupported(r, &gvk) {
        return Err(refused);
    }
    let namespaced = caps.scope == Scope::Namespaced;
    let mut shaped = decide::shape(object, &gvk, namespaced, namespace, step);
    for (i, csv) in std::mem::take(&mut shaped.owner_uids) {
        let uid = csv_uid(&csv, namespace, csv_uids, ctx).await?;
        shaped.object["metadata"]["ownerReferences"][i]["uid"] = json!(uid);
    }
    let api = |client: &Client| match namespaced {
        true => Api::namespaced_with(client.clone(), namespace, &resource),
        false => Api::all_with(client.clone(), &resource),
    };
    let target = Target {
        writes: api(client),
        reads: api(&ctx.shared.client),
    };
    let (applied, uid) = write(step, shaped.object, namespace, &target, ctx).await?;
    if r.kind == KIND_CSV {
        csv_uids.insert(r.name.clone(), uid.unwrap_or_default());
    }
    Ok(applied)
}

/// The object `step` writes: its manifest, or for a plan too large for etcd (which carries
/// its objects by reference) the object read back from the bundle in its catalog. A
/// catalog busy or down is retried without failing the plan, and the plan's message says so.
pub(super) async fn object_of(
    step: &Step,
    namespace: &str,
    ctx: &InstallPlanContext,
) -> Result<Value, StepError> {
    let r = &step.resource;
    let object = decide::manifest(step)?;
    let Some(bundle) = plan_steps::referred_bundle(&object) else {
        return Ok(object);
    };
    let catalog = format!("{}/{}", bundle.catalog_namespace, bundle.catalog);
    let objects = ctx
        .referred
        .objects(&bundle, &ctx.shared)
        .await
        .map_err(|source| StepError::CatalogUnavailable {
            kind: r.kind.clone(),
            name: r.name.clone(),
            bundle: bundle.name.clone(),
            catalog: catalog.clone(),
            source: Box::new(source),
        })?;
    plan_steps::pick(&objects, &r.kind, &r.name, &bundle.package, namespace).ok_or_else(|| {
        StepError::NotInBundle {
            kind: r.kind.clone(),
            name: r.name.clone(),
            bundle: bundle.name,
            catalog,
        }
    })
}

/// Writes `object` as [`decide`] says, given what exists; returns how the step went and,
/// when written, the object's UID.
async fn write(
    step: &Step,
    mut object: Value,
    namespace: &str,
    target: &Target,
    ctx: &InstallPlanContext,
) -> Result<(Applied, Option<String>), StepError> {
    let r = &step.resource;
    if r.kind == KIND_CRD
        && let Some(action) = decide_from_cache(step, &mut object, namespace, ctx)
    {
        return carry_out(action, step, object, None, target, ctx).await;
    }
    let existing = target.reads.get_opt(&r.name).await?;
    let existed = existing.is_some();
    if r.kind == KIND_CRD {
        let annotations = existing
            .as_ref()
            .and_then(|e| e.metadata.annotations.as_ref());
        add_alongside(&mut object, annotations, namespace, step, ctx);
    }
    // Only a CRD's content is looked at (and a CRD can be large).
    let existing = existing
        .filter(|_| r.kind == KIND_CRD)
        .map(|e| serde_json::to_value(e).unwrap_or_default());
    let action = decide::decide(&r.kind, step.status, &object, existing.as_ref());
    if let Some(found) = &existing
        && !matches!(action, StepAction::Apply { .. })
        && decide::established(found)
    {
        record_verdict(&r.name, found, crd_write::content_digest(&object), ctx);
    }
    let existing = existing.or(existed.then_some(Value::Null));
    carry_out(action, step, object, existing, target, ctx).await
}

/// What to do with a CRD step that the shared metadata cache can decide (the CRD is known
/// to hold this step's spec), with its alongside annotations added to `object`.
fn decide_from_cache(
    step: &Step,
    object: &mut Value,
    namespace: &str,
    ctx: &InstallPlanContext,
) -> Option<StepAction> {
    let r = &step.resource;
    let cached = ctx
        .shared
        .informers
        .cluster
        .crds
        .store()
        .get(&ObjectRef::new(&r.name))?;
    let meta = &cached.metadata;
    if !ctx
        .crd_verdicts
        .holds(&r.name, meta.uid.as_deref(), meta.generation, object)
    {
        return None;
    }
    add_alongside(object, meta.annotations.as_ref(), namespace, step, ctx);
    let known = json!({ "metadata": meta, "spec": &object["spec"] });
    decide::decide_cached(step.status, object, &known)
}

/// Carries out `action` for `step`; `existing`: what exists (Null when it exists but its
/// content was not needed).
async fn carry_out(
    action: StepAction,
    step: &Step,
    object: Value,
    existing: Option<Value>,
    target: &Target,
    ctx: &InstallPlanContext,
) -> Result<(Applied, Option<String>), StepError> {
    let r = &step.resource;
    let done = |action| match action {
        StepAction::Done(status) => Applied::Done(status),
        _ => Applied::Waiting,
    };
    match action {
        StepAction::Done(_) | StepAction::Wait => Ok((done(action), None)),
        StepAction::PatchCrdMetadata(patch) => {
            // A CRD that many installs share is large, and steps wait for their turn to
            // write it: what was read of it is not held meanwhile.
            drop((object, existing));
            let batch = ctx.crd_batch(&r.name);
            let established =
                apply::patch_crd_metadata(&batch, &target.writes, &r.name, &patch).await?;
            Ok((done(decide::crd_done(established, step.status)), None))
        }
        StepAction::Apply { check_upgrade } => {
            if check_upgrade && let Some(found) = &existing {
                apply::check_crd_upgrade(&object, found, ctx).await?;
            }
            apply_whole(step, object, existing.is_some(), target, ctx).await
        }
    }
}

/// Writes the step's object whole; a CRD's write takes turns with its metadata batch (see
/// `crd_write`) and is done once Established.
async fn apply_whole(
    step: &Step,
    object: Value,
    existed: bool,
    target: &Target,
    ctx: &InstallPlanContext,
) -> Result<(Applied, Option<String>), StepError> {
    let r = &step.resource;
    let crd = r.kind == KIND_CRD;
    let content = crd.then(|| crd_write::content_digest(&object));
    let batch = crd.then(|| ctx.crd_batch(&r.name));
    let _turn = match &batch {
        Some(batch) => Some(batch.turn.lock().await),
        None => None,
    };
    let applied = apply::apply(&target.writes, &r.name, object, existed).await?;
    if let Some(content) = content {
        if !decide::established(&applied.data) {
            return Ok((Applied::Waiting, None));
        }
        let meta = &applied.metadata;
        ctx.crd_verdicts
            .record(&r.name, meta.uid.as_deref(), meta.generation, content);
    }
    let status = decide::written(existed, step.status);
    Ok((Applied::Done(status), applied.metadata.uid))
}

/// Remembers that the CRD `found` holds the content of digest `content`.
fn record_verdict(name: &str, found: &Value, content: u64, ctx: &InstallPlanContext) {
    let meta = &found["metadata"];
    ctx.crd_verdicts.record(
        name,
        meta["uid"].as_str(),
        meta["generation"].as_i64(),
        content,
    );
}

/// Puts the CRD's alongside annotations on the step's `object`: those of `existing` for
/// CSVs that still exist, and the step's own CSV's.
fn add_alongside(
    object: &mut Value,
    existing: Option<&BTreeMap<String, String>>,
    namespace: &str,
    step: &Step,
    ctx: &InstallPlanContext,
) {
    let csvs = ctx.shared.informers.csvs.store();
    let alongside = alongside::annotations(existing, namespace, &step.resolving, |ns, name| {
        csvs.get(&ObjectRef::new(name).within(ns)).is_some()
    });
    if !object["metadata"]["annotations"].is_object() {
        object["metadata"]["annotations"] = json!({});
    }
    for (key, value) in alongside {
        object["metadata"]["annotations"][key] = json!(value);
    }
}

/// The UID of CSV `name`; a CSV that does not exist (yet) is retried, until the retry
/// timeout.
async fn csv_uid(
    name: &str,
    namespace: &str,
    csv_uids: &mut BTreeMap<String, String>,
    ctx: &InstallPlanContext,
) -> Result<String, StepError> {
    if let Some(uid) = csv_uids.get(name) {
        return Ok(uid.clone());
    }
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(ctx.shared.client.clone(), namespace);
    let Some(csv) = csvs.get_metadata_opt(name).await? else {
        return Err(StepError::CsvMissing(name.to_string()));
    };
    let uid = csv.metadata.uid.unwrap_or_default();
    csv_uids.insert(name.to_string(), uid.clone());
    Ok(uid)
}

/// Where objects of `gvk` are served, as OLM discovers it (cached); None when they are not.
/// Whether the API server serves `gvk`.
pub(super) async fn served(
    gvk: &GroupVersionKind,
    ctx: &InstallPlanContext,
) -> Result<bool, StepError> {
    Ok(discover(gvk, ctx).await?.is_some())
}

pub(super) async fn discover(
    gvk: &GroupVersionKind,
    ctx: &InstallPlanContext,
) -> Result<Option<(ApiResource, ApiCapabilities)>, StepError> {
    if let Some(found) = ctx.discovered(gvk) {
        return Ok(Some(found));
    }
    match kube::discovery::pinned_kind(&ctx.shared.client, gvk).await {
        Ok(found) => {
            ctx.remember_discovered(gvk, &found);
            Ok(Some(found))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
