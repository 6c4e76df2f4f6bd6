//! What every round of the InstallPlan controller shares: its context (caches, clients),
//! its error, and the status, Events and failures it writes.

use super::crd_write::{CrdBatch, SpecVerdicts};
use super::referred::ReferredBundles;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::ApiCapabilities;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use crate::api::{InstallPlan, InstallPlanReason as Reason, InstallPlanStatus, Step};
use crate::cluster::scoped;
use crate::controllers::context::Context;
use crate::controllers::kit::PanicError;
use crate::controllers::kit::{self, KitState, ObjectKey, ReconcileError, apply_status};
use crate::controllers::plan::{self};

pub const CONTROLLER: &str = "installplan";
/// Server-side apply field manager of everything this controller writes (a plan's status
/// is one manager's, whichever controller writes it).
pub const FIELD_MANAGER: &str = plan::STATUS_FIELD_MANAGER;
/// How often an Installing plan is looked at again while it waits (CRDs, retries).
pub(super) const RECHECK: Duration = Duration::from_secs(2);
/// How often a plan waiting for its namespace's OperatorGroup looks again.
pub(super) const GROUP_RECHECK: Duration = Duration::from_secs(5);
/// How often a plan waiting for a bundle image tries the pull again (upstream: 5s).
pub(super) const UNPACK_RECHECK: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("InstallPlan {namespace}/{name}: {action}: {error}")]
    Kube {
        namespace: String,
        name: String,
        action: String,
        #[source]
        error: kube::Error,
    },
    #[error("InstallPlan {namespace}/{name}: {message}")]
    Other {
        namespace: String,
        name: String,
        message: String,
    },
    #[error(transparent)]
    Panicked(#[from] PanicError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Other { .. } => "other",
            Error::Panicked(_) => "panic",
        }
    }
}

pub struct InstallPlanContext {
    pub shared: Arc<Context>,
    pub(super) kit: KitState<ObjectKey>,
    /// Discovery results per group/version/kind.
    pub(super) discovered: Mutex<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
    /// Clients that impersonate an OperatorGroup's service account, per account.
    pub(super) impersonating: scoped::ScopedClients,
    /// The bundles last read back for plans that carry their objects by reference.
    pub(super) referred: ReferredBundles,
    /// Per CRD name, the metadata its steps want written (see [`CrdBatch`]).
    pub(super) crd_batches: Mutex<HashMap<String, Arc<CrdBatch>>>,
    /// Per CRD name, the step content it was last found to hold (see [`SpecVerdicts`]).
    pub(super) crd_verdicts: SpecVerdicts,
}

impl InstallPlanContext {
    /// The write batch of the CRD `name`.
    pub(super) fn crd_batch(&self, name: &str) -> Arc<CrdBatch> {
        Arc::clone(
            self.crd_batches
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(name.to_string())
                .or_default(),
        )
    }

    /// Where objects of `gvk` are served, when discovered before.
    pub(super) fn discovered(
        &self,
        gvk: &GroupVersionKind,
    ) -> Option<(ApiResource, ApiCapabilities)> {
        let discovered = self
            .discovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        discovered.get(gvk).cloned()
    }

    pub(super) fn remember_discovered(
        &self,
        gvk: &GroupVersionKind,
        found: &(ApiResource, ApiCapabilities),
    ) {
        let mut discovered = self
            .discovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        discovered.insert(gvk.clone(), found.clone());
    }
}

pub(super) fn now() -> Timestamp {
    kit::now()
}

pub(super) async fn fail(
    plan: &InstallPlan,
    status: InstallPlanStatus,
    reason: Reason,
    message: String,
    ctx: &InstallPlanContext,
) -> Result<Action, Error> {
    tracing::warn!(plan = %plan.name_any(), reason = reason.as_str(), %message, "InstallPlan failed");
    let status = plan::failed(status, reason, message.clone(), now());
    write_status(plan, &status, ctx).await?;
    event(plan, ctx, EventType::Warning, reason, message);
    Ok(Action::await_change())
}

/// Writes `status`; returns the plan as written.
pub(super) async fn write_status(
    plan: &InstallPlan,
    status: &InstallPlanStatus,
    ctx: &InstallPlanContext,
) -> Result<InstallPlan, Error> {
    apply_status(ctx, plan, status)
        .await
        .map_err(|error| Error::Kube {
            namespace: plan.namespace().unwrap_or_default(),
            name: plan.name_any(),
            action: "writing status".into(),
            error,
        })
}

pub(super) fn event(
    plan: &InstallPlan,
    ctx: &InstallPlanContext,
    type_: EventType,
    reason: Reason,
    note: String,
) {
    ctx.shared.event(
        &plan.object_ref(&()),
        type_,
        reason.as_str(),
        "Install",
        note,
    );
}

/// A Warning Event on step `i` (`status.plan[i]`) saying what the API server warned of while
/// applying it, in upstream's words.
pub(super) fn warned(
    plan: &InstallPlan,
    i: usize,
    step: &Step,
    warnings: &[String],
    ctx: &InstallPlanContext,
) {
    let r = &step.resource;
    let what = if step.resolving.is_empty() {
        "operator installation".to_string()
    } else {
        format!("installation of operator {:?}", step.resolving)
    };
    let note = format!(
        "{} warning(s) generated during {what} ({} {:?}): {}",
        warnings.len(),
        r.kind,
        r.name,
        warnings.join(", ")
    );
    let mut regarding = plan.object_ref(&());
    regarding.field_path = Some(format!("status.plan[{i}]"));
    ctx.shared.event(
        &regarding,
        EventType::Warning,
        Reason::AppliedWithWarnings.as_str(),
        "Install",
        note,
    );
}
