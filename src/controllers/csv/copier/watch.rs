//! What asks the copier for a source's copies besides the phase machine: a change to a
//! copy (the metadata watch of every CSV's name), and a namespace coming or going or the
//! copied-CSV switch moving (the copies of AllNamespaces operators follow both).

use std::collections::HashSet;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::context::FIELD_MANAGER;
use super::names::CsvNames;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::controllers::csv::index::{CsvIndex, CsvRef};

/// Every CSV's name (compactly, see [`CsvNames`]), from a metadata watch of its own (copies
/// live in target namespaces, also outside a watched namespace; a namespace's own CSV of the
/// same name keeps the copy out), and the source of each copy that changed or went.
pub fn watch_csv_names(
    client: kube::Client,
) -> (CsvNames, impl Stream<Item = CsvRef> + Send + 'static) {
    let names = CsvNames::new(FIELD_MANAGER);
    let writer = names.clone();
    let sources = watcher(
        Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .filter_map(move |event| {
        let source = event.ok().and_then(|event| writer.apply(event));
        futures::future::ready(
            source.map(|(namespace, name)| ObjectRef::new(&name).within(&namespace)),
        )
    });
    (names, sources)
}

/// The CSVs of AllNamespaces groups, each time `wakes` yields: a namespace came or went, or
/// the copied-CSV switch moved (their copies follow both).
pub fn all_namespaces_sources(
    wakes: impl Stream<Item = ()> + Send + 'static,
    groups: Store<DeserializeGuard<OperatorGroup>>,
    csvs: Store<DeserializeGuard<ClusterServiceVersion>>,
    index: Arc<CsvIndex>,
) -> impl Stream<Item = CsvRef> + Send + 'static {
    wakes.flat_map(move |()| {
        let global: HashSet<String> = groups
            .state()
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .filter(|g| {
                g.status
                    .as_ref()
                    .is_some_and(|s| s.namespaces.len() == 1 && s.namespaces[0].is_empty())
            })
            .filter_map(|g| g.metadata.namespace.clone())
            .collect();
        let sources = global
            .iter()
            .flat_map(|ns| index.in_namespace(&csvs, Some(ns), |_| true));
        futures::stream::iter(sources.collect::<Vec<_>>())
    })
}
