use serde_json::json;

use super::*;
use crate::catalog::reading::load::load_path;
use crate::controllers::plan::manifests::{Fetched, objects_of};

fn catalog_bundle(name: &str) -> BundleManifests {
    let content =
        load_path(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("catalog")).unwrap();
    let bundle = content.bundles.iter().find(|b| b.name == name).unwrap();
    let Ok(Fetched::Objects {
        objects,
        properties,
    }) = objects_of(bundle)
    else {
        panic!("{name} has inline objects");
    };
    BundleManifests {
        bundle: PlannedBundle {
            name: name.into(),
            package: bundle.package.clone(),
            version: bundle.version().unwrap().into(),
            channel: "stable".into(),
            catalog: "operators".into(),
            catalog_namespace: "ns".into(),
            ..PlannedBundle::default()
        },
        objects,
        properties,
    }
}

fn kinds(steps: &[Step]) -> Vec<String> {
    steps.iter().map(|s| s.resource.kind.clone()).collect()
}

fn manifest(step: &Step) -> Value {
    serde_json::from_str(step.resource.manifest.as_deref().unwrap()).unwrap()
}

#[test]
fn steps_are_csvs_then_crds_then_the_rest_with_rbac_and_generated_subscriptions() {
    let mut kmm = catalog_bundle("kernel-module-management.v2.2.0");
    kmm.bundle.generated_subscription = Some("kernel-module-management-stable-operators-ns".into());
    kmm.bundle.dependency_of = vec!["ptemplate.v0.2.0".into()];
    let mut pt = catalog_bundle("ptemplate.v0.2.0");
    pt.bundle.replaces = Some("ptemplate.v0.1.0".into());
    pt.bundle.subscription = Some("ptemplate".into());
    let steps = build_steps("ns", &[kmm, pt]).unwrap();
    let kinds = kinds(&steps);
    assert_eq!(
        &kinds[..4],
        [
            "ClusterServiceVersion",
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "CustomResourceDefinition"
        ],
        "{kinds:?}"
    );
    assert!(
        kinds[4..]
            .iter()
            .all(|k| k != "ClusterServiceVersion" && k != "CustomResourceDefinition")
    );
    // Each CSV's RBAC, planned as upstream plans it, first among its bundle's other objects.
    let of = |csv: &str| -> Vec<String> {
        steps[4..]
            .iter()
            .filter(|s| s.resolving == csv && s.resource.kind != KIND_SUBSCRIPTION)
            .map(|s| s.resource.kind.clone())
            .collect()
    };
    let kmm = of("kernel-module-management.v2.2.0");
    assert_eq!(
        kmm[..5],
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding"
        ],
        "{kinds:?}"
    );
    let role = steps[4..]
        .iter()
        .find(|s| s.resource.kind == "ClusterRole" && s.resolving.starts_with("kernel"))
        .unwrap();
    assert!(
        role.resource
            .name
            .starts_with("kernel-module-management.v2.2.0-")
    );
    assert_eq!(role.resource.group, "rbac.authorization.k8s.io");
    assert_eq!(
        manifest(role)["metadata"]["labels"]["olm.owner"],
        "kernel-module-management.v2.2.0"
    );
    assert!(of("ptemplate.v0.2.0").contains(&"ClusterRoleBinding".to_string()));
    assert_eq!(steps[0].resolving, "kernel-module-management.v2.2.0");
    assert_eq!(steps[0].resource.group, "operators.coreos.com");
    assert_eq!(steps[0].resource.version, "v1alpha1");
    assert_eq!(steps[0].resource.source_name, "operators");
    assert_eq!(steps[0].status, StepStatus::Unknown);

    // The CSV records its package and replaces what is installed.
    let csv = manifest(&steps[1]);
    assert_eq!(csv["spec"]["replaces"], "ptemplate.v0.1.0");
    assert_eq!(csv["metadata"]["namespace"], "ns");
    let properties: Value = serde_json::from_str(
        csv["metadata"]["annotations"][ANNOTATION_PROPERTIES]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        properties["properties"][0],
        json!({"type": "olm.package", "value": {"packageName": "ptemplate", "version": "0.2.0"}})
    );

    // The dependency's generated Subscription.
    let sub = steps
        .iter()
        .find(|s| s.resource.kind == KIND_SUBSCRIPTION)
        .unwrap();
    let sub = manifest(sub);
    assert_eq!(
        sub["metadata"]["name"],
        "kernel-module-management-stable-operators-ns"
    );
    assert_eq!(
        sub["metadata"]["annotations"][ANNOTATION_GENERATED_BY],
        "ptemplate.v0.2.0"
    );
    assert_eq!(
        sub["spec"]["startingCSV"],
        "kernel-module-management.v2.2.0"
    );
    assert_eq!(sub["spec"]["installPlanApproval"], "Automatic");
    assert_eq!(sub["spec"]["sourceNamespace"], "ns");
}

