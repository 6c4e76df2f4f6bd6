//! What the operators of our catalog share: the command line (`--kubeconfig`,
//! `--namespace`/`WATCH_NAMESPACE`, the probe address, the log format), the namespaces an
//! operator watches (one, a list, or all, as OLM's `olm.targetNamespaces` annotation says),
//! `/healthz` `/readyz` `/metrics`, status conditions and Events, and `--leader-elect`.
//!
//! Nothing here knows about any operator's resources.

pub mod cli;
pub mod conditions;
pub mod events;
pub mod health;
pub mod leader;
pub mod namespaces;
pub mod runner;
pub mod signal;

pub use cli::CommonArgs;
pub use namespaces::Namespaces;
pub use runner::Runtime;
