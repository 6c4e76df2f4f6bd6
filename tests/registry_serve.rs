//! Differential test of `olm catalog serve` against upstream `opm serve` (v1.73.0, built by
//! `hack/opm/build`): both serve the same catalog on loopback ports and every registry RPC
//! is called over all packages, channels, bundles and provided GVKs (plus misses), on our
//! `catalog/` and on the rendered community-operators testdata. Answers are compared as
//! data: streams whose order upstream leaves unspecified are sorted, JSON strings (csvJson,
//! objects, property values) are parsed, errors compare by code and message. Then whole
//! catalogs are loaded through our registry client (`olm::registry::client`) from both
//! servers and compared as data.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, opm, render_testdata, repo, scratch};

use olm::catalog::{DeclarativeConfig, content_digest};
use olm::registry::generated as api;
use olm::registry::generated::experimental_registry_client::ExperimentalRegistryClient;
use olm::registry::generated::registry_client::RegistryClient;
use serde_json::{Value, json};
use tonic::transport::Channel;

/// A server process, killed when dropped (also when a test panics).
struct ServerGuard {
    child: Child,
    name: &'static str,
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_ours(dir: &Path, port: u16) -> ServerGuard {
    let child = Command::new(env!("CARGO_BIN_EXE_olm"))
        .args([
            "catalog",
            "serve",
            dir.to_str().unwrap(),
            "--port",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerGuard { child, name: "olm" }
}

fn start_opm(dir: &Path, port: u16) -> ServerGuard {
    let child = Command::new(opm())
        .env_remove("OLM_CACHE_DIR")
        .args([
            "serve",
            dir.to_str().unwrap(),
            "--port",
            &port.to_string(),
            "--pprof-addr",
            "",
            "-t",
            "/dev/null",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerGuard { child, name: "opm" }
}

/// Connects once the server answers a health check.
async fn connect(server: &mut ServerGuard, port: u16) -> Channel {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("{} exited before serving: {status}", server.name);
        }
        if let Ok(channel) = Channel::from_shared(format!("http://127.0.0.1:{port}"))
            .unwrap()
            .connect()
            .await
        {
            let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
            if let Ok(r) = health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                })
                .await
            {
                assert_eq!(
                    r.get_ref().status,
                    tonic_health::pb::health_check_response::ServingStatus::Serving as i32
                );
                return channel;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} did not become ready",
            server.name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn client(channel: Channel) -> RegistryClient<Channel> {
    RegistryClient::new(channel).max_decoding_message_size(256 << 20)
}

// --- Messages as comparable data -------------------------------------------------------

fn parse_json(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_string()))
    }
}

fn deprecation(d: &Option<api::Deprecation>) -> Value {
    d.as_ref().map_or(Value::Null, |d| json!(d.message))
}

fn gvks(g: &[api::GroupVersionKind]) -> Value {
    g.iter()
        .map(|g| json!([g.group, g.version, g.kind, g.plural]))
        .collect()
}

fn bundle(b: &api::Bundle) -> Value {
    json!({
        "csvName": b.csv_name, "packageName": b.package_name, "channelName": b.channel_name,
        "csvJson": parse_json(&b.csv_json),
        "object": b.object.iter().map(|o| parse_json(o)).collect::<Vec<_>>(),
        "bundlePath": b.bundle_path,
        "providedApis": gvks(&b.provided_apis), "requiredApis": gvks(&b.required_apis),
        "version": b.version, "skipRange": b.skip_range,
        "dependencies": b.dependencies.iter().map(|d| json!([d.r#type, parse_json(&d.value)])).collect::<Vec<_>>(),
        "properties": b.properties.iter().map(|p| json!([p.r#type, parse_json(&p.value)])).collect::<Vec<_>>(),
        "replaces": b.replaces, "skips": b.skips,
        "deprecation": deprecation(&b.deprecation),
    })
}

fn package(p: &api::Package) -> Value {
    json!({
        "name": p.name,
        "channels": p.channels.iter().map(|c| json!([c.name, c.csv_name, deprecation(&c.deprecation)])).collect::<Vec<_>>(),
        "defaultChannelName": p.default_channel_name,
        "deprecation": deprecation(&p.deprecation),
    })
}

fn entry(e: &api::ChannelEntry) -> Value {
    json!([e.package_name, e.channel_name, e.bundle_name, e.replaces])
}

fn error(s: &tonic::Status) -> Value {
    json!({ "code": format!("{:?}", s.code()), "message": s.message() })
}

fn unary<T>(r: Result<tonic::Response<T>, tonic::Status>, f: impl Fn(&T) -> Value) -> Value {
    match r {
        Ok(r) => f(r.get_ref()),
        Err(s) => error(&s),
    }
}

/// A stream's messages, sorted (upstream's order comes from Go map iteration).
async fn sorted_stream<T>(
    r: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
    f: impl Fn(&T) -> Value,
) -> Value {
    let mut stream = match r {
        Ok(r) => r.into_inner(),
        Err(s) => return error(&s),
    };
    let mut items = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(m)) => items.push(f(&m)),
            Ok(None) => break,
            Err(s) => return error(&s),
        }
    }
    items.sort_by_key(std::string::ToString::to_string);
    Value::Array(items)
}

// --- The comparison --------------------------------------------------------------------

#[derive(Default)]
struct Report {
    calls: BTreeMap<&'static str, (usize, usize)>,
    mismatches: Vec<String>,
}

impl Report {
    fn check(&mut self, rpc: &'static str, what: &str, ours: Value, theirs: Value) {
        let tally = self.calls.entry(rpc).or_default();
        tally.0 += 1;
        if ours == theirs {
            tally.1 += 1;
        } else if self.mismatches.len() < 30 {
            let (o, t) = (ours.to_string(), theirs.to_string());
            let at = o
                .bytes()
                .zip(t.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(o.len().min(t.len()));
            let from = at.saturating_sub(200);
            let cut = |s: &str| {
                s.get(from..(at + 300).min(s.len()))
                    .unwrap_or("")
                    .to_string()
            };
            self.mismatches.push(format!(
                "{rpc}({what}):\n  olm: …{}\n  opm: …{}",
                cut(&o),
                cut(&t)
            ));
        }
    }
}

// A scenario read top to bottom: tests are held to neither length nor complexity.
#[allow(clippy::cognitive_complexity)]
async fn compare(dir: &Path) -> Report {
    let (our_port, their_port) = (free_port(), free_port());
    let mut ours_proc = start_ours(dir, our_port);
    let mut theirs_proc = start_opm(dir, their_port);
    let our_channel = connect(&mut ours_proc, our_port).await;
    let their_channel = connect(&mut theirs_proc, their_port).await;
    let (mut o, mut t) = (client(our_channel.clone()), client(their_channel.clone()));
    let mut report = Report::default();

    // ListPackages.
    let names = |p: &api::PackageName| json!(p.name);
    let (a, b) = (
        sorted_stream(o.list_packages(api::ListPackageRequest {}).await, names).await,
        sorted_stream(t.list_packages(api::ListPackageRequest {}).await, names).await,
    );
    let packages: Vec<String> = b
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    report.check("ListPackages", "", a, b);

    // ListBundles: upstream's is the ground truth for everything below.
    let mut all: Vec<api::Bundle> = Vec::new();
    let mut stream = t
        .list_bundles(api::ListBundlesRequest {})
        .await
        .unwrap()
        .into_inner();
    while let Some(m) = stream.message().await.unwrap() {
        all.push(m);
    }
    let (a, b) = (
        sorted_stream(o.list_bundles(api::ListBundlesRequest {}).await, bundle).await,
        sorted_stream(t.list_bundles(api::ListBundlesRequest {}).await, bundle).await,
    );
    report.check("ListBundles", "", a, b);

    // GetPackage.
    let mut channels: BTreeSet<(String, String)> = BTreeSet::new();
    for p in packages
        .iter()
        .map(String::as_str)
        .chain(["no-such-package"])
    {
        let req = api::GetPackageRequest {
            name: p.to_string(),
        };
        let (a, b) = (
            unary(o.get_package(req.clone()).await, package),
            unary(t.get_package(req).await, package),
        );
        if let Some(chs) = b.get("channels").and_then(Value::as_array) {
            channels.extend(
                chs.iter()
                    .map(|c| (p.to_string(), c[0].as_str().unwrap().to_string())),
            );
        }
        report.check("GetPackage", p, a, b);
    }

    // GetBundleForChannel.
    let misses = [("no-such-package".to_string(), "stable".to_string())];
    let first_pkg = packages.first().cloned().unwrap_or_default();
    for (p, c) in channels
        .iter()
        .chain(misses.iter())
        .chain([(first_pkg.clone(), "no-such-channel".to_string())].iter())
    {
        let req = api::GetBundleInChannelRequest {
            pkg_name: p.clone(),
            channel_name: c.clone(),
        };
        #[allow(deprecated)]
        let (a, b) = (
            unary(o.get_bundle_for_channel(req.clone()).await, bundle),
            unary(t.get_bundle_for_channel(req).await, bundle),
        );
        report.check("GetBundleForChannel", &format!("{p}/{c}"), a, b);
    }

    // GetBundle, GetBundleThatReplaces, GetChannelEntriesThatReplace per bundle.
    let mut csv_names: BTreeSet<String> = BTreeSet::new();
    for b in &all {
        let req = api::GetBundleRequest {
            pkg_name: b.package_name.clone(),
            channel_name: b.channel_name.clone(),
            csv_name: b.csv_name.clone(),
        };
        let what = format!("{}/{}/{}", b.package_name, b.channel_name, b.csv_name);
        let (x, y) = (
            unary(o.get_bundle(req.clone()).await, bundle),
            unary(t.get_bundle(req).await, bundle),
        );
        report.check("GetBundle", &what, x, y);

        // Upstream picks any bundle of the channel that replaces or skips the CSV (Go map
        // order): compare exactly when there is one candidate, else check ours is one of them.
        let candidates: Vec<&api::Bundle> = all
            .iter()
            .filter(|c| c.package_name == b.package_name && c.channel_name == b.channel_name)
            .filter(|c| c.replaces == b.csv_name || c.skips.contains(&b.csv_name))
            .collect();
        let req = api::GetReplacementRequest {
            csv_name: b.csv_name.clone(),
            pkg_name: b.package_name.clone(),
            channel_name: b.channel_name.clone(),
        };
        let (x, y) = (
            unary(o.get_bundle_that_replaces(req.clone()).await, bundle),
            unary(t.get_bundle_that_replaces(req).await, bundle),
        );
        if candidates.len() > 1 {
            let ok = candidates.iter().any(|c| x["csvName"] == json!(c.csv_name))
                && y["csvName"].is_string();
            report.check("GetBundleThatReplaces", &what, json!(ok), json!(true));
        } else {
            report.check("GetBundleThatReplaces", &what, x, y);
        }
        csv_names.insert(b.csv_name.clone());
        csv_names.extend(b.skips.iter().cloned());
        if !b.replaces.is_empty() {
            csv_names.insert(b.replaces.clone());
        }
    }
    for (p, c) in [
        (first_pkg.clone(), "no-such-channel"),
        ("no-such-package".to_string(), "stable"),
    ] {
        let req = api::GetBundleRequest {
            pkg_name: p.clone(),
            channel_name: c.to_string(),
            csv_name: "x.v1".into(),
        };
        let (x, y) = (
            unary(o.get_bundle(req.clone()).await, bundle),
            unary(t.get_bundle(req).await, bundle),
        );
        report.check("GetBundle", &format!("{p}/{c}/x.v1"), x, y);
        let req = api::GetReplacementRequest {
            csv_name: "x.v1".into(),
            pkg_name: p.clone(),
            channel_name: c.to_string(),
        };
        let (x, y) = (
            unary(o.get_bundle_that_replaces(req.clone()).await, bundle),
            unary(t.get_bundle_that_replaces(req).await, bundle),
        );
        report.check("GetBundleThatReplaces", &format!("{p}/{c}/x.v1"), x, y);
    }
    for (p, c) in channels.iter().take(1) {
        let req = api::GetBundleRequest {
            pkg_name: p.clone(),
            channel_name: c.clone(),
            csv_name: "no-such-bundle".into(),
        };
        let (x, y) = (
            unary(o.get_bundle(req.clone()).await, bundle),
            unary(t.get_bundle(req).await, bundle),
        );
        report.check("GetBundle", "missing bundle", x, y);
    }
    csv_names.insert("no-such-bundle.v0".into());
    for name in &csv_names {
        let req = api::GetAllReplacementsRequest {
            csv_name: name.clone(),
        };
        let (x, y) = (
            sorted_stream(o.get_channel_entries_that_replace(req.clone()).await, entry).await,
            sorted_stream(t.get_channel_entries_that_replace(req).await, entry).await,
        );
        report.check("GetChannelEntriesThatReplace", name, x, y);
    }

    // The provider RPCs over every provided GVK (and one nobody provides); `plural` is set
    // to nonsense to show it is ignored.
    let mut gvk_set: BTreeSet<(String, String, String)> = all
        .iter()
        .flat_map(|b| {
            b.provided_apis
                .iter()
                .map(|g| (g.group.clone(), g.version.clone(), g.kind.clone()))
        })
        .collect();
    gvk_set.insert(("nobody.example.com".into(), "v1".into(), "Nothing".into()));
    for (group, version, kind) in &gvk_set {
        let what = format!("{group}/{version}/{kind}");
        let plural = "ignored".to_string();
        let req = api::GetAllProvidersRequest {
            group: group.clone(),
            version: version.clone(),
            kind: kind.clone(),
            plural: plural.clone(),
        };
        let (x, y) = (
            sorted_stream(o.get_channel_entries_that_provide(req.clone()).await, entry).await,
            sorted_stream(t.get_channel_entries_that_provide(req).await, entry).await,
        );
        report.check("GetChannelEntriesThatProvide", &what, x, y);
        let req = api::GetLatestProvidersRequest {
            group: group.clone(),
            version: version.clone(),
            kind: kind.clone(),
            plural: plural.clone(),
        };
        let (x, y) = (
            sorted_stream(
                o.get_latest_channel_entries_that_provide(req.clone()).await,
                entry,
            )
            .await,
            sorted_stream(t.get_latest_channel_entries_that_provide(req).await, entry).await,
        );
        report.check("GetLatestChannelEntriesThatProvide", &what, x, y);
        let req = api::GetDefaultProviderRequest {
            group: group.clone(),
            version: version.clone(),
            kind: kind.clone(),
            plural,
        };
        let (x, y) = (
            unary(
                o.get_default_bundle_that_provides(req.clone()).await,
                bundle,
            ),
            unary(t.get_default_bundle_that_provides(req).await, bundle),
        );
        report.check("GetDefaultBundleThatProvides", &what, x, y);
    }

    // ExperimentalListPackageCustomSchemas: with and without the header, bad names.
    let (mut eo, mut et) = (
        ExperimentalRegistryClient::new(our_channel.clone()),
        ExperimentalRegistryClient::new(their_channel.clone()),
    );
    let struct_json = |s: &prost_types::Struct| json!(format!("{s:?}"));
    let mut cases: Vec<(String, String, bool)> = vec![
        ("olm.package".into(), first_pkg.clone(), true),
        ("olm.bundle".into(), first_pkg.clone(), false),
        (String::new(), String::new(), true),
        ("../etc".into(), String::new(), true),
        ("my.schema".into(), "bad/name".into(), true),
        ("my.schema".into(), String::new(), true),
    ];
    for schema in ["olm.custom", "my.other"] {
        cases.extend(
            packages
                .iter()
                .chain([&String::new()])
                .map(|p| (schema.to_string(), p.clone(), true)),
        );
    }
    for (schema, pkg, ack) in cases {
        let request = || {
            let mut r = tonic::Request::new(api::ExperimentalListPackageCustomSchemasRequest {
                schema: schema.clone(),
                package_name: pkg.clone(),
            });
            if ack {
                r.metadata_mut()
                    .insert("x-acknowledge-experimental", "true".parse().unwrap());
            }
            r
        };
        let (x, y) = (
            sorted_stream(
                eo.experimental_list_package_custom_schemas(request()).await,
                struct_json,
            )
            .await,
            sorted_stream(
                et.experimental_list_package_custom_schemas(request()).await,
                struct_json,
            )
            .await,
        );
        report.check(
            "ExperimentalListPackageCustomSchemas",
            &format!("{schema}/{pkg}/{ack}"),
            x,
            y,
        );
    }

    // Health for a named service, and the services reflection lists.
    for svc in ["", "api.Registry"] {
        let req = tonic_health::pb::HealthCheckRequest {
            service: svc.into(),
        };
        let check = |r: &tonic_health::pb::HealthCheckResponse| json!(r.status);
        let (x, y) = (
            unary(
                tonic_health::pb::health_client::HealthClient::new(our_channel.clone())
                    .check(req.clone())
                    .await,
                check,
            ),
            unary(
                tonic_health::pb::health_client::HealthClient::new(their_channel.clone())
                    .check(req)
                    .await,
                check,
            ),
        );
        report.check("grpc.health.v1.Health/Check", svc, x, y);
    }
    let (x, y) = (
        reflected_services(our_channel).await,
        reflected_services(their_channel).await,
    );
    report.check("ServerReflection/ListServices", "", x, y);
    report
}

async fn reflected_services(channel: Channel) -> Value {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut client = ServerReflectionClient::new(channel);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::once(req))
        .await
        .unwrap()
        .into_inner();
    let mut names = BTreeSet::new();
    while let Some(r) = responses.message().await.unwrap() {
        if let Some(MessageResponse::ListServicesResponse(list)) = r.message_response {
            names.extend(list.service.into_iter().map(|s| s.name));
        }
    }
    json!(names)
}

fn assert_agree(what: &str, report: &Report) {
    for (rpc, (calls, agreed)) in &report.calls {
        eprintln!("{what}: {rpc}: {agreed}/{calls} agree");
    }
    assert!(
        report.mismatches.is_empty(),
        "{what}: olm catalog serve and opm serve disagree:\n{}",
        report.mismatches.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_agrees_with_opm_on_our_catalog() {
    let report = compare(&repo().join("catalog")).await;
    assert!(report.calls["GetBundle"].0 > 5);
    assert_agree("catalog/", &report);
}

/// Blobs of custom schemas (for ExperimentalListPackageCustomSchemas) and deprecations of
/// every kind, beside a copy of our `at` package.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_agrees_with_opm_on_custom_schemas_and_deprecations() {
    let dir = scratch("registry-serve-custom");
    write_custom_catalog(&dir);
    let report = compare(&dir).await;
    assert!(report.calls["ExperimentalListPackageCustomSchemas"].0 >= 8);
    assert_agree("custom", &report);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Our `at` package beside blobs of custom schemas and deprecations of every kind.
fn write_custom_catalog(dir: &Path) {
    std::fs::create_dir_all(dir.join("at")).unwrap();
    std::fs::copy(
        repo().join("catalog/at/catalog.yaml"),
        dir.join("at/catalog.yaml"),
    )
    .unwrap();
    let blobs = [
        json!({"schema": "olm.custom", "package": "at", "name": "x", "data": {"a": 1, "b": [true, null, "s", 2.5]}}),
        json!({"schema": "olm.custom", "package": "at", "name": "y"}),
        json!({"schema": "olm.custom", "name": "global", "note": "no package"}),
        json!({"schema": "my.other", "package": "at", "value": {"nested": {"deep": [1, 2]}}}),
        json!({"schema": "olm.deprecations", "package": "at", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "at is retired"},
            {"reference": {"schema": "olm.channel", "name": "stable"}, "message": "stable is frozen"},
            {"reference": {"schema": "olm.bundle", "name": "at.v0.1.0"}, "message": "0.1.0 has a bug"}]}),
    ];
    let text: String = blobs.iter().map(|b| format!("{b}\n")).collect();
    std::fs::write(dir.join("at/extra.json"), text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_agrees_with_opm_on_the_testdata_catalog() {
    let dir = scratch("registry-serve-testdata");
    render_testdata(&dir, false);
    let report = compare(&dir).await;
    assert!(report.calls["GetBundle"].0 > 100);
    assert_agree("testdata", &report);
    let _ = std::fs::remove_dir_all(&dir);
}

// --- Whole catalogs through our registry client ----------------------------------------

/// Loads `dir` with `olm::registry::client` from `olm catalog serve` and from `opm serve`.
async fn load_from_both(dir: &Path) -> (DeclarativeConfig, DeclarativeConfig) {
    let (our_port, their_port) = (free_port(), free_port());
    let mut ours = start_ours(dir, our_port);
    let mut theirs = start_opm(dir, their_port);
    connect(&mut ours, our_port).await;
    connect(&mut theirs, their_port).await;
    let load = |port: u16| async move {
        let client = olm::registry::client::RegistryClient::new(
            &format!("127.0.0.1:{port}"),
            Duration::from_secs(5),
        )
        .unwrap();
        client.check_health().await.unwrap();
        client.load_catalog().await.unwrap()
    };
    let (a, b) = (load(our_port).await, load(their_port).await);
    drop((ours, theirs));
    (a, b)
}

/// A catalog in a canonical order (streams and properties sorted, manifests parsed), as
/// comparable data.
fn canonical(c: &DeclarativeConfig) -> Value {
    let sorted = |mut v: Vec<Value>| {
        v.sort_by_key(std::string::ToString::to_string);
        Value::Array(v)
    };
    let manifest = |p: &olm::catalog::model::fbc::Property| {
        if p.type_ != "olm.bundle.object" {
            return p.value.clone();
        }
        let data = p.value["data"].as_str().unwrap();
        let bytes =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    json!({
        "packages": sorted(c.packages.iter().map(|p| serde_json::to_value(p).unwrap()).collect()),
        "channels": sorted(c.channels.iter().map(|ch| json!({
            "package": ch.package, "name": ch.name,
            "entries": sorted(ch.entries.iter().map(|e| serde_json::to_value(e).unwrap()).collect()),
        })).collect()),
        "bundles": sorted(c.bundles.iter().map(|b| json!({
            "package": b.package, "name": b.name, "image": b.image,
            "properties": sorted(b.properties.iter().map(|p| json!([p.type_, manifest(p)])).collect()),
            "relatedImages": sorted(b.related_images.iter().map(|r| json!([r.name, r.image])).collect()),
        })).collect()),
        "deprecations": sorted(c.deprecations.iter().map(|d| json!({
            "package": d.package,
            "entries": sorted(d.entries.iter().map(|e| serde_json::to_value(e).unwrap()).collect()),
        })).collect()),
    })
}

fn assert_same_catalog(what: &str, ours: &DeclarativeConfig, theirs: &DeclarativeConfig) {
    let (a, b) = (canonical(ours), canonical(theirs));
    if a != b {
        let (a, b) = (
            serde_json::to_string_pretty(&a).unwrap(),
            serde_json::to_string_pretty(&b).unwrap(),
        );
        let first = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        let context = |s: &str| {
            s.lines()
                .skip(first.saturating_sub(5))
                .take(12)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{what}: the catalog loaded from olm catalog serve and from opm serve differ near line {first}:\n--- olm\n{}\n--- opm\n{}",
            context(&a),
            context(&b)
        );
    }
    assert_eq!(content_digest(ours), content_digest(theirs), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_loads_the_same_catalog_from_opm_and_olm() {
    let dir = repo().join("catalog");
    let (ours, theirs) = load_from_both(&dir).await;
    assert_same_catalog("catalog/", &ours, &theirs);
    let files = olm::catalog::reading::load::load_path(&dir).unwrap();
    assert_eq!(content_digest(&theirs), content_digest(&files));
    let names = |c: &DeclarativeConfig| -> BTreeSet<(String, String)> {
        c.bundles
            .iter()
            .map(|b| (b.package.clone(), b.name.clone()))
            .collect()
    };
    assert_eq!(names(&theirs), names(&files));
    assert!(olm::catalog::checks::validate::validate(&theirs).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_loads_the_same_deprecations_from_opm_and_olm() {
    let dir = scratch("registry-client-custom");
    write_custom_catalog(&dir);
    let (ours, theirs) = load_from_both(&dir).await;
    assert_same_catalog("deprecations", &ours, &theirs);
    assert_eq!(theirs.deprecations.len(), 1);
    assert_eq!(theirs.deprecations[0].entries.len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_loads_the_same_testdata_catalog_from_opm_and_olm() {
    let dir = scratch("registry-client-testdata");
    render_testdata(&dir, false);
    let (ours, theirs) = load_from_both(&dir).await;
    assert!(theirs.bundles.len() > 100);
    assert_same_catalog("testdata", &ours, &theirs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `olm-registry` (the server alone, for catalog images) answers as `olm catalog serve` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_olm_registry_binary_serves_what_olm_catalog_serve_serves() {
    let dir = repo().join("catalog");
    let (serve_port, registry_port) = (free_port(), free_port());
    let mut serve = start_ours(&dir, serve_port);
    let mut registry = ServerGuard {
        child: Command::new(env!("CARGO_BIN_EXE_olm-registry"))
            .args([dir.to_str().unwrap(), "--port", &registry_port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        name: "olm-registry",
    };
    connect(&mut serve, serve_port).await;
    connect(&mut registry, registry_port).await;
    let load = |port: u16| async move {
        olm::registry::client::RegistryClient::new(
            &format!("127.0.0.1:{port}"),
            Duration::from_secs(5),
        )
        .unwrap()
        .load_catalog()
        .await
        .unwrap()
    };
    let (a, b) = (load(serve_port).await, load(registry_port).await);
    assert_same_catalog("olm-registry", &a, &b);
    assert_eq!(content_digest(&a), content_digest(&b));
}
