//! The `olm.semver` catalog template, as `opm alpha render-template semver` implements it
//! (operator-registry `alpha/template/semver`).
//!
//! A template lists bundle images under three channel archetypes, `candidate`, `fast` and
//! `stable` (in increasing stability). Rendering generates, per archetype, one channel per
//! major version (`stable-v1`) and/or per minor version (`stable-v1.2`), links the entries
//! with `replaces`/`skips`, and picks the package's default channel:
//!
//! * Edges: within one archetype, one kind of channel and one major version, taking the
//!   bundles in semver order, the highest-patch bundle of each minor stream `replaces` the
//!   highest-patch bundle of the previous minor stream and `skips` every other lower bundle
//!   of that major version. No other entry gets an edge (the very last bundle of a group is
//!   treated as a stream head), and nothing crosses a major version or an archetype.
//! * Default channel: opm keeps a "high-water" channel, compared when each channel is
//!   *created* (so with the version of the channel's lowest bundle): the more stable
//!   archetype wins, then the higher version, then the preferred channel kind
//!   (`defaultChannelTypePreference`), then minor over major. In practice this is the channel
//!   created last in the most stable non-empty archetype; with both kinds generated, a
//!   minor channel opened by a newer bundle beats the major channel even when `major` is
//!   preferred (e.g. `stable-v2.1` over `stable-v2`).
//! * The package's description and icon come from the CSV of the default channel's head
//!   bundle, found in its `olm.bundle.object` properties (or, for the description only,
//!   its `olm.csv.metadata`).
//!
//! Differences from opm, all in cases where opm would write an invalid catalog or depends on
//! Go map order: bundles come out sorted by name (opm's writer does the same); two
//! different images that render to the same bundle name are an error; only the
//! `olm.package` property is parsed (opm parses every known property type).
//!
//! Files: `parse.rs` reads a template, `render.rs` turns it into FBC, `channels.rs`
//! generates the channels and links their entries, `tests.rs` tests all of it.

pub use model::{
    BundleEntry, ChannelBundles, FieldError, PREFER_MAJOR, PREFER_MINOR, SCHEMA, SemverTemplate,
    TemplateError,
};
pub use parse::parse;
pub use render::render;

mod channels;
mod model;
mod parse;
mod render;
#[cfg(test)]
mod tests;
