//! Conditions, built one way: a typed status instead of bare `"True"`/`"False"` strings, a
//! reason from the kind's reason enum ([`crate::api::ConditionReason`]) instead of a literal,
//! and one builder that fills each kind's condition shape (upstream's kinds each have their
//! own: meta/v1 `Condition` on CatalogSources and OperatorGroups, `InstallPlanCondition`,
//! `SubscriptionCondition`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::{ConditionReason, InstallPlanCondition, SubscriptionCondition};

/// A condition's `status`, as the API spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }

    /// Whether a condition's `status` text says this.
    pub fn is(self, status: &str) -> bool {
        status == self.as_str()
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

impl std::fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One condition to write, before it takes its kind's shape. Built only through its
/// constructors, so every reason OLM writes comes from a reason enum of [`crate::api`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    type_: String,
    status: ConditionStatus,
    reason: String,
    message: String,
}

impl Cond {
    pub fn new(
        type_: &str,
        status: impl Into<ConditionStatus>,
        reason: impl ConditionReason,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_: type_.into(),
            status: status.into(),
            reason: reason.as_str().into(),
            message: message.into(),
        }
    }

    /// A condition whose status says it all: no reason and no message, as upstream's
    /// `ConditionMet` writes an InstallPlan's Resolved and Installed.
    pub fn without_reason(type_: &str, status: impl Into<ConditionStatus>) -> Self {
        Cond {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
        }
    }

    /// A condition that passes on another object's reason as that object spells it (a
    /// Subscription's InstallPlanFailed carries its plan's reason, as upstream's does). Our
    /// own reasons go through [`Cond::new`].
    pub fn relaying_reason(
        type_: &str,
        status: impl Into<ConditionStatus>,
        reason: String,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_: type_.into(),
            status: status.into(),
            reason,
            message: message.into(),
        }
    }

    /// A meta/v1 Condition. Its transition time moves only when the status does (the
    /// Kubernetes conventions), so `previous` (the same type, as the object shows it now)
    /// lends its time when the status holds.
    pub fn into_meta(
        self,
        previous: Option<&Condition>,
        observed_generation: Option<i64>,
        now: Timestamp,
    ) -> Condition {
        let last_transition_time = previous
            .filter(|p| self.status.is(&p.status))
            .map_or(Time(now), |p| p.last_transition_time.clone());
        Condition {
            type_: self.type_,
            status: self.status.as_str().into(),
            reason: self.reason,
            message: self.message,
            observed_generation,
            last_transition_time,
        }
    }

    /// An InstallPlan condition updated and transitioned at `transitioned` and `now`.
    pub fn into_install_plan(self, transitioned: Time, now: Time) -> InstallPlanCondition {
        InstallPlanCondition {
            type_: Some(self.type_),
            status: Some(self.status.as_str().into()),
            last_update_time: Some(now),
            last_transition_time: Some(transitioned),
            reason: (!self.reason.is_empty()).then_some(self.reason),
            message: (!self.message.is_empty()).then_some(self.message),
        }
    }

    /// A Subscription condition (its times are filled where the status is assembled).
    pub fn into_subscription(self) -> SubscriptionCondition {
        SubscriptionCondition {
            type_: self.type_,
            status: self.status.as_str().into(),
            reason: Some(self.reason),
            message: Some(self.message),
            last_heartbeat_time: None,
            last_transition_time: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogSourceReason::{Connected, ConnectionFailed};
    use crate::api::SubscriptionReason::AllCatalogSourcesHealthy;

    #[test]
    fn a_transition_time_moves_only_with_the_status() {
        let then = Timestamp::from_second(1_000).unwrap();
        let now = Timestamp::from_second(2_000).unwrap();
        let before = Cond::new("Ready", true, Connected, "fine").into_meta(None, Some(1), then);
        assert_eq!(before.status, "True");
        assert_eq!(before.last_transition_time, Time(then));
        let held = Cond::new("Ready", true, Connected, "still").into_meta(Some(&before), None, now);
        assert_eq!(held.last_transition_time, Time(then), "status held");
        let moved =
            Cond::new("Ready", false, ConnectionFailed, "gone").into_meta(Some(&held), None, now);
        assert_eq!(moved.last_transition_time, Time(now), "status moved");
        assert_eq!(
            (moved.status.as_str(), moved.reason.as_str()),
            ("False", "ConnectionFailed")
        );
    }

    #[test]
    fn every_shape_spells_the_status_as_the_api_does() {
        let t = Time(Timestamp::from_second(5).unwrap());
        let plan = Cond::without_reason("Installed", ConditionStatus::Unknown)
            .into_install_plan(t.clone(), t);
        assert_eq!(plan.status.as_deref(), Some("Unknown"));
        assert_eq!(
            (plan.reason, plan.message),
            (None, None),
            "empty stays absent"
        );
        let sub = Cond::new("ResolutionFailed", false, AllCatalogSourcesHealthy, "ok")
            .into_subscription();
        assert_eq!(sub.status, "False");
        assert_eq!(sub.reason.as_deref(), Some("AllCatalogSourcesHealthy"));
        assert!(ConditionStatus::True.is("True") && !ConditionStatus::True.is("true"));
    }
}
