//! `OLMConfig` (operators.coreos.com/v1, cluster-scoped): OLM's own settings, one object
//! named `cluster` for the whole cluster, field for field as upstream's. OLM creates it when
//! it is missing (the `olm run` flags are the defaults of a new one) and then reads it live;
//! its status says whether the copied CSVs are as the settings want them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the one OLMConfig OLM reads.
pub const OLM_CONFIG_NAME: &str = "cluster";

/// Upstream's pattern for `packageServerSyncInterval`: hours, minutes and seconds only.
const SYNC_INTERVAL_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$";

/// What OLM may be told; everything is optional (an empty spec is OLM's defaults).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OLMConfig",
    root = "OlmConfig",
    doc = "OLM's settings for the whole cluster: one object, named `cluster`.",
    plural = "olmconfigs",
    status = "OlmConfigStatus",
    category = "olm"
)]
#[serde(rename_all = "camelCase")]
pub struct OlmConfigSpec {
    /// The features that can be switched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// No copied CSVs for operators installed in an OperatorGroup that targets all
    /// namespaces; those that exist are deleted. Switched back off, the copies are made again.
    #[serde(
        default,
        rename = "disableCopiedCSVs",
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_copied_csvs: Option<bool>,
    /// Upstream's period of its package-server's catalog resync (a Go duration of hours,
    /// minutes and seconds, e.g. `60m`). Accepted and stored; it sets nothing here: the
    /// packagemanifests `olm run` serves come from the catalog snapshots, which follow each
    /// CatalogSource's own polling and events, with no resync of their own to pace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "sync_interval_schema")]
    pub package_server_sync_interval: Option<String>,
}

fn sync_interval_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "pattern": SYNC_INTERVAL_PATTERN,
    })
}

/// Whether the settings are in effect.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OlmConfigStatus {
    /// `DisabledCopiedCSVs`: True once copied CSVs are disabled and none is left for an
    /// operator installed in AllNamespaces mode.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "crate::api::schema::conditions_by_type::<Condition>")]
    pub conditions: Vec<Condition>,
}

impl OlmConfigSpec {
    /// Whether copied CSVs are disabled: only when the spec says so (upstream's
    /// `CopiedCSVsAreEnabled`, negated).
    pub fn disables_copied_csvs(&self) -> bool {
        self.features
            .as_ref()
            .and_then(|f| f.disable_copied_csvs)
            .unwrap_or(false)
    }

    /// The spec of the OLMConfig OLM creates when there is none: `disable_copied_csvs` (the
    /// `--disable-copied-csvs` flag) written out when set, an empty spec (all upstream's
    /// defaults) otherwise.
    pub fn seed(disable_copied_csvs: bool) -> Self {
        OlmConfigSpec {
            features: disable_copied_csvs.then_some(Features {
                disable_copied_csvs: Some(true),
                package_server_sync_interval: None,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_upstream_writes_it() {
        let config: OlmConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
            "metadata": {"name": "cluster"},
            "spec": {"features": {"disableCopiedCSVs": true, "packageServerSyncInterval": "60m"}},
        }))
        .unwrap();
        assert!(config.spec.disables_copied_csvs());
        let features = config.spec.features.as_ref().unwrap();
        assert_eq!(
            features.package_server_sync_interval.as_deref(),
            Some("60m")
        );
        // Unset or false: copies are made (upstream's default).
        assert!(!OlmConfigSpec::default().disables_copied_csvs());
        let off: OlmConfigSpec =
            serde_json::from_value(serde_json::json!({"features": {"disableCopiedCSVs": false}}))
                .unwrap();
        assert!(!off.disables_copied_csvs());
    }

    #[test]
    fn the_seed_writes_the_flag_only_when_set() {
        assert_eq!(
            serde_json::to_value(OlmConfigSpec::seed(true)).unwrap(),
            serde_json::json!({"features": {"disableCopiedCSVs": true}})
        );
        assert!(OlmConfigSpec::seed(true).disables_copied_csvs());
        assert_eq!(
            serde_json::to_value(OlmConfigSpec::seed(false)).unwrap(),
            serde_json::json!({})
        );
    }
}
