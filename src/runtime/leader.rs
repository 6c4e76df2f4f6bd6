//! Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules: the holder
//! renews every `renew_interval`; a candidate takes over once it has seen the same lease
//! record, unrenewed, for a whole `lease_duration` on *its own* clock (so clock skew between
//! nodes does not matter), or at once when the holder released it. Every write carries the
//! resourceVersion it read, so two candidates can never both win the same round.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

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

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lease {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("lost the leader lease {namespace}/{name} (now held by {holder:?})")]
    Lost {
        namespace: String,
        name: String,
        holder: Option<String>,
    },
    #[error(
        "could not renew the leader lease {namespace}/{name} within {deadline:?}; stepping down"
    )]
    RenewDeadline {
        namespace: String,
        name: String,
        deadline: Duration,
    },
}

/// The lease record as last seen, and when this process first saw it.
struct Observed {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    resource_version: Option<String>,
    since: Instant,
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
}

/// The outcome of one round.
#[derive(Debug, PartialEq, Eq)]
pub enum Round {
    Leading,
    /// Someone else holds a live lease (or won the race for it).
    Following {
        holder: Option<String>,
    },
}

impl LeaderElector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn kube_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Kube {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    async fn read(&self) -> Result<Option<Lease>, LeaderError> {
        self.api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.kube_error(e))
    }

    /// One election round: create, renew or take over the lease, or observe its holder.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Round, LeaderError> {
        let now = Timestamp::now();
        let duration_secs =
            i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Some(mut lease) = self.read().await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Round::Leading),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    Ok(Round::Following { holder: None })
                }
                Err(e) => Err(self.kube_error(e)),
            };
        };

        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let renew_time = spec.renew_time.as_ref().map(|t| t.0);
        let resource_version = lease.metadata.resource_version.clone();
        let changed = self.observed.as_ref().is_none_or(|o| {
            o.holder != holder
                || o.renew_time != renew_time
                || o.resource_version != resource_version
        });
        if changed {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew_time,
                resource_version,
                since: Instant::now(),
            });
        }

        let ours = holder.as_deref() == Some(self.config.identity.as_str());
        if !ours && holder.is_some() {
            let holder_duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.config.lease_duration, Duration::from_secs);
            let unrenewed_for = self
                .observed
                .as_ref()
                .map_or(Duration::ZERO, |o| o.since.elapsed());
            if unrenewed_for < holder_duration {
                return Ok(Round::Following { holder });
            }
        }

        if ours {
            spec.renew_time = Some(MicroTime(now));
        } else {
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.renew_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_duration_seconds = Some(duration_secs);
        // `replace` sends the resourceVersion we read: a concurrent writer makes this a 409.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Round::Leading),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Following { holder }),
            Err(e) => Err(self.kube_error(e)),
        }
    }

    /// Gives the lease up so that a standby takes over at once (client-go's ReleaseOnCancel).
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        let Some(mut lease) = self.read().await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = Timestamp::now();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(now));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| self.kube_error(e))
    }
}

/// Runs elections until `shutdown` turns true, publishing leadership on `leading`.
///
/// Returns an error when leadership, once held, is lost: the caller must stop acting (the
/// process exits, as upstream OLM does, and comes back as a standby).
pub async fn run(
    mut elector: LeaderElector,
    leading: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LeaderError> {
    let config = elector.config().clone();
    let mut last_renewal: Option<Instant> = None;
    let result = loop {
        if *shutdown.borrow() {
            break Ok(());
        }
        match elector.try_acquire_or_renew().await {
            Ok(Round::Leading) => {
                if last_renewal.is_none() {
                    tracing::info!(lease = %config.name, identity = %config.identity, "acquired the leader lease");
                    leading.send_replace(true);
                }
                last_renewal = Some(Instant::now());
            }
            Ok(Round::Following { holder }) => {
                if last_renewal.is_some() {
                    break Err(LeaderError::Lost {
                        namespace: config.namespace.clone(),
                        name: config.name.clone(),
                        holder,
                    });
                }
                tracing::debug!(lease = %config.name, ?holder, "standing by");
            }
            Err(error) => {
                tracing::warn!(%error, "leader election round failed");
                if let Some(at) = last_renewal
                    && at.elapsed() > config.renew_deadline()
                {
                    break Err(LeaderError::RenewDeadline {
                        namespace: config.namespace.clone(),
                        name: config.name.clone(),
                        deadline: config.renew_deadline(),
                    });
                }
            }
        }
        let pause = if last_renewal.is_some() {
            config.renew_interval
        } else {
            config.retry_interval
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
    };
    if result.is_err() {
        leading.send_replace(false);
    } else if last_renewal.is_some() {
        leading.send_replace(false);
        if let Err(error) = elector.release().await {
            tracing::warn!(%error, "could not release the leader lease; a standby takes over when it expires");
        } else {
            tracing::info!(lease = %config.name, "released the leader lease");
        }
    }
    result
}
