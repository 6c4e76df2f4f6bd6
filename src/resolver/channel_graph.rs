//! One channel's upgrade graph, built with petgraph: which entry is the head, the order
//! "nearest to the head", which entries can be installed, and where an installed CSV may
//! upgrade to. Upstream: `resolver.go` `sortChannel` and `cache/predicates.go`.

use std::collections::{BTreeSet, HashMap};

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use semver::Version;

use crate::catalog::fbc::Channel;
use crate::catalog::semver_range::VersionRange;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edge {
    Replaces,
    Skips,
}

impl ChannelGraph {
    pub fn build(channel: &Channel) -> Result<ChannelGraph, ChannelGraphError> {
        if channel.entries.is_empty() {
            return Err(ChannelGraphError::Empty);
        }
        let mut graph: DiGraph<usize, Edge> = DiGraph::new();
        let mut node_of: HashMap<&str, NodeIndex> = HashMap::new();
        for (i, entry) in channel.entries.iter().enumerate() {
            if node_of
                .insert(entry.name.as_str(), graph.add_node(i))
                .is_some()
            {
                return Err(ChannelGraphError::DuplicateEntry(entry.name.clone()));
            }
        }
        // Edges point from the newer entry to the one it replaces or skips; names outside
        // the channel are allowed (a channel may start by replacing a pruned bundle).
        for entry in &channel.entries {
            let from = node_of[entry.name.as_str()];
            if let Some(&to) = node_of.get(entry.replaces.as_str()) {
                graph.add_edge(from, to, Edge::Replaces);
            }
            for skipped in &entry.skips {
                if let Some(&to) = node_of.get(skipped.as_str()) {
                    graph.add_edge(from, to, Edge::Skips);
                }
            }
        }

        let cycle = tarjan_scc(&graph)
            .into_iter()
            .find(|scc| scc.len() > 1 || graph.contains_edge(scc[0], scc[0]));
        if let Some(scc) = cycle {
            let mut names: Vec<String> = scc
                .iter()
                .map(|n| channel.entries[graph[*n]].name.clone())
                .collect();
            names.sort();
            return Err(ChannelGraphError::Cycle(names));
        }
        let heads: Vec<NodeIndex> = graph
            .node_indices()
            .filter(|n| {
                graph
                    .neighbors_directed(*n, petgraph::Direction::Incoming)
                    .next()
                    .is_none()
            })
            .collect();
        if heads.len() > 1 {
            let mut names: Vec<String> = heads
                .iter()
                .map(|n| channel.entries[graph[*n]].name.clone())
                .collect();
            names.sort();
            return Err(ChannelGraphError::MultipleHeads(names));
        }
        // No cycle means at least one node without incoming edges.
        let head = heads[0];

        let skipped: BTreeSet<&str> = channel
            .entries
            .iter()
            .flat_map(|e| e.skips.iter().map(String::as_str))
            .collect();
        let mut on_chain = vec![false; channel.entries.len()];
        let mut installable = Vec::new();
        let mut current = Some(head);
        while let Some(node) = current {
            let entry = &channel.entries[graph[node]];
            on_chain[graph[node]] = true;
            if !skipped.contains(entry.name.as_str()) {
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
            current = graph
                .edges(node)
                .find(|e| *e.weight() == Edge::Replaces)
                .map(|e| petgraph::visit::EdgeRef::target(&e));
        }
        let not_installable = channel
            .entries
            .iter()
            .enumerate()
            .filter(|(i, e)| !on_chain[*i] || skipped.contains(e.name.as_str()))
            .map(|(i, e)| {
                let why = if skipped.contains(e.name.as_str()) {
                    "it is skipped by another entry"
                } else if on_chain[i] {
                    unreachable!()
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

    /// Entries that may replace the installed CSV `from`, nearest to the head first.
    pub fn upgrades_from<'a>(
        &'a self,
        from: &'a str,
        from_version: &'a Version,
    ) -> impl Iterator<Item = &'a GraphEntry> + 'a {
        self.installable
            .iter()
            .filter(move |e| e.upgrades_from(from, from_version))
    }
}
