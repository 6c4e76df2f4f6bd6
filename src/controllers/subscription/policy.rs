//! A Subscription's `spec.upgradePolicy`, decided (pure): the versions resolution may move
//! to, whether a plan made for it is approved now, held or withdrawn, and the condition
//! that tells the admin which policy held or allowed it and what would release it.
//!
//! Plans OLM makes for a Subscription with a policy carry, in an annotation, what each
//! served Subscription gets from them ([`PlanTarget`]), so a later round can judge a
//! waiting plan again (a window opens, the preview arrives, the policy changes) without
//! reading its steps.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use semver::Version;
use serde::{Deserialize, Serialize};

use super::windows::{Window, WindowError, any_open, next_opening};
use crate::api::{
    Approval, InstallPlan, InstallPlanPhase, PlanImpact, Subscription, SubscriptionCondition,
    SubscriptionConditionType, SubscriptionReason as Reason, UpgradePolicy,
};
use crate::catalog::model::semver_range::{RangeError, VersionRange, parse_version};
use crate::controllers::kit::{Cond, ConditionStatus};
use crate::resolver::{Held, VersionPolicy};

/// Annotation of an InstallPlan: the [`PlanTarget`]s it was made for, as JSON.
pub const TARGETS_ANNOTATION: &str = "olm-rs.dev/targets";

/// What a plan does for one Subscription it serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanTarget {
    pub subscription: String,
    pub csv: String,
    pub version: String,
    /// Nothing of the package was installed when the plan was made.
    #[serde(default)]
    pub first_install: bool,
    /// It goes back to an older version (`rollbackTo`).
    #[serde(default)]
    pub rollback: bool,
}

/// Why a policy cannot be read; the Subscription's resolution fails with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("spec.upgradePolicy.versionRange {value:?}: {error}")]
    Range { value: String, error: RangeError },
    #[error("spec.upgradePolicy.{field} {value:?} is not a version: {error}")]
    Version {
        field: &'static str,
        value: String,
        error: String,
    },
    #[error("spec.upgradePolicy.maintenanceWindows[{index}]: {error}")]
    Window { index: usize, error: WindowError },
}

/// One limit on the versions a Subscription may move to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    Range(String),
    ApprovedVersion(Version),
    Rejected(Vec<Version>),
    RollbackTo(Version),
}

impl Limit {
    /// How the limit is named in explanations (and to the resolver).
    pub fn words(&self) -> String {
        match self {
            Limit::Range(range) => format!("versionRange {range:?}"),
            Limit::ApprovedVersion(v) => format!("approvedVersion {v}"),
            Limit::Rejected(vs) => format!("rejectedVersions {}", join(vs)),
            Limit::RollbackTo(v) => format!("rollbackTo {v}"),
        }
    }

    /// What would release what it holds.
    fn release(&self, held: &str) -> String {
        match self {
            Limit::Range(_) => format!("widen versionRange to include {held}"),
            Limit::ApprovedVersion(_) => format!("raise approvedVersion to {held}"),
            Limit::Rejected(_) => "it waits for a newer version or a changed policy".into(),
            Limit::RollbackTo(_) => "remove rollbackTo to upgrade again".into(),
        }
    }

    fn reason(&self) -> Reason {
        match self {
            Limit::Range(_) | Limit::ApprovedVersion(_) => Reason::OutsideVersionPolicy,
            Limit::Rejected(_) => Reason::VersionRejected,
            Limit::RollbackTo(_) => Reason::RolledBack,
        }
    }

    fn range(&self) -> Result<VersionRange, PolicyError> {
        let text = match self {
            Limit::Range(range) => range.clone(),
            Limit::ApprovedVersion(v) | Limit::RollbackTo(v) => format!("<={v}"),
            Limit::Rejected(vs) => format!(
                ">{}",
                vs.iter().max().map(ToString::to_string).unwrap_or_default()
            ),
        };
        VersionRange::parse(&text).map_err(|error| PolicyError::Range { value: text, error })
    }
}

fn join(versions: &[Version]) -> String {
    versions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn version(field: &'static str, value: &str) -> Result<Version, PolicyError> {
    parse_version(value).map_err(|error| PolicyError::Version {
        field,
        value: value.to_string(),
        error: error.to_string(),
    })
}

/// A policy, read: its limits and windows.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub limits: Vec<Limit>,
    pub windows: Vec<Window>,
    /// `rollbackTo` when it is a CSV name rather than a version (resolved against the
    /// catalog by the caller).
    pub rollback_csv: Option<String>,
}

