//! Tests of the registry client against `olm catalog serve`'s server, in process.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine;
use serde_json::{Value, json};

use super::*;
use crate::catalog::checks::validate::validate;
use crate::catalog::content_digest;
use crate::catalog::model::fbc::{
    DeclarativeConfig, PROP_BUNDLE_OBJECT, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE,
    PROP_PACKAGE_REQUIRED, Property,
};
use crate::catalog::reading::load::load_path;
use crate::registry::{Index, router};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Serves `index` on an ephemeral loopback port until the handle is aborted.
async fn serve(index: Index) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let routes = router(Arc::new(index)).unwrap();
    let server = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
    });
    (address, server)
}

/// A catalog in a canonical order, manifests decoded, for comparing as data.
fn normalized(mut c: DeclarativeConfig) -> DeclarativeConfig {
    c.packages.sort_by(|a, b| a.name.cmp(&b.name));
    c.channels
        .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    for ch in &mut c.channels {
        ch.entries.sort_by(|a, b| a.name.cmp(&b.name));
    }
    c.bundles
        .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    for b in &mut c.bundles {
        for p in &mut b.properties {
            if p.type_ == PROP_BUNDLE_OBJECT {
                p.value = crate::catalog::bundles::csv::decode_bundle_object(&p.value).unwrap();
            }
        }
        b.properties
            .sort_by_key(|p| format!("{}{}", p.type_, p.value));
        b.related_images
            .sort_by(|x, y| (&x.name, &x.image).cmp(&(&y.name, &y.image)));
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_our_catalog_as_the_files_have_it() {
    let dir = repo().join("catalog");
    let (address, server) = serve(Index::load(&dir).unwrap()).await;
    let client = RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
    assert_eq!(client.address(), address);
    client.check_health().await.unwrap();
    let loaded = client.load_catalog().await.unwrap();
    let files = load_path(&dir).unwrap();

    let problems = validate(&loaded);
    assert!(problems.is_empty(), "{problems:#?}");
    let (loaded_n, files_n) = (normalized(loaded.clone()), normalized(files.clone()));
    let defaults = |c: &DeclarativeConfig| -> Vec<(String, String)> {
        c.packages
            .iter()
            .map(|p| (p.name.clone(), p.default_channel.clone()))
            .collect()
    };
    assert_eq!(defaults(&loaded_n), defaults(&files_n));
    assert_eq!(loaded_n.channels, files_n.channels);
    assert_eq!(loaded_n.bundles.len(), files_n.bundles.len());
    for (l, f) in loaded_n.bundles.iter().zip(&files_n.bundles) {
        assert_eq!(l, f, "bundle {}", f.name);
    }
    // Icons and descriptions come from the default channel heads' CSVs, as rendered.
    assert_eq!(loaded_n.packages, files_n.packages);
    assert_eq!(content_digest(&loaded), content_digest(&files));

    // Without manifests: bundles with images carry none, everything else is there.
    let light = client
        .load_catalog_with(&LoadOptions {
            manifests: Manifests::AsListed,
            concurrency: 1,
            ..LoadOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(light.bundles.len(), files.bundles.len());
    assert!(
        light.bundles.iter().all(|b| {
            !b.image.is_empty() && b.properties_of(PROP_BUNDLE_OBJECT).next().is_none()
        })
    );
    let strip = |c: &DeclarativeConfig| -> Vec<Vec<Property>> {
        normalized(c.clone())
            .bundles
            .into_iter()
            .map(|b| {
                b.properties
                    .into_iter()
                    .filter(|p| p.type_ != PROP_BUNDLE_OBJECT)
                    .collect()
            })
            .collect()
    };
    assert_eq!(strip(&light), strip(&files));

    // Channel heads only, each condensed by the caller's hook as it arrives.
    fn mark(bundle: &mut fbc::Bundle) {
        bundle.properties.retain(|p| p.type_ != PROP_BUNDLE_OBJECT);
        bundle
            .properties
            .push(Property::new("test.condensed", serde_json::Value::Null));
    }
    let heads = client
        .load_catalog_with(&LoadOptions {
            manifests: Manifests::ChannelHeads,
            condense_fetched: Some(mark),
            ..LoadOptions::default()
        })
        .await
        .unwrap();
    let condensed: Vec<&str> = heads
        .bundles
        .iter()
        .filter(|b| b.properties_of("test.condensed").next().is_some())
        .map(|b| b.name.as_str())
        .collect();
    assert!(condensed.contains(&"reverse-words.v0.5.0"), "{condensed:?}");
    assert!(
        !condensed.contains(&"reverse-words.v0.1.0"),
        "{condensed:?}"
    );
    assert!(
        heads
            .bundles
            .iter()
            .all(|b| b.properties_of(PROP_BUNDLE_OBJECT).next().is_none())
    );

    // One bundle on demand.
    let b = client
        .get_bundle("at", "stable", "at.v0.2.0")
        .await
        .unwrap();
    let expected = files_n
        .bundles
        .iter()
        .find(|b| b.name == "at.v0.2.0")
        .unwrap();
    assert_eq!(
        &normalized(DeclarativeConfig {
            bundles: vec![b],
            ..Default::default()
        })
        .bundles[0],
        expected
    );
    let e = client
        .get_bundle("at", "stable", "at.v9")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("registry {address}: GetBundle(at/stable/at.v9): ")),
        "{e}"
    );
    server.abort();
}

/// Deprecations of every kind, and a bundle without an image whose manifests come
/// inline in ListBundles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deprecations_and_inline_manifests_round_trip() {
    let csv = r#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{"name":"p.v2"},"spec":{"version":"2.0.0","relatedImages":[{"name":"op","image":"quay.io/p/op:v2"}]}}"#;
    let data = base64::engine::general_purpose::STANDARD.encode(csv);
    let text = format!(
        r#"{{"schema":"olm.package","name":"p","defaultChannel":"stable"}}
{{"schema":"olm.channel","package":"p","name":"stable","entries":[{{"name":"p.v1"}},{{"name":"p.v2","replaces":"p.v1","skips":["p.v0"],"skipRange":"<2.0.0"}}]}}
{{"schema":"olm.channel","package":"p","name":"candidate","entries":[{{"name":"p.v2"}}]}}
{{"schema":"olm.bundle","package":"p","name":"p.v1","image":"quay.io/p/bundle:v1","properties":[
 {{"type":"olm.package","value":{{"packageName":"p","version":"1.0.0"}}}},
 {{"type":"olm.package.required","value":{{"packageName":"q","versionRange":">=1.0.0"}}}},
 {{"type":"olm.constraint","value":{{"failureMessage":"needs K","gvk":{{"group":"g.io","kind":"K","version":"v1"}}}}}}]}}
{{"schema":"olm.bundle","package":"p","name":"p.v2","properties":[
 {{"type":"olm.package","value":{{"packageName":"p","version":"2.0.0"}}}},
 {{"type":"olm.gvk","value":{{"group":"g.io","kind":"K","version":"v1"}}}},
 {{"type":"olm.gvk.required","value":{{"group":"h.io","kind":"R","version":"v1"}}}},
 {{"type":"olm.bundle.object","value":{{"data":"{data}"}}}}],
 "relatedImages":[{{"name":"op","image":"quay.io/p/op:v2"}}]}}
{{"schema":"olm.deprecations","package":"p","entries":[
 {{"reference":{{"schema":"olm.package"}},"message":"p is retired"}},
 {{"reference":{{"schema":"olm.channel","name":"candidate"}},"message":"use stable"}},
 {{"reference":{{"schema":"olm.bundle","name":"p.v1"}},"message":"p.v1 is broken"}}]}}
"#
    );
    let files = crate::catalog::reading::load::load_str(Path::new("p.json"), &text).unwrap();
    let (address, server) = serve(Index::from_config(files.clone()).unwrap()).await;
    let client = RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
    let loaded = client.load_catalog().await.unwrap();
    server.abort();

    assert_eq!(
        normalized(loaded.clone()).channels,
        normalized(files.clone()).channels
    );
    let mut expected = normalized(files.clone()).bundles;
    // The bundle image is listed among related images, as `opm render` lists it.
    expected[0].related_images.push(fbc::RelatedImage {
        name: String::new(),
        image: "quay.io/p/bundle:v1".into(),
    });
    assert_eq!(normalized(loaded.clone()).bundles, expected);
    let entry_set = |d: &fbc::Deprecation| -> BTreeSet<(String, String, String)> {
        d.entries
            .iter()
            .map(|e| {
                (
                    e.reference.schema.clone(),
                    e.reference.name.clone(),
                    e.message.clone(),
                )
            })
            .collect()
    };
    let (entries, wanted) = (
        entry_set(&loaded.deprecations[0]),
        entry_set(&files.deprecations[0]),
    );
    assert_eq!(entries, wanted);
    assert!(validate(&loaded).is_empty(), "{:#?}", validate(&loaded));
}

/// A bundle with an image and only `olm.csv.metadata`: the CSV the server makes up for
/// it is not taken for its manifests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_metadata_bundles_keep_no_made_up_manifests() {
    let text = r#"{"schema":"olm.package","name":"m","defaultChannel":"stable"}
{"schema":"olm.channel","package":"m","name":"stable","entries":[{"name":"m.v1"}]}
{"schema":"olm.bundle","package":"m","name":"m.v1","image":"quay.io/m/bundle:v1","properties":[
 {"type":"olm.package","value":{"packageName":"m","version":"1.0.0"}},
 {"type":"olm.csv.metadata","value":{"displayName":"M","installModes":[{"type":"AllNamespaces","supported":true}]}}]}
"#;
    let files = crate::catalog::reading::load::load_str(Path::new("m.json"), text).unwrap();
    let (address, server) = serve(Index::from_config(files).unwrap()).await;
    let client = RegistryClient::new(&address, Duration::from_secs(5)).unwrap();
    let loaded = client.load_catalog().await.unwrap();
    let asked = client.get_bundle("m", "stable", "m.v1").await.unwrap();
    server.abort();
    assert_eq!(loaded.bundles, std::slice::from_ref(&asked));
    assert!(asked.properties_of(PROP_BUNDLE_OBJECT).next().is_none());
    assert_eq!(
        asked.related_images,
        [fbc::RelatedImage {
            name: String::new(),
            image: "quay.io/m/bundle:v1".into()
        }]
    );
}

