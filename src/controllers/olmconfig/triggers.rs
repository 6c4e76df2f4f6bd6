//! What wakes the OLMConfig's round: a change of its spec (not of its status: with
//! several OLMs on one cluster, each scoped to its namespaces, every one writes the status
//! from what it sees; reacting to each other's writes would keep them writing), and a change
//! of a copy of an operator of this process, at most once per [`COPIES_SETTLE`].

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;

use crate::api::{OLM_CONFIG_NAME, OlmConfig};
use crate::cluster::informers::Change;

type Guarded = DeserializeGuard<OlmConfig>;
pub type ConfigRef = ObjectRef<Guarded>;

/// How long copy changes gather before the status is looked at again (a copier writes
/// hundreds of copies at once).
pub const COPIES_SETTLE: Duration = Duration::from_millis(500);

/// The OLMConfig, as its round's key.
pub fn config_ref() -> ConfigRef {
    ObjectRef::new(OLM_CONFIG_NAME)
}

/// A version of a spec: the object (uid) and its generation.
type SpecVersion = (Option<String>, Option<i64>);

/// The OLMConfig each time its spec changes (a new generation or a new object): its status
/// alone does not wake it.
pub fn spec_changes(
    changes: impl Stream<Item = Change<Guarded>> + Send + 'static,
) -> impl Stream<Item = Arc<Guarded>> + Send + 'static {
    changes
        .scan(None::<SpecVersion>, |seen, change| {
            let woken = match change {
                Change::Applied(config) => new_spec(seen, &config).then_some(config),
                Change::Deleted(_) => {
                    *seen = None;
                    None
                }
            };
            futures::future::ready(Some(woken))
        })
        .filter_map(futures::future::ready)
}

/// Whether `config` carries a spec not seen before (and remembers it).
fn new_spec(seen: &mut Option<SpecVersion>, config: &Arc<Guarded>) -> bool {
    let meta = config.meta();
    let version = (meta.uid.clone(), meta.generation);
    if seen.as_ref() == Some(&version) {
        return false;
    }
    *seen = Some(version);
    true
}

/// `changes`, each after [`COPIES_SETTLE`] (those that come meanwhile are one).
pub fn settled(
    changes: impl Stream<Item = ()> + Send + 'static,
) -> impl Stream<Item = ConfigRef> + Send + 'static {
    changes.then(|()| async {
        tokio::time::sleep(COPIES_SETTLE).await;
        config_ref()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(uid: &str, generation: i64, status_writes: u32) -> Arc<Guarded> {
        let mut config = OlmConfig::new(OLM_CONFIG_NAME, Default::default());
        config.metadata.uid = Some(uid.into());
        config.metadata.generation = Some(generation);
        config.metadata.resource_version = Some(format!("{generation}-{status_writes}"));
        Arc::new(DeserializeGuard(Ok(config)))
    }

    #[tokio::test]
    async fn only_a_new_spec_wakes_the_round() {
        let changes = futures::stream::iter(vec![
            Change::Applied(config("u1", 1, 0)),
            // Status writes (another OLM's, or ours): same generation.
            Change::Applied(config("u1", 1, 1)),
            Change::Applied(config("u1", 1, 2)),
            Change::Applied(config("u1", 2, 2)),
            Change::Deleted(config("u1", 2, 2)),
            // Made again: a new object, whatever its generation.
            Change::Applied(config("u2", 1, 0)),
        ]);
        let woken: Vec<Arc<Guarded>> = spec_changes(changes).collect().await;
        let seen: Vec<_> = woken
            .iter()
            .map(|c| (c.meta().uid.clone().unwrap(), c.meta().generation.unwrap()))
            .collect();
        assert_eq!(
            seen,
            [("u1".into(), 1), ("u1".into(), 2), ("u2".to_string(), 1)]
        );
    }
}
