//! Go durations (`registryPoll.interval`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm::api::duration::parse_go_duration;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_go_duration(text);
    }
});
