//! Operators made again, as upstream's operator controller makes them: an Operator missing
//! while objects labelled as its components exist is created (deleted by a user while its
//! components remain, deleted while OLM was down, or named by a label before anything made
//! it). One whose components are all gone stays gone: `kubectl operator uninstall
//! --delete-operator` (and `-X`) deletes every component the Operator lists, waits until it
//! lists none, and deletes the Operator last.
//!
//! A kit reconciler needs its object in a cache, and a missing Operator has none; so this is
//! a queue of names of its own, on the kit's pieces (panic guard, metrics, backoff). It is
//! fed by the status controller's triggers (every wake of an Operator the cache does not
//! hold: a component of it changed, appeared or went) and by the Operators' own deletions.

use std::pin::pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use super::adoption::{RecentCreates, create_operator};
use super::context::{Error, OperatorContext, in_scope};
use crate::api::{Operator, RichReference, operator_label};
use crate::cluster::informers::Change;
use crate::controllers::kit::backoff::Backoff;
use crate::controllers::kit::{Shutdown, cache_ready, guard};

pub const CONTROLLER: &str = "operator-recreate";

type OperatorRef = ObjectRef<DeserializeGuard<Operator>>;

/// The trigger side: passes an Operator's wakes on to the status controller, and queues the
/// names the cache does not hold here.
#[derive(Clone)]
pub(super) struct Missing {
    operators: Store<DeserializeGuard<Operator>>,
    names: mpsc::UnboundedSender<String>,
}

impl Missing {
    pub(super) fn new(
        operators: Store<DeserializeGuard<Operator>>,
    ) -> (Self, mpsc::UnboundedReceiver<String>) {
        let (names, queued) = mpsc::unbounded_channel();
        (Missing { operators, names }, queued)
    }

    /// The Operators' cache.
    pub(super) fn operators(&self) -> &Store<DeserializeGuard<Operator>> {
        &self.operators
    }

    /// `refs`, unchanged; those the cache lacks are queued as well.
    pub(super) fn pass(&self, refs: Vec<OperatorRef>) -> Vec<OperatorRef> {
        for missing in refs.iter().filter(|r| self.operators.get(r).is_none()) {
            let _ = self.names.send(missing.name.clone());
        }
        refs
    }
}

/// What one name from the queue comes to.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Another scope's, in the cache, or created a moment ago.
    Leave,
    /// Missing: made again if any component remains.
    CheckComponents,
}

fn verdict(in_scope: bool, cached: bool, in_flight: bool) -> Verdict {
    if !in_scope || cached || in_flight {
        Verdict::Leave
    } else {
        Verdict::CheckComponents
    }
}

/// Whether a labelled component may bring its Operator into being: one that is
/// cluster-scoped, or in the namespace the Operator is named for (`<package>.<namespace>`).
/// A label is anyone's to write, and an Operator is cluster-scoped: a tenant who may only
/// label a ConfigMap in their namespace gets no Operator named for another namespace.
fn claims(name: &str, component: &RichReference) -> bool {
    let named_for = name.rsplit_once('.').map(|(_, namespace)| namespace);
    match component.namespace.as_deref() {
        None => true,
        Some(namespace) => named_for == Some(namespace),
    }
}

/// One item of the queue.
enum Item {
    /// The name of an Operator that may be missing.
    Name(String),
    /// The cache shows (or no longer shows) an Operator: a create of it has landed.
    Seen(String),
}

pub(super) struct Recreation {
    pub(super) status: Arc<OperatorContext>,
    pub(super) operators: Store<DeserializeGuard<Operator>>,
    /// Shared with adoption: a create of either is the other's too.
    pub(super) created: Arc<RecentCreates>,
    pub(super) backoff: Backoff<String>,
}

impl Recreation {
    /// Takes `queued` names and the Operators' `changes` until `shutdown`.
    pub(super) async fn run(
        self: Arc<Self>,
        queued: mpsc::UnboundedReceiver<String>,
        changes: impl Stream<Item = Change<DeserializeGuard<Operator>>> + Send,
        shutdown: Shutdown,
    ) {
        if !cache_ready::listed(&self.operators).await {
            return;
        }
        let (retries, retried) = mpsc::unbounded_channel();
        let changes = changes.flat_map(|change| {
            let (name, deleted) = match &change {
                Change::Applied(o) => (o.name_any(), false),
                Change::Deleted(o) => (o.name_any(), true),
            };
            // A deletion is also a name to look at: its components may remain.
            let items = match deleted {
                true => vec![Item::Seen(name.clone()), Item::Name(name)],
                false => vec![Item::Seen(name)],
            };
            futures::stream::iter(items)
        });
        let names = futures::stream::select(
            tokio_stream::wrappers::UnboundedReceiverStream::new(queued),
            tokio_stream::wrappers::UnboundedReceiverStream::new(retried),
        )
        .map(Item::Name);
        let items = futures::stream::select(changes, names).take_until(shutdown.requested());
        let mut items = pin!(items);
        while let Some(item) = items.next().await {
            match item {
                Item::Seen(name) => self.created.seen(&name),
                Item::Name(name) => self.look_at(name, &retries).await,
            }
        }
    }

