//! Status writes, one way for every controller: server-side apply of the fields the
//! controller owns, under its own field manager and without `force` unless the controller
//! says otherwise (a field another manager owns is a conflict to report, not to take over),
//! counted, and remembered as an own write so the next round can tell when its cache is
//! behind.

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

use super::{ObjectKey, Reconciler};

/// Applies `status` to `object` as `R`'s field manager; returns the object as written.
pub async fn apply_status<R: Reconciler>(
    ctx: &R,
    object: &R::Object,
    status: &impl Serialize,
) -> Result<R::Object, kube::Error> {
    use kube::Resource;
    let key = ObjectKey::of(object.meta());
    // Through the dynamic API, so that one writer serves namespaced and cluster-scoped kinds.
    let resource = ApiResource::erase::<R::Object>(&());
    let client = ctx.shared().client.clone();
    let api: Api<DynamicObject> = if key.namespace.is_empty() {
        Api::all_with(client, &resource)
    } else {
        Api::namespaced_with(client, &key.namespace, &resource)
    };
    let patch = json!({
        "apiVersion": R::Object::api_version(&()),
        "kind": R::Object::kind(&()),
        "status": status,
    });
    let mut params = PatchParams::apply(R::FIELD_MANAGER);
    params.force = R::FORCE_STATUS;
    let written = api
        .patch_status(&object.name_any(), &params, &Patch::Apply(&patch))
        .await?;
    let written: R::Object = serde_json::to_value(written)
        .and_then(serde_json::from_value)
        .map_err(kube::Error::SerdeError)?;
    ctx.kit()
        .own_writes
        .wrote(key, written.meta().resource_version.as_deref());
    ctx.shared().metrics.status_written(R::CONTROLLER);
    Ok(written)
}
