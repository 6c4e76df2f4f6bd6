//! The registry client's decoding of gRPC answers: arbitrary bytes decoded as an
//! `api.Bundle` (as a `ListBundles`/`GetBundle` answer) and turned into an FBC bundle, and
//! as an `api.Package`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm::registry::client::bundle_from_api;
use olm::registry::generated as api;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(bundle) = api::Bundle::decode(data) {
        let _ = bundle_from_api(&bundle);
    }
    let _ = api::Package::decode(data);
});