    /// One name, guarded as a kit round is: a failure is retried after the name's backoff.
    async fn look_at(self: &Arc<Self>, name: String, retries: &mpsc::UnboundedSender<String>) {
        let shared = &self.status.shared;
        let _timer = shared.metrics.reconcile_started(CONTROLLER);
        let outcome = match guard::catch_panic(self.recreate(&name)).await {
            Ok(outcome) => outcome,
            Err(panic) => {
                guard::report_panic(shared, CONTROLLER, &name, None, &panic);
                return;
            }
        };
        match outcome {
            Ok(()) => self.backoff.reset(&name),
            // A name that cannot be an Operator's (a label with capitals): not retried.
            Err(Error::Kube {
                error: kube::Error::Api(ref status),
                ..
            }) if status.code == 400 || status.code == 422 => {
                shared.metrics.reconcile_failed(CONTROLLER, "invalid");
                tracing::warn!(operator = %name, error = %status, "cannot create this Operator");
            }
            Err(error) => {
                shared.metrics.reconcile_failed(CONTROLLER, "kube");
                let delay = self.backoff.next_delay(&name);
                tracing::warn!(%error, retry_in = ?delay, "recreating an Operator failed");
                let retries = retries.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = retries.send(name);
                });
            }
        }
    }

    /// Creates the Operator `name` if it is this scope's, missing, and any component of it
    /// remains.
    async fn recreate(&self, name: &str) -> Result<(), Error> {
        let scope = self.status.shared.settings.watch_namespace.as_deref();
        let cached = self.operators.get(&ObjectRef::new(name)).is_some();
        if cached {
            self.created.seen(name);
        }
        if verdict(in_scope(scope, name), cached, self.created.in_flight(name)) == Verdict::Leave {
            return Ok(());
        }
        let label = operator_label(name);
        let watched = self.status.watched_components(&label);
        let labelled = self.status.labelled.components(name).await;
        if !watched.iter().chain(&labelled).any(|c| claims(name, c)) {
            return Ok(());
        }
        if !self.created.claim(name) {
            return Ok(());
        }
        create_operator(&self.status.shared, name)
            .await
            .inspect_err(|_| self.created.seen(name))?;
        tracing::info!(
            operator = name,
            "Operator made again: labelled components remain"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    use super::*;

    #[test]
    fn only_a_missing_operator_of_this_scope_not_just_created_is_looked_into() {
        assert_eq!(verdict(true, false, false), Verdict::CheckComponents);
        assert_eq!(
            verdict(false, false, false),
            Verdict::Leave,
            "another scope's"
        );
        assert_eq!(verdict(true, true, false), Verdict::Leave, "cached");
        assert_eq!(verdict(true, false, true), Verdict::Leave, "just created");
    }

    #[test]
    fn only_components_of_the_named_namespace_or_the_cluster_claim_an_operator() {
        let at = |namespace: Option<&str>| RichReference {
            namespace: namespace.map(str::to_string),
            ..RichReference::default()
        };
        assert!(claims("etcd.team-a", &at(Some("team-a"))));
        assert!(
            claims("my.pkg.team-a", &at(Some("team-a"))),
            "dots in the package"
        );
        assert!(claims("etcd.team-a", &at(None)), "cluster-scoped");
        assert!(!claims("etcd.team-a", &at(Some("team-b"))));
        assert!(!claims("nodots", &at(Some("nodots"))));
    }

    #[test]
    fn wakes_pass_through_and_the_missing_ones_are_queued() {
        let mut writer = Writer::<DeserializeGuard<Operator>>::default();
        let present = DeserializeGuard(Ok(Operator::new("here.ns", Default::default())));
        writer.apply_watcher_event(&watcher::Event::Apply(present));
        let (missing, mut queued) = Missing::new(writer.as_reader());
        let refs = vec![ObjectRef::new("here.ns"), ObjectRef::new("gone.ns")];
        let passed = missing.pass(refs.clone());
        assert_eq!(passed, refs, "the status controller gets every wake");
        assert_eq!(queued.try_recv().ok().as_deref(), Some("gone.ns"));
        assert!(queued.try_recv().is_err(), "nothing else is queued");
    }
}
