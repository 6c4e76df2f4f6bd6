//! A round decided, without I/O: the copied-CSV switch in effect, and the
//! `DisabledCopiedCSVs` condition, with upstream's reasons and messages
//! (`syncOLMConfig`/`getCopiedCSVsCondition` in its olm operator).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use crate::api::{
    OlmConfig, OlmConfigConditionType, OlmConfigReason, OlmConfigSpec, OlmConfigStatus,
};
use crate::controllers::kit::Cond;

pub const ENABLED_AND_PRESENT: &str = "Copied CSVs are enabled and present across the cluster";
pub const ENABLED_AND_MISSING: &str =
    "Copied CSVs are enabled and at least one copied CSVs is missing";
pub const DISABLED_AND_FOUND: &str = "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode";
pub const DISABLED_AND_NONE: &str = "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode";

/// One operator installed in AllNamespaces mode (a CSV in a namespace whose one
/// OperatorGroup targets all namespaces), as a round found it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    pub namespace: String,
    pub name: String,
    /// Whether it gets copies while they are enabled: a member of its group in a settled
    /// phase (the copier copies only those).
    pub copied: bool,
    /// How many namespaces hold a copy of it.
    pub copies: usize,
    /// How many active namespaces (not its own) hold no CSV of its name: where its copy is
    /// missing while copies are enabled.
    pub uncovered: usize,
}

/// What a round found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub spec: OlmConfigSpec,
    /// `--disable-copied-csvs`.
    pub flag: bool,
    pub sources: Vec<Source>,
}

/// What a round concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether copies are disabled for AllNamespaces operators.
    pub disabled: bool,
    pub condition: Cond,
    /// `namespace/name` of the operators that keep the condition from being met (copies
    /// left while disabled, or missing while enabled), for the log.
    pub holding_out: Vec<String>,
}

/// The switch in effect: the OLMConfig's when there is one (unset means enabled, as
/// upstream), else the flag, which is also what a new OLMConfig is created with.
pub fn switch(spec: Option<&OlmConfigSpec>, flag: bool) -> bool {
    spec.map_or(flag, OlmConfigSpec::disables_copied_csvs)
}

pub fn decide(observed: &Observed) -> Decision {
    let disabled = switch(Some(&observed.spec), observed.flag);
    let holding_out: Vec<String> = observed
        .sources
        .iter()
        .filter(|s| {
            if disabled {
                s.copies > 0
            } else {
                s.copied && s.uncovered > 0
            }
        })
        .map(|s| format!("{}/{}", s.namespace, s.name))
        .collect();
    let met = holding_out.is_empty();
    let type_ = OlmConfigConditionType::DisabledCopiedCSVs.as_str();
    let condition = match (disabled, met) {
        (true, true) => Cond::new(
            type_,
            true,
            OlmConfigReason::CopiedCSVsDisabled,
            DISABLED_AND_NONE,
        ),
        (true, false) => Cond::new(
            type_,
            false,
            OlmConfigReason::CopiedCSVsDisabled,
            DISABLED_AND_FOUND,
        ),
        (false, true) => Cond::new(
            type_,
            false,
            OlmConfigReason::CopiedCSVsEnabled,
            ENABLED_AND_PRESENT,
        ),
        (false, false) => Cond::new(
            type_,
            false,
            OlmConfigReason::CopiedCSVsEnabled,
            ENABLED_AND_MISSING,
        ),
    };
    Decision {
        disabled,
        condition,
        holding_out,
    }
}

