//! What the test operator and the mock extension API server share: HTTPS with the
//! certificate OLM mounts, reloaded when the kubelet rewrites it.

pub mod mock;
pub mod tls;
