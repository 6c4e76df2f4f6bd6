//! The upgrade edges of one channel, as upstream reads them: an entry's `replaces` and
//! `skips` point at older entries (names outside the channel are allowed and lead nowhere;
//! `skipRange` adds no edge). From them: the channel's head (the entry nothing replaces or
//! skips, opm's `Channel.Head`), the `replaces` chain down from it, and cycles.
//!
//! Validation, the resolver's channel graph and the registry index all build on this and
//! word the failures their own way.

use std::collections::{HashMap, HashSet};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;

use super::fbc::ChannelEntry;

/// Why a channel has no single head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadError<'a> {
    /// Every entry is replaced or skipped by another.
    NoHead,
    /// Several entries are neither replaced nor skipped; their names, sorted.
    MultipleHeads(Vec<&'a str>),
}

/// One channel's entries and the names its edges point at.
#[derive(Clone, Debug)]
pub struct UpgradeEdges<'a> {
    entries: &'a [ChannelEntry],
    /// Entry by name; of entries that share a name, the last.
    by_name: HashMap<&'a str, &'a ChannelEntry>,
    /// Every name some entry replaces or skips.
    incoming: HashSet<&'a str>,
    /// Every name some entry skips.
    skipped: HashSet<&'a str>,
}

impl<'a> UpgradeEdges<'a> {
    pub fn new(entries: &'a [ChannelEntry]) -> Self {
        let mut incoming = HashSet::new();
        let mut skipped = HashSet::new();
        for e in entries {
            if !e.replaces.is_empty() {
                incoming.insert(e.replaces.as_str());
            }
            incoming.extend(e.skips.iter().map(String::as_str));
            skipped.extend(e.skips.iter().map(String::as_str));
        }
        UpgradeEdges {
            entries,
            by_name: entries.iter().map(|e| (e.name.as_str(), e)).collect(),
            incoming,
            skipped,
        }
    }

