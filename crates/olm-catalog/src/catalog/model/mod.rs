//! The file-based catalog (FBC) model, with blang's version ranges and a channel's upgrade
//! edges. Its one error is [`semver_range::RangeError`].

pub mod fbc;
pub mod semver_range;
pub mod upgrade_edges;
