//! `--leader-elect`: one replica acts, the others wait on a Lease (operator-sdk's flag of the
//! same name, which the older bundles' Deployments pass). The Lease is `<operator>-leader` in
//! the pod's namespace. The holder renews it; a standby takes it once it expires or is
//! released; a leader that cannot renew in time exits (its pod restarts as a standby); a
//! leader stopped by a signal releases it, so that a rolling update's new pod takes over at
//! once instead of after the Lease's duration.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

const LEASE_SECONDS: i32 = 15;
const RENEW_EVERY: Duration = Duration::from_secs(5);
const RETRY_EVERY: Duration = Duration::from_secs(2);

/// Who competes for which Lease.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub namespace: String,
    pub name: String,
    pub identity: String,
}

impl Candidate {
    /// This pod, for `operator`: the namespace from the ServiceAccount mount (or
    /// `POD_NAMESPACE`), the identity from `POD_NAME` (or the host name, a pod's name).
    pub fn of_this_pod(operator: &str) -> Option<Candidate> {
        let namespace =
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .ok()
                .or_else(|| std::env::var("POD_NAMESPACE").ok())?;
        let identity = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())?;
        Some(Candidate {
            namespace: namespace.trim().to_string(),
            name: format!("{operator}-leader"),
            identity: identity.trim().to_string(),
        })
    }
}

/// Waits until `candidate` holds the Lease, then keeps it in a task of its own, which ends
/// once it has released the Lease on a stop signal (await it before the process exits).
pub async fn acquire(
    client: &Client,
    candidate: Candidate,
) -> Result<tokio::task::JoinHandle<()>, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &candidate.namespace);
    tracing::info!(lease = %candidate.name, identity = %candidate.identity, "waiting for leadership");
    loop {
        let current = api.get_opt(&candidate.name).await?;
        if let Some(lease) = &current
            && held_by_another(lease, &candidate.identity, Timestamp::now())
        {
            tokio::time::sleep(RETRY_EVERY).await;
            continue;
        }
        match write(&api, current, &candidate, true).await {
            Ok(()) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(error) => return Err(error),
        }
    }
    tracing::info!(lease = %candidate.name, "leading");
    Ok(tokio::spawn(keep(api, candidate)))
}

/// Renews until the process is told to stop (then releases) or cannot renew in time (then
/// exits: acting without the Lease could race the next leader).
async fn keep(api: Api<Lease>, candidate: Candidate) {
    let mut renewed = tokio::time::Instant::now();
    let stop = crate::signal::stop_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return release(&api, &candidate).await,
            () = tokio::time::sleep(RENEW_EVERY) => {}
        }
        match renew(&api, &candidate).await {
            Ok(()) => renewed = tokio::time::Instant::now(),
            Err(Renewal::Lost) => {
                tracing::error!(lease = %candidate.name, "leadership lost to another replica");
                std::process::exit(1);
            }
            Err(Renewal::Failed(error)) if renewed.elapsed() > lease_duration() => {
                tracing::error!(lease = %candidate.name, %error, "leadership not renewed in time");
                std::process::exit(1);
            }
            Err(Renewal::Failed(error)) => {
                tracing::warn!(lease = %candidate.name, %error, "renewing leadership");
            }
        }
    }
}

enum Renewal {
    /// Another identity holds the Lease now.
    Lost,
    Failed(kube::Error),
}

async fn renew(api: &Api<Lease>, candidate: &Candidate) -> Result<(), Renewal> {
    match api
        .get_opt(&candidate.name)
        .await
        .map_err(Renewal::Failed)?
    {
        Some(lease) if holder(&lease) == Some(&candidate.identity) => {
            write(api, Some(lease), candidate, false)
                .await
                .map_err(Renewal::Failed)
        }
        _ => Err(Renewal::Lost),
    }
}

/// Clears the holder, so that a standby takes over at once.
async fn release(api: &Api<Lease>, candidate: &Candidate) {
    let released = Candidate {
        identity: String::new(),
        ..candidate.clone()
    };
    if let Ok(Some(lease)) = api.get_opt(&candidate.name).await
        && holder(&lease) == Some(&candidate.identity)
    {
        let _ = write(api, Some(lease), &released, false).await;
    }
    tracing::info!(lease = %candidate.name, "released leadership");
}

fn lease_duration() -> Duration {
    Duration::from_secs(LEASE_SECONDS.unsigned_abs().into())
}

fn holder(lease: &Lease) -> Option<&String> {
    lease.spec.as_ref()?.holder_identity.as_ref()
}

/// Another identity holds the Lease and renewed it within its duration.
fn held_by_another(lease: &Lease, identity: &str, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    let other = spec
        .holder_identity
        .as_deref()
        .is_some_and(|h| !h.is_empty() && h != identity);
    let seconds = spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS);
    let fresh = spec
        .renew_time
        .as_ref()
        .is_some_and(|renewed| renewed.0 + jiff_seconds(seconds) > now);
    other && fresh
}

fn jiff_seconds(seconds: i32) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::from_secs(seconds.into())
}

/// Creates or replaces the Lease for `candidate` (an empty identity releases it), guarded by
/// the resourceVersion read: a 409 means someone else wrote first.
async fn write(
    api: &Api<Lease>,
    current: Option<Lease>,
    candidate: &Candidate,
    acquiring: bool,
) -> Result<(), kube::Error> {
    let now = MicroTime(Timestamp::now());
    let previous = current
        .as_ref()
        .and_then(|l| l.spec.clone())
        .unwrap_or_default();
    let transitions = previous.lease_transitions.unwrap_or(0);
    let spec = LeaseSpec {
        holder_identity: Some(candidate.identity.clone()),
        lease_duration_seconds: Some(LEASE_SECONDS),
        acquire_time: if acquiring {
            Some(now.clone())
        } else {
            previous.acquire_time
        },
        renew_time: Some(now),
        lease_transitions: Some(transitions + i32::from(acquiring && current.is_some())),
        ..LeaseSpec::default()
    };
    match current {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(candidate.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await.map(drop)
        }
        Some(mut lease) => {
            lease.spec = Some(spec);
            api.replace(&candidate.name, &PostParams::default(), &lease)
                .await
                .map(drop)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed_secs_ago: i64) -> Lease {
        let renewed = Timestamp::now() - jiff_seconds(i32::try_from(renewed_secs_ago).unwrap());
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(LEASE_SECONDS),
                renew_time: Some(MicroTime(renewed)),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_fresh_lease_of_another_waits_an_expired_or_released_or_own_one_does_not() {
        let now = Timestamp::now();
        assert!(held_by_another(&lease("pod-a", 3), "pod-b", now));
        assert!(!held_by_another(&lease("pod-a", 60), "pod-b", now));
        assert!(!held_by_another(&lease("", 3), "pod-b", now));
        assert!(!held_by_another(&lease("pod-b", 3), "pod-b", now));
    }
}
