//! Cluster tests: they run against the real control plane from `hack/cluster/up`
//! (`hack/test` brings it up and down). Build them with `--features cluster-tests`.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod harness;
mod processes;
mod proxy;
#[path = "../common/registry.rs"]
mod registry;

mod api_services;
mod catalog_sources;
mod config_map_catalogs;
mod control_plane;
mod crds;
mod csv_lifecycle;
mod deploy;
mod hostile_catalogs;
mod hostile_registry;
mod image_catalogs;
mod image_installs;
mod install_modes;
#[cfg(feature = "upstream-tests")]
mod kubectl_operator;
mod leader_election;
mod mirrors;
mod olm_config;
mod operator_api;
mod operator_conditions;
mod operator_groups;
mod operators;
mod operators_at;
mod operators_ptemplate;
mod operators_reverse_words;
mod packagemanifests;
#[cfg(feature = "upstream-tests")]
mod packagemanifests_upstream;
mod pull_proxy;
mod real_csvs;
mod real_node;
mod runtime_hardening;
mod security;
mod served_locally;
mod subscriptions;
mod upgrade_preview;
mod webhooks;
