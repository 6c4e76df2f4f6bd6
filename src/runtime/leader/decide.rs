//! The election's rules as pure functions: what to do, given the Lease record as read, when
//! this process first saw that record, when it last renewed, and the time now. No client
//! and no clock: the shell in `super` reads the Lease, passes the times in and does the
//! writes these functions describe.
//!
//! The rules are client-go's, with the holder's side made explicit:
//! - A candidate takes a Lease over once it has seen the same record, unrenewed, for the
//!   record's whole `leaseDurationSeconds` on *its own* clock (so clock skew between nodes
//!   does not matter), or at once when nobody holds it.
//! - The holder stops leading `renew_deadline` after the last renewal that succeeded,
//!   counted from when that write was *sent*. A candidate starts counting only after the
//!   write landed and it read it, and waits the longer lease duration; so the old holder
//!   has stopped before anyone may start.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

use super::config::LeaseConfig;

/// A Lease's spec as last read, and when this process first saw it as it is now.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub spec: LeaseSpec,
    pub since: Instant,
}

impl Observation {
    /// The holder named in the record; an empty name means nobody.
    pub fn holder(&self) -> Option<&str> {
        self.spec
            .holder_identity
            .as_deref()
            .filter(|h| !h.is_empty())
    }

    /// When the holder's lease runs out on our clock unless the record changes first.
    pub fn expires(&self, config: &LeaseConfig) -> Instant {
        let duration = self
            .spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(config.lease_duration, Duration::from_secs);
        self.since + duration
    }
}

/// Records a read made at `now`. A record that did not change keeps the time it was first
/// seen, which is where the holder's lease duration counts from.
pub fn observe(previous: Option<Observation>, spec: LeaseSpec, now: Instant) -> Observation {
    match previous {
        Some(previous) if previous.spec == spec => previous,
        _ => Observation { spec, since: now },
    }
}

/// What one round of the election does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the Lease with us as holder (see [`claimed_spec`]).
    Claim(Claim),
    /// Someone else holds a live lease, which runs out at `expires` unless renewed.
    Follow { holder: String, expires: Instant },
    /// We led, and must stop now.
    StepDown(StepDown),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// There is no Lease: create one naming us.
    Create,
    /// We lead and the Lease names us: write a new renewTime.
    Renew,
    /// The Lease is free, has run out on our clock, or names us from an earlier run of this
    /// replica (a restarted container keeps its pod name): take it.
    Acquire,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepDown {
    /// No renewal succeeded within the renew deadline.
    DeadlinePassed,
    /// The Lease names someone else (`None`: nobody; it was released behind our back).
    Superseded { holder: Option<String> },
    /// The Lease is gone.
    Deleted,
}

/// Decides one round. `lease` is the last read (`None`: no Lease exists); `renewed` is when
/// the write behind our last successful renewal was sent (`None`: we do not lead).
pub fn decide(
    lease: Option<&Observation>,
    renewed: Option<Instant>,
    now: Instant,
    config: &LeaseConfig,
) -> Decision {
    if let Some(renewed) = renewed
        && now >= renewed + config.renew_deadline()
    {
        return Decision::StepDown(StepDown::DeadlinePassed);
    }
    let leading = renewed.is_some();
    let Some(lease) = lease else {
        return if leading {
            Decision::StepDown(StepDown::Deleted)
        } else {
            Decision::Claim(Claim::Create)
        };
    };
    match lease.holder() {
        Some(holder) if holder == config.identity => Decision::Claim(if leading {
            Claim::Renew
        } else {
            Claim::Acquire
        }),
        other if leading => Decision::StepDown(StepDown::Superseded {
            holder: other.map(str::to_string),
        }),
        None => Decision::Claim(Claim::Acquire),
        Some(holder) => {
            let expires = lease.expires(config);
            if now >= expires {
                Decision::Claim(Claim::Acquire)
            } else {
                Decision::Follow {
                    holder: holder.to_string(),
                    expires,
                }
            }
        }
    }
}

