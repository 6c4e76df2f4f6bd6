//! Cluster access below the controllers: the shared informers (one list+watch per kind and
//! scope), API handles in a scope, clients acting as an OperatorGroup's account, pull
//! Secrets, the cluster's image mirror sets, and the layer that collects the API server's
//! warnings.

pub mod api;
pub mod fanout;
pub mod informers;
pub mod mirror_sets;
pub mod ownership;
pub mod pull_secrets;
pub mod scoped;
pub mod warnings;