/// The status to write for `condition`, or None when the OLMConfig shows it already (the
/// generation it was decided at included: a client can tell a condition about the spec it
/// sees from an older one).
pub fn status(config: &OlmConfig, condition: Cond, now: Timestamp) -> Option<OlmConfigStatus> {
    let type_ = OlmConfigConditionType::DisabledCopiedCSVs.as_str();
    let previous: Option<&Condition> = config
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_));
    let next = condition.into_meta(previous, config.metadata.generation, now);
    (previous != Some(&next)).then(|| OlmConfigStatus {
        conditions: vec![next],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Features;

    fn spec(disable: Option<bool>) -> OlmConfigSpec {
        OlmConfigSpec {
            features: Some(Features {
                disable_copied_csvs: disable,
                package_server_sync_interval: None,
            }),
        }
    }

    fn source(name: &str, copied: bool, copies: usize, uncovered: usize) -> Source {
        Source {
            namespace: "ops".into(),
            name: name.into(),
            copied,
            copies,
            uncovered,
        }
    }

    fn shown(decision: &Decision) -> (bool, String, String, String) {
        let condition =
            decision
                .condition
                .clone()
                .into_meta(None, None, Timestamp::from_second(1).unwrap());
        (
            decision.disabled,
            condition.status,
            condition.reason,
            condition.message,
        )
    }

    #[test]
    fn the_object_decides_and_the_flag_only_stands_in_for_a_missing_one() {
        assert!(switch(Some(&spec(Some(true))), false));
        assert!(
            !switch(Some(&spec(Some(false))), true),
            "never the flag over the object"
        );
        assert!(
            !switch(Some(&spec(None)), true),
            "unset means enabled, as upstream"
        );
        assert!(!switch(Some(&OlmConfigSpec::default()), true));
        assert!(switch(None, true));
        assert!(!switch(None, false));
    }

    #[test]
    fn disabled_is_met_once_no_copy_is_left() {
        let mut observed = Observed {
            spec: spec(Some(true)),
            flag: false,
            sources: vec![source("a.v1", true, 3, 0), source("b.v1", true, 0, 5)],
        };
        let left = decide(&observed);
        assert_eq!(
            shown(&left),
            (
                true,
                "False".into(),
                "CopiedCSVsDisabled".into(),
                DISABLED_AND_FOUND.into()
            )
        );
        assert_eq!(left.holding_out, ["ops/a.v1"]);
        observed.sources[0].copies = 0;
        let gone = decide(&observed);
        assert_eq!(
            shown(&gone),
            (
                true,
                "True".into(),
                "CopiedCSVsDisabled".into(),
                DISABLED_AND_NONE.into()
            )
        );
        assert!(gone.holding_out.is_empty());
        // Nothing installed in AllNamespaces mode: met at once.
        observed.sources.clear();
        assert_eq!(shown(&decide(&observed)).1, "True");
    }

    #[test]
    fn enabled_is_false_and_says_whether_a_copy_is_missing() {
        let mut observed = Observed {
            spec: OlmConfigSpec::default(),
            flag: true,
            // Installing: no copies expected yet, whatever is uncovered.
            sources: vec![source("a.v1", true, 4, 1), source("b.v1", false, 0, 5)],
        };
        let missing = decide(&observed);
        assert_eq!(
            shown(&missing),
            (
                false,
                "False".into(),
                "CopiedCSVsEnabled".into(),
                ENABLED_AND_MISSING.into()
            )
        );
        assert_eq!(missing.holding_out, ["ops/a.v1"]);
        observed.sources[0].uncovered = 0;
        assert_eq!(
            shown(&decide(&observed)),
            (
                false,
                "False".into(),
                "CopiedCSVsEnabled".into(),
                ENABLED_AND_PRESENT.into()
            )
        );
    }

    #[test]
    fn the_status_is_written_only_when_the_condition_or_generation_moves() {
        let mut config = OlmConfig::new("cluster", spec(Some(true)));
        config.metadata.generation = Some(2);
        let then = Timestamp::from_second(1_000).unwrap();
        let observed = Observed {
            spec: config.spec.clone(),
            flag: false,
            sources: vec![],
        };
        let first = status(&config, decide(&observed).condition, then).expect("a first write");
        let written = &first.conditions[0];
        assert_eq!(
            (written.type_.as_str(), written.observed_generation),
            ("DisabledCopiedCSVs", Some(2))
        );
        config.status = Some(first.clone());
        let later = Timestamp::from_second(2_000).unwrap();
        assert_eq!(status(&config, decide(&observed).condition, later), None);
        // A new generation, same condition: written again, its transition time kept.
        config.metadata.generation = Some(3);
        let again = status(&config, decide(&observed).condition, later).unwrap();
        assert_eq!(again.conditions[0].observed_generation, Some(3));
        assert_eq!(
            again.conditions[0].last_transition_time,
            written.last_transition_time
        );
    }
}
