//! Leader election on a coordination.k8s.io/v1 Lease, built so that two replicas never
//! lead at once, also when the API server stops answering one of them.
//!
//! - [`decide`] holds the rules (acquire, renew, follow, step down) as pure functions of
//!   the record read and the times; this module only does the I/O around them.
//! - Every Lease call is bounded by the renew deadline (and, while leading, by the time left
//!   until it), so a call that hangs counts as a failed one.
//! - A watchdog task flips `leading` to false at `last successful renewal + renew deadline`
//!   whether or not any call returned. The renew deadline is shorter than the lease
//!   duration, and a candidate counts that duration from when it saw the renewal, so the
//!   old leader has stopped before a candidate may take over.
//! - Every write carries the resourceVersion it read, so two candidates can never both win
//!   the same round.
//!
//! What a Lease cannot fence: a write a controller sent before the step-down but that the
//! network delivers only after a standby took over. The gap between the two (lease duration
//! minus renew deadline, 3.3 s with the defaults) covers requests that are in flight, not
//! ones delayed for longer.

mod config;
pub mod decide;

pub use config::LeaseConfig;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

use decide::{Claim, Decision, Observation, StepDown, claimed_spec, observe, released_spec};

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lease {namespace}/{name}: {call}: {source}")]
    Kube {
        namespace: String,
        name: String,
        call: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("lease {namespace}/{name}: {call} got no answer within {after:?}")]
    Timeout {
        namespace: String,
        name: String,
        call: &'static str,
        after: Duration,
    },
    #[error("lost the leader lease {namespace}/{name} (now held by {holder:?})")]
    Lost {
        namespace: String,
        name: String,
        holder: Option<String>,
    },
    #[error("the leader lease {namespace}/{name} was deleted while this process led")]
    Deleted { namespace: String, name: String },
    #[error(
        "could not renew the leader lease {namespace}/{name} within the renew deadline {deadline:?}; stepped down"
    )]
    RenewDeadline {
        namespace: String,
        name: String,
        deadline: Duration,
    },
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observation>,
}

/// The outcome of one round.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    /// We hold the Lease, renewed by a write sent at `sent`.
    Leading {
        sent: Instant,
    },
    /// Someone else holds a live lease.
    Following {
        holder: String,
    },
    /// Someone else wrote the Lease between our read and our write; read again.
    Contended,
    StepDown(StepDown),
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

    fn error(&self, call: &'static str, source: kube::Error) -> LeaderError {
        LeaderError::Kube {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            call,
            source,
        }
    }

    fn step_down_error(&self, reason: StepDown) -> LeaderError {
        let (namespace, name) = (self.config.namespace.clone(), self.config.name.clone());
        match reason {
            StepDown::DeadlinePassed => LeaderError::RenewDeadline {
                namespace,
                name,
                deadline: self.config.renew_deadline(),
            },
            StepDown::Superseded { holder } => LeaderError::Lost {
                namespace,
                name,
                holder,
            },
            StepDown::Deleted => LeaderError::Deleted { namespace, name },
        }
    }

    /// Runs one Lease call, giving up at `deadline`: a call that hangs is a failed call.
    async fn bounded<T>(
        &self,
        call: &'static str,
        deadline: Instant,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, LeaderError> {
        let after = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout_at(deadline.into(), request)
            .await
            .map_err(|_| LeaderError::Timeout {
                namespace: self.config.namespace.clone(),
                name: self.config.name.clone(),
                call,
                after,
            })
    }

    /// When a call started now must have answered: within the renew deadline, and while
    /// leading no later than the moment this process stops leading.
    fn call_deadline(&self, renewed: Option<Instant>) -> Instant {
        let deadline = self.config.renew_deadline();
        let own = Instant::now() + deadline;
        renewed.map_or(own, |renewed| own.min(renewed + deadline))
    }

    async fn read(&self, renewed: Option<Instant>) -> Result<Option<Lease>, LeaderError> {
        let deadline = self.call_deadline(renewed);
        self.bounded("read", deadline, self.api.get_opt(&self.config.name))
            .await?
            .map_err(|e| self.error("read", e))
    }

    /// One round: read the Lease, decide, and write what was decided.
    async fn round(&mut self, renewed: Option<Instant>) -> Result<Round, LeaderError> {
        let lease = self.read(renewed).await?;
        let now = Instant::now();
        self.observed = lease.as_ref().map(|lease| {
            let spec = lease.spec.clone().unwrap_or_default();
            observe(self.observed.take(), spec, now)
        });
        let claim = match decide::decide(self.observed.as_ref(), renewed, now, &self.config) {
            Decision::Claim(claim) => claim,
            Decision::Follow { holder, .. } => return Ok(Round::Following { holder }),
            Decision::StepDown(reason) => return Ok(Round::StepDown(reason)),
        };
        // The renewal counts from before the write is sent: a candidate can only see it later.
        let sent = Instant::now();
        let deadline = self.call_deadline(renewed);
        let params = PostParams::default();
        let result = match (claim, lease) {
            (Claim::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(claimed_spec(
                        Claim::Create,
                        &LeaseSpec::default(),
                        Timestamp::now(),
                        &self.config,
                    )),
                };
                self.bounded("create", deadline, self.api.create(&params, &lease))
                    .await?
            }
            (claim, Some(mut lease)) => {
                let current = lease.spec.take().unwrap_or_default();
                lease.spec = Some(claimed_spec(
                    claim,
                    &current,
                    Timestamp::now(),
                    &self.config,
                ));
                // `replace` sends the resourceVersion we read: a concurrent write makes it a 409.
                self.bounded(
                    "write",
                    deadline,
                    self.api.replace(&self.config.name, &params, &lease),
                )
                .await?
            }
        };
        match result {
            Ok(_) => Ok(Round::Leading { sent }),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Contended),
            Err(e) => Err(self.error("write", e)),
        }
    }

    /// Gives the lease up so that a standby takes over at once (client-go's
    /// ReleaseOnCancel), within what is left of the renew deadline after our last renewal
    /// (`renewed`); past that a standby may already be taking over.
    async fn release(&mut self, renewed: Option<Instant>) -> Result<(), LeaderError> {
        let deadline = self.call_deadline(renewed);
        let lease = self
            .bounded("read", deadline, self.api.get_opt(&self.config.name))
            .await?
            .map_err(|e| self.error("read", e))?;
        let Some(mut lease) = lease else {
            return Ok(());
        };
        let current = lease.spec.take().unwrap_or_default();
        let Some(spec) = released_spec(&current, Timestamp::now(), &self.config) else {
            return Ok(());
        };
        lease.spec = Some(spec);
        self.bounded(
            "release",
            deadline,
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease),
        )
        .await?
        .map(|_| ())
        .map_err(|e| self.error("release", e))
    }
}