#[tokio::test]
async fn health_of_a_closed_port_fails_within_the_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The listener is dropped: nothing listens there now.
    let address = format!("127.0.0.1:{port}");
    let client = RegistryClient::new(&address, Duration::from_secs(2)).unwrap();
    let started = Instant::now();
    let e = client.check_health().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(e.is_unreachable(), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "registry {address}: grpc.health.v1.Health/Check: "
        )),
        "{text}"
    );
    // Loading fails the same way, naming the RPC.
    let e = client.load_catalog().await.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("registry {address}: ListBundles: ")),
        "{e}"
    );
}

#[tokio::test]
async fn health_of_an_unroutable_address_fails_within_the_timeout() {
    // TEST-NET-1: connecting either fails at once or hangs until the timeout.
    let client = RegistryClient::new("192.0.2.1:50051", Duration::from_millis(1500)).unwrap();
    let started = Instant::now();
    let e = client.check_health().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(2500), "{e}");
    assert!(e.to_string().contains("192.0.2.1:50051"), "{e}");
}

#[test]
fn addresses_must_be_host_and_port() {
    for bad in [
        "",
        "localhost",
        "http://localhost:50051",
        "a:1/x",
        ":50051",
        "a:b",
    ] {
        let e = RegistryClient::new(bad, Duration::from_secs(1)).unwrap_err();
        assert!(
            matches!(&e, ClientError::InvalidAddress { address, .. } if address == bad),
            "{bad}: {e}"
        );
    }
    for good in [
        "localhost:50051",
        "10.0.0.1:50051",
        "[::1]:50051",
        "catalog.olm.svc:50051",
    ] {
        RegistryClient::new(good, Duration::from_secs(1)).unwrap();
    }
}

