//! The election's settings: below both the rules in `decide` and the shell in `super`,
//! which read them.

use std::time::Duration;

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// Who we are in `holderIdentity`; must differ between replicas.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_interval: Duration,
    /// How often a standby looks at the lease.
    pub retry_interval: Duration,
}

impl LeaseConfig {
    /// How long a leader keeps acting without a successful renewal. Shorter than the lease
    /// duration, so that it stops before anyone else may start.
    pub fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }
}
