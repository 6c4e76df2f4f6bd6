//! One reconcile of a `ReverseWordsApp`: gather (apply the desired children, read the
//! pods), decide the status (`status::desired`), write it only when it changed. Deletion
//! goes through the seed's finalizer; the children go with their owner (owner references).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::finalizer::{self, Event as Finalize, finalizer};
use kube::{Api, Client, Resource, ResourceExt};
use operator_common::{conditions, events};
use serde_json::json;

use crate::api::{FINALIZER, READY, ReverseWordsApp};
use crate::desired;
use crate::status::{self, Observed};

/// Server-side apply field manager of everything this operator writes.
pub const MANAGER: &str = "reverse-words-operator";

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    /// Image of the application (tag replaced by `spec.appVersion`).
    pub app_image: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ReverseWordsApp {object}: {step}: {source}")]
    Kube {
        object: String,
        step: String,
        #[source]
        source: kube::Error,
    },
    #[error("ReverseWordsApp {object}: the object has no namespace or uid")]
    Incomplete { object: String },
    #[error("ReverseWordsApp {object}: finalizer {FINALIZER}: {source}")]
    Finalizer {
        object: String,
        #[source]
        source: Box<finalizer::Error<Error>>,
    },
}

fn key(app: &ReverseWordsApp) -> String {
    format!("{}/{}", app.namespace().unwrap_or_default(), app.name_any())
}

pub async fn reconcile(app: Arc<ReverseWordsApp>, ctx: Arc<Context>) -> Result<Action, Error> {
    let object = key(&app);
    let namespace = app.namespace().ok_or_else(|| Error::Incomplete {
        object: object.clone(),
    })?;
    let api: Api<ReverseWordsApp> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, FINALIZER, app, |event| async {
        match event {
            Finalize::Apply(app) => apply(&app, &ctx).await,
            Finalize::Cleanup(app) => {
                // The Deployment and Service are owned: the garbage collector removes them.
                tracing::info!(
                    object = key(&app),
                    "finalized; children go with their owner"
                );
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|source| Error::Finalizer {
        object,
        source: Box::new(source),
    })
}

async fn apply(app: &ReverseWordsApp, ctx: &Context) -> Result<Action, Error> {
    let object = key(app);
    let namespace = app.namespace().unwrap_or_default();
    let api: Api<ReverseWordsApp> = Api::namespaced(ctx.client.clone(), &namespace);
    let gathered = gather(app, ctx, &namespace).await;
    let failure = gathered.as_ref().err().map(ToString::to_string);
    let observed = match &gathered {
        Ok((deployment, pods)) => Observed::Applied { deployment, pods },
        Err(_) => Observed::Failed(failure.as_deref().unwrap_or_default()),
    };
    let current = app.status.clone().unwrap_or_default();
    let next = status::desired(&current, app.metadata.generation, observed);
    if app.status.as_ref() != Some(&next) {
        let patch = json!({
            "apiVersion": ReverseWordsApp::api_version(&()),
            "kind": ReverseWordsApp::kind(&()),
            "status": next,
        });
        api.patch_status(
            &app.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|source| Error::Kube {
            object: object.clone(),
            step: "writing status".into(),
            source,
        })?;
        announce(app, ctx, &current, &next, failure.as_deref()).await;
    }
    gathered.map(|_| Action::await_change())
}

/// Applies the Deployment and Service; returns the Deployment as stored and the app's pods.
async fn gather(
    app: &ReverseWordsApp,
    ctx: &Context,
    namespace: &str,
) -> Result<(Deployment, Vec<Pod>), Error> {
    let object = key(app);
    let owner = app
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Incomplete {
            object: object.clone(),
        })?;
    let params = PatchParams::apply(MANAGER).force();
    let wanted = desired::deployment(app, &owner, &ctx.app_image);
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let deployment = Api::<Deployment>::namespaced(ctx.client.clone(), namespace)
        .patch(&name, &params, &Patch::Apply(&wanted))
        .await
        .map_err(|source| Error::Kube {
            object: object.clone(),
            step: format!("applying Deployment {name}"),
            source,
        })?;
    let wanted = desired::service(app, &owner);
    let name = wanted.metadata.name.clone().unwrap_or_default();
    Api::<Service>::namespaced(ctx.client.clone(), namespace)
        .patch(&name, &params, &Patch::Apply(&wanted))
        .await
        .map_err(|source| Error::Kube {
            object: object.clone(),
            step: format!("applying Service {name}"),
            source,
        })?;
    let selector = format!("app={}", app.name_any());
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Kube {
            object,
            step: format!("listing pods {selector}"),
            source,
        })?;
    Ok((deployment, pods.items))
}

/// An Event when readiness changes, and a Warning when a step fails.
async fn announce(
    app: &ReverseWordsApp,
    ctx: &Context,
    before: &crate::api::ReverseWordsAppStatus,
    after: &crate::api::ReverseWordsAppStatus,
    failure: Option<&str>,
) {
    let reference = app.object_ref(&());
    if let Some(message) = failure {
        events::publish(
            &ctx.recorder,
            &reference,
            EventType::Warning,
            "ReconcileFailed",
            "Reconcile",
            message.to_string(),
        )
        .await;
        return;
    }
    let was = conditions::find(&before.conditions, READY).map(|c| c.status.clone());
    let Some(now) = conditions::find(&after.conditions, READY) else {
        return;
    };
    if was.as_deref() != Some(now.status.as_str()) {
        let (type_, reason) = if now.status == "True" {
            (EventType::Normal, "Ready")
        } else {
            (EventType::Normal, "NotReady")
        };
        events::publish(
            &ctx.recorder,
            &reference,
            type_,
            reason,
            "Reconcile",
            now.message.clone(),
        )
        .await;
    }
}

pub fn error_policy(app: Arc<ReverseWordsApp>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::error!(object = key(&app), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}
