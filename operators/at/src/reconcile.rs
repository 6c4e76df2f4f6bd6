//! One reconcile of an `At`: gather (its Pod), decide (`decide::decide`), apply (create the
//! Pod when it is time, write the status when it changed, one `PhaseChange` Event per phase
//! entered), and come back when the schedule is due; never a busy loop.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use operator_common::{conditions, events};
use serde_json::json;

use crate::api::{At, AtStatus, DONE, PENDING, RUNNING, SCHEDULE_VALID};
use crate::decide::{self, decide, pod_state};

/// Field manager of everything this operator writes.
pub const MANAGER: &str = "at-operator";

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("At {object}: {step}: {source}")]
    Kube {
        object: String,
        step: String,
        #[source]
        source: kube::Error,
    },
    #[error("At {object}: the object has no namespace or uid")]
    Incomplete { object: String },
}

fn key(at: &At) -> String {
    format!("{}/{}", at.namespace().unwrap_or_default(), at.name_any())
}

pub async fn reconcile(at: Arc<At>, ctx: Arc<Context>) -> Result<Action, Error> {
    let object = key(&at);
    let namespace = at.namespace().ok_or_else(|| Error::Incomplete {
        object: object.clone(),
    })?;
    let kube_error = |step: String| {
        let object = object.clone();
        move |source| Error::Kube {
            object,
            step,
            source,
        }
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pod_name = decide::pod_name(&at.name_any());
    let pod = pods
        .get_opt(&pod_name)
        .await
        .map_err(kube_error(format!("reading Pod {pod_name}")))?;
    let current = at.status.clone().unwrap_or_default();
    let decision = decide(
        current.phase.as_deref(),
        &at.spec.schedule,
        Timestamp::now(),
        &pod_state(pod.as_ref()),
    );

    if decision.create_pod {
        let owner = at
            .controller_owner_ref(&())
            .ok_or_else(|| Error::Incomplete {
                object: object.clone(),
            })?;
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        match pods.create(&params, &decide::pod(&at, &owner)).await {
            Ok(_) => tracing::info!(
                object,
                pod = pod_name,
                command = at.spec.command,
                "pod launched"
            ),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => return Err(kube_error(format!("creating Pod {pod_name}"))(source)),
        }
    }

    let mut next = current.clone();
    next.phase = Some(decision.phase.to_string());
    match &decision.schedule {
        Ok(()) => conditions::set(
            &mut next.conditions,
            SCHEDULE_VALID,
            true,
            "Valid",
            "",
            at.metadata.generation,
        ),
        Err(error) => conditions::set(
            &mut next.conditions,
            SCHEDULE_VALID,
            false,
            "InvalidSchedule",
            &error.to_string(),
            at.metadata.generation,
        ),
    }
    if next != current {
        let api: Api<At> = Api::namespaced(ctx.client.clone(), &namespace);
        let patch = json!({
            "apiVersion": At::api_version(&()),
            "kind": At::kind(&()),
            "status": next,
        });
        api.patch_status(
            &at.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(kube_error("writing status".into()))?;
        announce(&at, &ctx, &current, &next).await;
    }
    Ok(match decision.requeue_after {
        Some(delay) => Action::requeue(delay),
        None => Action::await_change(),
    })
}

/// The phases entered between `before` and `after`, in order (a first look at an overdue
/// At enters PENDING and RUNNING at once).
pub fn phases_entered(before: Option<&str>, after: &str) -> Vec<&'static str> {
    let order = [PENDING, RUNNING, DONE];
    let from = before
        .and_then(|b| order.iter().position(|p| *p == b))
        .map_or(0, |i| i + 1);
    let to = order.iter().position(|p| *p == after).map_or(0, |i| i + 1);
    order.get(from..to).map(<[_]>::to_vec).unwrap_or_default()
}

async fn announce(at: &At, ctx: &Context, before: &AtStatus, after: &AtStatus) {
    let reference = at.object_ref(&());
    for phase in phases_entered(
        before.phase.as_deref(),
        after.phase.as_deref().unwrap_or_default(),
    ) {
        tracing::info!(object = key(at), phase, "phase change");
        // The Recorder folds Events with the same reason and action into one series: the
        // phase as the action keeps one Event per phase, as the seed shows them.
        events::publish(
            &ctx.recorder,
            &reference,
            EventType::Normal,
            "PhaseChange",
            phase,
            phase.to_string(),
        )
        .await;
    }
    let was = conditions::find(&before.conditions, SCHEDULE_VALID).map(|c| c.message.clone());
    if let Some(c) = conditions::find(&after.conditions, SCHEDULE_VALID)
        && c.status == "False"
        && was.as_deref() != Some(c.message.as_str())
    {
        tracing::warn!(object = key(at), problem = c.message, "invalid schedule");
        events::publish(
            &ctx.recorder,
            &reference,
            EventType::Warning,
            "InvalidSchedule",
            "Reconcile",
            c.message.clone(),
        )
        .await;
    }
}

pub fn error_policy(at: Arc<At>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::error!(object = key(&at), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_per_phase_entered() {
        assert_eq!(phases_entered(None, PENDING), vec![PENDING]);
        assert_eq!(phases_entered(None, RUNNING), vec![PENDING, RUNNING]);
        assert_eq!(phases_entered(Some(PENDING), PENDING), Vec::<&str>::new());
        assert_eq!(phases_entered(Some(PENDING), RUNNING), vec![RUNNING]);
        assert_eq!(phases_entered(Some(RUNNING), DONE), vec![DONE]);
        assert_eq!(phases_entered(Some("bogus"), PENDING), vec![PENDING]);
    }
}
