pub mod semver;