/// Sleeps until `at`, or forever when there is no such moment.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Flips `leading` to false at the deadline last published on `deadline`, unless a later
/// one arrives first. It runs beside the election loop, so nothing the loop waits for, a
/// call that never returns included, keeps this process leading past the deadline. If
/// the loop goes away without clearing the deadline, the last one still fires.
async fn watchdog(
    mut deadline: watch::Receiver<Option<Instant>>,
    leading: watch::Sender<bool>,
    lease: String,
) {
    let mut open = true;
    loop {
        let at = *deadline.borrow_and_update();
        let Some(at) = at else {
            if !open || deadline.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            () = tokio::time::sleep_until(at.into()) => {
                if leading.send_replace(false) {
                    tracing::warn!(%lease, "no renewal of the leader lease within the renew deadline: stepped down");
                }
                return;
            }
            changed = deadline.changed(), if open => open = changed.is_ok(),
        }
    }
}

/// Runs elections until `shutdown` turns true, publishing leadership on `leading`.
///
/// Returns an error when leadership, once held, is lost: `leading` is false by then, and
/// the caller must stop acting (the process exits, as upstream OLM does, and comes back as
/// a standby). On shutdown while leading, the Lease is released for a standby to take.
pub async fn run(
    mut elector: LeaderElector,
    leading: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LeaderError> {
    let config = elector.config().clone();
    let lease = format!("{}/{}", config.namespace, config.name);
    let renew_deadline = config.renew_deadline();
    let (deadline, deadline_rx) = watch::channel(None);
    tokio::spawn(watchdog(deadline_rx, leading.clone(), lease.clone()));
    let mut campaign = Campaign {
        lease,
        config,
        leading,
        deadline,
        renewed: None,
        pause: Duration::ZERO,
        last_holder: None,
    };
    let result = loop {
        let (renewed, pause) = (campaign.renewed, campaign.pause);
        let round = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => break campaign.stopped(&elector).map_or(Ok(()), Err),
            () = until(renewed.map(|at| at + renew_deadline)) => {
                Ok(Round::StepDown(StepDown::DeadlinePassed))
            }
            round = async {
                tokio::time::sleep(pause).await;
                elector.round(renewed).await
            } => round,
        };
        if let Some(error) = campaign.record(round, &elector) {
            break Err(error);
        }
    };
    campaign.end(&mut elector, result).await
}

/// What the election loop keeps between rounds.
struct Campaign {
    lease: String,
    config: LeaseConfig,
    leading: watch::Sender<bool>,
    /// The watchdog's deadline.
    deadline: watch::Sender<Option<Instant>>,
    /// When the write behind our last successful renewal was sent; Some while we lead.
    renewed: Option<Instant>,
    pause: Duration,
    last_holder: Option<String>,
}

