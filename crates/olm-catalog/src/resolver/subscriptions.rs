//! What each Subscription may resolve to, upstream's `getSubscriptionVariables`: candidates
//! come only from the Subscription's own catalog and channel; with an installed CSV, only
//! entries that replace it, skip it, or whose skipRange holds its version, nearest to the
//! head first, and staying put is the fallback; with nothing installed, `startingCSV`, or
//! the channel's installable entries head first.

use super::channel_graph::ChannelGraph;
use super::error::{ResolveError, SubscriptionError};
use super::index::{BundleId, CatalogIndex, PackageInfo};
use super::input::{Namespace, Subscription};

#[derive(Clone, Debug)]
pub struct Target {
    pub subscription: usize,
    pub catalog: usize,
    pub channel: String,
    /// The installed CSV of the subscribed package (index into `Namespace::installed`).
    pub installed: Option<usize>,
    /// Bundles to move to, most preferred first; `installed` stays the last resort.
    pub candidates: Vec<BundleId>,
    /// The most preferred bundle the Subscription's version policy kept out, and the
    /// policy that did.
    pub held: Option<(BundleId, String)>,
}

pub fn target(
    index: &CatalogIndex,
    namespace: &Namespace,
    subscription: usize,
) -> Result<Target, ResolveError> {
    let sub = &namespace.subscriptions[subscription];
    let name = || sub.name.clone();
    let catalog =
        index
            .catalog_id(&sub.source)
            .ok_or_else(|| SubscriptionError::UnknownCatalog {
                subscription: name(),
                catalog: sub.source.clone(),
                known: index
                    .catalogs
                    .iter()
                    .map(|c| c.source.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
    let package = index.catalogs[catalog]
        .packages
        .get(&sub.package)
        .ok_or_else(|| SubscriptionError::PackageNotFound {
            subscription: name(),
            package: sub.package.clone(),
            catalog: sub.source.clone(),
        })?;
    // An empty channel is no channel, as upstream reads `spec.channel: ""`.
    let channel = match sub.channel.as_deref() {
        None | Some("") => package.default_channel.clone(),
        Some(channel) => channel.to_string(),
    };
    if channel.is_empty() {
        return Err(SubscriptionError::NoDefaultChannel {
            subscription: name(),
            package: sub.package.clone(),
            catalog: sub.source.clone(),
        }
        .into());
    }
    let graph = channel_graph(sub, package, &channel)?;
    let installed = namespace
        .installed
        .iter()
        .position(|csv| csv.package == sub.package);
    let usable = |entry: &str| {
        package
            .bundles
            .get(entry)
            .copied()
            .filter(|b| index.bundles[*b].usable())
    };

    let candidates: Vec<BundleId> = match installed {
        Some(i) => {
            let csv = &namespace.installed[i];
            graph
                .upgrades_from(&csv.name, &csv.version)
                .filter_map(|e| usable(&e.name))
                .collect()
        }
        None => fresh_candidates(index, sub, package, graph, &channel, usable)?,
    };
    let (candidates, held) = allowed(index, sub, candidates);
    if installed.is_none()
        && candidates.is_empty()
        && let Some((bundle, policy)) = &held
    {
        return Err(SubscriptionError::NoAllowedVersion {
            subscription: name(),
            package: sub.package.clone(),
            channel,
            policy: policy.clone(),
            newest: index.bundles[*bundle].name.clone(),
        }
        .into());
    }
    if installed.is_none() && candidates.is_empty() {
        return Err(SubscriptionError::NothingInstallable {
            subscription: name(),
            package: sub.package.clone(),
            channel,
            catalog: sub.source.clone(),
            reasons: unusable_reasons(index, package, graph),
        }
        .into());
    }
    Ok(Target {
        subscription,
        catalog,
        channel,
        installed,
        candidates,
        held,
    })
}

/// With nothing installed: `startingCSV`, or the channel's installable entries head first.
fn fresh_candidates(
    index: &CatalogIndex,
    sub: &Subscription,
    package: &PackageInfo,
    graph: &ChannelGraph,
    channel: &str,
    usable: impl Fn(&str) -> Option<BundleId>,
) -> Result<Vec<BundleId>, ResolveError> {
    Ok(match &sub.starting_csv {
        Some(csv) => vec![starting_bundle(index, sub, package, graph, channel, csv)?],
        None => graph
            .installable()
            .iter()
            .filter_map(|e| usable(&e.name))
            .collect(),
    })
}

/// The candidates the Subscription's version policy allows, in order, and the most
/// preferred one it kept out (with the policy's words).
fn allowed(
    index: &CatalogIndex,
    sub: &Subscription,
    candidates: Vec<BundleId>,
) -> (Vec<BundleId>, Option<(BundleId, String)>) {
    if sub.versions.is_empty() {
        return (candidates, None);
    }
    let mut held = None;
    let mut kept = Vec::with_capacity(candidates.len());
    for bundle in candidates {
        let refusal = index.bundles[bundle]
            .version
            .as_ref()
            .and_then(|v| sub.versions.refusal(v));
        match refusal {
            // Held back only when nothing allowed is preferred to it.
            Some(policy) if held.is_none() && kept.is_empty() => {
                held = Some((bundle, policy.to_string()));
            }
            Some(_) => {}
            None => kept.push(bundle),
        }
    }
    (kept, held)
}

/// Why each installable entry of `graph` cannot be installed, `; `-separated.
fn unusable_reasons(index: &CatalogIndex, package: &PackageInfo, graph: &ChannelGraph) -> String {
    let reasons: Vec<String> = graph
        .installable()
        .iter()
        .map(|e| match package.bundles.get(&e.name) {
            Some(b) => format!(
                "{}: {}",
                e.name,
                index.bundles[*b].unusable_reason().unwrap_or("unusable")
            ),
            None => format!("{}: no olm.bundle with that name", e.name),
        })
        .collect();
    reasons.join("; ")
}

fn channel_graph<'p>(
    sub: &Subscription,
    package: &'p PackageInfo,
    channel: &str,
) -> Result<&'p ChannelGraph, ResolveError> {
    let problem = match package.channels.get(channel) {
        None => SubscriptionError::ChannelNotFound {
            subscription: sub.name.clone(),
            package: sub.package.clone(),
            channel: channel.to_string(),
            catalog: sub.source.clone(),
            available: package
                .channels
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        },
        Some(Err(problem)) => SubscriptionError::InvalidChannel {
            subscription: sub.name.clone(),
            package: sub.package.clone(),
            channel: channel.to_string(),
            catalog: sub.source.clone(),
            problem: problem.clone(),
        },
        Some(Ok(graph)) => return Ok(graph),
    };
    Err(problem.into())
}

fn starting_bundle(
    index: &CatalogIndex,
    sub: &Subscription,
    package: &PackageInfo,
    graph: &ChannelGraph,
    channel: &str,
    csv: &str,
) -> Result<BundleId, ResolveError> {
    let not_installable = |reason: String| -> ResolveError {
        SubscriptionError::StartingCsvNotInstallable {
            subscription: sub.name.clone(),
            csv: csv.to_string(),
            package: sub.package.clone(),
            reason,
        }
        .into()
    };
    if graph.distance(csv).is_none() {
        return Err(match graph.why_not_installable(csv) {
            Some(why) => not_installable(format!("in channel {channel:?} {why}")),
            None => SubscriptionError::StartingCsvNotFound {
                subscription: sub.name.clone(),
                csv: csv.to_string(),
                package: sub.package.clone(),
                channel: channel.to_string(),
                catalog: sub.source.clone(),
            }
            .into(),
        });
    }
    let bundle = *package
        .bundles
        .get(csv)
        .ok_or_else(|| not_installable("the catalog has no olm.bundle with that name".into()))?;
    match index.bundles[bundle].unusable_reason() {
        Some(why) => Err(not_installable(why.to_string())),
        None => Ok(bundle),
    }
}