fn lease_duration_seconds(config: &LeaseConfig) -> i32 {
    i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// The spec to write for `claim` over the `current` one (the default spec for `Create`).
pub fn claimed_spec(
    claim: Claim,
    current: &LeaseSpec,
    now: Timestamp,
    config: &LeaseConfig,
) -> LeaseSpec {
    let mut spec = current.clone();
    spec.renew_time = Some(MicroTime(now));
    spec.lease_duration_seconds = Some(lease_duration_seconds(config));
    match claim {
        Claim::Renew => {}
        Claim::Create => {
            spec.holder_identity = Some(config.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(0);
        }
        Claim::Acquire => {
            let changes_hands = spec.holder_identity.as_deref() != Some(config.identity.as_str());
            if changes_hands {
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.holder_identity = Some(config.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
        }
    }
    spec
}

/// The spec that gives the Lease up, so that a candidate takes it at once (client-go's
/// ReleaseOnCancel); `None` when it does not name us, and there is nothing to release.
pub fn released_spec(
    current: &LeaseSpec,
    now: Timestamp,
    config: &LeaseConfig,
) -> Option<LeaseSpec> {
    if current.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return None;
    }
    let mut spec = current.clone();
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(now));
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaseConfig {
        LeaseConfig {
            namespace: "olm".into(),
            name: "olm-leader".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(2),
            retry_interval: Duration::from_secs(1),
        }
    }

    fn held_by(holder: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(seconds),
            renew_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    fn seen(spec: LeaseSpec, since: Instant) -> Observation {
        Observation { spec, since }
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn no_lease_is_created_by_a_candidate_and_ends_a_leader() {
        let t0 = Instant::now();
        assert_eq!(
            decide(None, None, t0, &config()),
            Decision::Claim(Claim::Create)
        );
        assert_eq!(
            decide(None, Some(t0), t0 + s(1), &config()),
            Decision::StepDown(StepDown::Deleted)
        );
    }

    #[test]
    fn a_live_lease_of_another_holder_is_followed_until_it_runs_out_on_our_clock() {
        let t0 = Instant::now();
        let lease = seen(held_by("other", 10), t0);
        let follow = Decision::Follow {
            holder: "other".into(),
            expires: t0 + s(10),
        };
        assert_eq!(decide(Some(&lease), None, t0, &config()), follow);
        assert_eq!(decide(Some(&lease), None, t0 + s(9), &config()), follow);
        assert_eq!(
            decide(Some(&lease), None, t0 + s(10), &config()),
            Decision::Claim(Claim::Acquire)
        );
    }

    #[test]
    fn without_a_duration_in_the_record_ours_applies() {
        let t0 = Instant::now();
        let mut spec = held_by("other", 1);
        spec.lease_duration_seconds = None;
        let lease = seen(spec, t0);
        assert!(matches!(
            decide(Some(&lease), None, t0 + s(14), &config()),
            Decision::Follow { .. }
        ));
        assert_eq!(
            decide(Some(&lease), None, t0 + s(15), &config()),
            Decision::Claim(Claim::Acquire)
        );
    }

    #[test]
    fn the_holders_renew_time_is_ignored_only_our_sighting_counts() {
        // The record claims a renewal long ago (a skewed clock); we saw it just now.
        let t0 = Instant::now();
        let lease = seen(held_by("other", 10), t0);
        assert!(matches!(
            decide(Some(&lease), None, t0 + s(1), &config()),
            Decision::Follow { .. }
        ));
    }

    #[test]
    fn an_unchanged_record_keeps_its_first_sighting_and_a_renewal_restarts_the_clock() {
        let t0 = Instant::now();
        let first = observe(None, held_by("other", 10), t0);
        let again = observe(Some(first), held_by("other", 10), t0 + s(5));
        assert_eq!(again.since, t0);
        let mut renewed = held_by("other", 10);
        renewed.renew_time = Some(MicroTime(Timestamp::from_second(60).unwrap()));
        let after_renewal = observe(Some(again), renewed, t0 + s(6));
        assert_eq!(after_renewal.since, t0 + s(6));
        assert!(matches!(
            decide(Some(&after_renewal), None, t0 + s(12), &config()),
            Decision::Follow { .. }
        ));
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let t0 = Instant::now();
        for holder in [None, Some(String::new())] {
            let spec = LeaseSpec {
                holder_identity: holder,
                lease_duration_seconds: Some(1),
                ..LeaseSpec::default()
            };
            assert_eq!(
                decide(Some(&seen(spec, t0)), None, t0, &config()),
                Decision::Claim(Claim::Acquire)
            );
        }
    }

    #[test]
    fn the_leader_renews_its_own_lease() {
        let t0 = Instant::now();
        let lease = seen(held_by("me", 15), t0);
        assert_eq!(
            decide(Some(&lease), Some(t0), t0 + s(2), &config()),
            Decision::Claim(Claim::Renew)
        );
    }

    #[test]
    fn a_lease_naming_us_from_an_earlier_run_is_taken_back_at_once() {
        let t0 = Instant::now();
        let lease = seen(held_by("me", 15), t0);
        assert_eq!(
            decide(Some(&lease), None, t0, &config()),
            Decision::Claim(Claim::Acquire)
        );
    }

    #[test]
    fn the_leader_steps_down_at_the_renew_deadline_whatever_the_record_says() {
        let t0 = Instant::now();
        let config = config();
        assert_eq!(config.renew_deadline(), s(10));
        let lease = seen(held_by("me", 15), t0);
        assert_eq!(
            decide(
                Some(&lease),
                Some(t0),
                t0 + s(10) - Duration::from_millis(1),
                &config
            ),
            Decision::Claim(Claim::Renew)
        );
        for lease in [Some(&lease), None] {
            assert_eq!(
                decide(lease, Some(t0), t0 + s(10), &config),
                Decision::StepDown(StepDown::DeadlinePassed)
            );
        }
    }

    #[test]
    fn the_leader_steps_down_when_the_lease_names_someone_else_or_nobody() {
        let t0 = Instant::now();
        assert_eq!(
            decide(
                Some(&seen(held_by("other", 15), t0)),
                Some(t0),
                t0,
                &config()
            ),
            Decision::StepDown(StepDown::Superseded {
                holder: Some("other".into())
            })
        );
        let released = LeaseSpec::default();
        assert_eq!(
            decide(Some(&seen(released, t0)), Some(t0), t0, &config()),
            Decision::StepDown(StepDown::Superseded { holder: None })
        );
    }

    /// The property the election exists for: with the holder renewing (write sent) at `w`,
    /// it stops leading before any candidate that saw that write may take over.
    #[test]
    fn the_old_leader_stops_before_a_candidate_may_start() {
        let t0 = Instant::now();
        let config = config();
        let sent = t0;
        for seen_after_ms in [0, 1, 500, 5_000] {
            let candidate_saw = sent + Duration::from_millis(seen_after_ms);
            let lease = seen(held_by("me", 15), candidate_saw);
            let mut candidate = config.clone();
            candidate.identity = "candidate".into();
            let first_take_over = (0..40_000)
                .map(|ms| t0 + Duration::from_millis(ms))
                .find(|&now| {
                    decide(Some(&lease), None, now, &candidate) == Decision::Claim(Claim::Acquire)
                })
                .unwrap();
            let last_leading = (0..40_000)
                .map(|ms| t0 + Duration::from_millis(ms))
                .take_while(|&now| {
                    decide(Some(&lease), Some(sent), now, &config) == Decision::Claim(Claim::Renew)
                })
                .last()
                .unwrap();
            assert!(last_leading < first_take_over);
            assert!(
                first_take_over - last_leading >= config.lease_duration - config.renew_deadline()
            );
        }
    }

    #[test]
    fn claims_write_holder_times_and_transitions() {
        let now = Timestamp::from_second(1_000).unwrap();
        let config = config();
        let created = claimed_spec(Claim::Create, &LeaseSpec::default(), now, &config);
        assert_eq!(created.holder_identity.as_deref(), Some("me"));
        assert_eq!(created.lease_duration_seconds, Some(15));
        assert_eq!(created.acquire_time, Some(MicroTime(now)));
        assert_eq!(created.renew_time, Some(MicroTime(now)));
        assert_eq!(created.lease_transitions, Some(0));

        let taken = claimed_spec(Claim::Acquire, &held_by("other", 10), now, &config);
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.lease_duration_seconds, Some(15));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));
        assert_eq!(taken.lease_transitions, Some(4));

        let taken_back = claimed_spec(Claim::Acquire, &held_by("me", 10), now, &config);
        assert_eq!(taken_back.lease_transitions, Some(3));

        let mut ours = held_by("me", 15);
        ours.acquire_time = Some(MicroTime(Timestamp::UNIX_EPOCH));
        let renewed = claimed_spec(Claim::Renew, &ours, now, &config);
        assert_eq!(renewed.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));
        assert_eq!(renewed.lease_transitions, Some(3));
    }

    #[test]
    fn only_our_own_lease_is_released() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(released_spec(&held_by("other", 15), now, &config()), None);
        let released = released_spec(&held_by("me", 15), now, &config()).unwrap();
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(
            decide(
                Some(&seen(released, Instant::now())),
                None,
                Instant::now(),
                &LeaseConfig {
                    identity: "other".into(),
                    ..config()
                }
            ),
            Decision::Claim(Claim::Acquire)
        );
    }
}
