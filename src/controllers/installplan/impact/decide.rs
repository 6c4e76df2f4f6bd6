//! The preview itself, pure: from a plan's step objects and what was read of the cluster
//! ([`Found`]) to its [`PlanImpact`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::crds::{self, CrdFound, OnCluster};
use super::csvs;
use super::made;
use super::rbac::{self, Grant, Rbac};
use crate::api::{ClusterServiceVersion, CrdImpact, NamedChange, ObjectRef, PlanImpact};
use crate::controllers::plan::rbac as plan_rbac;
use crate::controllers::plan::steps::{KIND_CRD, KIND_CSV};

/// Kinds a plan may carry that are cluster-scoped; every other kind lives in the plan's
/// namespace (as the executor places it).
const CLUSTER_SCOPED: [&str; 9] = [
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
];
const CSV_API: &str = "operators.coreos.com/v1alpha1";

/// What the preview of one plan reads.
#[derive(Default)]
pub struct Found {
    /// The plan's namespace, where its CSVs and namespaced objects go.
    pub namespace: String,
    /// Each step's object, in plan order.
    pub objects: Vec<Value>,
    /// Each CSV the plan installs, with the CSV it replaces when that is on the cluster.
    pub csvs: Vec<(ClusterServiceVersion, Option<ClusterServiceVersion>)>,
    pub crds: Vec<CrdFound>,
    /// Which of the objects [`touched`] names exist.
    pub existing: BTreeSet<ObjectRef>,
    /// Existing objects as on the cluster, for those written that were read (RBAC from the
    /// caches; other kinds only for an upgrade): whether writing them changes anything.
    pub live: BTreeMap<ObjectRef, Value>,
    /// The target namespaces of the namespace's OperatorGroup (`[""]`: all), when it has one.
    pub targets: Option<Vec<String>>,
    /// The namespace's OperatorGroup and its members, when it has exactly one.
    pub group: Option<made::Group>,
    pub rbac: Rbac,
}

/// The objects whose existence the preview needs: those the plan writes (its steps', the
/// Deployments of its CSVs, what the CSV controller makes for them and the OperatorGroup
/// controller's ClusterRoles for the APIs they provide) and those that may go with the CSVs
/// it replaces.
#[derive(Debug, Default, PartialEq)]
pub struct Touched {
    pub written: BTreeSet<ObjectRef>,
    pub going: BTreeSet<ObjectRef>,
}

/// The preview of a plan whose steps are `found.objects`.
pub fn decide(found: &Found) -> PlanImpact {
    let new: Vec<&ClusterServiceVersion> = found.csvs.iter().map(|(n, _)| n).collect();
    let old: Vec<&ClusterServiceVersion> =
        found.csvs.iter().filter_map(|(_, o)| o.as_ref()).collect();
    let crds: Vec<CrdImpact> = found.crds.iter().filter_map(crds::impact).collect();
    let pairs = || found.csvs.iter().map(|(n, o)| (n, o.as_ref()));
    let (ns, targets) = (found.namespace.as_str(), found.targets.as_deref());
    let made_by = |csvs: &[&ClusterServiceVersion]| -> Vec<Value> {
        csvs.iter()
            .flat_map(|c| made::made(c, ns, targets))
            .collect()
    };
    let (made_new, made_old) = (made_by(&new), made_by(&old));
    let grants: (Vec<Grant>, Vec<Grant>) = (
        made::grants(&made_new, ns, &found.rbac),
        made::grants(&made_old, ns, &found.rbac),
    );
    let group = found.group.as_ref();
    let touched = touched(&found.objects, &found.csvs, ns, targets, group);
    let exists = |r: &ObjectRef| found.existing.contains(r);
    let mut desired: BTreeMap<ObjectRef, &Value> =
        made_new.iter().map(|o| (made::made_ref(o), o)).collect();
    desired.extend(found.objects.iter().map(|o| (object_ref(o, ns), o)));
    let group_made = group.map(|g| made::group_made(g, &found.csvs));
    desired.extend(group_made.iter().flatten().map(|o| (made::made_ref(o), o)));
    let (existing, created): (Vec<ObjectRef>, Vec<ObjectRef>) =
        touched.written.iter().cloned().partition(|r| exists(r));
    let updated = existing
        .into_iter()
        .filter(|r| is_updated(r, &desired, found))
        .collect();
    let mut impact = PlanImpact {
        computed_at: None,
        summary: String::new(),
        rbac: rbac::changes(&new, &old, ns, &found.rbac, (&grants.0, &grants.1)),
        blockers: crds.iter().flat_map(crds::blockers).collect(),
        crds,
        images: pairs().flat_map(|(n, o)| csvs::images(n, o)).collect(),
        webhooks: pairs().flat_map(|(n, o)| csvs::webhooks(n, o)).collect(),
        api_services: pairs()
            .flat_map(|(n, o)| csvs::api_services(n, o))
            .collect(),
        objects: crate::api::ObjectChanges {
            created,
            updated,
            deleted: touched.going.into_iter().filter(|r| exists(r)).collect(),
        },
    };
    impact.summary = summary(&impact);
    impact
}

