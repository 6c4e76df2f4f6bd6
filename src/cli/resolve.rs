//! `olm resolve`: "what would subscribing to X do here?", answered without a cluster.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::catalog::DeclarativeConfig;
use crate::catalog::bundles::bundle::is_bundle_dir;
use crate::catalog::bundles::render::{RenderOptions, render_package_dir, render_package_folders};
use crate::catalog::model::semver_range::parse_version;
use crate::catalog::reading::load::load_path;
use crate::resolver::{
    Catalog, CatalogIndex, CatalogRef, InstalledCsv, Namespace, Outcome, Subscription, resolve,
};

/// Catalogs without `namespace=` live in upstream's global catalog namespace.
const DEFAULT_CATALOG_NAMESPACE: &str = "olm";
/// The namespace being resolved.
const RESOLVING_NAMESPACE: &str = "default";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct ResolveArgs {
    /// `DIR[,name=N][,namespace=NS][,priority=P]`: a file-based catalog, a package folder of
    /// bundles, or a folder of package folders (community-operators layout). Repeatable.
    #[arg(
        long = "catalog",
        required = true,
        value_name = "DIR[,name=N][,namespace=NS][,priority=P]"
    )]
    catalogs: Vec<String>,
    /// `PACKAGE[,channel=C][,source=N][,starting=CSV]`. Repeatable.
    #[arg(
        long = "subscribe",
        required = true,
        value_name = "PACKAGE[,channel=C][,source=N][,starting=CSV]"
    )]
    subscriptions: Vec<String>,
    /// `CSV,package=P,version=V[,source=N]`: a CSV already in the namespace. Repeatable.
    #[arg(long = "installed", value_name = "CSV,package=P,version=V[,source=N]")]
    installed: Vec<String>,
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

pub fn run(args: ResolveArgs) -> anyhow::Result<()> {
    let catalogs = args
        .catalogs
        .iter()
        .map(|spec| parse_catalog(spec))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let index = CatalogIndex::new(&catalogs);
    let namespace = Namespace {
        name: RESOLVING_NAMESPACE.into(),
        installed: args
            .installed
            .iter()
            .map(|s| parse_installed(s, &catalogs))
            .collect::<anyhow::Result<_>>()?,
        subscriptions: args
            .subscriptions
            .iter()
            .map(|s| parse_subscription(s, &catalogs))
            .collect::<anyhow::Result<_>>()?,
    };
    match (resolve(&index, &namespace), args.output) {
        (Ok(plan), OutputFormat::Json) => {
            println!("{}", serde_json::to_string_pretty(&plan.steps)?);
        }
        (Ok(plan), OutputFormat::Text) => {
            for step in &plan.steps {
                println!("{step}");
            }
            for result in &plan.subscriptions {
                if let Outcome::AtLatestKnown { csv } = &result.outcome {
                    println!(
                        "keep {csv}: subscription {} is at the latest known version",
                        result.subscription
                    );
                }
            }
        }
        (Err(e), OutputFormat::Json) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({"error": e.to_string()}))?
            );
            bail!("resolution failed");
        }
        (Err(e), OutputFormat::Text) => bail!("resolution failed: {e}"),
    }
    Ok(())
}

/// Splits `head,key=value,…`, refusing keys the flag does not know.
fn split_spec<'a>(
    spec: &'a str,
    keys: &[&str],
) -> anyhow::Result<(&'a str, Vec<(&'a str, &'a str)>)> {
    let mut parts = spec.split(',');
    let head = parts
        .next()
        .filter(|h| !h.is_empty())
        .with_context(|| format!("{spec:?}: missing the leading value"))?;
    let mut pairs = Vec::new();
    for part in parts {
        let (k, v) = part
            .split_once('=')
            .with_context(|| format!("{spec:?}: {part:?} is not key=value"))?;
        if !keys.contains(&k) {
            bail!("{spec:?}: unknown key {k:?} (expected one of {keys:?})");
        }
        pairs.push((k, v));
    }
    Ok((head, pairs))
}

