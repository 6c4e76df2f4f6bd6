//! opm's channel generation and linking: one channel per archetype and major or minor
//! version, the default channel by high-water mark, and the `replaces`/`skips` edges.

use std::collections::{BTreeSet, HashMap};

use semver::Version;

use super::model::{Archetype, Kind, Settings};
use crate::catalog::model::fbc::{Channel, ChannelEntry, SCHEMA_CHANNEL};

/// opm's `highwaterChannel`.
struct Highwater {
    archetype: Archetype,
    kind: Kind,
    version: Version,
    name: String,
}

impl Highwater {
    fn gt(&self, other: &Highwater, preference: Kind) -> bool {
        if self.archetype != other.archetype {
            return self.archetype > other.archetype;
        }
        if !self.version.cmp_precedence(&other.version).is_eq() {
            return self.version.cmp_precedence(&other.version).is_gt();
        }
        if self.kind != other.kind {
            if self.kind == preference {
                return true;
            }
            if other.kind == preference {
                return false;
            }
            return self.kind.priority() > other.kind.priority();
        }
        false
    }
}

/// One channel entry with what linking needs to know about it (opm's `entryTuple`).
struct Placed {
    archetype: Archetype,
    kind: Kind,
    channel: usize,
    index: usize,
    name: String,
    version: Version,
}

/// opm's `generateChannels` + `linkChannels`: the channels (unsorted) and the default
/// channel's name.
pub(super) fn generate_channels(
    package: &str,
    settings: &Settings,
    versions: Vec<(Archetype, Vec<(String, Version)>)>,
) -> (Vec<Channel>, String) {
    let mut channels: Vec<Channel> = Vec::new();
    let mut channel_index: HashMap<String, usize> = HashMap::new();
    let mut placed: Vec<Placed> = Vec::new();
    let mut highwater = Highwater {
        archetype: Archetype::Candidate,
        kind: Kind::Default,
        version: Version::new(0, 0, 0),
        name: String::new(),
    };

    for (archetype, mut bundles) in versions {
        bundles.sort_by(|a, b| a.1.cmp_precedence(&b.1));
        for (name, version) in bundles {
            let mut kinds = Vec::with_capacity(2);
            if settings.major {
                kinds.push((
                    Kind::Major,
                    format!("{}-v{}", archetype.name(), version.major),
                ));
            }
            if settings.minor {
                kinds.push((
                    Kind::Minor,
                    format!("{}-v{}.{}", archetype.name(), version.major, version.minor),
                ));
            }
            for (kind, channel_name) in kinds {
                let channel = match channel_index.get(&channel_name) {
                    Some(&i) => i,
                    None => {
                        let candidate = Highwater {
                            archetype,
                            kind,
                            version: version.clone(),
                            name: channel_name.clone(),
                        };
                        if candidate.gt(&highwater, settings.preference) {
                            highwater = candidate;
                        }
                        channels.push(Channel {
                            schema: SCHEMA_CHANNEL.into(),
                            name: channel_name.clone(),
                            package: package.into(),
                            ..Default::default()
                        });
                        channel_index.insert(channel_name, channels.len() - 1);
                        channels.len() - 1
                    }
                };
                channels[channel].entries.push(ChannelEntry {
                    name: name.clone(),
                    ..Default::default()
                });
                let index = channels[channel].entries.len() - 1;
                placed.push(Placed {
                    archetype,
                    kind,
                    channel,
                    index,
                    name: name.clone(),
                    version: version.clone(),
                });
            }
        }
    }

    link(&mut channels, placed);
    (channels, highwater.name)
}

/// opm's `linkChannels`: walk all entries ordered by archetype, kind and version; at each
/// change of minor (or anything bigger) the previous entry, the head of its minor stream,
/// gets `replaces` = the head of the stream before it and `skips` = the rest of the major
/// version so far; archetype, kind and major changes reset what is carried.
fn link(channels: &mut [Channel], mut entries: Vec<Placed>) {
    entries.sort_by(|a, b| {
        a.archetype
            .cmp(&b.archetype)
            .then(a.kind.priority().cmp(&b.kind.priority()))
            .then(a.version.cmp_precedence(&b.version))
    });

    let finalize =
        |channels: &mut [Channel], at: &Placed, replaces: &str, skips: &BTreeSet<String>| {
            let entry = &mut channels[at.channel].entries[at.index];
            entry.replaces = replaces.to_string();
            let skips: Vec<String> = skips.iter().filter(|s| *s != replaces).cloned().collect();
            if !skips.is_empty() {
                entry.skips = skips;
            }
        };

    let mut prev_z_max = String::new();
    let mut skips: BTreeSet<String> = BTreeSet::new();
    for pair in entries.windows(2) {
        let (prev, cur) = (&pair[0], &pair[1]);
        let arch_change = prev.archetype != cur.archetype;
        let kind_change = prev.kind != cur.kind;
        let x_change = prev.version.major != cur.version.major;
        let y_change =
            (prev.version.major, prev.version.minor) != (cur.version.major, cur.version.minor);

        if arch_change || kind_change || x_change || y_change {
            finalize(channels, prev, &prev_z_max, &skips);
        }
        if arch_change || kind_change || x_change {
            skips.clear();
            prev_z_max.clear();
        } else {
            if y_change {
                prev_z_max = prev.name.clone();
            }
            skips.insert(prev.name.clone());
        }
    }

    if let [.., penultimate, last] = entries.as_slice()
        && penultimate.archetype == last.archetype
        && penultimate.kind == last.kind
        && penultimate.version.major == last.version.major
    {
        finalize(channels, last, &prev_z_max, &skips);
    }
}
