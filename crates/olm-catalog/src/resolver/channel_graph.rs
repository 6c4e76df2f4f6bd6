//! One channel's upgrade graph, built on [`UpgradeEdges`]: which entry is the head, the
//! order "nearest to the head", which entries can be installed, and where an installed CSV
//! may upgrade to. Upstream: `resolver.go` `sortChannel` and `cache/predicates.go`.

use std::collections::{HashMap, HashSet};

use semver::Version;

use crate::catalog::model::fbc::Channel;
use crate::catalog::model::semver_range::VersionRange;
use crate::catalog::model::upgrade_edges::{HeadError, UpgradeEdges};

/// Why a channel cannot be used at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChannelGraphError {
    #[error("channel has no entries")]
    Empty,
    #[error("entry {0:?} appears more than once")]
    DuplicateEntry(String),
    #[error(
        "found multiple channel heads {0:?}: each of them is neither replaced nor skipped by another entry; check their replaces/skips/skipRange"
    )]
    MultipleHeads(Vec<String>),
    #[error("a cycle exists in the upgrade chain through {0:?}")]
    Cycle(Vec<String>),
    #[error("entry {entry:?} has an invalid olm.skipRange: {problem}")]
    BadSkipRange { entry: String, problem: String },
}

/// An entry as the resolver needs it.
#[derive(Clone, Debug)]
pub struct GraphEntry {
    pub name: String,
    pub replaces: String,
    pub skips: Vec<String>,
    pub skip_range: Option<VersionRange>,
}

impl GraphEntry {
    /// Whether this entry is an upgrade edge out of `from` (replaces it, skips it, or its
    /// skipRange holds `from`'s version).
    pub fn upgrades_from(&self, from: &str, from_version: &Version) -> bool {
        self.name != from
            && (self.replaces == from
                || self.skips.iter().any(|s| s == from)
                || self
                    .skip_range
                    .as_ref()
                    .is_some_and(|r| r.contains(from_version)))
    }
}

#[derive(Clone, Debug)]
pub struct ChannelGraph {
    /// Installable entries, head first, following `replaces` back from the head.
    installable: Vec<GraphEntry>,
    distance: HashMap<String, usize>,
    /// Entries that exist but can never be installed, with the reason.
    not_installable: Vec<(String, &'static str)>,
}

impl ChannelGraph {
    pub fn build(channel: &Channel) -> Result<ChannelGraph, ChannelGraphError> {
        if channel.entries.is_empty() {
            return Err(ChannelGraphError::Empty);
        }
        let mut names = HashSet::new();
        if let Some(twice) = channel.entries.iter().find(|e| !names.insert(&e.name)) {
            return Err(ChannelGraphError::DuplicateEntry(twice.name.clone()));
        }
        // `replaces` and `skips` may name entries outside the channel (a channel may start
        // by replacing a pruned bundle); those lead nowhere.
        let edges = UpgradeEdges::new(&channel.entries);
        let owned = |names: Vec<&str>| names.into_iter().map(String::from).collect();
        if let Some(cycle) = edges.cycle() {
            return Err(ChannelGraphError::Cycle(owned(cycle)));
        }
        let head = match edges.head() {
            Ok(head) => head,
            Err(HeadError::MultipleHeads(heads)) => {
                return Err(ChannelGraphError::MultipleHeads(owned(heads)));
            }
            Err(HeadError::NoHead) => unreachable!("without a cycle some entry has no edge in"),
        };
        let chain = edges
            .replaces_chain(head)
            .expect("without a cycle the replaces chain ends");

        let mut installable = Vec::new();
        for name in chain.iter().filter(|n| !edges.is_skipped(n)) {
            let entry = edges.entry(name).expect("the chain holds entries");
            let skip_range = if entry.skip_range.trim().is_empty() {
                None
            } else {
                Some(VersionRange::parse(&entry.skip_range).map_err(|e| {
                    ChannelGraphError::BadSkipRange {
                        entry: entry.name.clone(),
                        problem: e.to_string(),
                    }
                })?)
            };
            installable.push(GraphEntry {
                name: entry.name.clone(),
                replaces: entry.replaces.clone(),
                skips: entry.skips.clone(),
                skip_range,
            });
        }
        let on_chain: HashSet<&str> = chain.into_iter().collect();
        let not_installable = channel
            .entries
            .iter()
            .filter(|e| !on_chain.contains(e.name.as_str()) || edges.is_skipped(&e.name))
            .map(|e| {
                let why = if edges.is_skipped(&e.name) {
                    "it is skipped by another entry"
                } else {
                    "it is only reachable through skipped entries, not on the replaces chain from the head"
                };
                (e.name.clone(), why)
            })
            .collect();
        let distance = installable
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Ok(ChannelGraph {
            installable,
            distance,
            not_installable,
        })
    }

    /// The entry nothing replaces or skips.
    pub fn head(&self) -> Option<&GraphEntry> {
        self.installable.first()
    }

    /// Installable entries, nearest to the head first.
    pub fn installable(&self) -> &[GraphEntry] {
        &self.installable
    }

    /// Hops from the head along `replaces`, for installable entries.
    pub fn distance(&self, name: &str) -> Option<usize> {
        self.distance.get(name).copied()
    }

    /// Why an entry of this channel can never be installed, if it cannot.
    pub fn why_not_installable(&self, name: &str) -> Option<&'static str> {
        self.not_installable
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, why)| *why)
    }

    /// Entries that may replace the installed CSV `from`, nearest to the head first. When
    /// `from` is on the chain, only entries nearer the head than it: a skipRange like
    /// `>=0.12.0` on every entry (medik8s operators, debezium) also holds the head's own
    /// version, and taking an older entry for an upgrade moved installs back and forth
    /// for ever.
    pub fn upgrades_from<'a>(
        &'a self,
        from: &'a str,
        from_version: &'a Version,
    ) -> impl Iterator<Item = &'a GraphEntry> + 'a {
        let nearer = self.distance(from).unwrap_or(usize::MAX);
        self.installable
            .iter()
            .take(nearer)
            .filter(move |e| e.upgrades_from(from, from_version))
    }
}
