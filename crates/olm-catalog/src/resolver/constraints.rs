//! A bundle's dependencies, read from its properties: `olm.package.required`,
//! `olm.gvk.required` and `olm.constraint` (gvk, package, all, any, not, cel), as
//! `api/pkg/constraints` defines them. Each becomes "at least one bundle in the namespace
//! matches this predicate".

use std::fmt;
use std::sync::Arc;

use semver::Version;
use serde_json::Value;

use super::cel::{CelError, CelRule};
use super::properties::BundleProperties;
use crate::catalog::model::fbc::{
    PROP_CONSTRAINT, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE_REQUIRED, Property,
};
use crate::catalog::model::semver_range::{RangeError, VersionRange};

/// Upstream refuses `olm.constraint` values larger than this.
pub const MAX_CONSTRAINT_BYTES: usize = 128 << 10;
/// `all`/`any`/`not` nested inside each other (upstream has no limit; real catalogs use 2).
pub const MAX_CONSTRAINT_NESTING: usize = 16;
/// The kinds of an `olm.constraint`, of which exactly one is set.
const CONSTRAINT_KINDS: [&str; 6] = ["gvk", "package", "all", "any", "not", "cel"];

/// Why a dependency property cannot be read (the bundle can then never be satisfied).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    #[error("needs a packageName")]
    NoPackageName,
    #[error("needs a versionRange")]
    NoVersionRange,
    #[error(transparent)]
    Range(#[from] RangeError),
    /// An `olm.gvk.required` without its three fields.
    #[error("needs string fields group, version and kind")]
    GvkFields,
    #[error("{size} bytes, larger than the limit of {MAX_CONSTRAINT_BYTES} bytes (128 KiB)")]
    TooLarge { size: usize },
    #[error("a constraint needs exactly one of {CONSTRAINT_KINDS:?}, found {found:?}")]
    Kinds { found: Vec<&'static str> },
    #[error("{kind} needs a constraints list")]
    NoConstraintsList { kind: &'static str },
    #[error("{kind} needs at least one constraint")]
    NoConstraints { kind: &'static str },
    #[error("all/any/not nested more than {MAX_CONSTRAINT_NESTING} deep (the limit)")]
    TooDeep,
    /// A `gvk` constraint without its three fields.
    #[error("gvk needs string fields group, version and kind")]
    GvkConstraintFields,
    #[error("cel needs a rule")]
    NoCelRule,
    #[error(transparent)]
    Cel(#[from] CelError),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn from_value(v: &Value) -> Option<Gvk> {
        let field = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Gvk {
            group: field("group")?,
            version: field("version")?,
            kind: field("kind")?,
        })
    }
}

impl fmt::Display for Gvk {
    /// Upstream's wording: `Kind (group/version)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}/{})", self.kind, self.group, self.version)
    }
}

/// What a candidate bundle looks like to a predicate.
pub struct Facts<'a> {
    pub package: &'a str,
    pub version: &'a Version,
    pub gvks: &'a [Gvk],
    pub properties: &'a BundleProperties,
}

/// A test over one bundle.
#[derive(Clone, Debug)]
pub enum Predicate {
    Gvk(Gvk),
    Package {
        package: String,
        range: VersionRange,
    },
    All(Vec<Predicate>),
    Any(Vec<Predicate>),
    /// None of the inner predicates holds (upstream's `not` over a list).
    Not(Vec<Predicate>),
    Cel(Arc<CelRule>),
}

impl Predicate {
    pub fn matches(&self, facts: &Facts<'_>) -> bool {
        match self {
            Predicate::Gvk(g) => facts.gvks.contains(g),
            Predicate::Package { package, range } => {
                facts.package == package && range.contains(facts.version)
            }
            Predicate::All(ps) => ps.iter().all(|p| p.matches(facts)),
            Predicate::Any(ps) => ps.iter().any(|p| p.matches(facts)),
            Predicate::Not(ps) => !ps.iter().any(|p| p.matches(facts)),
            Predicate::Cel(rule) => rule.matches(&facts.properties.decode()),
        }
    }

    /// A package every match must belong to, when the predicate pins one; lets the
    /// candidate search look at one package instead of the whole catalog.
    pub fn only_package(&self) -> Option<&str> {
        match self {
            Predicate::Package { package, .. } => Some(package),
            Predicate::All(ps) => ps.iter().find_map(Predicate::only_package),
            _ => None,
        }
    }

    /// A GVK every match must provide, when the predicate pins one.
    pub fn only_gvk(&self) -> Option<&Gvk> {
        match self {
            Predicate::Gvk(g) => Some(g),
            Predicate::All(ps) => ps.iter().find_map(Predicate::only_gvk),
            _ => None,
        }
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, word: &str, ps: &[Predicate]| {
            write!(f, "{word}(")?;
            for (i, p) in ps.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{p}")?;
            }
            f.write_str(")")
        };
        match self {
            Predicate::Gvk(g) => write!(f, "a provider of {g}"),
            Predicate::Package { package, range } => {
                write!(f, "package {package} with version in range {range:?}")
            }
            Predicate::All(ps) => list(f, "all of", ps),
            Predicate::Any(ps) => list(f, "any of", ps),
            Predicate::Not(ps) => list(f, "none of", ps),
            Predicate::Cel(rule) => write!(f, "CEL rule {:?}", rule.source()),
        }
    }
}

