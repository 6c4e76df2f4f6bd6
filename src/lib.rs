//! OLM in Rust: the Operator Lifecycle Manager, compatible with upstream OLM v0.
//!
//! Modules mirror the domain: [`api`] holds the `operators.coreos.com` types and their CRDs;
//! [`catalog`] reads, validates and renders catalogs; [`resolver`] chooses bundles;
//! [`registry`] speaks the registry gRPC API; [`controllers`] reconcile the kinds and
//! [`runtime`] hosts them in `olm run`; [`snapshots`] is the catalog cache every replica holds; [`cli`] is the thin `olm` command line on top.

pub mod allocator;
pub mod api;
pub mod catalog;
pub mod cli;
pub mod controllers;
pub mod memory;
pub mod oci;
pub mod packageserver;
pub mod parallel;
pub mod registry;
pub mod resolver;
pub mod runtime;
pub mod signal;
pub mod snapshots;
pub mod telemetry;