#[test]
fn kinds_outside_upstreams_list_fail_the_plan_naming_them() {
    let mut rw = catalog_bundle("reverse-words.v0.4.0");
    rw.objects.push(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sneaky"}}),
    );
    let error = build_steps("ns", &[rw]).unwrap_err();
    assert_eq!(
        error,
        PlanError::UnsupportedKind {
            bundle: "reverse-words.v0.4.0".into(),
            kind: "Deployment".into(),
            name: "sneaky".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("kind Deployment (sneaky) is not supported")
    );

    let mut no_csv = catalog_bundle("at.v0.2.0");
    no_csv.objects.retain(|o| o["kind"] != KIND_CSV);
    assert!(
        build_steps("ns", &[no_csv])
            .unwrap_err()
            .to_string()
            .contains("no ClusterServiceVersion")
    );
}

/// A plan past the inline budget carries its CRDs and other objects by reference, and each
/// reference reads back to the object the step would have carried.
#[test]
fn a_plan_too_large_for_etcd_refers_to_its_catalog() {
    let mut big = catalog_bundle("kernel-module-management.v2.2.0");
    let description = "x".repeat(INLINE_MANIFEST_BUDGET);
    let crd = big
        .objects
        .iter_mut()
        .find(|o| o["kind"] == KIND_CRD)
        .unwrap();
    crd["metadata"]["annotations"] = json!({"padding": description});
    let inline = build_steps("ns", std::slice::from_ref(&big)).unwrap();
    let mut steps = inline.clone();
    refer_when_too_large(&mut steps, std::slice::from_ref(&big));
    for (before, after) in inline.iter().zip(&steps) {
        let after_manifest = manifest(after);
        // The CSV stays inline, and so does the RBAC the plan derived from it (small, and
        // not the catalog's to hand back).
        if after.resource.kind == KIND_CSV
            || after_manifest["metadata"]["labels"]["olm.owner"].is_string()
        {
            assert_eq!(after_manifest, manifest(before), "stays inline");
            continue;
        }
        let bundle = referred_bundle(&after_manifest).expect("a reference");
        assert_eq!(bundle.name, "kernel-module-management.v2.2.0");
        assert_eq!(
            (bundle.catalog.as_str(), bundle.catalog_namespace.as_str()),
            ("operators", "ns")
        );
        let read_back = pick(
            &big.objects,
            &after.resource.kind,
            &after.resource.name,
            &bundle.package,
            "ns",
        )
        .unwrap();
        assert_eq!(read_back, manifest(before), "{}", after.resource.name);
    }
    let total: usize = steps
        .iter()
        .filter_map(|s| s.resource.manifest.as_ref())
        .map(String::len)
        .sum();
    assert!(total < INLINE_MANIFEST_BUDGET, "{total}");
    // Small plans stay inline.
    let small = catalog_bundle("ptemplate.v0.2.0");
    let inline = build_steps("ns", std::slice::from_ref(&small)).unwrap();
    let mut steps = inline.clone();
    refer_when_too_large(&mut steps, std::slice::from_ref(&small));
    assert_eq!(steps, inline);
}
