//! Tests of the ConfigMap catalog format on the etcd fixture and broken variants of it.

use super::*;
use crate::catalog::checks::validate::validate;
use base64::Engine;
use serde_json::{Value, json};

const FIXTURE: &str = include_str!("../../../../../tests/catalogs/configmap/etcd.yaml");

/// The `data` of the fixture ConfigMap.
fn fixture() -> BTreeMap<String, String> {
    let cm: Value = serde_yaml::from_str(FIXTURE).unwrap();
    serde_json::from_value(cm["data"].clone()).unwrap()
}

fn with(key: &str, text: &str) -> BTreeMap<String, String> {
    let mut data = fixture();
    data.insert(key.to_string(), text.to_string());
    data
}

fn bundle<'a>(c: &'a DeclarativeConfig, name: &str) -> &'a Bundle {
    c.bundles.iter().find(|b| b.name == name).unwrap()
}

fn props(b: &Bundle, kind: &str) -> Vec<Value> {
    b.properties_of(kind).cloned().collect()
}

fn manifests(b: &Bundle) -> Vec<Value> {
    b.properties_of(PROP_BUNDLE_OBJECT)
        .map(|v| {
            let data = base64::engine::general_purpose::STANDARD
                .decode(v["data"].as_str().unwrap())
                .unwrap();
            serde_json::from_slice(&data).unwrap()
        })
        .collect()
}