#[test]
fn legacy_bundles_get_properties_from_apis_and_dependencies() {
    let g = |group: &str, kind: &str| api::GroupVersionKind {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: "ignored".into(),
    };
    let b = api::Bundle {
        csv_name: "p.v1".into(),
        package_name: "p".into(),
        channel_name: "stable".into(),
        version: "1.0.0".into(),
        provided_apis: vec![g("g.io", "K")],
        required_apis: vec![g("h.io", "R")],
        dependencies: vec![
            api::Dependency {
                r#type: "olm.gvk".into(),
                value: r#"{"group":"h.io","kind":"R","version":"v1"}"#.into(),
            },
            api::Dependency {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"q","version":">=1.0.0"}"#.into(),
            },
            api::Dependency {
                r#type: "olm.label".into(),
                value: r#"{"label":"beta"}"#.into(),
            },
            api::Dependency {
                r#type: "olm.unknown".into(),
                value: "{}".into(),
            },
        ],
        object: vec![r#"{"kind":"ClusterServiceVersion"}"#.into()],
        ..Default::default()
    };
    let f = bundle_from_api(&b).unwrap();
    let props: Vec<(String, Value)> = f
        .properties
        .iter()
        .map(|p| (p.type_.clone(), p.value.clone()))
        .collect();
    assert_eq!(
        props,
        [
            (
                PROP_PACKAGE.to_string(),
                json!({"packageName": "p", "version": "1.0.0"})
            ),
            (
                PROP_GVK.to_string(),
                json!({"group": "g.io", "kind": "K", "version": "v1"})
            ),
            (
                PROP_GVK_REQUIRED.to_string(),
                json!({"group": "h.io", "kind": "R", "version": "v1"})
            ),
            (
                PROP_PACKAGE_REQUIRED.to_string(),
                json!({"packageName": "q", "versionRange": ">=1.0.0"})
            ),
            ("olm.label.required".to_string(), json!({"label": "beta"})),
            (
                PROP_BUNDLE_OBJECT.to_string(),
                json!({"data": "eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0="})
            ),
        ]
    );
    assert!(f.image.is_empty() && f.related_images.is_empty());

    let mut broken = b;
    broken.properties.push(api::Property {
        r#type: "olm.maxOpenShiftVersion".into(),
        value: "4.1{".into(),
    });
    assert!(
        bundle_from_api(&broken)
            .unwrap_err()
            .to_string()
            .starts_with("olm.maxOpenShiftVersion value \"4.1{\" is not JSON")
    );
}

