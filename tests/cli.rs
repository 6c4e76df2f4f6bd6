//! The `olm` binary as a user runs it, without a cluster.

use std::process::Command;

fn olm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_olm")).args(args).output().expect("olm runs")
}

#[test]
fn help_lists_the_subcommands() {
    let out = olm(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("crds"), "{help}");
    assert!(help.contains("--log-format"), "{help}");
}

#[test]
fn crds_prints_five_crds_as_one_yaml_stream() {
    let out = olm(&["crds"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8(out.stdout).unwrap();
    let names: Vec<String> = yaml
        .split("\n---\n")
        .skip(1)
        .map(|doc| {
            let value: serde_json::Value = serde_yaml::from_str(doc).unwrap();
            assert_eq!(value["kind"], "CustomResourceDefinition");
            value["metadata"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "catalogsources.operators.coreos.com",
            "clusterserviceversions.operators.coreos.com",
            "installplans.operators.coreos.com",
            "operatorgroups.operators.coreos.com",
            "subscriptions.operators.coreos.com",
        ]
    );
}

#[test]
fn unknown_subcommand_fails_with_a_message() {
    let out = olm(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand 'frobnicate'"));
}
