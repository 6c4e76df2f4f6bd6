//! `olm catalog …` and `olm bundle …`: thin wrappers over `crate::catalog`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::catalog::bundles::bundle::{read_bundle, validate_bundle};
use crate::catalog::bundles::render::{RenderOptions, render_package_dir, render_paths_each};
use crate::catalog::checks::validate::validate;
use crate::catalog::reading::load::{LoadOptions, load_path_with};
use crate::catalog::template::semver as semver_template;

use super::fbc::{FbcFormat, write_fbc};

/// The image every bundle in this repo is published as (see bundles/README.md).
pub const BUNDLE_IMAGE_TEMPLATE: &str = "quay.io/olm-rs/{{.Package}}-bundle:v{{.Version}}";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    Text,
    Json,
}

#[derive(clap::Subcommand, Debug)]
pub enum CatalogCommand {
    /// Render bundle directories, package folders of bundles, or FBC to FBC on stdout.
    Render {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(short, long, value_enum, default_value_t = FbcFormat::Json)]
        output: FbcFormat,
        /// Fill each bundle's image, e.g. `quay.io/org/{{.Package}}-bundle:v{{.Version}}`.
        #[arg(long = "image-template", alias = "alpha-image-ref-template")]
        image_template: Option<String>,
        /// Refuse bundles with problems opm passes over silently (a malformed
        /// `metadata/dependencies.yaml`) instead of rendering them with a warning.
        #[arg(long)]
        strict: bool,
        /// For inputs that are image references (pulled, then rendered as opm does).
        #[command(flatten)]
        registry: super::image::RegistryArgs,
    },
    /// Validate a file-based catalog; exit status 1 when it is invalid.
    Validate {
        dir: PathBuf,
        #[arg(short, long, value_enum, default_value_t = ReportFormat::Text)]
        output: ReportFormat,
    },
    /// Regenerate a catalog directory (one folder per package) from a bundles directory.
    Generate {
        #[arg(long, default_value = "bundles")]
        bundles: PathBuf,
        #[arg(long, default_value = "catalog")]
        out: PathBuf,
    },
    /// Render a catalog template.
    #[command(subcommand)]
    Template(TemplateCommand),
    /// Serve a file-based catalog over the registry gRPC API (as `opm serve` does), with
    /// grpc.health.v1 and server reflection.
    Serve {
        dir: PathBuf,
        #[arg(short, long, default_value_t = 50051)]
        port: u16,
        /// The address to listen on; `0.0.0.0` for every interface.
        #[arg(long, default_value = "127.0.0.1")]
        address: std::net::IpAddr,
        #[command(flatten)]
        cache: crate::registry::CacheArgs,
    },
    /// Build a catalog image (the FBC under /configs) into an OCI layout; --push to push it.
    Build(super::image::CatalogBuildArgs),
    /// Push every bundle of a bundles directory as an image, then a catalog image that
    /// refers to them by digest.
    Publish(super::image::PublishArgs),
}

#[derive(clap::Subcommand, Debug)]
pub enum TemplateCommand {
    /// The olm.semver template: bundles by stability archetype → channels and edges. Each
    /// `image` is resolved to a local bundle directory (a path, relative to the template, or
    /// under --bundles named by the repo's image scheme).
    Semver {
        file: PathBuf,
        #[arg(short, long, value_enum, default_value_t = FbcFormat::Json)]
        output: FbcFormat,
        #[arg(long, default_value = "bundles")]
        bundles: PathBuf,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum BundleCommand {
    /// Check a registry+v1 bundle directory: layout, annotations, CSV sanity.
    Validate { dirs: Vec<PathBuf> },
    /// Build a bundle image (manifests/, metadata/, bundle labels) into an OCI layout;
    /// --push to push it.
    Build(super::image::BuildArgs),
}

pub fn run_catalog(command: CatalogCommand) -> anyhow::Result<()> {
    match command {
        CatalogCommand::Render {
            inputs,
            output,
            image_template,
            strict,
            registry,
        } => {
            let options = RenderOptions {
                image_template,
                strict,
            };
            render(&inputs, output, &options, &registry)
        }
        CatalogCommand::Validate { dir, output } => validate_catalog(&dir, output),
        CatalogCommand::Generate { bundles, out } => generate(&bundles, &out),
        CatalogCommand::Build(args) => super::image::catalog_build(args),
        CatalogCommand::Publish(args) => super::image::publish(args),
        CatalogCommand::Serve {
            dir,
            port,
            address,
            cache,
        } => Ok(crate::registry::run(
            &dir,
            std::net::SocketAddr::new(address, port),
            &cache,
        )?),
        CatalogCommand::Template(TemplateCommand::Semver {
            file,
            output,
            bundles,
        }) => render_semver_template(&file, output, &bundles),
    }
}

/// `olm catalog render`: image references are pulled and rendered as opm does; directories
/// and files are rendered in order, each as it is read (runs of bundle directories in
/// parallel).
fn render(
    inputs: &[PathBuf],
    output: FbcFormat,
    options: &RenderOptions,
    registry: &super::image::RegistryArgs,
) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    // Renders of whole repositories write hundreds of MB: in large writes, not 8 KiB ones.
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut rest = inputs;
    while let Some(first) = rest.first() {
        if super::image::is_image_reference(first) {
            let text = first.to_string_lossy();
            let config = super::image::render_image(&text, registry)?;
            write_fbc(&config, output, &mut out)?;
            rest = &rest[1..];
            continue;
        }
        let local = rest
            .iter()
            .take_while(|p| !super::image::is_image_reference(p))
            .count();
        render_paths_each(&rest[..local], options, |part| {
            write_fbc(&part, output, &mut out).map_err(|e| {
                crate::catalog::bundles::bundle::BundleError::Input {
                    path: "<stdout>".into(),
                    message: e.to_string(),
                }
            })
        })?;
        rest = &rest[local..];
    }
    out.flush()?;
    Ok(())
}

/// `olm catalog validate`: the problems as text or JSON, warnings on stderr; an error when
/// there are any problems.
fn validate_catalog(dir: &Path, output: ReportFormat) -> anyhow::Result<()> {
    let config = load_path_with(
        dir,
        LoadOptions {
            drop_bundle_objects: true,
        },
    )?;
    let problems = validate(&config);
    for w in crate::catalog::checks::validate::warnings(&config) {
        eprintln!("warning: {w}");
    }
    match output {
        ReportFormat::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({ "valid": problems.is_empty(), "problems": problems })
                )?
            );
        }
        ReportFormat::Text => {
            for p in &problems {
                println!("{p}");
            }
        }
    }
    if !problems.is_empty() {
        bail!(
            "{}: {} problem(s) found; the catalog is invalid",
            dir.display(),
            problems.len()
        );
    }
    Ok(())
}

