//! OLM's pure half: what needs no cluster. [`catalog`] reads, validates and renders
//! file-based catalogs and registry+v1 bundles; [`resolver`] chooses bundles for
//! Subscriptions; [`duration`] reads Go durations as upstream's fields carry them;
//! [`parallel`] spreads batch work over the cores.
//!
//! This crate depends on no Kubernetes client and no async runtime, so nothing here can
//! reach a cluster: the `olm` crate wires it to one.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it
// tests (the library is checked without `cfg(test)` too, so it stays held there).
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod catalog;
pub mod duration;
pub mod parallel;
pub mod resolver;

#[cfg(test)]
mod error_words;
