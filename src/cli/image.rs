//! `olm bundle build`, `olm catalog build`, `olm catalog publish`, `olm image push`: images
//! built without a container engine (see `crate::oci`), pushed with the user's registry
//! credentials.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::catalog::bundles::bundle::read_bundle;
use crate::catalog::bundles::render::{RenderOptions, render_bundle, render_package_dir};
use crate::catalog::checks::validate::validate;
use crate::catalog::reading::load::load_path;
use crate::oci::build::{build_into, bundle_image, catalog_image};
use crate::oci::input::ImageInput;
use crate::oci::layout::Layout;
use crate::oci::registry::{Options, PulledImage, Session, parse_reference};

use super::fbc::{FbcFormat, write_fbc};

/// Where and how to push.
#[derive(clap::Args, Debug, Clone)]
pub struct RegistryArgs {
    /// A registry (`host:port`) reached over plain HTTP; loopback addresses always are.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    pub insecure: Vec<String>,
}

impl RegistryArgs {
    fn options(&self) -> Options {
        Options {
            insecure: self.insecure.clone(),
            timeout: Some(std::time::Duration::from_secs(60)),
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// The bundle directory (manifests/, metadata/) or catalog directory (FBC).
    pub dir: PathBuf,
    /// The image reference, e.g. `registry.example.com/org/pkg-bundle:v1.0.0`.
    #[arg(short = 't', long = "tag")]
    pub reference: String,
    /// Push to the registry after building.
    #[arg(long)]
    pub push: bool,
    /// The OCI image layout directory to write; images are tagged in it by their
    /// reference. Default: `oci-layout` under the current directory, or, with --push, a
    /// scratch directory removed after the push (a push leaves nothing behind).
    #[arg(long)]
    pub layout: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(clap::Args, Debug)]
pub struct CatalogBuildArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// Also put this registry server binary (`olm-registry`, static) in the image as its
    /// entrypoint, so upstream OLM v0 can run the image as a catalog pod.
    #[arg(long, value_name = "BINARY")]
    pub with_server: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct PushArgs {
    /// An OCI image layout directory, optionally `:TAG` to pick one of its images.
    pub layout: String,
    pub reference: String,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// Where the images go: `host[:port][/path]`; bundles become
    /// `<registry>/<package>-bundle:v<version>`.
    #[arg(long)]
    pub registry: String,
    /// Package folders of bundle directories.
    #[arg(long, default_value = "bundles")]
    pub bundles: PathBuf,
    /// The catalog image's name and tag under the registry.
    #[arg(long, default_value = "catalog:latest")]
    pub catalog_image: String,
    /// Where the catalog that refers to the pushed bundles is written (default: a scratch
    /// directory, removed with the layout once everything is pushed).
    #[arg(long)]
    pub catalog_dir: Option<PathBuf>,
    /// The OCI image layout the images are built into (default: a scratch directory).
    #[arg(long)]
    pub layout: Option<PathBuf>,
    /// `bundle-object-to-csv-metadata` (as opm's `--migrate-level`): the catalog carries no
    /// bundle objects, only each CSV's metadata, so installs pull the bundle images (as
    /// with most real catalogs). Default `none`: objects inline.
    #[arg(long, default_value = "none", value_parser = ["none", "bundle-object-to-csv-metadata"])]
    pub migrate_level: String,
    /// Only these packages (default: every package folder).
    #[arg(long = "package", value_name = "NAME")]
    pub packages: Vec<String>,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
}

#[derive(clap::Args, Debug)]
pub struct BuildBinaryArgs {
    /// Image names from the list (default: every image in it).
    pub names: Vec<String>,
    /// The list of images (binary, entrypoint, labels, ports per image).
    #[arg(long, default_value = "operators/images.yaml")]
    pub images: PathBuf,
    /// Where the built binaries are (`cargo build --workspace --bins` puts them in
    /// target/debug; target/release for release builds).
    #[arg(long, default_value = "target/debug")]
    pub binaries: PathBuf,
    /// Publish under this registry instead of the list's (`host[:port][/path]`).
    #[arg(long)]
    pub registry: Option<String>,
    /// Push to the registry after building.
    #[arg(long)]
    pub push: bool,
    /// As for `olm bundle build`: `oci-layout`, or a scratch directory with --push.
    #[arg(long)]
    pub layout: Option<PathBuf>,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
}

/// `olm image build-binary`: one image per named entry of the list; prints
/// `<reference>@<digest>` per image.
pub fn build_binary(args: BuildBinaryArgs) -> anyhow::Result<()> {
    use crate::oci::binary::{binary_image, crate_version, read_image_list};
    let list = read_image_list(&args.images)?;
    let repo_root = args
        .images
        .canonicalize()
        .with_context(|| format!("{}", args.images.display()))?
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    for name in &args.names {
        if !list.images.iter().any(|i| &i.name == name) {
            let known: Vec<&str> = list.images.iter().map(|i| i.name.as_str()).collect();
            bail!(
                "{}: no image {name:?} (known: {})",
                args.images.display(),
                known.join(", ")
            );
        }
    }
    let registry = args
        .registry
        .as_deref()
        .unwrap_or(&list.registry)
        .trim_end_matches('/')
        .to_string();
    let runtime = runtime()?;
    let layout = WorkDir::for_layout(args.layout.as_deref(), args.push)?;
    for spec in list
        .images
        .iter()
        .filter(|i| args.names.is_empty() || args.names.contains(&i.name))
    {
        let version = crate_version(&repo_root.join(&spec.krate))?;
        let binary = args.binaries.join(&spec.binary);
        let input = binary_image(spec, &binary, &version)?;
        let build = BuildArgs {
            dir: binary,
            reference: format!("{registry}/{}:v{version}", spec.name),
            push: args.push,
            layout: Some(layout.path.clone()),
            registry: args.registry_args.clone(),
        };
        let digest = build_and_maybe_push(&input, &build, &runtime)?;
        println!("{}@{digest}", build.reference);
    }
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Live progress lines only on a terminal; logs and pipes get one plain line per blob.
fn on_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

fn progress(line: &str) {
    eprintln!("  {line}");
}

/// A directory a command writes into: the one the user named (kept), or a scratch directory
/// under the system's temporary directory that is removed when the command ends.
struct WorkDir {
    path: PathBuf,
    scratch: bool,
}

impl WorkDir {
    /// The layout to build into: the named one; else, when the image is pushed, a scratch
    /// directory (a push leaves nothing behind); else `./oci-layout`.
    fn for_layout(named: Option<&Path>, push: bool) -> anyhow::Result<Self> {
        match named {
            Some(path) => Ok(Self::kept(path)),
            None if push => Self::scratch(),
            None => Ok(Self::kept(Path::new("oci-layout"))),
        }
    }

    fn scratch_unless(named: Option<&Path>) -> anyhow::Result<Self> {
        named.map_or_else(Self::scratch, |path| Ok(Self::kept(path)))
    }

    fn kept(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            scratch: false,
        }
    }

    fn scratch() -> anyhow::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("olm-image-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .with_context(|| format!("creating scratch directory {}", path.display()))?;
        Ok(Self {
            path,
            scratch: true,
        })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.scratch {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Builds into the layout, pushes when asked; prints the digest on stdout.
fn build_and_maybe_push(
    input: &ImageInput,
    args: &BuildArgs,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<String> {
    let reference = parse_reference(&args.reference)?;
    let work = WorkDir::for_layout(args.layout.as_deref(), args.push)?;
    let layout = Layout::create(&work.path)?;
    let built = build_into(input, &layout, &reference.whole())
        .with_context(|| format!("building {}", args.dir.display()))?;
    eprintln!(
        "built {} {} in {}",
        reference.whole(),
        built.manifest.digest,
        work.path.display()
    );
    if args.push {
        let session = Session::for_user(&reference, &args.registry.options())?
            .with_live_progress(on_terminal());
        runtime.block_on(session.push(&layout, &built.manifest, &reference, &mut progress))?;
    }
    Ok(built.manifest.digest)
}

pub fn bundle_build(args: BuildArgs) -> anyhow::Result<()> {
    let bundle = read_bundle(&args.dir)?;
    let problems =
        crate::catalog::bundles::bundle::validate_bundle(&bundle, &crate::api::check_csv_schema);
    if !problems.is_empty() {
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        bail!(
            "{}: not a valid bundle: {}",
            args.dir.display(),
            text.join("; ")
        );
    }
    let input = bundle_image(&args.dir)?;
    let digest = build_and_maybe_push(&input, &args, &runtime()?)?;
    println!("{digest}");
    Ok(())
}

pub fn catalog_build(args: CatalogBuildArgs) -> anyhow::Result<()> {
    check_catalog(&args.build.dir)?;
    // With a server, its index cache goes in the image too, built by that very binary (the
    // cache is keyed by its build), so every start of the image reads it.
    let server = args.with_server.as_deref();
    let baked = server
        .map(|server| bake_index_cache(server, &args.build.dir))
        .transpose()?;
    let input = catalog_image(
        &args.build.dir,
        server.zip(baked.as_ref().map(|work| work.path.as_path())),
    )?;
    let digest = build_and_maybe_push(&input, &args.build, &runtime()?)?;
    println!("{digest}");
    Ok(())
}

/// Runs `server --cache-only` on the catalog at `dir`: the index cache it would build at
/// its first start, in a scratch directory.
fn bake_index_cache(server: &Path, dir: &Path) -> anyhow::Result<WorkDir> {
    let work = WorkDir::scratch()?;
    progress(&format!(
        "indexing {} with {}",
        dir.display(),
        server.display()
    ));
    let out = std::process::Command::new(server)
        .arg(dir)
        .arg("--cache-dir")
        .arg(&work.path)
        .arg("--cache-only")
        .output()
        .with_context(|| format!("running {} to build the index cache", server.display()))?;
    if !out.status.success() {
        bail!(
            "{} could not index {}: {}",
            server.display(),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(work)
}

fn check_catalog(dir: &Path) -> anyhow::Result<()> {
    let config = load_path(dir)?;
    let problems = validate(&config);
    if !problems.is_empty() {
        let text: Vec<String> = problems.iter().take(5).map(ToString::to_string).collect();
        bail!(
            "{}: the catalog is invalid: {}",
            dir.display(),
            text.join("; ")
        );
    }
    Ok(())
}

pub fn push(args: PushArgs) -> anyhow::Result<()> {
    // LAYOUT:TAG, where the tag (a reference) may hold colons of its own.
    let (dir, tag) = args
        .layout
        .match_indices(':')
        .map(|(at, _)| (&args.layout[..at], Some(&args.layout[at + 1..])))
        .find(|(dir, _)| Path::new(dir).join("oci-layout").is_file())
        .unwrap_or((args.layout.as_str(), None));
    let layout = Layout::open(Path::new(dir))?;
    let manifest = layout.resolve(tag)?;
    let reference = parse_reference(&args.reference)?;
    let session =
        Session::for_user(&reference, &args.registry.options())?.with_live_progress(on_terminal());
    let report =
        runtime()?.block_on(session.push(&layout, &manifest, &reference, &mut progress))?;
    println!("{}", report.digest);
    Ok(())
}

/// Every bundle of `bundles/` as `<registry>/<package>-bundle:v<version>`, then a catalog
/// that refers to them by digest, as `<registry>/<catalog-image>`.
pub fn publish(args: PublishArgs) -> anyhow::Result<()> {
    let runtime = runtime()?;
    let registry = args.registry.trim_end_matches('/');
    let template = format!("{registry}/{{{{.Package}}}}-bundle:v{{{{.Version}}}}");
    let options = RenderOptions {
        image_template: Some(template),
        strict: false,
    };
    let mut packages: Vec<PathBuf> = std::fs::read_dir(&args.bundles)
        .with_context(|| format!("reading {}", args.bundles.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter(|p| {
            args.packages.is_empty()
                || p.file_name()
                    .is_some_and(|n| args.packages.iter().any(|w| n == w.as_str()))
        })
        .collect();
    packages.sort();
    let layout = WorkDir::for_layout(args.layout.as_deref(), true)?;
    let catalog_dir = WorkDir::scratch_unless(args.catalog_dir.as_deref())?;
    let _ = std::fs::remove_dir_all(&catalog_dir.path);
    for package_dir in &packages {
        let mut config = render_package_dir(package_dir, &options)?;
        for bundle in &mut config.bundles {
            let dir = package_dir.join(bundle_dir_name(package_dir, &bundle.name)?);
            let build = BuildArgs {
                dir: dir.clone(),
                reference: bundle.image.clone(),
                push: true,
                layout: Some(layout.path.clone()),
                registry: args.registry_args.clone(),
            };
            let digest = build_and_maybe_push(&bundle_image(&dir)?, &build, &runtime)?;
            let reference = parse_reference(&bundle.image)?;
            let pinned = format!(
                "{}/{}@{digest}",
                reference.registry(),
                reference.repository()
            );
            for related in &mut bundle.related_images {
                if related.image == bundle.image {
                    related.image = pinned.clone();
                }
            }
            bundle.image = pinned;
            if args.migrate_level == "bundle-object-to-csv-metadata" {
                crate::catalog::bundles::csv::migrate_to_csv_metadata(bundle)
                    .map_err(anyhow::Error::msg)?;
            }
        }
        let name = package_dir.file_name().unwrap_or_default();
        let out = catalog_dir.path.join(name);
        std::fs::create_dir_all(&out)?;
        let mut text = Vec::new();
        write_fbc(&config, FbcFormat::Json, &mut text)?;
        std::fs::write(out.join("catalog.json"), text)?;
    }
    let build = BuildArgs {
        dir: catalog_dir.path.clone(),
        reference: format!("{registry}/{}", args.catalog_image),
        push: true,
        layout: Some(layout.path.clone()),
        registry: args.registry_args.clone(),
    };
    check_catalog(&build.dir)?;
    let digest = build_and_maybe_push(&catalog_image(&build.dir, None)?, &build, &runtime)?;
    println!("{}@{digest}", build.reference);
    Ok(())
}

/// The folder of the bundle `csv_name` under a package folder (folders are versions).
fn bundle_dir_name(package_dir: &Path, csv_name: &str) -> anyhow::Result<PathBuf> {
    for entry in std::fs::read_dir(package_dir)? {
        let dir = entry?.path();
        if dir.join("metadata/annotations.yaml").is_file()
            && read_bundle(&dir).is_ok_and(|b| b.csv_name() == csv_name)
        {
            return Ok(PathBuf::from(dir.file_name().unwrap_or_default()));
        }
    }
    bail!(
        "{}: no bundle directory holds {csv_name}",
        package_dir.display()
    )
}

/// Does `input` name an image rather than a local path?
pub fn is_image_reference(input: &Path) -> bool {
    let Some(text) = input.to_str() else {
        return false;
    };
    // The file system is asked last: most inputs are local paths whose text already says so.
    text.contains('/')
        && text
            .split('/')
            .next()
            .is_some_and(|host| host.contains('.') || host.contains(':') || host == "localhost")
        && parse_reference(text).is_ok()
        && !input.exists()
}

/// `olm catalog render IMAGE`: a bundle image renders as its directory does (with the
/// reference as its image), a catalog image as the FBC under its label's path.
pub fn render_image(
    text: &str,
    registry: &RegistryArgs,
) -> anyhow::Result<crate::catalog::DeclarativeConfig> {
    let reference = parse_reference(text)?;
    let session =
        Session::for_user(&reference, &registry.options())?.with_live_progress(on_terminal());
    let cache = std::env::temp_dir().join(format!("olm-render-{}", std::process::id()));
    let pulled: anyhow::Result<PulledImage> = runtime()?
        .block_on(session.pull(&reference, &cache, &crate::oci::registry::select_all, None))
        .map_err(Into::into);
    let result = pulled.and_then(|image| render_pulled(text, &image));
    let _ = std::fs::remove_dir_all(&cache);
    result
}

fn render_pulled(
    text: &str,
    image: &PulledImage,
) -> anyhow::Result<crate::catalog::DeclarativeConfig> {
    if image.labels.contains_key(crate::oci::LABEL_BUNDLE_PACKAGE) {
        let bundle_dir = read_bundle(&image.rootfs)?;
        // As opm renders an image: the reference as given is the bundle's image.
        let options = RenderOptions {
            image_template: Some(text.to_string()),
            strict: false,
        };
        let bundle = render_bundle(&bundle_dir, &options)?;
        return Ok(crate::catalog::DeclarativeConfig {
            bundles: vec![bundle],
            ..Default::default()
        });
    }
    if let Some(configs) = image.labels.get(crate::oci::LABEL_CATALOG_CONFIGS) {
        let dir = image.rootfs.join(configs.trim_start_matches('/'));
        return Ok(load_path(&dir)?);
    }
    bail!("{text}: image type could not be determined (no bundle or catalog label)")
}
