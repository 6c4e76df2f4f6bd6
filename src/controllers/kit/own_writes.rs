//! Reading one's own writes through a cache.
//!
//! A controller reads its objects from a reflector cache, which lags the API server. After
//! writing an object's status, a round triggered by something else (a Deployment turning
//! Available, say) can still find the old status in the cache and redo what the write
//! recorded as done: install again, transition again, publish the Event again. Remembering
//! the resourceVersion each write returned lets a round see that its cache is behind and
//! wait for the watch event that is on its way (it triggers a round of its own).
//!
//! resourceVersions are compared as numbers: what etcd-backed API servers hand out. One
//! that is not a number is never taken as stale.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

#[derive(Debug)]
pub struct OwnWrites<K> {
    last: Mutex<HashMap<K, u64>>,
}

impl<K> Default for OwnWrites<K> {
    fn default() -> Self {
        OwnWrites {
            last: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash> OwnWrites<K> {
    /// Records the resourceVersion a write of `key` returned.
    pub fn wrote(&self, key: K, resource_version: Option<&str>) {
        if let Some(version) = resource_version.and_then(|v| v.parse::<u64>().ok()) {
            let mut last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let entry = last.entry(key).or_insert(version);
            *entry = (*entry).max(version);
        }
    }

    /// Whether `cached` (the resourceVersion in the cache) predates the last write of `key`.
    /// A cache that has caught up stays caught up (a watch only moves forward), so the
    /// write is forgotten then: only writes still in flight are kept.
    pub fn is_behind(&self, key: &K, cached: Option<&str>) -> bool {
        let Some(cached) = cached.and_then(|v| v.parse::<u64>().ok()) else {
            return false;
        };
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match last.get(key) {
            Some(&written) if cached < written => true,
            Some(_) => {
                last.remove(key);
                false
            }
            None => false,
        }
    }

    /// Whether a write of `key` has not been seen in the cache yet (an object this process
    /// created, which the cache does not hold yet).
    pub fn in_flight(&self, key: &K) -> bool {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(key)
    }

    /// How many writes are still in flight (tests).
    #[cfg(test)]
    fn in_flight_count(&self) -> usize {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_behind_the_last_write_is_seen() {
        let writes = OwnWrites::default();
        assert!(!writes.is_behind(&"a", Some("5")), "nothing written yet");
        writes.wrote("a", Some("10"));
        assert!(writes.is_behind(&"a", Some("9")));
        assert!(!writes.is_behind(&"a", Some("10")));
        assert!(
            !writes.is_behind(&"a", Some("11")),
            "someone wrote after us"
        );
        assert!(!writes.is_behind(&"b", Some("1")), "another object");
        assert_eq!(
            writes.in_flight_count(),
            0,
            "a caught-up write is forgotten"
        );
    }

    #[test]
    fn older_writes_and_odd_versions_change_nothing() {
        let writes = OwnWrites::default();
        writes.wrote("a", Some("10"));
        writes.wrote("a", Some("7"));
        assert!(writes.is_behind(&"a", Some("9")), "the newest write counts");
        writes.wrote("a", Some("not-a-number"));
        assert!(!writes.is_behind(&"a", Some("opaque")));
        assert!(!writes.is_behind(&"a", None));
        assert!(!writes.is_behind(&"a", Some("10")), "the cache caught up");
        assert!(
            !writes.is_behind(&"a", Some("9")),
            "and the write is forgotten"
        );
    }
}
