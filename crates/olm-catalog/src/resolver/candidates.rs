//! The OLM side of the solver problem: which bundles may satisfy what, in which order.
//!
//! Choices are catalog bundles, installed CSVs, and one "provider token" per (bundle, GVK
//! it provides). Groups are packages (at most one bundle per package) and GVKs (at most one
//! token, so at most one provider per GVK): every bundle requires its tokens, and a GVK
//! requirement is a requirement on the GVK's tokens. Everything is interned lazily, so a
//! resolution touches only the part of a large catalog it reaches.

use std::cell::RefCell;
use std::collections::HashMap;

use semver::Version;
use serde_json::json;

use super::constraints::{Dependency, Facts, Gvk, provided_gvks};
use super::index::{BundleId, BundleProperties, CatalogIndex};
use super::input::Namespace;
use super::solver::{ChoiceId, Clause, GroupId, Members, Problem};
use crate::catalog::model::fbc::{PROP_PACKAGE, Property};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Choice {
    Bundle(BundleId),
    Installed(usize),
    Token { provider: ChoiceId, gvk: Gvk },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    Package(String),
    Gvk(Gvk),
}

/// An installed CSV with what its catalog entry (when found) says it provides.
struct Installed {
    catalog: Option<usize>,
    gvks: Vec<Gvk>,
    properties: BundleProperties,
}

#[derive(Default)]
struct Ids {
    choices: Vec<Choice>,
    choice_ids: HashMap<Choice, ChoiceId>,
    groups: Vec<Group>,
    group_ids: HashMap<Group, GroupId>,
}

pub struct OlmProblem<'a> {
    pub index: &'a CatalogIndex,
    pub namespace: &'a Namespace,
    installed: Vec<Installed>,
    ids: RefCell<Ids>,
}

impl<'a> OlmProblem<'a> {
    pub fn new(index: &'a CatalogIndex, namespace: &'a Namespace) -> Self {
        let installed = namespace
            .installed
            .iter()
            .map(|csv| {
                let catalog = csv.source.as_ref().and_then(|s| index.catalog_id(s));
                match index.find_bundle(&csv.name, &csv.package, catalog) {
                    Some(b) => {
                        let bundle = &index.bundles[b];
                        Installed {
                            catalog: Some(bundle.catalog),
                            gvks: bundle.gvks.clone(),
                            properties: bundle.properties.clone(),
                        }
                    }
                    None => {
                        let value =
                            json!({"packageName": csv.package, "version": csv.version.to_string()});
                        let mut properties = vec![Property::new(PROP_PACKAGE, value)];
                        properties.extend(csv.provided.iter().cloned());
                        Installed {
                            catalog,
                            gvks: provided_gvks(&properties),
                            properties: BundleProperties::Decoded(properties),
                        }
                    }
                }
            })
            .collect();
        OlmProblem {
            index,
            namespace,
            installed,
            ids: RefCell::default(),
        }
    }

    pub fn choice_id(&self, choice: Choice) -> ChoiceId {
        let mut ids = self.ids.borrow_mut();
        if let Some(id) = ids.choice_ids.get(&choice) {
            return *id;
        }
        let id = ids.choices.len() as ChoiceId;
        ids.choices.push(choice.clone());
        ids.choice_ids.insert(choice, id);
        id
    }

    pub fn choice(&self, id: ChoiceId) -> Choice {
        self.ids.borrow().choices[id as usize].clone()
    }

    fn group_id(&self, group: Group) -> GroupId {
        let mut ids = self.ids.borrow_mut();
        if let Some(id) = ids.group_ids.get(&group) {
            return *id;
        }
        let id = ids.groups.len() as GroupId;
        ids.groups.push(group.clone());
        ids.group_ids.insert(group, id);
        id
    }