impl Campaign {
    /// Takes one round's outcome in; the error that ends leadership, once it is over.
    fn record(
        &mut self,
        round: Result<Round, LeaderError>,
        elector: &LeaderElector,
    ) -> Option<LeaderError> {
        // The watchdog fires at the same deadline; whoever is first, leadership is over.
        if self.renewed.is_some() && !*self.leading.borrow() {
            return Some(elector.step_down_error(StepDown::DeadlinePassed));
        }
        self.pause = self.config.retry_interval;
        let lease = &self.lease;
        match round {
            Ok(Round::Leading { sent }) => self.renewed_at(sent),
            Ok(Round::Following { holder }) => {
                if self.last_holder.as_ref() != Some(&holder) {
                    tracing::info!(%lease, %holder, "standing by: the leader lease is held");
                    self.last_holder = Some(holder);
                }
            }
            Ok(Round::Contended) => {
                tracing::debug!(%lease, "the leader lease changed between read and write");
            }
            Ok(Round::StepDown(reason)) => return Some(elector.step_down_error(reason)),
            Err(error) => tracing::warn!(%error, "leader election round failed"),
        }
        None
    }

    /// A renewal (or the first claim) whose write was sent at `sent`.
    fn renewed_at(&mut self, sent: Instant) {
        // Arm the watchdog before anyone hears that we lead.
        self.deadline
            .send_replace(Some(sent + self.config.renew_deadline()));
        if self.renewed.is_none() {
            tracing::info!(lease = %self.lease, identity = %self.config.identity, "acquired the leader lease");
            self.leading.send_replace(true);
        }
        self.renewed = Some(sent);
        self.pause = self.config.renew_interval;
    }

    /// Asked to stop: the error to report when the watchdog had ended our leadership
    /// already.
    fn stopped(&self, elector: &LeaderElector) -> Option<LeaderError> {
        let deadline = self.config.renew_deadline();
        let expired = self
            .renewed
            .is_some_and(|at| !*self.leading.borrow() || Instant::now() >= at + deadline);
        expired.then(|| elector.step_down_error(StepDown::DeadlinePassed))
    }

    /// Gives leadership up ourselves: the watchdog stops, `leading` turns false, and on a
    /// clean stop while leading the Lease is released for a standby.
    async fn end(
        self,
        elector: &mut LeaderElector,
        result: Result<(), LeaderError>,
    ) -> Result<(), LeaderError> {
        let lease = &self.lease;
        self.deadline.send_replace(None);
        self.leading.send_replace(false);
        match (&result, self.renewed) {
            (Err(error), Some(_)) => tracing::warn!(%lease, %error, "stepped down"),
            (Ok(()), renewed @ Some(_)) => match elector.release(renewed).await {
                Ok(()) => tracing::info!(%lease, "released the leader lease"),
                Err(error) => tracing::warn!(
                    %error,
                    "could not release the leader lease; a standby takes over when it expires"
                ),
            },
            (_, None) => {}
        }
        result
    }
}

#[cfg(test)]
mod tests {
    //! The I/O shell against a fake API server that answers the first few Lease calls and
    //! then goes silent with the connection open, as a partitioned API server does.

    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// The Lease the fake server holds (as JSON), and how many requests it answered.
    #[derive(Default)]
    struct FakeLease {
        lease: Mutex<Option<Value>>,
        answered: AtomicUsize,
    }