/// A bundle whose `GetBundle` answer is just under the message limit is read; one just over
/// it is refused (by our server, which will not encode it, and the client says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_just_under_the_message_limit_is_read_and_one_just_over_is_refused() {
    use crate::registry::limits::MAX_MESSAGE_BYTES;
    for (padding, fits) in [
        (MAX_MESSAGE_BYTES - (256 << 10), true),
        (MAX_MESSAGE_BYTES + 1, false),
    ] {
        let mut config = load_path(&repo().join("catalog")).unwrap();
        let channel = config.channels[0].clone();
        let name = channel.entries[0].name.clone();
        let bundle = config
            .bundles
            .iter_mut()
            .find(|b| b.package == channel.package && b.name == name)
            .unwrap();
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "padding"},
            "data": {"padding": "x".repeat(padding)},
        });
        let data =
            base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&object).unwrap());
        bundle.properties.push(Property {
            type_: PROP_BUNDLE_OBJECT.into(),
            value: json!({ "data": data }),
        });
        let (address, server) = serve(Index::from_config(config).unwrap()).await;
        let client = RegistryClient::new(&address, Duration::from_secs(10)).unwrap();
        let answer = client
            .get_bundle(&channel.package, &channel.name, &name)
            .await;
        server.abort();
        match answer {
            Ok(bundle) => assert!(fits, "{} was read", bundle.name),
            Err(error) => {
                assert!(!fits, "{error}");
                let text = error.to_string();
                assert!(
                    text.contains("the limit on one message is 32 MiB"),
                    "{text}"
                );
                assert!(
                    text.contains(&format!(
                        "GetBundle({}/{}/{name})",
                        channel.package, channel.name
                    )),
                    "{text}"
                );
            }
        }
    }
}