/// Whether the existing object `r` that the plan writes changes beyond its metadata: a CRD
/// whose spec the cluster does not hold yet, a Deployment whose CSV's spec of it changes
/// ([`made::deployment_changes`]), any other object whose live content differs from what
/// is written (unknown when it was not read: then it counts as updated).
fn is_updated(r: &ObjectRef, desired: &BTreeMap<ObjectRef, &Value>, found: &Found) -> bool {
    match r.kind.as_str() {
        KIND_CRD => found.crds.iter().any(|c| {
            c.new["metadata"]["name"] == r.name.as_str()
                && !matches!(c.on_cluster, OnCluster::Unchanged)
        }),
        "Deployment" if !desired.contains_key(r) => made::deployment_changes(&r.name, &found.csvs),
        KIND_CSV => true,
        _ => match (desired.get(r), found.live.get(r)) {
            (Some(wanted), Some(live)) => made::changes(wanted, live),
            _ => true,
        },
    }
}

/// The preview of a plan whose preview could not be computed: it says why, and holds
/// nothing else (the plan is not held back by it).
pub fn failed(why: &str) -> PlanImpact {
    // A blocker too: what a policy decides from the preview (a rollback, a permission
    // hold) must not take a preview that says nothing for one that found nothing.
    PlanImpact {
        summary: format!("preview failed: {why}"),
        blockers: vec![format!("the preview failed: {why}")],
        ..PlanImpact::default()
    }
}

/// See [`Touched`]. What goes: each replaced CSV, the RBAC its plan and the CSV controller
/// made and the Deployments of its strategy, unless the new plan writes them again (the
/// OperatorGroup controller's roles never go: see [`made::group_made`]).
pub fn touched(
    objects: &[Value],
    csvs: &[(ClusterServiceVersion, Option<ClusterServiceVersion>)],
    namespace: &str,
    targets: Option<&[String]>,
    group: Option<&made::Group>,
) -> Touched {
    let made_refs = |csv: &ClusterServiceVersion| -> Vec<ObjectRef> {
        made::made(csv, namespace, targets)
            .iter()
            .map(made::made_ref)
            .collect()
    };
    let deployment = |name: &str| ObjectRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some(namespace.to_string()),
        name: name.to_string(),
    };
    let mut written: BTreeSet<ObjectRef> =
        objects.iter().map(|o| object_ref(o, namespace)).collect();
    if let Some(group) = group {
        written.extend(made::group_made(group, csvs).iter().map(made::made_ref));
    }
    let mut going = BTreeSet::new();
    for (new, old) in csvs {
        written.extend(csvs::deployments(Some(new)).map(|d| deployment(&d.name)));
        written.extend(made_refs(new));
        let Some(old) = old else {
            continue;
        };
        going.insert(ObjectRef {
            api_version: CSV_API.into(),
            kind: KIND_CSV.into(),
            namespace: Some(namespace.to_string()),
            name: old.metadata.name.clone().unwrap_or_default(),
        });
        going.extend(
            plan_rbac::objects(old, namespace)
                .iter()
                .map(|o| object_ref(o, namespace)),
        );
        going.extend(csvs::deployments(Some(old)).map(|d| deployment(&d.name)));
        going.extend(made_refs(old));
    }
    going.retain(|r| !written.contains(r));
    Touched { written, going }
}

/// An object by its apiVersion, kind and name, in `namespace` unless its kind is
/// cluster-scoped.
pub fn object_ref(object: &Value, namespace: &str) -> ObjectRef {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let kind = text(&object["kind"]);
    ObjectRef {
        api_version: text(&object["apiVersion"]),
        namespace: (!CLUSTER_SCOPED.contains(&kind.as_str())).then(|| namespace.to_string()),
        kind,
        name: text(&object["metadata"]["name"]),
    }
}

/// One line: blockers first, then escalations, rules, images, webhooks, APIServices,
/// CRDs and objects (each left out when nothing of it changes, objects always said).
pub fn summary(impact: &PlanImpact) -> String {
    let mut parts = Vec::new();
    if let Some(first) = impact.blockers.first() {
        let more = impact.blockers.len() - 1;
        parts.push(match more {
            0 => format!("BLOCKED: {first}"),
            _ => format!("BLOCKED: {first} (and {more} more)"),
        });
    }
    let escalations = impact.escalations();
    if escalations > 0 {
        parts.push(counted(escalations, "escalation"));
    }
    let added: usize = impact.rbac.iter().map(|a| a.added.len()).sum();
    let removed: usize = impact.rbac.iter().map(|a| a.removed.len()).sum();
    if added + removed > 0 {
        parts.push(format!("+{added} -{removed} rules"));
    }
    if !impact.images.is_empty() {
        parts.push(format!("{} changed", counted(impact.images.len(), "image")));
    }
    for (what, changes) in [
        ("webhooks", &impact.webhooks),
        ("APIServices", &impact.api_services),
    ] {
        if !changes.is_empty() {
            parts.push(format!("{what} {}", named_counts(changes)));
        }
    }
    if !impact.crds.is_empty() {
        let count = |change: &str| impact.crds.iter().filter(|c| c.change == change).count();
        let said: Vec<String> = [("created", count("Created")), ("updated", count("Updated"))]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        parts.push(format!("CRDs: {}", said.join(", ")));
    }
    let o = &impact.objects;
    parts.push(format!(
        "objects +{} ~{} -{}",
        o.created.len(),
        o.updated.len(),
        o.deleted.len()
    ));
    parts.join("; ")
}

fn counted(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        _ => format!("{n} {what}s"),
    }
}

/// `+added -removed ~changed`.
fn named_counts(changes: &[NamedChange]) -> String {
    let count = |change: &str| changes.iter().filter(|c| c.change == change).count();
    format!(
        "+{} -{} ~{}",
        count("Added"),
        count("Removed"),
        count("Changed")
    )
}
