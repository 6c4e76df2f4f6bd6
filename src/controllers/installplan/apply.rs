//! The applier: carries out what [`super::decide`] chose for a step, and nothing else.

use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::context::{FIELD_MANAGER, InstallPlanContext};
use super::crd_upgrade;
use super::crd_write::CrdBatch;
use super::decide::established;
use super::error::StepError;

/// Writes `object` whole: server-side apply, forced (the bundle's manifest wins over
/// whoever applied the object last, as upstream's updates do). `exists`: it was there.
pub async fn apply(
    api: &Api<DynamicObject>,
    name: &str,
    object: Value,
    exists: bool,
) -> Result<DynamicObject, StepError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Ok(
        match api.patch(name, &params, &Patch::Apply(&object)).await {
            // Server-side apply refuses fields the kind's schema does not declare (published
            // CSVs carry a few, e.g. `spec.support`); upstream creates and updates, which prune
            // them. So do we, for such a manifest only.
            Err(kube::Error::Api(e)) if e.message.contains("field not declared in schema") => {
                tracing::info!(%name, error = %e.message, "pruning fields the schema does not declare");
                apply_pruned(api, name, object, exists).await
            }
            // A scoped group's account refused a new object: say which right it lacks in
            // upstream's words ("cannot create resource"; upstream creates new objects), found
            // by a dry-run create; "cannot patch" stays when create alone is allowed.
            Err(kube::Error::Api(e)) if e.code == 403 && !exists => {
                match create(api, object, true).await {
                    Err(refused @ kube::Error::Api(_)) => Err(refused),
                    _ => Err(kube::Error::Api(e)),
                }
            }
            other => other,
        }?,
    )
}

/// Creates or merges `object` the way upstream writes steps, so that the API server prunes
/// what the schema does not declare (with a warning) instead of refusing it.
async fn apply_pruned(
    api: &Api<DynamicObject>,
    name: &str,
    object: Value,
    exists: bool,
) -> Result<DynamicObject, kube::Error> {
    if exists {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Merge(&object)).await
    } else {
        create(api, object, false).await
    }
}

/// Creates `object` (only checks that it could be, with `dry_run`).
async fn create(
    api: &Api<DynamicObject>,
    object: Value,
    dry_run: bool,
) -> Result<DynamicObject, kube::Error> {
    let params = PostParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let object: DynamicObject = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    api.create(&params, &object).await
}

/// Writes `patch` (labels and annotations a CRD lacks) with whatever other steps of the
/// same CRD want, in one merge patch when this step has the turn, or not at all when a
/// write in another step's turn included it. Returns whether the CRD written was
/// Established.
pub async fn patch_crd_metadata(
    batch: &CrdBatch,
    api: &Api<DynamicObject>,
    name: &str,
    patch: &Value,
) -> Result<bool, StepError> {
    let mine = batch.want(patch);
    let mut written = batch.turn.lock().await;
    if written.generation >= mine {
        return Ok(written.established);
    }
    let (patch, generation) = batch.take();
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(crd) => {
            written.generation = generation;
            written.established = established(&crd.data);
            Ok(written.established)
        }
        Err(error) => {
            batch.put_back(&patch);
            Err(error.into())
        }
    }
}

/// Refuses a CRD update that would drop a stored version or that existing custom resources
/// do not validate against.
pub async fn check_crd_upgrade(
    new: &Value,
    existing: &Value,
    ctx: &InstallPlanContext,
) -> Result<(), StepError> {
    crd_upgrade::check_stored_versions(existing, new)?;
    let served_before: Vec<String> = crd_upgrade::served_schemas(existing)
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    for (version, schema) in crd_upgrade::served_schemas(new) {
        if served_before.contains(&version) && !schema.is_null() {
            check_existing_resources(new, &version, &schema, ctx).await?;
        }
    }
    Ok(())
}

/// Every existing resource of the CRD `new` in `version` validates against `schema`.
async fn check_existing_resources(
    new: &Value,
    version: &str,
    schema: &Value,
    ctx: &InstallPlanContext,
) -> Result<(), StepError> {
    let objects = existing_resources(new, version, &ctx.shared.client).await?;
    // Every object is judged; past the first refused one, the others are only counted.
    let mut refused = crd_upgrade::refused(schema, &objects);
    let Some((object, problems)) = refused.next() else {
        return Ok(());
    };
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    Err(StepError::InvalidExisting {
        crd: text(&new["metadata"]["name"]),
        kind: text(&new["spec"]["names"]["kind"]),
        object,
        version: version.into(),
        problems: problems.join("; ").into(),
        others: refused.count(),
    })
}

/// The existing resources of the CRD `new` in `version`, as JSON (none while the version
/// is not served).
pub async fn existing_resources(
    new: &Value,
    version: &str,
    client: &kube::Client,
) -> Result<Vec<Value>, kube::Error> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    let group = text(&new["spec"]["group"]);
    let resource = ApiResource {
        api_version: format!("{group}/{version}"),
        group,
        version: version.into(),
        kind: text(&new["spec"]["names"]["kind"]),
        plural: text(&new["spec"]["names"]["plural"]),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        // Not served yet (the CRD is not Established, e.g. created a moment ago by
        // another plan on a busy API server): no object of it can exist.
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => return Err(e),
    };
    Ok(list
        .iter()
        .map(|cr| serde_json::to_value(cr).unwrap_or_default())
        .collect())
}
