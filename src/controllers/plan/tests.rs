use serde_json::json;

use super::*;
use crate::api::StepStatus;

fn bundle(name: &str, package: &str) -> PlannedBundle {
    PlannedBundle {
        name: name.into(),
        package: package.into(),
        version: "1.0.0".into(),
        channel: "stable".into(),
        catalog: "operators".into(),
        catalog_namespace: "olm".into(),
        ..PlannedBundle::default()
    }
}

fn csv(name: &str) -> Value {
    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
           "metadata": {"name": name},
           "spec": {"displayName": name, "install": {"strategy": "deployment"}}})
}

fn now() -> Timestamp {
    Timestamp::from_second(1_000).unwrap()
}

#[test]
fn a_new_plan_has_steps_for_inline_bundles_and_lookups_for_images() {
    let mut dependency = bundle("kmm.v1.0.0", "kmm");
    dependency.generated_subscription = Some("kmm-stable-operators-olm".into());
    dependency.dependency_of = vec!["app.v1.0.0".into()];
    let mut app = bundle("app.v1.0.0", "app");
    app.replaces = Some("app.v0.9.0".into());
    let gathered = Gathered {
        with_manifests: vec![BundleManifests {
            bundle: app,
            objects: vec![csv("app.v1.0.0")],
            properties: vec![],
        }],
        to_unpack: vec![(
            dependency,
            "registry.example/kmm-bundle:v1".into(),
            vec![
                json!({"type": "olm.gvk", "value": {"group": "kmm.io", "kind": "Module", "version": "v1"}}),
            ],
        )],
        catalog_sources: vec!["operators".into()],
    };
    let status = initial_status("ns", gathered, false, now());
    assert_eq!(
        status.phase,
        InstallPlanPhase::Installing,
        "{:?}",
        status.message
    );
    assert_eq!(status.start_time, Some(Time(now())));
    let steps: Vec<(&str, &str, StepStatus)> = status
        .plan
        .iter()
        .map(|s| (s.resource.kind.as_str(), s.resource.name.as_str(), s.status))
        .collect();
    assert_eq!(
        steps,
        [
            ("ClusterServiceVersion", "app.v1.0.0", StepStatus::Unknown),
            (
                "Subscription",
                "kmm-stable-operators-olm",
                StepStatus::Unknown
            ),
        ]
    );
    let sub: Value =
        serde_json::from_str(status.plan[1].resource.manifest.as_deref().unwrap()).unwrap();
    assert_eq!(sub["spec"]["startingCSV"], "kmm.v1.0.0");
    assert_eq!(
        sub["metadata"]["annotations"]["olm.generated-by"],
        "app.v1.0.0"
    );

    // The lookup carries everything the steps of the unpacked bundle need.
    let [lookup] = &status.bundle_lookups[..] else {
        panic!("one lookup: {:?}", status.bundle_lookups)
    };
    assert_eq!(lookup.path, "registry.example/kmm-bundle:v1");
    assert_eq!(lookup.catalog_source_ref.name.as_deref(), Some("operators"));
    let (back, properties) = bundle_of_lookup(lookup).unwrap();
    assert_eq!(
        (
            back.name.as_str(),
            back.package.as_str(),
            back.version.as_str()
        ),
        ("kmm.v1.0.0", "kmm", "1.0.0")
    );
    assert_eq!(back.replaces, None);
    assert_eq!(properties.len(), 2, "{properties:?}");
}

#[test]
fn manual_plans_wait_and_bundles_that_make_no_steps_fail_the_plan() {
    let gathered = || Gathered {
        with_manifests: vec![BundleManifests {
            bundle: bundle("app.v1.0.0", "app"),
            objects: vec![csv("app.v1.0.0")],
            properties: vec![],
        }],
        ..Gathered::default()
    };
    let waiting = initial_status("ns", gathered(), true, now());
    assert_eq!(waiting.phase, InstallPlanPhase::RequiresApproval);
    assert_eq!(waiting.start_time, None);

    let mut broken = gathered();
    broken.with_manifests[0].objects = vec![json!({"kind": "Pod", "metadata": {"name": "p"}})];
    let failed = initial_status("ns", broken, false, now());
    assert_eq!(failed.phase, InstallPlanPhase::Failed);
    let installed = &failed.conditions[0];
    assert_eq!(installed.type_.as_deref(), Some("Installed"));
    assert_eq!(installed.reason.as_deref(), Some("InstallComponentFailed"));
    assert!(
        failed.message.as_deref().unwrap().contains("kind Pod"),
        "{failed:?}"
    );
}

#[test]
fn merged_steps_keep_csvs_then_crds_then_the_rest() {
    let step = |kind: &str, name: &str| Step {
        resolving: "x".into(),
        resource: crate::api::StepResource {
            kind: kind.into(),
            name: name.into(),
            ..Default::default()
        },
        optional: None,
        status: StepStatus::Unknown,
    };
    let merged = merge_steps(
        vec![
            step(KIND_CSV, "a"),
            step(KIND_CRD, "a"),
            step("Secret", "a"),
        ],
        vec![
            step(KIND_CSV, "b"),
            step("Subscription", "b"),
            step(KIND_CRD, "b"),
        ],
    );
    let order: Vec<String> = merged
        .iter()
        .map(|s| format!("{}/{}", s.resource.kind, s.resource.name))
        .collect();
    assert_eq!(
        order,
        [
            "ClusterServiceVersion/a",
            "ClusterServiceVersion/b",
            "CustomResourceDefinition/a",
            "CustomResourceDefinition/b",
            "Secret/a",
            "Subscription/b"
        ]
    );
}
