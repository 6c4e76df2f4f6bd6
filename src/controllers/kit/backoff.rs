//! Per-object retry delays for `error_policy`: exponential with jitter, so a broken object
//! is retried soon at first and then ever more rarely (never more than [`MAX_DELAY`] apart),
//! and many objects failing together (an API server restart) do not retry in lockstep.
//! A successful reconcile resets the object's delay.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

pub const MIN_DELAY: Duration = Duration::from_secs(1);
pub const MAX_DELAY: Duration = Duration::from_secs(300);

pub struct Backoff<K> {
    builder: ExponentialBuilder,
    per_object: Mutex<HashMap<K, ExponentialBackoff>>,
}

impl<K: Eq + Hash + Clone> Default for Backoff<K> {
    fn default() -> Self {
        Self::new(MIN_DELAY, MAX_DELAY)
    }
}

impl<K: Eq + Hash + Clone> Backoff<K> {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            builder: ExponentialBuilder::new()
                .with_min_delay(min)
                .with_max_delay(max)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times(),
            per_object: Mutex::new(HashMap::new()),
        }
    }

    /// The delay before the next try of `key`, one step longer than the last.
    pub fn next_delay(&self, key: &K) -> Duration {
        let mut map = self
            .per_object
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(key.clone())
            .or_insert_with(|| self.builder.build())
            .next()
            .unwrap_or(MAX_DELAY)
    }

    /// `key` reconciled fine: its next failure starts from the shortest delay again.
    pub fn reset(&self, key: &K) {
        let mut map = self
            .per_object
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_per_object_stay_bounded_and_reset_on_success() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let delays: Vec<Duration> = (0..10).map(|_| backoff.next_delay(&"a")).collect();
        // Jitter adds up to the current delay: step n lies in [2^n s, 2^(n+1) s), capped.
        for (n, delay) in delays.iter().enumerate().take(4) {
            let base = Duration::from_secs(1 << n);
            assert!(*delay >= base && *delay < base * 2, "step {n}: {delay:?}");
        }
        assert!(
            delays.iter().all(|d| *d <= Duration::from_secs(60)),
            "{delays:?}"
        );
        assert!(delays[9] >= Duration::from_secs(30), "{delays:?}");
        // Another object starts at the beginning.
        assert!(backoff.next_delay(&"b") < Duration::from_secs(2));
        backoff.reset(&"a");
        assert!(backoff.next_delay(&"a") < Duration::from_secs(2));
    }
}
