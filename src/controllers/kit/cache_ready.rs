//! Waiting for a reflector cache to have listed once, safely from many reconciles at once.
//!
//! kube-runtime 5.0's `Store::wait_until_ready` sits on a oneshot receiver that remembers a
//! single waker: when several reconciles wait at the same time (start-up, or a burst of
//! events), only the last one is woken and the others hang for ever, with their objects
//! never reconciled again. Re-polling with a short timeout registers the current task each
//! time, and once the store is ready every poll returns at once.

use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::Store;

/// How often a waiter looks again; only matters before the first list completes.
const RECHECK: Duration = Duration::from_millis(100);

/// True once `store` has listed; false if its writer was dropped (the controller is ending).
pub async fn listed<K>(store: &Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        if let Ok(result) = tokio::time::timeout(RECHECK, store.wait_until_ready()).await {
            return result.is_ok();
        }
    }
}

/// (namespace, name) of every object in `store`: what the periodic pruners compare owners
/// against.
pub fn live_keys<K>(store: &Store<K>) -> std::collections::HashSet<(String, String)>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .state()
        .iter()
        .map(|o| {
            (
                o.meta().namespace.clone().unwrap_or_default(),
                o.meta().name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    /// The failure mode of `wait_until_ready` itself: many concurrent waiters, one wake-up.
    #[tokio::test]
    async fn every_concurrent_waiter_proceeds_once_the_store_is_listed() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let done = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let (store, done) = (store.clone(), Arc::clone(&done));
                tokio::spawn(async move {
                    assert!(listed(&store).await);
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        tokio::task::yield_now().await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for waiter in waiters {
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .expect("a waiter hung")
                .unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 8);
    }
}
