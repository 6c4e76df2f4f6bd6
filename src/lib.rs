//! OLM in Rust: the Operator Lifecycle Manager, compatible with upstream OLM v0.
//!
//! Modules mirror the domain: [`api`] holds the `operators.coreos.com` types and their CRDs;
//! [`cli`] is the thin `olm` command line on top.

pub mod api;
pub mod catalog;
pub mod cli;
pub mod registry;
pub mod resolver;
pub mod telemetry;
