//! Status writes, one way for every controller: server-side apply of the fields the
//! controller owns, under its own field manager and without `force` unless the controller
//! says otherwise (a field another manager owns is a conflict to report, not to take over),
//! counted, and remembered as an own write so the next round can tell when its cache is
//! behind.

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

use super::reconciler::{ObjectKey, Reconciler};

/// Applies `status` to `object` as `R`'s field manager; returns the object as written.
pub async fn apply_status<R: Reconciler>(
    ctx: &R,
    object: &R::Object,
    status: &impl Serialize,
) -> Result<R::Object, kube::Error> {
    use kube::Resource;
    let written = write_status(
        &ctx.shared().client,
        object,
        R::FIELD_MANAGER,
        R::FORCE_STATUS,
        status,
    )
    .await?;
    ctx.kit().own_writes.wrote(
        ObjectKey::of(object.meta()),
        written.meta().resource_version.as_deref(),
    );
    ctx.shared().metrics.status_written(R::CONTROLLER);
    Ok(written)
}

/// The one status writer under [`apply_status`], also for the writes a controller makes on
/// another kind's objects (the Subscription controller's first status of a new InstallPlan,
/// the copier's copies): server-side apply of `status` to the status subresource as
/// `field_manager`. Through the dynamic API, so that it serves namespaced and cluster-scoped
/// kinds alike.
pub async fn write_status<K>(
    client: &kube::Client,
    object: &K,
    field_manager: &str,
    force: bool,
    status: &impl Serialize,
) -> Result<K, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned,
{
    let key = ObjectKey::of(object.meta());
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = if key.namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &key.namespace, &resource)
    };
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let mut params = PatchParams::apply(field_manager);
    params.force = force;
    let written = api
        .patch_status(&object.name_any(), &params, &Patch::Apply(&patch))
        .await?;
    serde_json::to_value(written)
        .and_then(serde_json::from_value)
        .map_err(kube::Error::SerdeError)
}