impl Policy {
    pub fn read(policy: &UpgradePolicy) -> Result<Policy, PolicyError> {
        let mut limits = Vec::new();
        if let Some(range) = &policy.version_range {
            let limit = Limit::Range(range.clone());
            limit.range()?;
            limits.push(limit);
        }
        if let Some(v) = &policy.approved_version {
            limits.push(Limit::ApprovedVersion(version("approvedVersion", v)?));
        }
        if !policy.rejected_versions.is_empty() {
            let versions = policy
                .rejected_versions
                .iter()
                .map(|v| version("rejectedVersions", v))
                .collect::<Result<Vec<_>, _>>()?;
            limits.push(Limit::Rejected(versions));
        }
        let mut rollback_csv = None;
        match policy.rollback_to.as_deref().map(parse_version) {
            Some(Ok(v)) => limits.push(Limit::RollbackTo(v)),
            // A CSV name: the caller knows its version from the catalog.
            Some(Err(_)) => rollback_csv = policy.rollback_to.clone(),
            None => {}
        }
        let windows = policy
            .maintenance_windows
            .iter()
            .enumerate()
            .map(|(index, w)| {
                Window::parse(w).map_err(|error| PolicyError::Window { index, error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Policy {
            limits,
            windows,
            rollback_csv,
        })
    }

    /// The resolver's view: each limit as a range, named by its words.
    pub fn versions(&self) -> Result<VersionPolicy, PolicyError> {
        let ranges = self
            .limits
            .iter()
            .map(|l| Ok((l.range()?, l.words())))
            .collect::<Result<Vec<_>, PolicyError>>()?;
        Ok(VersionPolicy { ranges })
    }

    pub fn rollback_to(&self) -> Option<&Version> {
        self.limits.iter().find_map(|l| match l {
            Limit::RollbackTo(v) => Some(v),
            _ => None,
        })
    }

    /// The limit the resolver named `words`; a `rollbackTo` given as a CSV name was
    /// resolved to its version by then, so it is read back from the words.
    fn limit_named(&self, words: &str) -> Option<Limit> {
        let found = self.limits.iter().find(|l| l.words() == words).cloned();
        found.or_else(|| {
            let version = words.strip_prefix("rollbackTo ")?;
            self.rollback_csv.as_ref()?;
            parse_version(version).ok().map(Limit::RollbackTo)
        })
    }
}

/// Why a plan may run now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowed {
    Automatic,
    FirstInstall,
    ApprovedVersion(Version),
    Rollback,
}

impl Allowed {
    pub fn words(&self) -> String {
        match self {
            Allowed::Automatic => "installPlanApproval Automatic".into(),
            Allowed::FirstInstall => "firstInstall Automatic".into(),
            Allowed::ApprovedVersion(v) => format!("approvedVersion {v}"),
            Allowed::Rollback => "rollbackTo (the rollback was asked for)".into(),
        }
    }
}

/// Why a plan waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    Manual,
    Window {
        next: Option<Timestamp>,
    },
    Preview,
    NewPermissions {
        rules: usize,
    },
    /// A rollback its preview refuses.
    Refused {
        blockers: Vec<String>,
    },
    /// An upgrade whose preview found blockers (or failed): a person decides.
    Blocked {
        blockers: Vec<String>,
    },
}

/// What becomes of a plan that waits for approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approve(Allowed),
    Hold(Hold),
    /// The policy no longer allows its target: the plan is deleted (it ran nothing).
    Withdraw(String),
}

