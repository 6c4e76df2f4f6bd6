//! The operator's own OperatorCondition (`operators.coreos.com/v2`, named by
//! `OPERATOR_CONDITION_NAME`): it reports `Upgradeable` in `spec.conditions`, as operators
//! do, through in-cluster config. OLM's Role for the operator's ServiceAccount allows get,
//! update and patch of this one object.
//!
//! `UPGRADEABLE_UNTIL_WIDGET` plays a migration that ends: once a Widget of that name exists
//! in the operator's namespace, it reports `Upgradeable=True` (reason `MigrationDone`).

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;

/// The operator's field manager in the OperatorCondition's managedFields.
pub const FIELD_MANAGER: &str = "webhook-test-operator";

/// What to report, from `UPGRADEABLE` (`True` or `False`), `UPGRADEABLE_REASON` and
/// `UPGRADEABLE_MESSAGE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Upgradeable {
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl Upgradeable {
    pub fn from_env() -> Option<Upgradeable> {
        let status = std::env::var("UPGRADEABLE").ok()?;
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_string());
        Some(Upgradeable {
            reason: var("UPGRADEABLE_REASON", "Reported"),
            message: var("UPGRADEABLE_MESSAGE", "reported by webhook-test-operator"),
            status,
        })
    }
}

/// Reports `upgradeable`, then `True` once the migration's Widget exists (when one is named).
pub async fn report(upgradeable: Upgradeable) {
    let Ok(name) = std::env::var("OPERATOR_CONDITION_NAME") else {
        tracing::warn!("no OPERATOR_CONDITION_NAME: Upgradeable not reported");
        return;
    };
    report_once(&name, &upgradeable).await;
    let Ok(widget) = std::env::var("UPGRADEABLE_UNTIL_WIDGET") else {
        return;
    };
    while !widget_exists(&widget).await {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let done = Upgradeable {
        status: "True".into(),
        reason: "MigrationDone".into(),
        message: format!("widget {widget} exists"),
    };
    report_once(&name, &done).await;
}

async fn widget_exists(name: &str) -> bool {
    let Ok(client) = kube::Client::try_default().await else {
        return false;
    };
    let gvk = GroupVersionKind::gvk("webhook-test.olm-rs.io", "v1", "Widget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), client.default_namespace(), &resource);
    match api.get_opt(name).await {
        Ok(found) => found.is_some(),
        Err(error) => {
            tracing::warn!(%error, "reading widget {name}");
            false
        }
    }
}

/// Writes the condition, retrying until it is written (OLM may make the OperatorCondition
/// after the pod starts).
async fn report_once(name: &str, upgradeable: &Upgradeable) {
    let mut delay = Duration::from_secs(1);
    loop {
        match write(name, upgradeable).await {
            Ok(()) => {
                tracing::info!(%name, status = %upgradeable.status, "Upgradeable reported");
                return;
            }
            Err(error) => tracing::warn!(%name, %error, "reporting Upgradeable"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

async fn write(name: &str, upgradeable: &Upgradeable) -> Result<(), kube::Error> {
    let client = kube::Client::try_default().await?;
    let gvk = GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "operatorconditions");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), client.default_namespace(), &resource);
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = json!({"spec": {"conditions": [{
        "type": "Upgradeable",
        "status": upgradeable.status,
        "reason": upgradeable.reason,
        "message": upgradeable.message,
        "lastTransitionTime": now,
    }]}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(&patch)).await?;
    Ok(())
}
