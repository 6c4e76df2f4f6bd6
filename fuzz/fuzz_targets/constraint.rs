//! `olm.constraint` (gvk, package, all/any/not nesting, CEL with `semver_compare`) read
//! from a property value and evaluated against a bundle's properties. Input that is not
//! JSON is taken as a CEL rule. Runs on a 2 MiB stack, as tokio's threads have: the `cel`
//! crate recurses, and a rule that overflows that stack would abort `olm run`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm::catalog::model::fbc::Property;
use olm::resolver::constraints::{Dependency, Facts, Gvk, dependencies};
use olm::resolver::index::BundleProperties;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let text = text.to_string();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || check(&text))
        .unwrap()
        .join()
        .unwrap();
});

fn check(text: &str) {
    let value: Value = serde_json::from_str(text)
        .unwrap_or_else(|_| json!({"cel": {"rule": text}, "failureMessage": "fuzz"}));
    let properties = [
        Property::new(
            "olm.package",
            json!({"packageName": "etcd", "version": "0.9.2"}),
        ),
        Property::new(
            "olm.gvk",
            json!({"group": "etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"}),
        ),
        Property::new("olm.label", json!({"label": "a"})),
        Property::new("olm.maxOpenShiftVersion", json!("4.12")),
    ];
    // As the resolver's index keeps them: packed as JSON text, decoded when a rule reads them.
    let properties = BundleProperties::packed(properties.iter());
    let gvks = vec![Gvk {
        group: "etcd.database.coreos.com".into(),
        version: "v1beta2".into(),
        kind: "EtcdCluster".into(),
    }];
    let version = semver::Version::new(0, 9, 2);
    let facts = Facts {
        package: "etcd",
        version: &version,
        gvks: &gvks,
        properties: &properties,
    };
    for kind in ["olm.constraint", "olm.package.required", "olm.gvk.required"] {
        for dep in dependencies(&[Property::new(kind, value.clone())]) {
            let _ = dep.to_string();
            let _ = dep.failure_message();
            if let Dependency::Matching { predicate, .. } = &dep {
                let _ = predicate.matches(&facts);
                let _ = predicate.only_package();
                let _ = predicate.only_gvk();
            }
        }
    }
}