/// The verdict on `target` for `sub` at `now`, given the plan's preview when it has one.
pub fn verdict(
    sub: &Subscription,
    target: &PlanTarget,
    impact: Option<&PlanImpact>,
    now: Timestamp,
) -> Verdict {
    let manual = sub.spec.install_plan_approval == Some(Approval::Manual);
    let Some(spec) = &sub.spec.upgrade_policy else {
        return if manual {
            Verdict::Hold(Hold::Manual)
        } else {
            Verdict::Approve(Allowed::Automatic)
        };
    };
    let Ok(policy) = Policy::read(spec) else {
        return Verdict::Hold(Hold::Manual);
    };
    let Ok(to) = parse_version(&target.version) else {
        return Verdict::Hold(Hold::Manual);
    };
    if target.rollback {
        return rollback_verdict(&policy, spec, target, &to, impact);
    }
    if let Some(refusal) = policy
        .versions()
        .ok()
        .and_then(|v| v.refusal(&to).map(String::from))
    {
        return Verdict::Withdraw(refusal);
    }
    if target.first_install {
        let approval = spec.first_install.or(sub.spec.install_plan_approval);
        return match approval {
            Some(Approval::Manual) => Verdict::Hold(Hold::Manual),
            _ => Verdict::Approve(Allowed::FirstInstall),
        };
    }
    let allowed = match policy.limits.iter().find_map(|l| match l {
        Limit::ApprovedVersion(v) if to <= *v => Some(v),
        _ => None,
    }) {
        Some(v) => Allowed::ApprovedVersion(v.clone()),
        None if manual => return Verdict::Hold(Hold::Manual),
        None => Allowed::Automatic,
    };
    if !policy.windows.is_empty() && !any_open(&policy.windows, now) {
        let next = next_opening(&policy.windows, now);
        return Verdict::Hold(Hold::Window { next });
    }
    if spec.hold_new_permissions {
        match impact {
            None => return Verdict::Hold(Hold::Preview),
            Some(impact) if !impact.blockers.is_empty() => {
                return Verdict::Hold(Hold::Blocked {
                    blockers: impact.blockers.clone(),
                });
            }
            Some(impact) if impact.escalates() => {
                let rules = impact.escalations();
                return Verdict::Hold(Hold::NewPermissions { rules });
            }
            Some(_) => {}
        }
    }
    Verdict::Approve(allowed)
}

/// A rollback runs once its preview shows nothing that blocks it; it is withdrawn when
/// `rollbackTo` no longer names its target.
fn rollback_verdict(
    policy: &Policy,
    spec: &UpgradePolicy,
    target: &PlanTarget,
    to: &Version,
    impact: Option<&PlanImpact>,
) -> Verdict {
    let still_wanted = policy.rollback_to() == Some(to)
        || spec.rollback_to.as_deref() == Some(target.csv.as_str());
    if !still_wanted {
        return Verdict::Withdraw("rollbackTo no longer names it".into());
    }
    match impact {
        None => Verdict::Hold(Hold::Preview),
        Some(impact) if !impact.blockers.is_empty() => Verdict::Hold(Hold::Refused {
            blockers: impact.blockers.clone(),
        }),
        Some(_) => Verdict::Approve(Allowed::Rollback),
    }
}

/// The targets a plan carries, when OLM made it for a Subscription with a policy.
pub fn targets(plan: &InstallPlan) -> Option<Vec<PlanTarget>> {
    serde_json::from_str(plan.annotations().get(TARGETS_ANNOTATION)?).ok()
}

/// A plan that waits for approval and was made with targets.
pub fn waiting(plan: &InstallPlan) -> bool {
    plan.phase() == InstallPlanPhase::RequiresApproval
        && !plan.spec.approved
        && plan.metadata.deletion_timestamp.is_none()
}

/// The verdict on a whole plan: withdrawn when any target is, held when any is, approved
/// when all are. None for a plan without targets or for a Subscription not found.
pub fn plan_verdict(plan: &InstallPlan, subs: &[&Subscription], now: Timestamp) -> Option<Verdict> {
    let targets = targets(plan)?;
    let impact = plan.status.as_ref().and_then(|s| s.impact.as_ref());
    let mut verdicts = Vec::with_capacity(targets.len());
    for target in &targets {
        let sub = subs.iter().find(|s| s.name_any() == target.subscription)?;
        verdicts.push(verdict(sub, target, impact, now));
    }
    combine(verdicts)
}

/// Whether a new plan with `targets` is approved as it is made (it has no preview yet).
pub fn approved_at_creation(
    targets: &[PlanTarget],
    subs: &[&Subscription],
    now: Timestamp,
) -> bool {
    let verdicts = targets
        .iter()
        .filter_map(|t| {
            let sub = subs.iter().find(|s| s.name_any() == t.subscription)?;
            Some(verdict(sub, t, None, now))
        })
        .collect();
    matches!(combine(verdicts), Some(Verdict::Approve(_)))
}

fn combine(verdicts: Vec<Verdict>) -> Option<Verdict> {
    let withdrawn = verdicts.iter().find(|v| matches!(v, Verdict::Withdraw(_)));
    let held = verdicts.iter().find(|v| matches!(v, Verdict::Hold(_)));
    withdrawn.or(held).or(verdicts.first()).cloned()
}

