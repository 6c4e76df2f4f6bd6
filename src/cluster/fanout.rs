//! Bounded fan-out of an informer's changes, with a lag policy: drop and relist.
//!
//! Each subscriber has a channel of [`CAPACITY`] changes. A subscriber that falls that far
//! behind (a controller stuck on a slow write while thousands of objects change) is not
//! sent more: its channel is left to drain, then it relists, i.e. it is handed every
//! object in the shared store as applied. An applied change it missed is in the store; a
//! deletion is not, so the deletions a lagging subscriber missed are kept for it and
//! handed on before the relist (the Subscription and OperatorGroup controllers act on
//! deletions). The same relist serves a subscriber that comes after the first list, and
//! the informer's own relists after a watch gap, whose vanished objects come as deletions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use kube::runtime::reflector::{Lookup, Store};
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
use tokio::sync::{Notify, mpsc};

/// One change an informer passes on.
#[derive(Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
}

impl<K> Change<K> {
    pub fn object(self) -> Arc<K> {
        match self {
            Change::Applied(object) | Change::Deleted(object) => object,
        }
    }
}

impl<K> Change<K> {
    fn share(&self) -> Change<K> {
        match self {
            Change::Applied(object) => Change::Applied(Arc::clone(object)),
            Change::Deleted(object) => Change::Deleted(Arc::clone(object)),
        }
    }
}

/// Changes a subscriber may have waiting before it is relisted instead: 64 KiB of `Change`s
/// at most (the channel allocates as it fills), and far more than a controller's streams
/// hold back while its workers are busy, so a relist stays the exception.
pub const CAPACITY: usize = 4096;

/// A subscriber's lag: whether it is to relist, and the deletions it missed since.
struct Lag<K> {
    relist: bool,
    missed: Vec<Arc<K>>,
}

struct Shared<K> {
    lag: Mutex<Lag<K>>,
    /// Wakes a subscriber waiting on an empty channel when it is to relist.
    wake: Notify,
}

impl<K> Shared<K> {
    fn lag(&self) -> MutexGuard<'_, Lag<K>> {
        self.lag.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The informer's end of one subscriber.
pub struct Feed<K> {
    kind: &'static str,
    sender: mpsc::Sender<Change<K>>,
    shared: Arc<Shared<K>>,
}

impl<K> Feed<K> {
    /// Passes a change on, or keeps a deletion for a lagging subscriber's relist. False
    /// once the subscriber is gone.
    pub fn offer(&self, change: &Change<K>) -> bool {
        let mut lag = self.shared.lag();
        if !lag.relist {
            match self.sender.try_send(change.share()) {
                Ok(()) => return true,
                Err(TrySendError::Closed(_)) => return false,
                Err(TrySendError::Full(_)) => {
                    tracing::info!(
                        kind = self.kind,
                        waiting = self.sender.max_capacity(),
                        "a subscriber of a shared informer lags; it will relist"
                    );
                    lag.relist = true;
                    self.shared.wake.notify_one();
                }
            }
        }
        if let Change::Deleted(object) = change {
            lag.missed.push(Arc::clone(object));
        }
        !self.sender.is_closed()
    }

    /// Has the subscriber relist (after the informer's own relist), with the objects
    /// that vanished from the store as deletions.
    pub fn relist(&self, vanished: &[Arc<K>]) {
        let mut lag = self.shared.lag();
        lag.relist = true;
        lag.missed.extend(vanished.iter().cloned());
        self.shared.wake.notify_one();
    }
}

/// A subscriber's feed and its stream of changes; `relist_first` for one that comes after
/// the store was listed (it is handed the store before any change).
pub fn channel<K>(
    kind: &'static str,
    store: Store<K>,
    relist_first: bool,
    capacity: usize,
) -> (Feed<K>, impl Stream<Item = Change<K>> + Send + 'static)
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (sender, receiver) = mpsc::channel(capacity);
    let shared = Arc::new(Shared {
        lag: Mutex::new(Lag {
            relist: relist_first,
            missed: Vec::new(),
        }),
        wake: Notify::new(),
    });
    let subscriber = Subscriber {
        receiver,
        shared: Arc::clone(&shared),
        store,
        pending: VecDeque::new(),
    };
    let stream = futures::stream::unfold(subscriber, |mut subscriber| async move {
        let change = subscriber.next().await?;
        Some((change, subscriber))
    });
    (
        Feed {
            kind,
            sender,
            shared,
        },
        stream,
    )
}

/// The subscriber's end: its channel, then a relist when it lagged.
struct Subscriber<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    receiver: mpsc::Receiver<Change<K>>,
    shared: Arc<Shared<K>>,
    store: Store<K>,
    pending: VecDeque<Change<K>>,
}

impl<K> Subscriber<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    async fn next(&mut self) -> Option<Change<K>> {
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Some(change);
            }
            if self.shared.lag().relist {
                // What was sent before the lag comes first, then the relist.
                match self.receiver.try_recv() {
                    Ok(change) => return Some(change),
                    Err(TryRecvError::Empty) => self.relist(),
                    Err(TryRecvError::Disconnected) => return None,
                }
                continue;
            }
            tokio::select! {
                change = self.receiver.recv() => return change,
                () = self.shared.wake.notified() => {}
            }
        }
    }

    /// The missed deletions, then every object in the store. The relist flag is cleared
    /// before the store is read, so a change after the read comes on the channel again.
    fn relist(&mut self) {
        let missed = {
            let mut lag = self.shared.lag();
            lag.relist = false;
            std::mem::take(&mut lag.missed)
        };
        self.pending.extend(missed.into_iter().map(Change::Deleted));
        self.pending
            .extend(self.store.state().into_iter().map(Change::Applied));
    }
}
