//! Copied CSVs, as the process shares them: the switch (whether operators installed in
//! AllNamespaces mode get copies: the OLMConfig's `spec.features.disableCopiedCSVs`, live)
//! and what the copier knows of the copies (for the OLMConfig's status).
//!
//! The OLMConfig controller sets the switch and reads the copies; the copier reads the
//! switch, is woken when it moves, and makes its copies known here. The two controllers meet
//! here and in the API objects, never in each other's modules.

use std::sync::{Arc, OnceLock};

use futures::Stream;
use tokio::sync::watch;

/// What the copier knows of every CSV's name, cluster-wide.
pub trait CopiesView: Send + Sync {
    /// The namespaces holding a copy of the CSV `name` of `source_namespace`.
    fn copies_of(&self, source_namespace: &str, name: &str) -> Vec<String>;
    /// Whether `namespace` holds a CSV named `name` (a copy or its own).
    fn holds(&self, namespace: &str, name: &str) -> bool;
}

pub struct CopiedCsvs {
    /// Whether copies are disabled for AllNamespaces operators; None until the OLMConfig
    /// controller has read the cluster's OLMConfig (or found none) once.
    disabled: watch::Sender<Option<bool>>,
    /// The copier's names, once it has listed them (the first copier of the process).
    copies: OnceLock<Arc<dyn CopiesView>>,
    /// Moves each time a copy of an operator of this process changed or went.
    changes: watch::Sender<u64>,
}

impl Default for CopiedCsvs {
    fn default() -> Self {
        CopiedCsvs {
            disabled: watch::Sender::new(None),
            copies: OnceLock::new(),
            changes: watch::Sender::new(0),
        }
    }
}

impl CopiedCsvs {
    /// The switch as last read (None: not read yet).
    pub fn disabled(&self) -> Option<bool> {
        *self.disabled.borrow()
    }

    /// Sets the switch; true when it moved (or was read for the first time).
    pub fn set_disabled(&self, disabled: bool) -> bool {
        self.disabled.send_if_modified(|current| {
            let moved = *current != Some(disabled);
            *current = Some(disabled);
            moved
        })
    }

    /// Waits until the switch has been read once (false: the process is ending).
    pub async fn known(&self) -> bool {
        self.disabled
            .subscribe()
            .wait_for(Option::is_some)
            .await
            .is_ok()
    }

    /// Yields each time the switch moves from now on.
    pub fn switched(&self) -> impl Stream<Item = ()> + Send + 'static {
        changes_of(self.disabled.subscribe())
    }

    /// Makes the copier's names known (the first registration holds: every copier of the
    /// process watches the same names).
    pub fn register(&self, view: Arc<dyn CopiesView>) {
        let _ = self.copies.set(view);
    }

    /// The copier's names, once listed.
    pub fn view(&self) -> Option<Arc<dyn CopiesView>> {
        self.copies.get().cloned()
    }

    /// A copy of an operator of this process changed or went.
    pub fn copies_changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Yields after each [`CopiedCsvs::copies_changed`] from now on (several at once yield
    /// once).
    pub fn copy_changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        changes_of(self.changes.subscribe())
    }
}

/// One item per change a receiver sees (changes made while the reader is away count once).
fn changes_of<T: Send + Sync + 'static>(
    receiver: watch::Receiver<T>,
) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(receiver, |mut receiver| async move {
        // `changed` marks the value seen: changes made meanwhile are one.
        receiver.changed().await.ok()?;
        Some(((), receiver))
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    #[tokio::test]
    async fn the_switch_is_unknown_until_set_and_its_moves_are_seen() {
        let hub = CopiedCsvs::default();
        assert_eq!(hub.disabled(), None);
        let mut switched = Box::pin(hub.switched());
        assert!(hub.set_disabled(false), "read for the first time");
        assert!(hub.known().await);
        assert!(!hub.set_disabled(false), "unchanged");
        assert!(hub.set_disabled(true));
        assert_eq!(hub.disabled(), Some(true));
        let seen = tokio::time::timeout(Duration::from_secs(1), switched.next()).await;
        assert_eq!(seen.unwrap(), Some(()));
        // Both moves were made before the reader looked: one wake-up.
        let more = tokio::time::timeout(Duration::from_millis(50), switched.next()).await;
        assert!(more.is_err(), "no second wake-up");
    }

    #[tokio::test]
    async fn copy_changes_coalesce() {
        let hub = CopiedCsvs::default();
        let mut changes = Box::pin(hub.copy_changes());
        hub.copies_changed();
        hub.copies_changed();
        let seen = tokio::time::timeout(Duration::from_secs(1), changes.next()).await;
        assert_eq!(seen.unwrap(), Some(()));
        let more = tokio::time::timeout(Duration::from_millis(50), changes.next()).await;
        assert!(more.is_err());
    }

    struct Names;

    impl CopiesView for Names {
        fn copies_of(&self, _: &str, name: &str) -> Vec<String> {
            vec![format!("{name}-copy")]
        }
        fn holds(&self, _: &str, _: &str) -> bool {
            true
        }
    }

    #[test]
    fn the_first_view_registered_holds() {
        let hub = CopiedCsvs::default();
        assert!(hub.view().is_none());
        hub.register(Arc::new(Names));
        hub.register(Arc::new(Names));
        assert_eq!(hub.view().unwrap().copies_of("ns", "a"), ["a-copy"]);
    }
}
