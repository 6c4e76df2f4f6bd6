//! Status conditions the way `meta.SetStatusCondition` keeps them: the transition time
//! moves only when the status does, so recomputing an unchanged condition changes nothing
//! (and a status that did not change is not written).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

pub fn status_str(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// Sets (adds or updates) the condition `type_`.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let status = status_str(status);
    let updated = Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time: Time(Timestamp::now()),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let since = if existing.status == status {
                existing.last_transition_time.clone()
            } else {
                updated.last_transition_time.clone()
            };
            *existing = Condition {
                last_transition_time: since,
                ..updated
            };
        }
        None => conditions.push(updated),
    }
}

pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut conditions = Vec::new();
        set(&mut conditions, "Ready", false, "Waiting", "", Some(1));
        let first = conditions[0].last_transition_time.clone();
        let before = conditions.clone();
        set(&mut conditions, "Ready", false, "Waiting", "", Some(1));
        assert_eq!(conditions, before, "an unchanged condition changes nothing");
        set(
            &mut conditions,
            "Ready",
            false,
            "StillWaiting",
            "m",
            Some(2),
        );
        assert_eq!(conditions[0].last_transition_time, first);
        assert_eq!(conditions[0].reason, "StillWaiting");
        std::thread::sleep(std::time::Duration::from_millis(2));
        set(&mut conditions, "Ready", true, "Ready", "", Some(2));
        assert_ne!(conditions[0].last_transition_time, first);
        assert_eq!(find(&conditions, "Ready").unwrap().status, "True");
        assert_eq!(conditions.len(), 1);
    }
}
