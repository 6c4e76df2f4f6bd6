//! One reconcile of a `Ptemplate`: apply the desired Module and DaemonSet (server-side
//! apply with force: a drifted field is set back), read the consumer pods, write the status
//! when it changed. Owned Modules and DaemonSets are watched, so an edit or a deletion of a
//! child brings the Ptemplate back here.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use operator_common::events;
use serde_json::json;

use crate::api::{Ptemplate, module_resource};
use crate::desired::{self, Images};
use crate::status::{self, Observed};

pub const MANAGER: &str = "ptemplate-operator";

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub images: Images,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Ptemplate {object}: {step}: {source}")]
    Kube {
        object: String,
        step: String,
        #[source]
        source: kube::Error,
    },
    #[error("Ptemplate {object}: the object has no namespace or uid")]
    Incomplete { object: String },
}

fn key(pt: &Ptemplate) -> String {
    format!("{}/{}", pt.namespace().unwrap_or_default(), pt.name_any())
}

pub async fn reconcile(pt: Arc<Ptemplate>, ctx: Arc<Context>) -> Result<Action, Error> {
    let object = key(&pt);
    let namespace = pt.namespace().ok_or_else(|| Error::Incomplete {
        object: object.clone(),
    })?;
    let gathered = gather(&pt, &ctx, &namespace).await;
    let failure = gathered.as_ref().err().map(ToString::to_string);
    let observed = match &gathered {
        Ok((daemonset, pods)) => Observed::Applied { daemonset, pods },
        Err(_) => Observed::Failed(failure.as_deref().unwrap_or_default()),
    };
    let current = pt.status.clone().unwrap_or_default();
    let next = status::desired(&current, pt.metadata.generation, observed);
    if pt.status.as_ref() != Some(&next) {
        let patch = json!({
            "apiVersion": Ptemplate::api_version(&()),
            "kind": Ptemplate::kind(&()),
            "status": next,
        });
        Api::<Ptemplate>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(
                &pt.name_any(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|source| Error::Kube {
                object: object.clone(),
                step: "writing status".into(),
                source,
            })?;
        if let Some(message) = &failure {
            events::publish(
                &ctx.recorder,
                &pt.object_ref(&()),
                EventType::Warning,
                "ReconcileFailed",
                "Reconcile",
                message.clone(),
            )
            .await;
        }
    }
    gathered.map(|_| Action::await_change())
}

async fn gather(
    pt: &Ptemplate,
    ctx: &Context,
    namespace: &str,
) -> Result<(DaemonSet, Vec<Pod>), Error> {
    let object = key(pt);
    let owner = pt
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Incomplete {
            object: object.clone(),
        })?;
    let params = PatchParams::apply(MANAGER).force();
    let failed = |step: String| {
        let object = object.clone();
        move |source| Error::Kube {
            object,
            step,
            source,
        }
    };

    let module = desired::module(pt, &owner, &ctx.images);
    let name = desired::module_name(&pt.name_any());
    Api::<DynamicObject>::namespaced_with(ctx.client.clone(), namespace, &module_resource())
        .patch(&name, &params, &Patch::Apply(&module))
        .await
        .map_err(failed(format!("applying Module {name}")))?;

    let wanted = desired::daemonset(pt, &owner);
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let daemonset = Api::<DaemonSet>::namespaced(ctx.client.clone(), namespace)
        .patch(&name, &params, &Patch::Apply(&wanted))
        .await
        .map_err(failed(format!("applying DaemonSet {name}")))?;

    let selector = format!("app={name}");
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(failed(format!("listing pods {selector}")))?;
    Ok((daemonset, pods.items))
}

pub fn error_policy(pt: Arc<Ptemplate>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::error!(object = key(&pt), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}
