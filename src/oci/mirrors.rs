//! Registry mirrors for the pulls `olm run` makes itself (catalog and bundle images), read
//! from the file the nodes' container tools read: containers-registries.conf(5) v2
//! (`[[registry]]` with `prefix`, `location`, `insecure`, `blocked`,
//! `mirror-by-digest-only`, and `[[registry.mirror]]` with `location`, `insecure`,
//! `pull-from-mirror`). A reference is matched against the longest `prefix` (`host`,
//! `host/path` or `*.domain`); its mirrors are tried in order, then the registry's own
//! location, as the kubelet's runtime does. Digests are checked by the pull whatever host
//! served them.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: {reference} makes no image reference: {message}")]
    Rewritten {
        path: PathBuf,
        reference: String,
        message: String,
    },
    #[error(
        "{reference}: no mirror of {prefix} takes this reference, and {origin} forbids asking {prefix} itself (NeverContactSource)"
    )]
    NoMirror {
        reference: String,
        prefix: String,
        origin: String,
    },
    #[error("{reference}: registry {prefix} is blocked in {path}")]
    Blocked {
        reference: String,
        prefix: String,
        path: PathBuf,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    registry: Vec<Registry>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Registry {
    prefix: Option<String>,
    location: Option<String>,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<Mirror>,
    /// Only the mirrors, never the source: set by an ImageDigestMirrorSet or
    /// ImageTagMirrorSet with `mirrorSourcePolicy: NeverContactSource` (named here).
    #[serde(skip)]
    mirrors_only: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Mirror {
    location: String,
    #[serde(default)]
    insecure: bool,
    pull_from_mirror: Option<PullFrom>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum PullFrom {
    All,
    DigestOnly,
    TagOnly,
}

/// One place to pull a reference from, in the order to try them.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The reference rewritten to this place (`host[:port]/path…:tag` or `…@digest`).
    pub reference: String,
    /// Plain HTTP (the entry's `insecure`).
    pub insecure: bool,
    /// A mirror, not the registry itself.
    pub mirror: bool,
}

/// The parsed configuration; empty when there is no file.
#[derive(Clone, Debug, Default)]
pub struct Mirrors {
    path: PathBuf,
    registries: Vec<Registry>,
}

impl Mirrors {
    /// Reads `path`; a missing file is no configuration (as for the nodes' tools).
    pub fn load(path: &Path) -> Result<Mirrors, MirrorError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Mirrors::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Mirrors::default()),
            Err(source) => Err(MirrorError::Read {
                path: path.into(),
                source,
            }),
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Mirrors, MirrorError> {
        let invalid = |message: String| MirrorError::Invalid {
            path: path.into(),
            message,
        };
        let file: File = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        for (i, registry) in file.registry.iter().enumerate() {
            if registry.prefix.is_none() && registry.location.is_none() {
                return Err(invalid(format!(
                    "[[registry]] {}: neither prefix nor location",
                    i + 1
                )));
            }
            let by_digest = registry.mirror_by_digest_only;
            if by_digest && registry.mirror.iter().any(|m| m.pull_from_mirror.is_some()) {
                return Err(invalid(format!(
                    "[[registry]] {}: mirror-by-digest-only and pull-from-mirror together",
                    i + 1
                )));
            }
        }
        Ok(Mirrors {
            path: path.into(),
            registries: file.registry,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.registries.is_empty()
    }

    /// Where to pull `reference` (fully qualified: `host/path[:tag][@digest]`) from, in
    /// order: the matching entry's mirrors that take this kind of reference, then its
    /// location. Unmatched references are pulled as they are.
    pub fn candidates(&self, reference: &str) -> Result<Vec<Candidate>, MirrorError> {
        let as_is = Candidate {
            reference: reference.into(),
            insecure: false,
            mirror: false,
        };
        let Some((registry, matched)) = self.matching(reference) else {
            return Ok(vec![as_is]);
        };
        let prefix = registry
            .prefix
            .clone()
            .or_else(|| registry.location.clone());
        if registry.blocked {
            return Err(MirrorError::Blocked {
                reference: reference.into(),
                prefix: prefix.unwrap_or_default(),
                path: self.path.clone(),
            });
        }
        let rest = &reference[matched.len()..];
        let by_digest = reference.contains('@');
        let mut found: Vec<Candidate> = registry
            .mirror
            .iter()
            .filter(|m| {
                let from = if registry.mirror_by_digest_only {
                    PullFrom::DigestOnly
                } else {
                    m.pull_from_mirror.unwrap_or(PullFrom::All)
                };
                match from {
                    PullFrom::All => true,
                    PullFrom::DigestOnly => by_digest,
                    PullFrom::TagOnly => !by_digest,
                }
            })
            .map(|m| Candidate {
                reference: format!("{}{rest}", m.location),
                insecure: m.insecure,
                mirror: true,
            })
            .collect();
        if let Some(origin) = &registry.mirrors_only {
            if found.is_empty() {
                return Err(MirrorError::NoMirror {
                    reference: reference.into(),
                    prefix: prefix.unwrap_or_default(),
                    origin: origin.clone(),
                });
            }
            return Ok(found);
        }
        // A wildcard prefix keeps the matched host; a location rewrites it.
        let location = match &registry.location {
            Some(location) if !registry.prefix.as_deref().unwrap_or("").starts_with("*.") => {
                location.clone()
            }
            _ => matched.to_string(),
        };
        found.push(Candidate {
            reference: format!("{location}{rest}"),
            insecure: registry.insecure,
            mirror: false,
        });
        Ok(found)
    }

    /// The entry with the longest prefix `reference` falls under, and the part of the
    /// reference that prefix matched.
    fn matching<'a>(&'a self, reference: &'a str) -> Option<(&'a Registry, &'a str)> {
        self.registries
            .iter()
            .filter_map(|registry| {
                let prefix = registry
                    .prefix
                    .as_deref()
                    .or(registry.location.as_deref())?;
                matched(prefix, reference).map(|m| (registry, m))
            })
            .max_by_key(|(_, m)| m.len())
    }
}

/// One rule of an ImageDigestMirrorSet (`by_digest`) or ImageTagMirrorSet: pulls of
/// `source` (a registry, repository or `*.domain`) try `mirrors` in order, for digests or
/// for tags only, and the source last unless `mirrors_only` names the object forbidding it.
#[derive(Clone, Debug, PartialEq)]
pub struct MirrorSetRule {
    pub source: String,
    pub mirrors: Vec<String>,
    pub by_digest: bool,
    pub mirrors_only: Option<String>,
}

impl Mirrors {
    /// This configuration with the mirror sets' rules added: a rule for a prefix the file
    /// already has appends its mirrors to that entry's (the file's first), as OpenShift's
    /// machine-config operator merges them into the nodes' registries.conf.
    pub fn with_sets(&self, rules: &[MirrorSetRule]) -> Mirrors {
        let mut merged = self.clone();
        for rule in rules {
            let index = merged
                .registries
                .iter()
                .position(|r| r.prefix.as_deref().or(r.location.as_deref()) == Some(&rule.source))
                .unwrap_or_else(|| {
                    merged.registries.push(Registry {
                        prefix: Some(rule.source.clone()),
                        location: (!rule.source.starts_with("*.")).then(|| rule.source.clone()),
                        ..Registry::default()
                    });
                    merged.registries.len() - 1
                });
            let entry = &mut merged.registries[index];
            // Per mirror from here on: digest-only and tag-only mirrors share the entry.
            if std::mem::take(&mut entry.mirror_by_digest_only) {
                for m in &mut entry.mirror {
                    m.pull_from_mirror = Some(PullFrom::DigestOnly);
                }
            }
            let from = if rule.by_digest {
                PullFrom::DigestOnly
            } else {
                PullFrom::TagOnly
            };
            entry
                .mirror
                .extend(rule.mirrors.iter().map(|location| Mirror {
                    location: location.clone(),
                    insecure: false,
                    pull_from_mirror: Some(from),
                }));
            if entry.mirrors_only.is_none() {
                entry.mirrors_only = rule.mirrors_only.clone();
            }
        }
        merged
    }
}

/// The configuration in use: the file's, with the cluster's mirror sets added as they
/// change (see `crate::cluster::mirror_sets`).
#[derive(Debug, Default)]
pub struct LiveMirrors {
    file: Mirrors,
    current: std::sync::RwLock<std::sync::Arc<Mirrors>>,
}

impl LiveMirrors {
    pub fn new(file: Mirrors) -> LiveMirrors {
        LiveMirrors {
            current: std::sync::RwLock::new(std::sync::Arc::new(file.clone())),
            file,
        }
    }

    pub fn current(&self) -> std::sync::Arc<Mirrors> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn set_rules(&self, rules: &[MirrorSetRule]) {
        let merged = std::sync::Arc::new(self.file.with_sets(rules));
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = merged;
    }
}

/// One place to try: the reference there, the registry options for it (an insecure mirror
/// added to the plain-HTTP hosts), and the mirror's host when it is one.
pub struct Attempt {
    pub reference: oci_client::Reference,
    pub options: crate::oci::registry::Options,
    pub mirror: Option<String>,
}

impl Mirrors {
    /// [`Mirrors::candidates`] of a parsed reference, ready to pull.
    pub fn attempts(
        &self,
        reference: &oci_client::Reference,
        options: &crate::oci::registry::Options,
    ) -> Result<Vec<Attempt>, MirrorError> {
        if self.is_empty() {
            return Ok(vec![Attempt {
                reference: reference.clone(),
                options: options.clone(),
                mirror: None,
            }]);
        }
        let found = self.candidates(&reference.whole())?;
        found
            .into_iter()
            .map(|candidate| {
                let parsed =
                    crate::oci::registry::parse_reference(&candidate.reference).map_err(|e| {
                        MirrorError::Rewritten {
                            path: self.path.clone(),
                            reference: candidate.reference.clone(),
                            message: e.to_string(),
                        }
                    })?;
                let host = parsed.resolve_registry().to_string();
                let mut options = options.clone();
                if candidate.insecure {
                    options.insecure.push(host.clone());
                }
                Ok(Attempt {
                    reference: parsed,
                    options,
                    mirror: candidate.mirror.then_some(host),
                })
            })
            .collect()
    }
}

/// The part of `reference` that `prefix` matches: the prefix itself followed by the end,
/// `/`, `:` or `@`; for `*.domain`, the reference's host when it ends in `.domain`.
fn matched<'a>(prefix: &str, reference: &'a str) -> Option<&'a str> {
    if let Some(domain) = prefix.strip_prefix('*') {
        let host_end = reference.find('/').unwrap_or(reference.len());
        let host = &reference[..host_end];
        let name = host.split(':').next().unwrap_or(host);
        return name.ends_with(domain).then_some(host);
    }
    let rest = reference.strip_prefix(prefix)?;
    // As containers/image: a `:` boundary also lets `host` match `host:5000`.
    (rest.is_empty() || rest.starts_with(['/', ':', '@'])).then(|| &reference[..prefix.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Mirrors {
        Mirrors::parse(text, Path::new("registries.conf")).unwrap()
    }

    fn refs(found: Vec<Candidate>) -> Vec<String> {
        found.into_iter().map(|c| c.reference).collect()
    }

    const QUAY: &str = r#"
[[registry]]
prefix = "quay.io/olm-rs"
location = "quay.io/olm-rs"
[[registry.mirror]]
location = "mirror.local:5000/olm-rs"
insecure = true
[[registry.mirror]]
location = "backup.local/olm"
pull-from-mirror = "digest-only"
"#;

    #[test]
    fn mirrors_come_first_in_order_then_the_source() {
        let m = conf(QUAY);
        let found = m.candidates("quay.io/olm-rs/catalog:v1").unwrap();
        assert_eq!(
            refs(found.clone()),
            [
                "mirror.local:5000/olm-rs/catalog:v1",
                "quay.io/olm-rs/catalog:v1"
            ]
        );
        assert!(found[0].insecure && found[0].mirror && !found[1].mirror);
        // A digest also goes to the digest-only mirror.
        let found = m.candidates("quay.io/olm-rs/catalog@sha256:abc").unwrap();
        assert_eq!(
            refs(found),
            [
                "mirror.local:5000/olm-rs/catalog@sha256:abc",
                "backup.local/olm/catalog@sha256:abc",
                "quay.io/olm-rs/catalog@sha256:abc"
            ]
        );
        // Outside the prefix: as it is.
        assert_eq!(
            refs(m.candidates("quay.io/other/x:1").unwrap()),
            ["quay.io/other/x:1"]
        );
        assert_eq!(
            refs(m.candidates("quay.io/olm-rs-other/x:1").unwrap()),
            ["quay.io/olm-rs-other/x:1"]
        );
    }

    #[test]
    fn digest_only_registries_send_tags_to_the_source() {
        let m = conf(
            "[[registry]]\nlocation = \"quay.io\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m.local\"\n",
        );
        assert_eq!(
            refs(m.candidates("quay.io/a/b:v1").unwrap()),
            ["quay.io/a/b:v1"]
        );
        assert_eq!(
            refs(m.candidates("quay.io/a/b@sha256:1").unwrap()),
            ["m.local/a/b@sha256:1", "quay.io/a/b@sha256:1"]
        );
    }

    #[test]
    fn the_longest_prefix_wins_and_locations_rewrite() {
        let m = conf(
            "[[registry]]\nprefix = \"example.com\"\nlocation = \"example.com\"\n[[registry]]\nprefix = \"example.com/team\"\nlocation = \"internal.local/team-copy\"\n",
        );
        assert_eq!(
            refs(m.candidates("example.com/team/op:1").unwrap()),
            ["internal.local/team-copy/op:1"]
        );
        let m = conf(
            "[[registry]]\nprefix = \"*.example.com\"\n[[registry.mirror]]\nlocation = \"m.local\"\n",
        );
        assert_eq!(
            refs(m.candidates("a.example.com/op:1").unwrap()),
            ["m.local/op:1", "a.example.com/op:1"]
        );
    }

    #[test]
    fn blocked_registries_and_bad_files_are_errors_naming_the_file() {
        let m = conf("[[registry]]\nlocation = \"quay.io\"\nblocked = true\n");
        let e = m.candidates("quay.io/a:1").unwrap_err().to_string();
        assert_eq!(
            e,
            "quay.io/a:1: registry quay.io is blocked in registries.conf"
        );
        let bad = Mirrors::parse("[[registry]]\ninsecure = true\n", Path::new("r.conf"));
        assert!(
            bad.unwrap_err()
                .to_string()
                .starts_with("r.conf: [[registry]] 1")
        );
        let both = "[[registry]]\nlocation = \"q\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m\"\npull-from-mirror = \"all\"\n";
        assert!(Mirrors::parse(both, Path::new("r.conf")).is_err());
        assert!(Mirrors::parse("[[registry]", Path::new("r.conf")).is_err());
        assert!(
            Mirrors::load(Path::new("/nonexistent/registries.conf"))
                .unwrap()
                .is_empty()
        );
    }

    fn rule(source: &str, mirrors: &[&str], by_digest: bool, only: bool) -> MirrorSetRule {
        MirrorSetRule {
            source: source.into(),
            mirrors: mirrors.iter().map(ToString::to_string).collect(),
            by_digest,
            mirrors_only: only.then(|| "ImageDigestMirrorSet/never".into()),
        }
    }

    #[test]
    fn mirror_sets_add_digest_and_tag_mirrors_after_the_file_s() {
        let merged = conf(QUAY).with_sets(&[
            rule("quay.io/olm-rs", &["idms.local/olm"], true, false),
            rule("quay.io/olm-rs", &["itms.local/olm"], false, false),
            rule("registry.example/team", &["idms.local/team"], true, false),
        ]);
        assert_eq!(
            refs(merged.candidates("quay.io/olm-rs/catalog:v1").unwrap()),
            [
                "mirror.local:5000/olm-rs/catalog:v1",
                "itms.local/olm/catalog:v1",
                "quay.io/olm-rs/catalog:v1"
            ]
        );
        assert_eq!(
            refs(merged.candidates("quay.io/olm-rs/c@sha256:abc").unwrap()),
            [
                "mirror.local:5000/olm-rs/c@sha256:abc",
                "backup.local/olm/c@sha256:abc",
                "idms.local/olm/c@sha256:abc",
                "quay.io/olm-rs/c@sha256:abc"
            ]
        );
        // A digest-only set mirrors no tag: the tag goes to the source.
        assert_eq!(
            refs(merged.candidates("registry.example/team/x:1").unwrap()),
            ["registry.example/team/x:1"]
        );
    }

    #[test]
    fn never_contact_source_leaves_only_the_mirrors() {
        let live = LiveMirrors::new(Mirrors::default());
        live.set_rules(&[rule(
            "registry.example/team",
            &["idms.local/team"],
            true,
            true,
        )]);
        let m = live.current();
        assert_eq!(
            refs(m.candidates("registry.example/team/x@sha256:abc").unwrap()),
            ["idms.local/team/x@sha256:abc"]
        );
        let refused = m.candidates("registry.example/team/x:1").unwrap_err();
        assert!(
            refused.to_string().contains("ImageDigestMirrorSet/never"),
            "{refused}"
        );
        live.set_rules(&[]);
        assert_eq!(
            refs(
                live.current()
                    .candidates("registry.example/team/x:1")
                    .unwrap()
            ),
            ["registry.example/team/x:1"]
        );
    }
}
