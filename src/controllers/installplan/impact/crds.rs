//! How a plan's CRD steps change the CRDs on the cluster: versions added, unserved and
//! removed, stored versions left unserved, schemas changed, and existing objects the new
//! schema refuses (checked as the executor checks them, [`crd_upgrade`]).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::CrdImpact;
use crate::controllers::installplan::{crd_upgrade, crd_write};

/// At most this many failing objects are listed per CRD.
const FAILING_LISTED: usize = 10;

/// The CRD of a step as found on the cluster.
#[derive(Debug)]
pub enum OnCluster {
    Absent,
    /// Known to hold the step's spec already (the executor's verdict cache): nothing to
    /// compare, and no need to read it.
    Unchanged,
    Found(Value),
}

/// One CRD step with what was read for it.
#[derive(Debug)]
pub struct CrdFound {
    /// The step's CRD.
    pub new: Value,
    pub on_cluster: OnCluster,
    /// The existing custom resources, per version of [`versions_to_check`].
    pub listed: Vec<(String, Vec<Value>)>,
}

/// Each version a CRD defines and whether it is served.
fn versions(crd: &Value) -> BTreeMap<String, bool> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v["name"].as_str()?.to_string(), v["served"] == true)))
        .collect()
}

/// The versions served before and after whose schema changes: the existing objects are
/// read in those and checked against the new schema (in other versions either nothing
/// changes or nothing is served).
pub fn versions_to_check(existing: &Value, new: &Value) -> Vec<String> {
    let before: BTreeMap<String, Value> =
        crd_upgrade::served_schemas(existing).into_iter().collect();
    crd_upgrade::served_schemas(new)
        .into_iter()
        .filter(|(version, schema)| {
            // Compared as the executor compares specs: `1` and `1.0` are the same number.
            let schema = crd_write::numbers_as_floats(schema);
            before
                .get(version)
                .is_some_and(|old| crd_write::numbers_as_floats(old) != schema)
        })
        .map(|(version, _)| version)
        .collect()
}

/// How the CRD of `found` changes; None when the step leaves its versions and schemas as
/// they are (it is still an updated object).
pub fn impact(found: &CrdFound) -> Option<CrdImpact> {
    let name = found.new["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let after = versions(&found.new);
    let existing = match &found.on_cluster {
        OnCluster::Unchanged => return None,
        OnCluster::Absent => {
            return Some(CrdImpact {
                name,
                change: "Created".into(),
                versions_added: served(&after),
                ..CrdImpact::default()
            });
        }
        OnCluster::Found(existing) => existing,
    };
    let before = versions(existing);
    let impact = CrdImpact {
        name,
        change: "Updated".into(),
        versions_added: after
            .iter()
            .filter(|(v, served)| **served && before.get(*v) != Some(&true))
            .map(|(v, _)| v.clone())
            .collect(),
        versions_unserved: after
            .iter()
            .filter(|(v, served)| !**served && before.get(*v) == Some(&true))
            .map(|(v, _)| v.clone())
            .collect(),
        versions_removed: before
            .keys()
            .filter(|v| !after.contains_key(*v))
            .cloned()
            .collect(),
        stored_versions_unserved: crd_upgrade::stored_versions_unserved(existing, &found.new),
        schema_changed: !versions_to_check(existing, &found.new).is_empty(),
        objects_failing: failing(found),
        objects_pruned: losing(found),
    };
    let changes = CrdImpact {
        name: impact.name.clone(),
        change: impact.change.clone(),
        ..CrdImpact::default()
    };
    (impact != changes).then_some(impact)
}

fn served(versions: &BTreeMap<String, bool>) -> Vec<String> {
    versions
        .iter()
        .filter(|(_, served)| **served)
        .map(|(v, _)| v.clone())
        .collect()
}

/// Each listed version with the new CRD's schema of it and the objects read in it.
fn listed_with_schemas(found: &CrdFound) -> Vec<(&String, Value, &[Value])> {
    let schemas: BTreeMap<String, Value> = crd_upgrade::served_schemas(&found.new)
        .into_iter()
        .collect();
    found
        .listed
        .iter()
        .filter_map(|(version, objects)| {
            let schema = schemas.get(version).filter(|s| !s.is_null())?;
            Some((version, schema.clone(), objects.as_slice()))
        })
        .collect()
}

/// The listed objects the new schema of their version refuses, `namespace/name: why`.
fn failing(found: &CrdFound) -> Vec<String> {
    let mut out = Vec::new();
    for (version, schema, objects) in listed_with_schemas(found) {
        let room = FAILING_LISTED.saturating_sub(out.len());
        for (object, problems) in crd_upgrade::refused(&schema, objects).take(room) {
            out.push(format!("{object}: {version}: {}", problems.join("; ")));
        }
    }
    out
}

/// The listed objects holding fields the new schema of their version does not know,
/// `namespace/name: version: .path, …`.
fn losing(found: &CrdFound) -> Vec<String> {
    let mut out = Vec::new();
    for (version, schema, objects) in listed_with_schemas(found) {
        for object in objects {
            if out.len() >= FAILING_LISTED {
                return out;
            }
            let mut fields = Vec::new();
            crd_upgrade::pruned(&schema, object, "", &mut fields);
            if !fields.is_empty() {
                let name = crd_upgrade::object_name(object);
                out.push(format!("{name}: {version}: {}", fields.join(", ")));
            }
        }
    }
    out
}

/// Why the CRD change must not run: each stored version left unserved, each failing
/// object, each object that would lose fields.
pub fn blockers(crd: &CrdImpact) -> Vec<String> {
    let name = &crd.name;
    let stored = crd.stored_versions_unserved.iter().map(|v| {
        format!("CustomResourceDefinition {name}: stored version {v} would no longer be served")
    });
    let failing = crd.objects_failing.iter().map(|object| {
        format!("CustomResourceDefinition {name}: the new schema refuses existing {object}")
    });
    let losing = crd.objects_pruned.iter().map(|object| {
        format!(
            "CustomResourceDefinition {name}: the new schema does not know fields of existing {object}, which would be dropped"
        )
    });
    stored.chain(failing).chain(losing).collect()
}