    fn facts(&self, choice: &Choice) -> Option<Facts<'_>> {
        match choice {
            Choice::Bundle(b) => {
                let b = &self.index.bundles[*b];
                Some(Facts {
                    package: &b.package,
                    version: b.version.as_ref()?,
                    gvks: &b.gvks,
                    properties: &b.properties,
                })
            }
            Choice::Installed(i) => {
                let csv = &self.namespace.installed[*i];
                let info = &self.installed[*i];
                Some(Facts {
                    package: &csv.package,
                    version: &csv.version,
                    gvks: &info.gvks,
                    properties: &info.properties,
                })
            }
            Choice::Token { .. } => None,
        }
    }

    /// The dependency search order, upstream's `FindPreferred`: installed → the dependent's
    /// own catalog → higher priority → a catalog in this namespace → catalog name; then, in
    /// a catalog, the default channel first and nearest to the head.
    fn rank(
        &self,
        choice: &Choice,
        dependent_catalog: Option<usize>,
    ) -> (u8, u8, i64, u8, String, String, u8, usize, String) {
        match choice {
            Choice::Installed(i) => (
                0,
                0,
                0,
                0,
                String::new(),
                String::new(),
                0,
                0,
                self.namespace.installed[*i].name.clone(),
            ),
            Choice::Token { provider, .. } => self.rank(&self.choice(*provider), dependent_catalog),
            Choice::Bundle(b) => {
                let bundle = &self.index.bundles[*b];
                let catalog = &self.index.catalogs[bundle.catalog];
                let (channel, distance) = bundle.channel.clone().unwrap_or_default();
                let default = &catalog.packages[&bundle.package].default_channel;
                (
                    1,
                    u8::from(dependent_catalog != Some(bundle.catalog)),
                    -i64::from(catalog.priority),
                    u8::from(catalog.source.namespace != self.namespace.name),
                    catalog.source.name.clone(),
                    catalog.source.namespace.clone(),
                    u8::from(&channel != default),
                    distance,
                    bundle.name.clone(),
                )
            }
        }
    }

    fn sorted(&self, mut choices: Vec<Choice>, dependent_catalog: Option<usize>) -> Vec<ChoiceId> {
        choices.sort_by_cached_key(|c| self.rank(c, dependent_catalog));
        choices.into_iter().map(|c| self.choice_id(c)).collect()
    }

    /// Installed CSVs and usable catalog bundles of a package; a catalog bundle with the
    /// name of an installed CSV is the installed CSV, not a second choice.
    fn package_choices(&self, package: &str) -> Vec<Choice> {
        let installed: Vec<usize> = (0..self.namespace.installed.len())
            .filter(|i| self.namespace.installed[*i].package == package)
            .collect();
        let mut out: Vec<Choice> = installed.iter().map(|i| Choice::Installed(*i)).collect();
        for &b in self.index.by_package.get(package).into_iter().flatten() {
            if !installed
                .iter()
                .any(|i| self.namespace.installed[*i].name == self.index.bundles[b].name)
            {
                out.push(Choice::Bundle(b));
            }
        }
        out
    }

    /// Choices (bundles or installed CSVs, not tokens) that provide a GVK.
    fn gvk_providers(&self, gvk: &Gvk) -> Vec<Choice> {
        let mut out: Vec<Choice> = (0..self.installed.len())
            .filter(|i| self.installed[*i].gvks.contains(gvk))
            .map(Choice::Installed)
            .collect();
        for &b in self.index.by_gvk.get(gvk).into_iter().flatten() {
            let bundle = &self.index.bundles[b];
            if !self
                .namespace
                .installed
                .iter()
                .any(|csv| csv.package == bundle.package && csv.name == bundle.name)
            {
                out.push(Choice::Bundle(b));
            }
        }
        out
    }

    fn all_choices(&self) -> Vec<Choice> {
        let mut out: Vec<Choice> = (0..self.installed.len()).map(Choice::Installed).collect();
        let mut packages: Vec<&String> = self.index.by_package.keys().collect();
        packages.sort();
        for p in packages {
            out.extend(
                self.package_choices(p)
                    .into_iter()
                    .filter(|c| matches!(c, Choice::Bundle(_))),
            );
        }
        out
    }

    pub fn dependency_clause(
        &self,
        dependent: &str,
        dep: &Dependency,
        dependent_catalog: Option<usize>,
    ) -> Clause {
        let choices: Vec<Choice> = match dep {
            Dependency::Package { package, range, .. } => self
                .package_choices(package)
                .into_iter()
                .filter(|c| self.facts(c).is_some_and(|f| range.contains(f.version)))
                .collect(),
            Dependency::Gvk { gvk, .. } => self
                .gvk_providers(gvk)
                .into_iter()
                .map(|p| Choice::Token {
                    provider: self.choice_id(p),
                    gvk: gvk.clone(),
                })
                .collect(),
            Dependency::Matching { predicate, .. } => {
                let pool = if let Some(p) = predicate.only_package() {
                    self.package_choices(p)
                } else if let Some(g) = predicate.only_gvk() {
                    self.gvk_providers(g)
                } else {
                    self.all_choices()
                };
                pool.into_iter()
                    .filter(|c| self.facts(c).is_some_and(|f| predicate.matches(&f)))
                    .collect()
            }
            Dependency::Invalid { .. } => Vec::new(),
        };
        let mut label = format!("{dependent} requires {dep}");
        if let Some(message) = dep.failure_message() {
            label.push_str(&format!(" ({message})"));
        }
        if choices.is_empty() {
            label.push_str(&self.why_nothing_matches(dep));
        }
        Clause {
            label,
            alternatives: self.sorted(choices, dependent_catalog),
        }
    }

    /// Says what the catalogs do have, so that the user sees how close they came.
    fn why_nothing_matches(&self, dep: &Dependency) -> String {
        match dep {
            Dependency::Package { package, .. } => {
                let mut versions: Vec<&Version> = self
                    .package_choices(package)
                    .iter()
                    .filter_map(|c| self.facts(c).map(|f| f.version))
                    .collect();
                versions.sort();
                versions.dedup();
                if versions.is_empty() {
                    format!(", but no catalog has an installable bundle of package {package}")
                } else {
                    let list: Vec<String> = versions
                        .iter()
                        .map(std::string::ToString::to_string)
                        .collect();
                    format!(
                        ", but package {package} only has versions {} available",
                        list.join(", ")
                    )
                }
            }
            Dependency::Gvk { .. } => {
                ", but no installable bundle in any catalog provides it".into()
            }
            Dependency::Matching { .. } => {
                ", but no installable bundle in any catalog matches".into()
            }
            Dependency::Invalid { .. } => ", so it can never be installed".into(),
        }
    }

    pub fn display_choice(&self, choice: &Choice) -> String {
        match choice {
            Choice::Bundle(b) => {
                let bundle = &self.index.bundles[*b];
                format!(
                    "{} from catalog {}",
                    bundle.name, self.index.catalogs[bundle.catalog].source
                )
            }
            Choice::Installed(i) => format!("{} (installed)", self.namespace.installed[*i].name),
            Choice::Token { provider, gvk } => format!(
                "{} as the provider of {gvk}",
                self.display_choice(&self.choice(*provider))
            ),
        }
    }

    fn choice_name(&self, choice: &Choice) -> String {
        match choice {
            Choice::Bundle(b) => self.index.bundles[*b].name.clone(),
            Choice::Installed(i) => self.namespace.installed[*i].name.clone(),
            Choice::Token { provider, .. } => self.choice_name(&self.choice(*provider)),
        }
    }

    fn catalog_of(&self, choice: &Choice) -> Option<usize> {
        match choice {
            Choice::Bundle(b) => Some(self.index.bundles[*b].catalog),
            Choice::Installed(i) => self.installed[*i].catalog,
            Choice::Token { provider, .. } => self.catalog_of(&self.choice(*provider)),
        }
    }
}

