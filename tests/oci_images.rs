//! Bundle and catalog images built and pushed by `olm` to a real registry (Debian's
//! docker-registry on loopback), read back by upstream `opm render` and by `olm`.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

#[path = "common/mod.rs"]
mod common;
#[path = "common/registry.rs"]
mod registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine;
use common::{opm, repo, scratch, subdirs};
use registry::{PASSWORD, TestRegistry, opm_home};
use serde_json::Value;

fn olm() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_olm"));
    cmd.current_dir(repo());
    // Never read the developer's own registry credentials.
    cmd.env("REGISTRY_AUTH_FILE", "/nonexistent/auth.json");
    cmd.env("OLM_REGISTRY_RETRIES", "0");
    cmd
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn opm_render(image: &str, home: &Path, auth: Option<&Path>) -> Vec<Value> {
    let mut cmd = Command::new(opm());
    cmd.env_remove("OLM_CACHE_DIR")
        .env("HOME", home)
        .args(["render", "--use-http", image]);
    match auth {
        Some(file) => cmd.env("REGISTRY_AUTH_FILE", file),
        None => cmd.env("REGISTRY_AUTH_FILE", home.join("none.json")),
    };
    json_stream(&run(&mut cmd).stdout)
}

fn json_stream(bytes: &[u8]) -> Vec<Value> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Manifests decoded, properties and related images sorted (the tools order them
/// differently; the content is what must agree).
fn normalize(mut blob: Value) -> Value {
    if let Some(Value::Array(props)) = blob.get_mut("properties") {
        for p in props.iter_mut() {
            if p["type"] == "olm.bundle.object" {
                let data = p["value"]["data"].as_str().unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap();
                p["value"]["data"] = serde_json::from_slice(&bytes).unwrap();
            }
        }
        props.sort_by_key(std::string::ToString::to_string);
    }
    if let Some(Value::Array(images)) = blob.get_mut("relatedImages") {
        images.sort_by_key(std::string::ToString::to_string);
    }
    blob
}

fn normalized(blobs: Vec<Value>) -> Vec<Value> {
    blobs.into_iter().map(normalize).collect()
}

fn bundle_dirs() -> Vec<PathBuf> {
    subdirs(&repo().join("bundles"))
        .iter()
        .flat_map(|p| subdirs(p))
        .collect()
}

#[test]
fn published_bundles_and_catalog_render_in_opm_as_their_directories_do() {
    let registry = TestRegistry::start("publish", false);
    let work = scratch("oci-publish");
    let home = opm_home(&work);
    let prefix = format!("{}/olm", registry.host);
    let out = run(olm().args([
        "catalog",
        "publish",
        "--registry",
        &prefix,
        "--layout",
        work.join("layout").to_str().unwrap(),
        "--catalog-dir",
        work.join("catalog").to_str().unwrap(),
    ]));
    let catalog_ref = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(catalog_ref.starts_with(&format!("{prefix}/catalog:latest@sha256:")));

    for dir in bundle_dirs() {
        let package = dir.parent().unwrap().file_name().unwrap().to_str().unwrap();
        let version = dir.file_name().unwrap().to_str().unwrap();
        let image = format!("{prefix}/{package}-bundle:v{version}");
        let theirs = opm_render(&image, &home, None);
        let ours_dir = json_stream(
            &run(olm().args([
                "catalog",
                "render",
                dir.to_str().unwrap(),
                "--image-template",
                &image,
            ]))
            .stdout,
        );
        let ours_image = json_stream(&run(olm().args(["catalog", "render", &image])).stdout);
        assert_eq!(normalized(theirs.clone()), normalized(ours_dir), "{image}");
        assert_eq!(normalized(theirs), normalized(ours_image), "{image}");
    }

    // The catalog image: opm reads what was put in, and the bundles are pinned by digest.
    let theirs = opm_render(&format!("{prefix}/catalog:latest"), &home, None);
    let ours = json_stream(
        &run(olm().args(["catalog", "render", work.join("catalog").to_str().unwrap()])).stdout,
    );
    assert_eq!(normalized(theirs.clone()), normalized(ours));
    let bundles: Vec<&Value> = theirs
        .iter()
        .filter(|b| b["schema"] == "olm.bundle")
        .collect();
    assert_eq!(bundles.len(), bundle_dirs().len());
    for bundle in bundles {
        let image = bundle["image"].as_str().unwrap();
        assert!(
            image.starts_with(&prefix) && image.contains("-bundle@sha256:"),
            "{image}"
        );
    }
    let validate = Command::new(opm())
        .arg("validate")
        .arg(work.join("catalog"))
        .output()
        .unwrap();
    assert!(
        validate.status.success(),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );
}

#[test]
fn the_same_build_gives_the_same_digest_and_an_unchanged_push_uploads_nothing() {
    let registry = TestRegistry::start("repush", false);
    let work = scratch("oci-repush");
    let image = format!("{}/at-bundle:v0.2.0", registry.host);
    let build = |layout: &str, push: bool| -> (String, String) {
        let mut cmd = olm();
        cmd.args([
            "bundle",
            "build",
            "bundles/at/0.2.0",
            "-t",
            &image,
            "--layout",
        ])
        .arg(work.join(layout));
        if push {
            cmd.arg("--push");
        }
        let out = run(&mut cmd);
        (
            String::from_utf8(out.stdout).unwrap().trim().to_string(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (first, _) = build("one", true);
    let uploads_after_first = registry.requests("PUT", "/blobs/uploads/");
    assert_eq!(
        uploads_after_first, 2,
        "layer and config uploaded once each"
    );
    let (second, log) = build("two", true);
    assert_eq!(
        first, second,
        "a rebuild in another layout has the same digest"
    );
    assert_eq!(
        registry.requests("PUT", "/blobs/uploads/"),
        uploads_after_first,
        "{log}"
    );
    assert_eq!(log.matches(" exists ").count(), 2, "{log}");

    // The layout alone, pushed elsewhere by `olm image push`, keeps the digest.
    let other = format!("{}/copy:v1", registry.host);
    let pushed = run(olm()
        .args(["image", "push"])
        .arg(format!("{}:{image}", work.join("one").display()))
        .arg(&other));
    assert_eq!(String::from_utf8(pushed.stdout).unwrap().trim(), first);

    // Catalog images too.
    let catalog = |layout: &str| -> String {
        let out = run(olm()
            .args([
                "catalog",
                "build",
                "catalog",
                "-t",
                "example.com/c:1",
                "--layout",
            ])
            .arg(work.join(layout)));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(catalog("c1"), catalog("c2"));
}

#[test]
fn a_push_without_a_layout_leaves_nothing_behind() {
    let registry = TestRegistry::start("no-leftovers", false);
    let cwd = scratch("oci-no-leftovers");
    let image = format!("{}/at-bundle:v0.2.0", registry.host);
    run(olm()
        .current_dir(&cwd)
        .args(["bundle", "build"])
        .arg(repo().join("bundles/at/0.2.0"))
        .args(["-t", &image, "--push"]));
    let left: Vec<_> = std::fs::read_dir(&cwd)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "left behind in {}: {left:?}",
        cwd.display()
    );
    // The pushed image is whole: opm reads it back.
    let home = opm_home(&scratch("oci-no-leftovers-opm"));
    let rendered = opm_render(&image, &home, None);
    assert_eq!(rendered[0]["name"], "at.v0.2.0", "{rendered:?}");
    // Without --push the build is kept, in ./oci-layout as before.
    run(olm()
        .current_dir(&cwd)
        .args(["bundle", "build"])
        .arg(repo().join("bundles/at/0.2.0"))
        .args(["-t", &image]));
    assert!(cwd.join("oci-layout/index.json").is_file());
}

#[test]
fn basic_auth_from_the_auth_file_and_clear_errors_without_it() {
    let registry = TestRegistry::start("auth", true);
    let work = scratch("oci-auth");
    let image = format!("{}/reverse-words-bundle:v0.1.0", registry.host);
    let push = |auth: Option<PathBuf>| {
        let mut cmd = olm();
        cmd.args([
            "bundle",
            "build",
            "bundles/reverse-words/0.1.0",
            "-t",
            &image,
            "--push",
        ])
        .arg("--layout")
        .arg(work.join("layout"));
        if let Some(auth) = auth {
            cmd.env("REGISTRY_AUTH_FILE", auth);
        }
        cmd.output().unwrap()
    };
    let anonymous = push(None);
    assert!(!anonymous.status.success());
    let message = String::from_utf8_lossy(&anonymous.stderr);
    assert!(
        message.contains(&image) && message.to_lowercase().contains("authoriz"),
        "{message}"
    );

    let wrong = push(Some(registry.auth_file("wrong")));
    assert!(!wrong.status.success());
    let message = String::from_utf8_lossy(&wrong.stderr);
    assert!(message.contains(&image), "{message}");

    let good = registry.auth_file(PASSWORD);
    let out = push(Some(good.clone()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let home = opm_home(&work);
    let rendered = opm_render(&image, &home, Some(&good));
    assert_eq!(rendered[0]["name"], "reverse-words.v0.1.0");
}

#[test]
fn an_image_that_is_neither_bundle_nor_catalog_is_refused_by_render() {
    let registry = TestRegistry::start("nolabel", false);
    let work = scratch("oci-nolabel");
    // A layout from a catalog build with its label removed is hard to make by hand; an
    // OCI layout of a bundle pushed under another name still has labels, so build an image
    // with crane-like content: here, our own catalog image of an empty directory would be
    // refused at build time. Use `olm image push` of a hand-made layout instead.
    let layout = work.join("layout");
    make_unlabelled_layout(&layout);
    let image = format!("{}/plain:v1", registry.host);
    run(olm().args(["image", "push"]).arg(&layout).arg(&image));
    let out = olm().args(["catalog", "render", &image]).output().unwrap();
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains(&image) && message.contains("image type could not be determined"),
        "{message}"
    );
}

/// An OCI layout whose one image has a layer and no labels at all.
fn make_unlabelled_layout(dir: &Path) {
    use sha2::Digest;
    let blob = |bytes: &[u8]| -> (String, usize) {
        let hex: String = sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join("blobs/sha256").join(&hex), bytes).unwrap();
        (format!("sha256:{hex}"), bytes.len())
    };
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.set_size(2);
    header.set_mode(0o644);
    tar.append_data(&mut header, "hello.txt", &b"hi"[..])
        .unwrap();
    let layer_bytes = tar.into_inner().unwrap();
    let (layer, layer_size) = blob(&layer_bytes);
    let config = serde_json::json!({"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[layer]}});
    let (config, config_size) = blob(config.to_string().as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": layer_size}],
    });
    let (manifest, manifest_size) = blob(manifest.to_string().as_bytes());
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    std::fs::write(
        dir.join("index.json"),
        serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest, "size": manifest_size}]}).to_string(),
    )
    .unwrap();
}

/// `olm image build-binary`: the olm-registry image as operators/images.yaml describes it,
/// built twice with the same digest, its config (entrypoint, labels, non-root user), a
/// layer that runs on its own (binary plus the glibc libraries it loads), and a push.
#[test]
fn binary_images_are_reproducible_self_contained_and_pushed() {
    let registry = TestRegistry::start("binary-images", false);
    let work = scratch("oci-binary");
    let binaries = Path::new(env!("CARGO_BIN_EXE_olm-registry"))
        .parent()
        .unwrap();
    let prefix = format!("{}/olm-rs", registry.host);
    let build = |layout: &str, push: bool| -> (String, String) {
        let mut cmd = olm();
        cmd.args([
            "image",
            "build-binary",
            "olm-registry",
            "--registry",
            &prefix,
        ])
        .arg("--binaries")
        .arg(binaries)
        .arg("--layout")
        .arg(work.join(layout));
        if push {
            cmd.arg("--push");
        }
        let out = run(&mut cmd);
        (
            String::from_utf8(out.stdout).unwrap().trim().to_string(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (first, _) = build("one", false);
    let version = env!("CARGO_PKG_VERSION");
    let reference = format!("{prefix}/olm-registry:v{version}");
    assert!(
        first.starts_with(&format!("{reference}@sha256:")),
        "{first}"
    );
    let (second, log) = build("two", true);
    assert_eq!(first, second, "the same binary gives the same digest");
    assert!(log.contains("manifest pushed"), "{log}");
    let digest = first.rsplit('@').next().unwrap().to_string();
    let resolved = run(olm()
        .args(["image", "push"])
        .arg(format!("{}:{reference}", work.join("one").display()))
        .arg(&reference));
    assert_eq!(String::from_utf8(resolved.stdout).unwrap().trim(), digest);
    assert_eq!(
        registry.requests("PUT", "/blobs/uploads/"),
        2,
        "the second push of the same image uploads no blob"
    );

    let layout = olm::oci::layout::Layout::open(&work.join("one")).unwrap();
    let manifest = layout.resolve(Some(&reference)).unwrap();
    let image = layout.manifest(&manifest).unwrap();
    let config: Value =
        serde_json::from_slice(&layout.read_blob(&image.config.digest).unwrap()).unwrap();
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/olm-registry"])
    );
    assert_eq!(config["config"]["User"], "65532:65532");
    assert!(
        config["config"]["ExposedPorts"]["50051/tcp"].is_object(),
        "{config:#}"
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "olm-registry");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        format!("v{version}")
    );

    // The layer alone runs the binary: its loader and libraries are in it.
    let rootfs = work.join("rootfs");
    let blob = std::fs::File::open(layout.blob_path(&image.layers[0].digest).unwrap()).unwrap();
    olm::oci::unpack::apply_layer(blob, "binary", &rootfs, None).unwrap();
    let loader = std::fs::read_dir(rootfs.join("lib64"))
        .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut cmd = match loader.first() {
        // glibc: the image's own loader, with only the image's libraries.
        Some(loader) => {
            // Our unpacker writes plain files; the image's modes are checked by a runtime.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(loader, std::fs::Permissions::from_mode(0o755)).unwrap();
            let mut cmd = Command::new(loader);
            cmd.arg("--inhibit-cache")
                .arg("--library-path")
                .arg(rootfs.join("lib/x86_64-linux-gnu"))
                .arg(rootfs.join("olm-registry"));
            cmd
        }
        // A static binary.
        None => {
            use std::os::unix::fs::PermissionsExt;
            let binary = rootfs.join("olm-registry");
            std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
            Command::new(binary)
        }
    };
    let help = run(cmd.arg("--help"));
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("Usage"),
        "{help:?}"
    );
}

/// `olm catalog build --with-server`: the image runs olm-registry on every address of the
/// pod with the index cache the same binary built at image build time, so its first start
/// reads the cache instead of parsing the catalog; rebuilt, the image has the same digest.
#[test]
fn a_catalog_image_with_its_server_carries_the_servers_index_cache() {
    let work = scratch("oci-catalog-server");
    let server = env!("CARGO_BIN_EXE_olm-registry");
    let reference = "example.com/catalog-with-server:1";
    let build = |layout: &str| -> String {
        let out = run(olm()
            .args(["catalog", "build", "catalog", "-t", reference])
            .args(["--with-server", server, "--layout"])
            .arg(work.join(layout)));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let first = build("one");
    assert_eq!(
        first,
        build("two"),
        "the cache keeps the image reproducible"
    );

    let layout = olm::oci::layout::Layout::open(&work.join("one")).unwrap();
    let image = layout
        .manifest(&layout.resolve(Some(reference)).unwrap())
        .unwrap();
    let config: Value =
        serde_json::from_slice(&layout.read_blob(&image.config.digest).unwrap()).unwrap();
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!([
            "/bin/olm-registry",
            "/configs",
            "--address",
            "0.0.0.0",
            "--cache-dir",
            "/tmp/cache"
        ])
    );
    let rootfs = work.join("rootfs");
    for layer in &image.layers {
        let blob = std::fs::File::open(layout.blob_path(&layer.digest).unwrap()).unwrap();
        olm::oci::unpack::apply_layer(blob, "catalog", &rootfs, None).unwrap();
    }
    let cache = rootfs.join("tmp/cache");
    assert!(cache.join("index.bin").is_file() && cache.join("store.bin").is_file());
    // The image's catalog and cache, as the entrypoint reads them: no parsing.
    let loaded = run(Command::new(server)
        .arg(rootfs.join("configs"))
        .arg("--cache-dir")
        .arg(&cache)
        .arg("--cache-only"));
    let log = String::from_utf8_lossy(&loaded.stdout).to_string()
        + &String::from_utf8_lossy(&loaded.stderr);
    assert!(log.contains("catalog index read from the cache"), "{log}");
    std::fs::remove_dir_all(&work).unwrap();
}