fn get<'a>(pairs: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    pairs.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn parse_catalog(spec: &str) -> anyhow::Result<Catalog> {
    let (dir, pairs) = split_spec(spec, &["name", "namespace", "priority"])?;
    let dir = PathBuf::from(dir);
    let default_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "catalog".into());
    let priority = get(&pairs, "priority")
        .map(str::parse)
        .transpose()
        .with_context(|| format!("{spec:?}: priority must be an integer"))?;
    Ok(Catalog {
        name: get(&pairs, "name")
            .map(String::from)
            .unwrap_or(default_name),
        namespace: get(&pairs, "namespace")
            .unwrap_or(DEFAULT_CATALOG_NAMESPACE)
            .into(),
        priority: priority.unwrap_or(0),
        content: load_catalog_dir(&dir)?,
    })
}

/// A package folder or a folder of package folders is rendered; anything else is FBC.
fn load_catalog_dir(dir: &Path) -> anyhow::Result<DeclarativeConfig> {
    let is_package = |d: &Path| {
        d.join("ci.yaml").is_file()
            || subdirs(d)
                .iter()
                .any(|s| is_bundle_dir(s) || is_bundle_dir(&s.join("bundle")))
    };
    if is_package(dir) {
        return render_package_dir(dir, &RenderOptions::default())
            .with_context(|| format!("rendering {}", dir.display()));
    }
    let content = render_package_folders(dir, &RenderOptions::default())
        .with_context(|| format!("rendering the packages in {}", dir.display()))?;
    if content.is_empty() {
        return load_path(dir).with_context(|| format!("loading catalog {}", dir.display()));
    }
    Ok(content)
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The catalog named `source`, or (without one) the catalog that has the package,
/// preferring higher priority, then name.
fn catalog_ref(
    source: Option<&str>,
    package: &str,
    catalogs: &[Catalog],
    spec: &str,
) -> anyhow::Result<CatalogRef> {
    let found = match source {
        Some(name) => catalogs
            .iter()
            .find(|c| c.name == name)
            .with_context(|| format!("{spec:?}: no --catalog named {name:?}"))?,
        None => catalogs
            .iter()
            .filter(|c| c.content.packages.iter().any(|p| p.name == package))
            .min_by_key(|c| (-c.priority, c.name.clone()))
            .with_context(|| {
                format!("{spec:?}: no catalog has package {package:?}; name one with source=N")
            })?,
    };
    Ok(CatalogRef::new(&found.name, &found.namespace))
}

fn parse_subscription(spec: &str, catalogs: &[Catalog]) -> anyhow::Result<Subscription> {
    let (package, pairs) = split_spec(spec, &["channel", "source", "starting"])?;
    Ok(Subscription {
        name: package.into(),
        package: package.into(),
        channel: get(&pairs, "channel").map(String::from),
        source: catalog_ref(get(&pairs, "source"), package, catalogs, spec)?,
        starting_csv: get(&pairs, "starting").map(String::from),
        versions: Default::default(),
    })
}

fn parse_installed(spec: &str, catalogs: &[Catalog]) -> anyhow::Result<InstalledCsv> {
    let (name, pairs) = split_spec(spec, &["package", "version", "source"])?;
    let package = get(&pairs, "package").with_context(|| format!("{spec:?}: needs package=P"))?;
    let version = get(&pairs, "version").with_context(|| format!("{spec:?}: needs version=V"))?;
    let version = parse_version(version)
        .with_context(|| format!("{spec:?}: version {version:?} is not semver"))?;
    let source = get(&pairs, "source")
        .map(|s| catalog_ref(Some(s), package, catalogs, spec))
        .transpose()?;
    Ok(InstalledCsv {
        name: name.into(),
        package: package.into(),
        version,
        source,
        provided: vec![],
    })
}
