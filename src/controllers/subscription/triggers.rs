//! Which CSV changes re-resolve a namespace: a CSV that appears, goes, or changes phase.
//! Every other update (annotations, conditions, requirement status, the many writes of an
//! install) leaves resolution's input as it was, so it must not cost a resolution.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{Stream, StreamExt, future};
use kube::core::DeserializeGuard;

use crate::api::ClusterServiceVersion;
use crate::cluster::informers::Change;

type Guarded = DeserializeGuard<ClusterServiceVersion>;

fn key(csv: &Guarded) -> (Option<String>, Option<String>) {
    let meta = match &csv.0 {
        Ok(csv) => &csv.metadata,
        Err(invalid) => &invalid.metadata,
    };
    (meta.namespace.clone(), meta.name.clone())
}

fn phase(csv: &Guarded) -> Option<String> {
    let phase = csv.0.as_ref().ok()?.status.as_ref()?.phase?;
    Some(format!("{phase:?}"))
}

/// The CSVs of an informer's changes whose phase changed since last seen (or that are new
/// or deleted); a relist of unchanged CSVs passes nothing.
pub fn phase_changes<S>(changes: S) -> impl Stream<Item = Arc<Guarded>>
where
    S: Stream<Item = Change<Guarded>>,
{
    let mut seen: HashMap<(Option<String>, Option<String>), Option<String>> = HashMap::new();
    changes.filter_map(move |change| {
        let passed = match change {
            Change::Applied(csv) => {
                let phase = phase(&csv);
                (seen.insert(key(&csv), phase.clone()) != Some(phase)).then_some(csv)
            }
            Change::Deleted(csv) => {
                seen.remove(&key(&csv));
                Some(csv)
            }
        };
        future::ready(passed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterServiceVersionStatus, CsvPhase};

    fn csv(name: &str, phase: Option<CsvPhase>, note: &str) -> Arc<Guarded> {
        let mut csv = ClusterServiceVersion::new(name, Default::default());
        csv.metadata.namespace = Some("ns".into());
        csv.metadata.annotations = Some([("note".to_string(), note.to_string())].into());
        csv.status = phase.map(|phase| ClusterServiceVersionStatus {
            phase: Some(phase),
            ..Default::default()
        });
        Arc::new(DeserializeGuard(Ok(csv)))
    }

    #[tokio::test]
    async fn only_new_gone_and_phase_changed_csvs_pass() {
        use Change::*;
        let changes = vec![
            // The first list.
            Applied(csv("a", Some(CsvPhase::Succeeded), "1")),
            Applied(csv("a", Some(CsvPhase::Succeeded), "2")),
            Applied(csv("b", None, "1")),
            Applied(csv("b", Some(CsvPhase::Pending), "1")),
            Applied(csv("b", Some(CsvPhase::Pending), "2")),
            // A relist of what is known passes nothing.
            Applied(csv("a", Some(CsvPhase::Succeeded), "2")),
            Deleted(csv("a", Some(CsvPhase::Succeeded), "2")),
            Applied(csv("a", Some(CsvPhase::Pending), "3")),
        ];
        let passed: Vec<(String, Option<String>)> = phase_changes(futures::stream::iter(changes))
            .map(|csv| (key(&csv).1.unwrap(), phase(&csv)))
            .collect()
            .await;
        let phase = |p: &str| Some(p.to_string());
        assert_eq!(
            passed,
            [
                ("a".to_string(), phase("Succeeded")),
                ("b".into(), None),
                ("b".into(), phase("Pending")),
                ("a".into(), phase("Succeeded")),
                ("a".into(), phase("Pending")),
            ]
        );
    }
}