impl Problem for OlmProblem<'_> {
    fn group_of(&self, choice: ChoiceId) -> GroupId {
        let group = match self.choice(choice) {
            Choice::Bundle(b) => Group::Package(self.index.bundles[b].package.clone()),
            Choice::Installed(i) => Group::Package(self.namespace.installed[i].package.clone()),
            Choice::Token { gvk, .. } => Group::Gvk(gvk),
        };
        self.group_id(group)
    }

    fn members(&self, group: GroupId) -> Members {
        let group = self.ids.borrow().groups[group as usize].clone();
        match group {
            Group::Package(package) => {
                let choices = self
                    .package_choices(&package)
                    .into_iter()
                    .map(|c| self.choice_id(c))
                    .collect();
                let mut excluded = Vec::new();
                for catalog in &self.index.catalogs {
                    let Some(p) = catalog.packages.get(&package) else {
                        continue;
                    };
                    let mut ids: Vec<BundleId> = p.bundles.values().copied().collect();
                    ids.sort_unstable();
                    for b in ids {
                        if let Some(why) = self.index.bundles[b].unusable_reason() {
                            excluded.push((self.choice_id(Choice::Bundle(b)), why.to_string()));
                        }
                    }
                }
                Members { choices, excluded }
            }
            Group::Gvk(gvk) => {
                let choices = self
                    .gvk_providers(&gvk)
                    .into_iter()
                    .map(|p| {
                        let provider = self.choice_id(p);
                        self.choice_id(Choice::Token {
                            provider,
                            gvk: gvk.clone(),
                        })
                    })
                    .collect();
                Members {
                    choices,
                    excluded: Vec::new(),
                }
            }
        }
    }

    fn requirements(&self, id: ChoiceId) -> Vec<Clause> {
        let choice = self.choice(id);
        let name = self.choice_name(&choice);
        let gvks: &[Gvk] = match &choice {
            Choice::Bundle(b) => &self.index.bundles[*b].gvks,
            Choice::Installed(i) => &self.installed[*i].gvks,
            Choice::Token { provider, gvk } => {
                let label = format!(
                    "{} provides {gvk}",
                    self.choice_name(&self.choice(*provider))
                );
                return vec![Clause {
                    label,
                    alternatives: vec![*provider],
                }];
            }
        };
        let mut clauses: Vec<Clause> = gvks
            .iter()
            .map(|gvk| Clause {
                label: format!("only one operator may provide {gvk}"),
                alternatives: vec![self.choice_id(Choice::Token {
                    provider: id,
                    gvk: gvk.clone(),
                })],
            })
            .collect();
        // Installed CSVs are already running: their own dependencies were met when they
        // were installed, and are not re-checked here.
        if let Choice::Bundle(b) = choice {
            let catalog = self.catalog_of(&choice);
            for dep in &self.index.bundles[b].dependencies {
                clauses.push(self.dependency_clause(&name, dep, catalog));
            }
        }
        clauses
    }

    fn describe_choice(&self, choice: ChoiceId) -> String {
        self.display_choice(&self.choice(choice))
    }

    fn describe_group(&self, group: GroupId) -> String {
        match &self.ids.borrow().groups[group as usize] {
            Group::Package(p) => p.clone(),
            Group::Gvk(g) => format!("providers of {g}"),
        }
    }
}
