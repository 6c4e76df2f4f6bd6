//! The small parsers: blang-style ranges (`olm.package.required`, `olm.skipRange`), the
//! version parsers, the semver template (parsed, then rendered with bundles whose versions
//! come from the image tags), and Go durations (`registryPoll.interval`). The first byte
//! picks the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm::api::duration::parse_go_duration;
use olm::catalog::model::fbc::{Bundle, PROP_PACKAGE, Property};
use olm::catalog::model::semver_range::{VersionRange, parse_version};
use olm::catalog::template::semver::{parse, render};

const PROBES: [&str; 6] = [
    "0.0.0",
    "1.0.0",
    "1.2.3-alpha.1",
    "2.0.0+build",
    "999999.0.0",
    "0.1.0-0",
];

fn bundle_for(image: &str) -> Result<Bundle, String> {
    let tag = image.rsplit(':').next().unwrap_or_default();
    Ok(Bundle {
        schema: "olm.bundle".into(),
        name: format!("fuzz.v{tag}"),
        package: "fuzz".into(),
        image: image.into(),
        properties: vec![Property::new(
            PROP_PACKAGE,
            serde_json::json!({"packageName": "fuzz", "version": tag}),
        )],
        related_images: vec![],
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match mode % 4 {
        0 => {
            if let Ok(range) = VersionRange::parse(text) {
                for probe in PROBES {
                    let _ = range.contains(&semver::Version::parse(probe).unwrap());
                }
                let _ = range.as_str();
            }
        }
        1 => {
            if let Ok(v) = parse_version(text) {
                let _ = VersionRange::parse(&format!(">={v}")).map(|r| r.contains(&v));
            }
        }
        3 => {
            let _ = parse_go_duration(text);
        }
        _ => {
            if let Ok(template) = parse(text) {
                let _ = render(&template, &mut bundle_for);
            }
        }
    }
});