/// One dependency of a bundle.
#[derive(Clone, Debug)]
pub enum Dependency {
    /// `olm.package.required`, or `olm.constraint` with only `package`.
    Package {
        package: String,
        range: VersionRange,
        failure_message: Option<String>,
    },
    /// `olm.gvk.required`, or `olm.constraint` with only `gvk`.
    Gvk {
        gvk: Gvk,
        failure_message: Option<String>,
    },
    /// Any other `olm.constraint`.
    Matching {
        predicate: Predicate,
        failure_message: Option<String>,
    },
    /// A dependency property that cannot be read: the bundle can never be satisfied.
    Invalid {
        property: String,
        problem: ConstraintError,
    },
}

impl Dependency {
    pub fn failure_message(&self) -> Option<&str> {
        match self {
            Dependency::Package {
                failure_message, ..
            }
            | Dependency::Gvk {
                failure_message, ..
            }
            | Dependency::Matching {
                failure_message, ..
            } => failure_message.as_deref(),
            Dependency::Invalid { .. } => None,
        }
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dependency::Package { package, range, .. } => write!(
                f,
                "package {package} with version in range {:?}",
                range.as_str()
            ),
            Dependency::Gvk { gvk, .. } => write!(f, "an operator that provides {gvk}"),
            Dependency::Matching { predicate, .. } => write!(f, "a bundle matching {predicate}"),
            Dependency::Invalid { property, problem } => {
                write!(f, "a valid {property} property ({problem})")
            }
        }
    }
}

/// The provided APIs (`olm.gvk`) of a bundle.
pub fn provided_gvks(properties: &[Property]) -> Vec<Gvk> {
    let mut gvks: Vec<Gvk> = properties
        .iter()
        .filter(|p| p.type_ == PROP_GVK)
        .filter_map(|p| Gvk::from_value(&p.value))
        .collect();
    gvks.sort();
    gvks.dedup();
    gvks
}

/// Every dependency declared by a bundle's properties, in property order.
pub fn dependencies(properties: &[Property]) -> Vec<Dependency> {
    let mut out = Vec::new();
    for p in properties {
        let dep = match p.type_.as_str() {
            PROP_PACKAGE_REQUIRED => package_required(&p.value),
            PROP_GVK_REQUIRED => Gvk::from_value(&p.value)
                .map(|gvk| Dependency::Gvk {
                    gvk,
                    failure_message: None,
                })
                .ok_or(ConstraintError::GvkFields),
            PROP_CONSTRAINT => constraint(&p.value),
            _ => continue,
        };
        out.push(dep.unwrap_or_else(|problem| Dependency::Invalid {
            property: p.type_.clone(),
            problem,
        }));
    }
    out
}

fn package_required(v: &Value) -> Result<Dependency, ConstraintError> {
    let (package, range) = package_and_range(v)?;
    Ok(Dependency::Package {
        package,
        range,
        failure_message: None,
    })
}

fn package_and_range(v: &Value) -> Result<(String, VersionRange), ConstraintError> {
    let package = v
        .get("packageName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(ConstraintError::NoPackageName)?;
    let range_text = v
        .get("versionRange")
        .and_then(Value::as_str)
        .ok_or(ConstraintError::NoVersionRange)?;
    let range = VersionRange::parse(range_text)?;
    Ok((package.to_string(), range))
}

fn constraint(v: &Value) -> Result<Dependency, ConstraintError> {
    let size = serde_json::to_string(v).map(|s| s.len()).unwrap_or(0);
    if size > MAX_CONSTRAINT_BYTES {
        return Err(ConstraintError::TooLarge { size });
    }
    let failure_message = v
        .get("failureMessage")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    Ok(match predicate(v, 1)? {
        Predicate::Gvk(gvk) => Dependency::Gvk {
            gvk,
            failure_message,
        },
        Predicate::Package { package, range } => Dependency::Package {
            package,
            range,
            failure_message,
        },
        predicate => Dependency::Matching {
            predicate,
            failure_message,
        },
    })
}

/// Reads one constraint object, `depth` compounds deep; exactly one of its kinds must be
/// set, as upstream requires.
fn predicate(v: &Value, depth: usize) -> Result<Predicate, ConstraintError> {
    let set: Vec<&'static str> = CONSTRAINT_KINDS
        .into_iter()
        .filter(|k| v.get(k).is_some_and(|x| !x.is_null()))
        .collect();
    let [kind] = set.as_slice() else {
        return Err(ConstraintError::Kinds { found: set });
    };
    let kind = *kind;
    let body = &v[kind];
    let compound = || -> Result<Vec<Predicate>, ConstraintError> {
        let list = body
            .get("constraints")
            .and_then(Value::as_array)
            .ok_or(ConstraintError::NoConstraintsList { kind })?;
        if list.is_empty() {
            return Err(ConstraintError::NoConstraints { kind });
        }
        if depth > MAX_CONSTRAINT_NESTING {
            return Err(ConstraintError::TooDeep);
        }
        list.iter().map(|p| predicate(p, depth + 1)).collect()
    };
    Ok(match kind {
        "gvk" => Predicate::Gvk(Gvk::from_value(body).ok_or(ConstraintError::GvkConstraintFields)?),
        "package" => {
            let (package, range) = package_and_range(body)?;
            Predicate::Package { package, range }
        }
        "all" => Predicate::All(compound()?),
        "any" => Predicate::Any(compound()?),
        "not" => Predicate::Not(compound()?),
        _ => {
            let rule = body
                .get("rule")
                .and_then(Value::as_str)
                .ok_or(ConstraintError::NoCelRule)?;
            Predicate::Cel(Arc::new(CelRule::compile(rule)?))
        }
    })
}
