//! Code generated from `proto/registry.proto` by tonic-prost-build, checked in so that a
//! normal build needs neither `protoc` nor a protobuf compiler crate.
//!
//! To refresh after editing the proto: `OLM_REGENERATE=1 cargo test --lib registry::generated`.
//! Without that variable the test regenerates into a temporary directory and fails if the
//! checked-in files differ.

#![allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]

#[rustfmt::skip]
#[path = "api.rs"]
mod api_generated;
pub use api_generated::*;

/// The encoded `FileDescriptorSet` of `registry.proto` and its imports, for reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("registry_descriptor.bin");

#[cfg(test)]
mod tests {
    use std::path::Path;

    use prost::Message;

    #[test]
    fn checked_in_code_matches_the_proto() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut fds = protox::compile([root.join("proto/registry.proto")], [root.join("proto")])
            .expect("proto compiles");
        // Source info carries absolute paths and comments' spans; reflection does not need it.
        for file in &mut fds.file {
            file.source_code_info = None;
        }
        let descriptor = fds.encode_to_vec();
        let out = std::env::temp_dir().join(format!("olm-registry-gen-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .out_dir(&out)
            .compile_fds(fds)
            .expect("code generation");
        let generated = std::fs::read_to_string(out.join("api.rs")).unwrap();
        std::fs::remove_dir_all(&out).ok();
        let dir = root.join("src/registry/generated");
        if std::env::var_os("OLM_REGENERATE").is_some() {
            std::fs::write(dir.join("api.rs"), &generated).unwrap();
            std::fs::write(dir.join("registry_descriptor.bin"), &descriptor).unwrap();
            return;
        }
        let checked_in = std::fs::read_to_string(dir.join("api.rs")).unwrap_or_default();
        assert!(
            checked_in == generated,
            "src/registry/generated/api.rs is stale: run OLM_REGENERATE=1 cargo test --lib registry::generated"
        );
        assert!(
            super::FILE_DESCRIPTOR_SET == descriptor.as_slice(),
            "registry_descriptor.bin is stale: run OLM_REGENERATE=1 cargo test --lib registry::generated"
        );
    }
}