/// `UpgradeHeld` for a Subscription with a policy: from the plan it points to and what
/// resolution held back. None without a policy (upstream's conditions say it all).
pub fn explain(
    sub: &Subscription,
    plan: Option<&InstallPlan>,
    held: Option<&Held>,
    now: Timestamp,
) -> Option<SubscriptionCondition> {
    let spec = sub.spec.upgrade_policy.as_ref()?;
    let cond = |status, reason, message: String| {
        Some(
            Cond::new(
                SubscriptionConditionType::UpgradeHeld.as_str(),
                status,
                reason,
                message,
            )
            .into_subscription(),
        )
    };
    let policy = match Policy::read(spec) {
        Ok(policy) => policy,
        Err(error) => {
            return cond(
                ConditionStatus::True,
                Reason::SpecInvalidError,
                error.to_string(),
            );
        }
    };
    let name = sub.name_any();
    let mine = plan.and_then(|p| {
        let target = targets(p)?.into_iter().find(|t| t.subscription == name)?;
        Some((p, target))
    });
    if let Some((plan, target)) = mine.filter(|(p, _)| {
        !matches!(
            p.phase(),
            InstallPlanPhase::Complete | InstallPlanPhase::Failed
        )
    }) {
        let impact = plan.status.as_ref().and_then(|s| s.impact.as_ref());
        let what = format!(
            "InstallPlan {} (to {} {})",
            plan.name_any(),
            target.csv,
            target.version
        );
        return match (waiting(plan), verdict(sub, &target, impact, now)) {
            (true, Verdict::Hold(hold)) => {
                let (reason, message) = held_words(&hold, &what, plan);
                cond(ConditionStatus::True, reason, message)
            }
            (true | false, Verdict::Approve(allowed)) => cond(
                ConditionStatus::False,
                Reason::UpgradeApproved,
                format!("{what} is approved by {}", allowed.words()),
            ),
            _ => cond(
                ConditionStatus::False,
                Reason::UpgradeApproved,
                format!("{what} was approved by hand"),
            ),
        };
    }
    if let Some(held) = held {
        let limit = policy.limit_named(&held.policy);
        let reason = limit
            .as_ref()
            .map_or(Reason::OutsideVersionPolicy, Limit::reason);
        let release = limit.map(|l| l.release(&held.version)).unwrap_or_default();
        return cond(
            ConditionStatus::True,
            reason,
            format!(
                "{} ({}) is available; {} keeps the Subscription from it: {release}",
                held.bundle, held.version, held.policy
            ),
        );
    }
    cond(
        ConditionStatus::False,
        Reason::NothingHeld,
        "no newer version is held back".into(),
    )
}

/// The reason and message of a plan held by `hold`.
fn held_words(hold: &Hold, what: &str, plan: &InstallPlan) -> (Reason, String) {
    let show = format!(
        "olm plan show {}/{}",
        plan.namespace().unwrap_or_default(),
        plan.name_any()
    );
    match hold {
        Hold::Manual => (
            Reason::ManualApproval,
            format!(
                "{what} waits for approval (installPlanApproval Manual): approve it (spec.approved: true), or raise approvedVersion to its version; `{show}` shows what it changes"
            ),
        ),
        Hold::Window { next } => (
            Reason::OutsideMaintenanceWindow,
            format!(
                "{what} waits for a maintenance window{}; approve it (spec.approved: true) to run it now",
                next.map(|t| format!(" (the next opens at {t})"))
                    .unwrap_or_default()
            ),
        ),
        Hold::Preview => (
            Reason::AwaitingPreview,
            format!("{what} waits for its impact preview"),
        ),
        Hold::NewPermissions { rules } => (
            Reason::NewPermissions,
            format!(
                "{what} adds {rules} rule(s) its ServiceAccounts did not have (holdNewPermissions): `{show}` lists them; approve it (spec.approved: true) to grant them"
            ),
        ),
        Hold::Blocked { blockers } => (
            Reason::PlanBlocked,
            format!(
                "{what} is held by its preview: {}; `{show}` shows it; approve it (spec.approved: true) to run it anyway",
                blockers.join("; ")
            ),
        ),
        Hold::Refused { blockers } => (
            Reason::RollbackRefused,
            format!(
                "rollback refused: {}; remove rollbackTo to cancel",
                blockers.join("; ")
            ),
        ),
    }
}

/// How long until a held plan's verdict can change by time alone (a window opening).
pub fn wake_after(verdicts: &[Verdict], now: Timestamp) -> Option<std::time::Duration> {
    verdicts
        .iter()
        .filter_map(|v| match v {
            Verdict::Hold(Hold::Window { next: Some(next) }) => Some(*next),
            _ => None,
        })
        .min()
        .and_then(|next| {
            let secs = next.as_second().saturating_sub(now.as_second()).max(1);
            u64::try_from(secs).ok().map(std::time::Duration::from_secs)
        })
}

#[cfg(test)]
mod tests;
