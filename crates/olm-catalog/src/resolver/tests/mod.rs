//! Resolver tests: one table row (or test) per rule, failures included; property tests;
//! and the project's own and the community-operators catalogs.

mod deps;
mod limits;
mod policy;
mod props;
mod real;
mod upgrades;

use serde_json::{Value, json};

use super::*;
use crate::catalog::model::fbc::*;

/// A channel entry: `name`, then optional replaces / skips / skipRange.
pub fn entry(name: &str) -> ChannelEntry {
    ChannelEntry {
        name: name.into(),
        ..Default::default()
    }
}

pub trait EntryExt {
    fn replaces(self, r: &str) -> Self;
    fn skips(self, s: &[&str]) -> Self;
    fn range(self, r: &str) -> Self;
}

impl EntryExt for ChannelEntry {
    fn replaces(mut self, r: &str) -> Self {
        self.replaces = r.into();
        self
    }
    fn skips(mut self, s: &[&str]) -> Self {
        self.skips = s.iter().map(std::string::ToString::to_string).collect();
        self
    }
    fn range(mut self, r: &str) -> Self {
        self.skip_range = r.into();
        self
    }
}

pub fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

pub fn prop(type_: &str, value: Value) -> Property {
    Property::new(type_, value)
}

pub fn requires_package(package: &str, range: &str) -> Property {
    prop(
        PROP_PACKAGE_REQUIRED,
        json!({"packageName": package, "versionRange": range}),
    )
}

pub fn constraint(value: Value) -> Property {
    prop(PROP_CONSTRAINT, value)
}

/// Builds one catalog's FBC.
#[derive(Clone)]
pub struct Cat {
    pub catalog: Catalog,
}

impl Cat {
    pub fn new(name: &str) -> Cat {
        Cat::in_ns(name, "olm", 0)
    }

    pub fn in_ns(name: &str, namespace: &str, priority: i32) -> Cat {
        Cat {
            catalog: Catalog {
                name: name.into(),
                namespace: namespace.into(),
                priority,
                content: DeclarativeConfig::default(),
            },
        }
    }

    pub fn package(mut self, name: &str, default_channel: &str) -> Cat {
        self.catalog.content.packages.push(Package {
            schema: SCHEMA_PACKAGE.into(),
            name: name.into(),
            default_channel: default_channel.into(),
            ..Default::default()
        });
        self
    }

    pub fn channel(mut self, package: &str, name: &str, entries: Vec<ChannelEntry>) -> Cat {
        self.catalog.content.channels.push(Channel {
            schema: SCHEMA_CHANNEL.into(),
            name: name.into(),
            package: package.into(),
            entries,
            properties: Vec::new(),
        });
        self
    }

    /// A bundle named `<package>.v<version>` with `olm.package` plus `extra` properties.
    pub fn bundle(mut self, package: &str, version: &str, extra: Vec<Property>) -> Cat {
        let mut properties = vec![prop(
            PROP_PACKAGE,
            json!({"packageName": package, "version": version}),
        )];
        properties.extend(extra);
        self.catalog.content.bundles.push(Bundle {
            schema: SCHEMA_BUNDLE.into(),
            name: format!("{package}.v{version}"),
            package: package.into(),
            properties,
            ..Default::default()
        });
        self
    }

    /// A one-channel ("stable") package whose versions replace each other in order.
    pub fn linear(
        self,
        package: &str,
        versions: &[&str],
        extra: &dyn Fn(&str) -> Vec<Property>,
    ) -> Cat {
        let mut entries = Vec::new();
        let mut previous: Option<String> = None;
        for v in versions {
            let name = format!("{package}.v{v}");
            let mut e = entry(&name);
            if let Some(p) = &previous {
                e = e.replaces(p);
            }
            entries.push(e);
            previous = Some(name);
        }
        let mut cat = self
            .package(package, "stable")
            .channel(package, "stable", entries);
        for v in versions {
            cat = cat.bundle(package, v, extra(v));
        }
        cat
    }
}

pub fn none(_: &str) -> Vec<Property> {
    Vec::new()
}

pub fn sub(package: &str, catalog: &str) -> Subscription {
    Subscription {
        name: package.into(),
        package: package.into(),
        channel: None,
        source: CatalogRef::new(catalog, "olm"),
        starting_csv: None,
        versions: Default::default(),
    }
}

pub fn installed(package: &str, version: &str) -> InstalledCsv {
    InstalledCsv {
        name: format!("{package}.v{version}"),
        package: package.into(),
        version: semver::Version::parse(version).unwrap(),
        source: None,
        provided: vec![],
    }
}

pub fn ns(installed: Vec<InstalledCsv>, subscriptions: Vec<Subscription>) -> Namespace {
    Namespace {
        name: "operators".into(),
        installed,
        subscriptions,
    }
}

pub fn run(cats: &[Cat], namespace: &Namespace) -> Result<Plan, ResolveError> {
    let catalogs: Vec<Catalog> = cats.iter().map(|c| c.catalog.clone()).collect();
    resolve(&CatalogIndex::new(&catalogs), namespace)
}

/// `bundle@catalog` per step, in install order.
pub fn steps(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| format!("{}@{}", s.bundle, s.catalog))
        .collect()
}

pub fn error_text(result: Result<Plan, ResolveError>) -> String {
    match result {
        Ok(plan) => panic!("expected a failure, got {:?}", steps(&plan)),
        Err(e) => e.to_string(),
    }
}
