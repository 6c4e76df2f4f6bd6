//! The ConfigMap catalog format: the input is split at NUL bytes into the three data keys
//! (customResourceDefinitions, clusterServiceVersions, packages); the catalog it makes is
//! validated and indexed.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use olm::catalog::checks::validate;
use olm::catalog::configmap::{KEY_CRDS, KEY_CSVS, KEY_PACKAGES, from_configmap_data};
use olm::resolver::{Catalog, CatalogIndex};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0);
    let mut map = BTreeMap::new();
    for key in [KEY_CRDS, KEY_CSVS, KEY_PACKAGES] {
        if let Some(part) = parts.next() {
            map.insert(key.to_string(), String::from_utf8_lossy(part).into_owned());
        }
    }
    let Ok(config) = from_configmap_data(&map) else {
        return;
    };
    let _ = validate::validate(&config);
    let catalog = Catalog {
        name: "fuzz".into(),
        namespace: "olm".into(),
        priority: 0,
        content: config,
    };
    let _ = CatalogIndex::new(std::slice::from_ref(&catalog));
});
