//! Text decoding for untrusted catalog input: YAML under a nesting limit (with a fast path
//! for plain manifests), Go's JSON rules, compact JSON, and the size limits every reader
//! enforces. Its one error is [`yaml_nesting::YamlError`].

pub mod compact_json;
pub(in crate::catalog) mod fast_yaml;
pub mod go_json;
pub mod limits;
pub mod yaml_nesting;