    /// The names no entry replaces or skips, sorted, each once.
    pub fn heads(&self) -> Vec<&'a str> {
        let mut heads: Vec<&str> = self
            .entries
            .iter()
            .map(|e| e.name.as_str())
            .filter(|n| !self.incoming.contains(n))
            .collect();
        heads.sort_unstable();
        heads.dedup();
        heads
    }

    /// The one entry no entry replaces or skips.
    pub fn head(&self) -> Result<&'a str, HeadError<'a>> {
        let mut heads = self.heads();
        match heads.len() {
            0 => Err(HeadError::NoHead),
            1 => Ok(heads.remove(0)),
            _ => Err(HeadError::MultipleHeads(heads)),
        }
    }

    /// The entry named `name` (of entries that share a name, the last).
    pub fn entry(&self, name: &str) -> Option<&'a ChannelEntry> {
        self.by_name.get(name).copied()
    }

    /// Whether some entry of the channel skips `name`.
    pub fn is_skipped(&self, name: &str) -> bool {
        self.skipped.contains(name)
    }

    /// The entries from `from` down its `replaces` links, `from` first, as far as they name
    /// entries of the channel. When a name comes round again, `Err` holds the cycle: the
    /// names from its first visit to the repeat, which closes it.
    pub fn replaces_chain(&self, from: &'a str) -> Result<Vec<&'a str>, Vec<&'a str>> {
        let mut chain = vec![from];
        let mut seen: HashSet<&str> = HashSet::from([from]);
        let mut current = from;
        while let Some(entry) = self.by_name.get(current) {
            let next = entry.replaces.as_str();
            if next.is_empty() || !self.by_name.contains_key(next) {
                break;
            }
            if !seen.insert(next) {
                let start = chain.iter().position(|n| *n == next).unwrap_or(0);
                let mut cycle = chain[start..].to_vec();
                cycle.push(next);
                return Err(cycle);
            }
            chain.push(next);
            current = next;
        }
        Ok(chain)
    }

    /// A set of entries that reach each other through `replaces` and `skips` (an entry that
    /// replaces or skips itself counts), its names sorted; `None` when there is no cycle.
    /// Entries that share a name count as one.
    pub fn cycle(&self) -> Option<Vec<&'a str>> {
        let mut graph: DiGraph<&str, ()> = DiGraph::new();
        let mut node_of = HashMap::new();
        for e in self.entries {
            node_of
                .entry(e.name.as_str())
                .or_insert_with(|| graph.add_node(e.name.as_str()));
        }
        for e in self.entries {
            let from = node_of[e.name.as_str()];
            let targets = std::iter::once(&e.replaces).chain(&e.skips);
            for to in targets.filter_map(|t| node_of.get(t.as_str())) {
                graph.add_edge(from, *to, ());
            }
        }
        let scc = tarjan_scc(&graph)
            .into_iter()
            .find(|scc| scc.len() > 1 || graph.contains_edge(scc[0], scc[0]))?;
        let mut names: Vec<&str> = scc.iter().map(|n| graph[*n]).collect();
        names.sort_unstable();
        Some(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, replaces: &str, skips: &[&str], skip_range: &str) -> ChannelEntry {
        ChannelEntry {
            name: name.into(),
            replaces: replaces.into(),
            skips: skips.iter().map(std::string::ToString::to_string).collect(),
            skip_range: skip_range.into(),
        }
    }

    fn replaces(name: &str, replaces: &str) -> ChannelEntry {
        entry(name, replaces, &[], "")
    }

    #[test]
    fn a_linear_channel_has_one_head_and_one_chain() {
        let entries = [
            replaces("v1", ""),
            replaces("v3", "v2"),
            replaces("v2", "v1"),
        ];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.head(), Ok("v3"));
        assert_eq!(edges.replaces_chain("v3"), Ok(vec!["v3", "v2", "v1"]));
        assert_eq!(edges.replaces_chain("v2"), Ok(vec!["v2", "v1"]));
        assert_eq!(edges.cycle(), None);
        assert_eq!(edges.entry("v2").map(|e| e.replaces.as_str()), Some("v1"));
        assert!(edges.entry("v4").is_none());
    }

    #[test]
    fn two_heads_are_named_in_order() {
        let entries = [
            replaces("b.v2", "a"),
            replaces("a.v1", ""),
            replaces("c", ""),
        ];
        assert_eq!(
            UpgradeEdges::new(&entries).head(),
            Err(HeadError::MultipleHeads(vec!["a.v1", "b.v2", "c"]))
        );
    }

    #[test]
    fn skips_remove_heads_but_skip_range_does_not() {
        let entries = [
            entry("v1", "", &[], ""),
            entry("v2", "", &["v1"], ""),
            entry("v3", "", &[], ">=2.0.0 <3.0.0"),
        ];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(
            edges.head(),
            Err(HeadError::MultipleHeads(vec!["v2", "v3"]))
        );
        assert!(edges.is_skipped("v1") && !edges.is_skipped("v2"));
        // A skip is no `replaces` link: the chain from v2 stops at once.
        assert_eq!(edges.replaces_chain("v2"), Ok(vec!["v2"]));
    }

    #[test]
    fn a_replaces_naming_a_missing_entry_ends_the_chain() {
        let entries = [replaces("v3", "v2"), replaces("v2", "gone")];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.head(), Ok("v3"));
        assert_eq!(edges.replaces_chain("v3"), Ok(vec!["v3", "v2"]));
        // A missing name is no head either: only entries are.
        assert!(!edges.heads().contains(&"gone"));
        assert_eq!(edges.cycle(), None);
    }

    #[test]
    fn cycles_leave_no_head_and_show_in_the_chain() {
        let entries = [replaces("a", "b"), replaces("b", "c"), replaces("c", "a")];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.head(), Err(HeadError::NoHead));
        assert_eq!(edges.replaces_chain("a"), Err(vec!["a", "b", "c", "a"]));
        assert_eq!(edges.cycle(), Some(vec!["a", "b", "c"]));

        // Below a head: the chain names the loop only.
        let entries = [replaces("h", "a"), replaces("a", "b"), replaces("b", "a")];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.head(), Ok("h"));
        assert_eq!(edges.replaces_chain("h"), Err(vec!["a", "b", "a"]));
        assert_eq!(edges.cycle(), Some(vec!["a", "b"]));

        // An entry that replaces itself.
        let entries = [replaces("h", "a"), replaces("a", "a")];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.replaces_chain("h"), Err(vec!["a", "a"]));
        assert_eq!(edges.cycle(), Some(vec!["a"]));
    }

    #[test]
    fn cycles_through_skips_or_off_the_chain_are_found_too() {
        // v2 replaces v1, v1 skips v2: no replaces loop, but an upgrade cycle.
        let entries = [
            entry("v3", "v2", &[], ""),
            entry("v2", "v1", &[], ""),
            entry("v1", "", &["v2"], ""),
        ];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.replaces_chain("v3"), Ok(vec!["v3", "v2", "v1"]));
        assert_eq!(edges.cycle(), Some(vec!["v1", "v2"]));

        // A loop no chain from the head reaches.
        let entries = [replaces("h", ""), replaces("x", "y"), replaces("y", "x")];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.head(), Ok("h"));
        assert_eq!(edges.replaces_chain("h"), Ok(vec!["h"]));
        assert_eq!(edges.cycle(), Some(vec!["x", "y"]));
    }

    #[test]
    fn duplicate_names_count_once() {
        let entries = [replaces("v1", ""), replaces("v2", "v1"), replaces("v2", "")];
        let edges = UpgradeEdges::new(&entries);
        assert_eq!(edges.head(), Ok("v2"));
        // The last of the duplicates decides where the chain goes.
        assert_eq!(edges.replaces_chain("v2"), Ok(vec!["v2"]));
    }
}
