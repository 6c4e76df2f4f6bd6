//! The FBC loader (JSON streams, multi-document YAML, case-insensitive keys), then
//! validation, the resolver's index and the registry server's index of what it loaded.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use olm::catalog::checks::validate;
use olm::catalog::reading::load;
use olm::registry::index::Index;
use olm::resolver::{Catalog, CatalogIndex};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = load::load_str(Path::new("fuzz/catalog.yaml"), text) else {
        return;
    };
    let _ = validate::validate(&config);
    let _ = validate::warnings(&config);
    let _ = olm::catalog::content_digest(&config);
    let catalog = Catalog {
        name: "fuzz".into(),
        namespace: "olm".into(),
        priority: 0,
        content: config.clone(),
    };
    let _ = CatalogIndex::new(std::slice::from_ref(&catalog));
    let _ = Index::from_config(config);
});
