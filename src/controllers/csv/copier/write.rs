//! A source's copies written: created or updated where its targets want them, deleted
//! where they no longer do.

use futures::StreamExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::context::{CopyError, FIELD_MANAGER, Source};
use super::copies;
use crate::api::ClusterServiceVersion;
use kube::ResourceExt;

/// Copy writes in flight for one source.
const COPY_WRITERS: usize = 16;

/// Creates or updates the copies whose source changed; deletes those no longer targeted
/// (all of an AllNamespaces operator's when copies are `disabled`). Copies follow settled
/// phases only (Succeeded, Failed): an install's passage through Pending, InstallReady and
/// Installing would otherwise cost two writes per namespace each.
pub async fn sync(
    source: &Source<'_>,
    targets: &[String],
    disabled: bool,
) -> Result<(), CopyError> {
    let ctx = source.ctx;
    let all: Vec<String> = ctx
        .namespaces
        .state()
        .iter()
        .map(|n| n.name_any())
        .collect();
    let wanted = copies::copy_namespaces(targets, &source.namespace, &all, disabled);
    let phase = source.csv.status.as_ref().and_then(|s| s.phase);
    if copies::settled(phase) {
        let (object, copy_status, hash) = copies::build(source.csv, "");
        let mut stale = Vec::new();
        for namespace in &wanted {
            let existing = ctx.names.get(namespace, &source.name);
            match copies::existing_copy(existing.as_ref(), &source.namespace, &hash) {
                copies::Existing::Current => {}
                copies::Existing::Stale => stale.push(namespace.clone()),
                copies::Existing::NotOurs => tracing::info!(
                    csv = %source.name,
                    source = %source.namespace,
                    %namespace,
                    "not copied: the namespace has a CSV of that name that is not this one's copy"
                ),
            }
        }
        let results: Vec<Result<(), CopyError>> = futures::stream::iter(stale)
            .map(|namespace: String| {
                let mut body = object.clone();
                body["metadata"]["namespace"] = json!(namespace);
                write_copy(source, namespace, body, &copy_status)
            })
            .buffer_unordered(COPY_WRITERS)
            .collect()
            .await;
        results.into_iter().collect::<Result<(), CopyError>>()?;
    }
    for copy in ctx.names.copies(Some((&source.namespace, &source.name))) {
        if wanted.contains(&copy.namespace) {
            continue;
        }
        delete_copy(source.client(), &copy.namespace, &source.name)
            .await
            .map_err(source.fail("delete_copy"))?;
    }
    Ok(())
}

/// One copy: the object, then its status (a subresource: ignored on create).
async fn write_copy(
    source: &Source<'_>,
    namespace: String,
    body: Value,
    status: &Value,
) -> Result<(), CopyError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let api: Api<ClusterServiceVersion> = Api::namespaced(source.client(), &namespace);
    match api.patch(&source.name, &params, &Patch::Apply(&body)).await {
        Ok(_) => {}
        // The namespace is going away.
        Err(kube::Error::Api(s))
            if s.code == 404
                || s.code == 403
                    && s.reason == "Forbidden"
                    && s.message.contains("being terminated") =>
        {
            return Ok(());
        }
        Err(error) => return Err(source.fail("apply_copy")(error)),
    }
    let copy = ClusterServiceVersion {
        metadata: kube::api::ObjectMeta {
            name: Some(source.name.clone()),
            namespace: Some(namespace),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    };
    crate::controllers::kit::status::write_status(
        &source.client(),
        &copy,
        FIELD_MANAGER,
        true,
        status,
    )
    .await
    .map_err(source.fail("apply_copy_status"))?;
    Ok(())
}

pub async fn delete_copy(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(client, namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}
