//! The controllers `olm run` hosts, one module per kind, sharing one [`context::Context`]
//! (client, event Recorder, metrics, catalog snapshots). They meet through the API objects
//! and the snapshots, never through each other's internals.

pub mod catalogsource;
pub mod context;
pub mod duration;
pub mod metrics;
pub mod snapshots;