/// `olm catalog template semver`: each `image` rendered from its local bundle directory.
fn render_semver_template(file: &Path, output: FbcFormat, bundles: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let template = semver_template::parse(&text).with_context(|| format!("{}", file.display()))?;
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let options = RenderOptions::default();
    let mut resolve = |image: &str| -> Result<crate::catalog::Bundle, String> {
        let dir = resolve_image_to_dir(image, &base, bundles).ok_or_else(|| {
            format!(
                "image {image:?} is neither a bundle directory nor a bundle under {}",
                bundles.display()
            )
        })?;
        let bundle_dir = read_bundle(&dir).map_err(|e| e.to_string())?;
        let mut bundle = crate::catalog::bundles::render::render_bundle(&bundle_dir, &options)
            .map_err(|e| e.to_string())?;
        bundle.image = image.to_string();
        Ok(bundle)
    };
    let config = semver_template::render(&template, &mut resolve)
        .with_context(|| format!("{}", file.display()))?;
    write_fbc(&config, output, &mut std::io::stdout().lock())
}

/// A template's bundle `image` as a local directory: a path, or this repo's image scheme
/// `…/<package>-bundle:v<version>` mapped to `<bundles>/<package>/<version>`.
fn resolve_image_to_dir(image: &str, base: &Path, bundles: &Path) -> Option<PathBuf> {
    let as_path = base.join(image);
    if as_path.join("metadata/annotations.yaml").is_file() {
        return Some(as_path);
    }
    let (repo, tag) = image.rsplit_once(':')?;
    let package = repo.rsplit('/').next()?.strip_suffix("-bundle")?;
    let dir = bundles
        .join(package)
        .join(tag.strip_prefix('v').unwrap_or(tag));
    dir.join("metadata/annotations.yaml")
        .is_file()
        .then_some(dir)
}

pub fn run_bundle(command: BundleCommand) -> anyhow::Result<()> {
    match command {
        BundleCommand::Build(args) => super::image::bundle_build(args),
        BundleCommand::Validate { dirs } => {
            let mut failed = 0;
            for dir in &dirs {
                let problems = match read_bundle(dir) {
                    Ok(bundle) => validate_bundle(&bundle, &crate::api::check_csv_schema)
                        .into_iter()
                        .map(|p| p.to_string())
                        .collect(),
                    Err(e) => vec![e.to_string()],
                };
                if problems.is_empty() {
                    println!("{}: valid", dir.display());
                } else {
                    failed += 1;
                    for p in problems {
                        println!("{p}");
                    }
                }
            }
            if failed > 0 {
                bail!("{failed} of {} bundle(s) invalid", dirs.len());
            }
            Ok(())
        }
    }
}

/// `catalog/<package>/catalog.yaml` for every package folder under `bundles`.
pub fn generate(bundles: &Path, out: &Path) -> anyhow::Result<()> {
    let options = RenderOptions {
        image_template: Some(BUNDLE_IMAGE_TEMPLATE.into()),
        strict: false,
    };
    let mut packages: Vec<PathBuf> = std::fs::read_dir(bundles)
        .with_context(|| format!("reading {}", bundles.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    packages.sort();
    for package_dir in packages {
        let config = render_package_dir(&package_dir, &options)?;
        // Entries of a directory listing always have a name.
        let Some(name) = package_dir.file_name() else {
            continue;
        };
        let dir = out.join(name);
        std::fs::create_dir_all(&dir)?;
        let mut text = Vec::new();
        write_fbc(&config, FbcFormat::Yaml, &mut text)?;
        std::fs::write(dir.join("catalog.yaml"), text)?;
        eprintln!("wrote {}", dir.join("catalog.yaml").display());
    }
    Ok(())
}
