//! Events through the one Recorder of an operator. Failing to record an Event is logged,
//! never fatal: the reconcile's own work matters more.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

pub async fn publish(
    recorder: &Recorder,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: action.to_string(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, regarding).await {
        tracing::error!(
            object = regarding.name.as_deref().unwrap_or_default(),
            namespace = regarding.namespace.as_deref().unwrap_or_default(),
            reason,
            %error,
            "recording an Event failed"
        );
    }
}