    /// Serves GET/POST/PUT of one Lease over plain HTTP; requests after the first `answer`
    /// are read and never answered.
    async fn fake_api_server(answer: usize) -> (SocketAddr, Arc<FakeLease>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let state = Arc::new(FakeLease::default());
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(stream, Arc::clone(&shared), answer));
            }
        });
        (address, state)
    }

    async fn serve(stream: TcpStream, state: Arc<FakeLease>, answer: usize) {
        let mut stream = BufReader::new(stream);
        loop {
            let mut head = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
                head.push(line);
            }
            let mut body = vec![0; length];
            stream.read_exact(&mut body).await.unwrap();
            if state.answered.load(Ordering::SeqCst) >= answer {
                std::future::pending::<()>().await;
            }
            state.answered.fetch_add(1, Ordering::SeqCst);
            let method = head[0].split(' ').next().unwrap().to_string();
            let (code, reply) = {
                let mut lease = state.lease.lock().unwrap();
                match (method.as_str(), lease.as_mut()) {
                    ("GET", None) => (
                        404,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "reason": "NotFound", "code": 404, "message": "not found"}),
                    ),
                    ("GET", Some(lease)) => (200, lease.clone()),
                    ("POST" | "PUT", current) => {
                        let version = current
                            .and_then(|l| l["metadata"]["resourceVersion"].as_str()?.parse().ok())
                            .unwrap_or(0u64);
                        let mut written: Value = serde_json::from_slice(&body).unwrap();
                        written["metadata"]["resourceVersion"] = json!((version + 1).to_string());
                        *lease = Some(written.clone());
                        (if method == "POST" { 201 } else { 200 }, written)
                    }
                    _ => panic!("unexpected request {head:?}"),
                }
            };
            let reply = reply.to_string();
            let response = format!(
                "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
                reply.len()
            );
            stream.write_all(response.as_bytes()).await.unwrap();
        }
    }

    fn elector(address: SocketAddr) -> LeaderElector {
        let config = kube::Config::new(format!("http://{address}").parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        LeaderElector::new(
            client,
            LeaseConfig {
                namespace: "olm".into(),
                name: "olm-leader".into(),
                identity: "me".into(),
                lease_duration: Duration::from_millis(900),
                renew_interval: Duration::from_millis(100),
                retry_interval: Duration::from_millis(50),
            },
        )
    }

    #[tokio::test]
    async fn a_leader_whose_calls_hang_steps_down_at_the_renew_deadline() {
        // GET (404) and POST (created): this process leads; then every call hangs.
        let (address, _lease) = fake_api_server(2).await;
        let elector = elector(address);
        let deadline = elector.config().renew_deadline();
        let (leading, mut watch_leading) = watch::channel(false);
        let (stop, shutdown) = watch::channel(false);
        let election = tokio::spawn(run(elector, leading, shutdown));

        watch_leading.wait_for(|leading| *leading).await.unwrap();
        let led = Instant::now();
        watch_leading.wait_for(|leading| !*leading).await.unwrap();
        let stepped_down = led.elapsed();
        // The host stops the elector as soon as its controllers are down: that is no clean
        // shutdown (nothing to release), and it must not wait on the silent server.
        stop.send_replace(true);
        let stopped = Instant::now();
        // At the deadline, give or take the timer's millisecond; what matters is that it
        // is well before the lease duration, when a standby could take over.
        assert!(
            stepped_down <= deadline + Duration::from_millis(50),
            "led for {stepped_down:?} with no renewal, past the renew deadline {deadline:?}"
        );
        let result = tokio::time::timeout(Duration::from_secs(5), election)
            .await
            .expect("run returns once it stepped down")
            .unwrap();
        assert!(
            matches!(result, Err(LeaderError::RenewDeadline { .. })),
            "{result:?}"
        );
        assert!(stopped.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test]
    async fn a_leader_renews_and_releases_the_lease_on_shutdown() {
        let (address, lease) = fake_api_server(usize::MAX).await;
        let elector = elector(address);
        let deadline = elector.config().renew_deadline();
        let (leading, mut watch_leading) = watch::channel(false);
        let (stop, shutdown) = watch::channel(false);
        let election = tokio::spawn(run(elector, leading, shutdown));

        watch_leading.wait_for(|leading| *leading).await.unwrap();
        // Still leading well past the renew deadline: renewals keep it alive.
        tokio::time::sleep(deadline * 2).await;
        assert!(*watch_leading.borrow());
        assert!(lease.answered.load(Ordering::SeqCst) > 6);

        stop.send_replace(true);
        let result = tokio::time::timeout(Duration::from_secs(5), election)
            .await
            .expect("run returns on shutdown")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
        assert!(!*watch_leading.borrow());
        let released = lease.lease.lock().unwrap().clone().unwrap();
        assert_eq!(released["spec"]["holderIdentity"], Value::Null);
        assert_eq!(released["spec"]["leaseDurationSeconds"], 1);
    }

    #[tokio::test]
    async fn the_watchdog_fires_at_the_last_deadline_even_when_the_loop_is_gone() {
        let (leading, watch_leading) = watch::channel(true);
        let (deadline, deadline_rx) = watch::channel(None);
        let watchdog = tokio::spawn(watchdog(deadline_rx, leading, "olm/olm-leader".into()));
        let start = Instant::now();
        deadline.send_replace(Some(start + Duration::from_millis(100)));
        // Moved on before it fired: the old deadline does not count.
        tokio::time::sleep(Duration::from_millis(50)).await;
        deadline.send_replace(Some(start + Duration::from_millis(200)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(*watch_leading.borrow(), "fired at a superseded deadline");
        // The loop goes away without clearing the deadline: it still fires.
        drop(deadline);
        watchdog.await.unwrap();
        assert!(!*watch_leading.borrow());
        assert!(start.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn a_cleared_deadline_ends_the_watchdog_without_firing() {
        let (leading, watch_leading) = watch::channel(true);
        let (deadline, deadline_rx) =
            watch::channel(Some(Instant::now() + Duration::from_millis(50)));
        let watchdog = tokio::spawn(watchdog(deadline_rx, leading, "olm/olm-leader".into()));
        deadline.send_replace(None);
        drop(deadline);
        watchdog.await.unwrap();
        assert!(*watch_leading.borrow());
    }
}