#[test]
fn the_etcd_fixture_becomes_a_valid_catalog() {
    let c = from_configmap_data(&fixture()).unwrap();
    let packages: Vec<(&str, &str)> = c
        .packages
        .iter()
        .map(|p| (p.name.as_str(), p.default_channel.as_str()))
        .collect();
    assert_eq!(packages, [("etcd", "alpha"), ("etcd-backup", "stable")]);
    let etcd = &c.packages[0];
    assert_eq!(etcd.icon.as_ref().unwrap().mediatype, "image/svg+xml");
    assert!(
        etcd.description
            .starts_with("etcd is a distributed key value store")
    );

    let channels: Vec<(&str, &str, Vec<&str>)> = c
        .channels
        .iter()
        .map(|ch| {
            (
                ch.package.as_str(),
                ch.name.as_str(),
                ch.entries.iter().map(|e| e.name.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        channels,
        [
            (
                "etcd",
                "alpha",
                vec![
                    "etcdoperator.v0.9.2",
                    "etcdoperator.v0.9.0",
                    "etcdoperator.v0.6.1",
                    "etcdoperator.v0.9.1"
                ]
            ),
            (
                "etcd",
                "beta",
                vec!["etcdoperator.v0.9.0", "etcdoperator.v0.6.1"]
            ),
            ("etcd-backup", "stable", vec!["etcd-backup.v0.1.0"]),
        ]
    );
    let alpha = &c.channels[0];
    assert_eq!(alpha.entries[0].replaces, "etcdoperator.v0.9.0");
    assert_eq!(
        alpha.entries[0].skips,
        ["etcdoperator.v0.9.1", "etcdoperator.v0.8.0"]
    );
    assert_eq!(alpha.entries[0].skip_range, ">=0.6.0 <0.9.2");
    assert_eq!(alpha.entries[1].replaces, "etcdoperator.v0.6.1");
    // A skipped CSV joins the channel without edges of its own.
    assert_eq!(
        alpha.entries[3],
        ChannelEntry {
            name: "etcdoperator.v0.9.1".into(),
            ..Default::default()
        }
    );

    // Bundles in CSV-list order; the CSV no channel reaches is left out.
    let names: Vec<&str> = c.bundles.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "etcdoperator.v0.6.1",
            "etcdoperator.v0.9.0",
            "etcdoperator.v0.9.1",
            "etcdoperator.v0.9.2",
            "etcd-backup.v0.1.0"
        ]
    );

    let v092 = bundle(&c, "etcdoperator.v0.9.2");
    assert!(v092.image.is_empty());
    assert_eq!(
        props(v092, PROP_PACKAGE),
        [json!({"packageName": "etcd", "version": "0.9.2"})]
    );
    // Both versions of the etcdclusters CRD, though the CSV describes one.
    assert_eq!(
        props(v092, PROP_GVK),
        [
            json!({"group": "etcd.database.coreos.com", "kind": "EtcdBackup", "version": "v1beta2"}),
            json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"}),
            json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta3"}),
        ]
    );
    assert!(props(v092, PROP_GVK_REQUIRED).is_empty());
    // The olm.properties annotation.
    assert_eq!(props(v092, "olm.maxOpenShiftVersion"), [json!("4.20")]);
    let objects = manifests(v092);
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "CustomResourceDefinition"
        ]
    );
    assert_eq!(objects[0]["metadata"]["name"], "etcdoperator.v0.9.2");
    assert_eq!(
        v092.related_images,
        [RelatedImage {
            name: String::new(),
            image: "quay.io/coreos/etcd-operator@sha256:c0301e4686c3ed4206e370b42de5a3bd2229b9fb4906cf85f3f30650424abec2".into()
        }]
    );

    // The required CRD of the backup operator.
    let backup = bundle(&c, "etcd-backup.v0.1.0");
    assert_eq!(
        props(backup, PROP_GVK_REQUIRED),
        [json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"})]
    );
    assert_eq!(
        props(backup, PROP_GVK),
        [json!({"group": "backup.example.com", "kind": "Snapshot", "version": "v1"})]
    );
    // A CSV without kind gets it, so it can be applied.
    assert_eq!(manifests(backup)[0]["kind"], "ClusterServiceVersion");

    let problems = validate(&c);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn empty_values_are_empty_lists_and_only_channel_is_default() {
    let mut data = BTreeMap::new();
    data.insert(KEY_CRDS.to_string(), String::new());
    data.insert(
        KEY_CSVS.to_string(),
        "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {name: p.v1}\n  spec: {version: 1.0.0, displayName: P}\n".into(),
    );
    data.insert(
        KEY_PACKAGES.to_string(),
        "- packageName: p\n  defaultChannel: nope\n  channels:\n  - {name: only, currentCSV: p.v1}\n".into(),
    );
    let c = from_configmap_data(&data).unwrap();
    assert_eq!(c.packages[0].default_channel, "only");
    assert_eq!(c.bundles.len(), 1);
    assert!(validate(&c).is_empty(), "{:#?}", validate(&c));
}

fn error(data: &BTreeMap<String, String>) -> String {
    from_configmap_data(data).unwrap_err().to_string()
}

#[test]
fn malformed_yaml_names_the_key_and_line() {
    let e = error(&with(
        KEY_PACKAGES,
        "- packageName: etcd\n  channels:\n  - name: [alpha\n",
    ));
    assert_eq!(
        e,
        "packages: malformed YAML at line 4: did not find expected ',' or ']', while parsing a flow sequence at line 3 column 11"
    );
    let e = error(&with(KEY_CSVS, "metadata: {name: x}\n"));
    assert_eq!(
        e,
        "clusterServiceVersions: expected a YAML list, found a mapping"
    );
}

#[test]
fn a_missing_key_is_named() {
    for key in [KEY_CRDS, KEY_CSVS, KEY_PACKAGES] {
        let mut data = fixture();
        data.remove(key);
        assert_eq!(
            error(&data),
            format!("the ConfigMap data has no {key:?} key")
        );
    }
}

#[test]
fn an_unknown_current_csv_names_the_package_and_channel() {
    let text = fixture()[KEY_PACKAGES].replace(
        "currentCSV: etcd-backup.v0.1.0",
        "currentCSV: etcd-backup.v9",
    );
    assert_eq!(
        error(&with(KEY_PACKAGES, &text)),
        "packages[1] (etcd-backup): channel \"stable\": currentCSV \"etcd-backup.v9\" is not among clusterServiceVersions"
    );
}

#[test]
fn a_csv_without_a_name_is_named_by_index() {
    let text = fixture()[KEY_CSVS].replace(
        "name: etcdoperator.v0.9.0\n",
        "generateName: etcdoperator-\n",
    );
    let e = error(&with(KEY_CSVS, &text));
    assert_eq!(
        e,
        "clusterServiceVersions[1]: metadata.name is missing; a CSV needs a name"
    );
}

#[test]
fn a_replaces_chain_into_a_missing_csv_is_refused() {
    let text = fixture()[KEY_CSVS].replace(
        "replaces: etcdoperator.v0.6.1",
        "replaces: etcdoperator.v0.5.0",
    );
    assert_eq!(
        error(&with(KEY_CSVS, &text)),
        "packages[0] (etcd): channel \"alpha\": CSV \"etcdoperator.v0.9.0\" replaces \"etcdoperator.v0.5.0\", which is not among clusterServiceVersions"
    );
}

#[test]
fn a_replaces_cycle_is_refused() {
    let text = fixture()[KEY_CSVS].replace(
        "  spec:\n    displayName: etcd\n    version: 0.6.1\n",
        "  spec:\n    displayName: etcd\n    version: 0.6.1\n    replaces: etcdoperator.v0.9.2\n",
    );
    let e = error(&with(KEY_CSVS, &text));
    assert!(e.contains("the replaces chain has a cycle: etcdoperator.v0.9.2 -> etcdoperator.v0.9.0 -> etcdoperator.v0.6.1 -> etcdoperator.v0.9.2"), "{e}");
}

#[test]
fn an_owned_crd_missing_from_the_list_is_refused() {
    let text = fixture()[KEY_CRDS].replace("plural: etcdbackups", "plural: etcdbackupz");
    let e = error(&with(KEY_CRDS, &text));
    assert_eq!(
        e,
        "clusterServiceVersions[1] (etcdoperator.v0.9.0): owned CRD etcdbackups.etcd.database.coreos.com (version v1beta2, kind EtcdBackup) is not among customResourceDefinitions"
    );
}

#[test]
fn a_crd_defined_twice_is_refused() {
    let crds = fixture()[KEY_CRDS].clone();
    let first = crds.split("\n- ").next().unwrap().to_string();
    let e = error(&with(KEY_CRDS, &format!("{crds}\n{first}\n")));
    assert!(
        e.starts_with("customResourceDefinitions[3] (etcdbackups.etcd.database.coreos.com): etcdbackups.etcd.database.coreos.com (version v1beta2, kind EtcdBackup) is already defined by customResourceDefinitions[0]"),
        "{e}"
    );
}

#[test]
fn package_errors_name_the_package() {
    let e = error(&with(
        KEY_PACKAGES,
        "- channels: [{name: a, currentCSV: x}]\n",
    ));
    assert_eq!(e, "packages[0]: packageName is missing");
    let e = error(&with(
        KEY_PACKAGES,
        "- packageName: etcd\n  channels:\n  - {name: alpha, currentCSV: etcdoperator.v0.9.2}\n  - {name: beta, currentCSV: etcdoperator.v0.9.0}\n",
    ));
    assert_eq!(
        e,
        "packages[0] (etcd): no default channel specified, and the package has several channels"
    );
    let e = error(&with(KEY_PACKAGES, "- packageName: etcd\n  channels: []\n"));
    assert_eq!(e, "packages[0] (etcd): the package has no channels");
    let e = error(&with(
        KEY_PACKAGES,
        "- packageName: etcd\n  defaultChannel: nope\n  channels:\n  - {name: alpha, currentCSV: etcdoperator.v0.9.2}\n  - {name: beta, currentCSV: etcdoperator.v0.9.0}\n",
    ));
    assert_eq!(
        e,
        "packages[0] (etcd): defaultChannel \"nope\" is not one of the package's channels"
    );
    let e = error(&with(
        KEY_PACKAGES,
        "- packageName: etcd\n  defaultChannel: [a]\n",
    ));
    assert_eq!(
        e,
        "packages[0] (etcd): defaultChannel must be a string, not a list"
    );
    let e = error(&with(KEY_PACKAGES, "- packageName: etcd\n  channels: {}\n"));
    assert_eq!(
        e,
        "packages[0] (etcd): channels must be a list, not a mapping"
    );
    let e = error(&with(
        KEY_PACKAGES,
        "- packageName: etcd\n  channels:\n  - {name: [a], currentCSV: x}\n",
    ));
    assert_eq!(
        e,
        "packages[0] (etcd): channels[0].name must be a string, not a list"
    );
}

#[test]
fn a_chain_stops_at_another_packages_csv() {
    // Upstream's tests switch a Subscription between packages with a CSV that replaces one
    // of another package: that CSV stays its own package's, and the chain names it.
    let text = format!(
        "{}\n- packageName: other\n  channels:\n  - {{name: a, currentCSV: etcdoperator.v0.6.1}}\n",
        fixture()[KEY_PACKAGES].trim_end()
    );
    let config = from_configmap_data(&with(KEY_PACKAGES, &text)).unwrap();
    let entries = |package: &str| -> Vec<(String, String)> {
        config
            .channels
            .iter()
            .filter(|c| c.package == package)
            .flat_map(|c| c.entries.iter())
            .map(|e| (e.name.clone(), e.replaces.clone()))
            .collect()
    };
    assert!(
        entries("etcd").contains(&(
            "etcdoperator.v0.9.0".to_string(),
            "etcdoperator.v0.6.1".to_string()
        )),
        "{:?}",
        entries("etcd")
    );
    assert!(
        entries("etcd")
            .iter()
            .all(|(name, _)| name != "etcdoperator.v0.6.1")
    );
    assert_eq!(
        entries("other"),
        [("etcdoperator.v0.6.1".to_string(), String::new())]
    );
    let bundle = |name: &str| config.bundles.iter().find(|b| b.name == name).unwrap();
    assert_eq!(bundle("etcdoperator.v0.6.1").package, "other");
    assert_eq!(bundle("etcdoperator.v0.9.0").package, "etcd");
}

#[test]
fn a_csv_at_the_head_of_two_packages_is_refused() {
    let text = format!(
        "{}\n- packageName: other\n  channels:\n  - {{name: a, currentCSV: etcdoperator.v0.9.2}}\n",
        fixture()[KEY_PACKAGES].trim_end()
    );
    let e = error(&with(KEY_PACKAGES, &text));
    assert!(
        e.contains("the channels of packages \"etcd\" and \"other\" both reach it; a CSV belongs to one package"),
        "{e}"
    );
}

#[test]
fn a_bad_olm_properties_annotation_names_the_csv() {
    let text = fixture()[KEY_CSVS].replace(
        r#"olm.properties: '[{"type": "olm.maxOpenShiftVersion", "value": "4.20"}]'"#,
        "olm.properties: 'not json'",
    );
    let e = error(&with(KEY_CSVS, &text));
    assert!(
        e.starts_with("clusterServiceVersions[3] (etcdoperator.v0.9.2): CSV \"etcdoperator.v0.9.2\": annotation olm.properties is not a JSON list of properties"),
        "{e}"
    );
}
