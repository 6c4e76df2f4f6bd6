//! Images of the binaries this repository builds (`olm`, `olm-registry`, the operators and
//! the reverse-words app), described as data in `operators/images.yaml` and built by the
//! same code as bundle and catalog images: one reproducible layer, an entrypoint, labels.
//!
//! No musl target is installed here, so the binaries are glibc executables: the layer also
//! carries the shared libraries `ldd` names (the loader at its own path included), and the
//! image runs from scratch with no base image. A static binary gets no libraries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::input::{BuildError, Content, FileEntry, ImageInput};

/// `operators/images.yaml`.
#[derive(Clone, Debug, Deserialize)]
pub struct ImageList {
    /// Where the images are published (`quay.io/olm-rs`); CSVs name images under it.
    pub registry: String,
    pub images: Vec<ImageSpec>,
}

/// One image: which binary of which workspace member, and how it runs.
#[derive(Clone, Debug, Deserialize)]
pub struct ImageSpec {
    pub name: String,
    /// The workspace member's directory, relative to the repository root.
    #[serde(rename = "crate")]
    pub krate: String,
    pub binary: String,
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub ports: Vec<u16>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Files of the building machine copied into the image at the same path: the CA bundle
    /// of an image that talks TLS to registries (a scratch image has none of its own).
    #[serde(default, rename = "host-files")]
    pub host_files: Vec<PathBuf>,
}

/// The user the images run as (no /etc/passwd needed for a numeric one).
pub const NON_ROOT_USER: &str = "65532:65532";

pub fn read_image_list(path: &Path) -> Result<ImageList, BuildError> {
    let text = std::fs::read_to_string(path).map_err(|source| BuildError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|e| BuildError::Input {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The `[package]` version of the crate in `dir` (the image tag is `v<version>`).
pub fn crate_version(dir: &Path) -> Result<String, BuildError> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|source| BuildError::Read {
        path: manifest.clone(),
        source,
    })?;
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some(value) = line.strip_prefix("version")
            && let Some(value) = value.trim_start().strip_prefix('=')
        {
            return Ok(value.trim().trim_matches('"').to_string());
        }
    }
    Err(BuildError::Input {
        path: manifest,
        message: "no version in [package]".into(),
    })
}

/// The image of `binary` as `spec` describes it, labelled with `version`.
pub fn binary_image(
    spec: &ImageSpec,
    binary: &Path,
    version: &str,
) -> Result<ImageInput, BuildError> {
    if !binary.is_file() {
        return Err(BuildError::Input {
            path: binary.to_path_buf(),
            message: format!(
                "no binary {} (build it first: cargo build -p <crate> --bin {})",
                spec.binary, spec.binary
            ),
        });
    }
    let mut files = binary_files(binary, &spec.binary)?;
    for host_file in &spec.host_files {
        if !host_file.is_file() {
            return Err(BuildError::Input {
                path: host_file.clone(),
                message: format!(
                    "{}: host-files names a file this machine does not have",
                    spec.name
                ),
            });
        }
        files.push(FileEntry {
            path: host_file
                .to_string_lossy()
                .trim_start_matches('/')
                .to_string(),
            content: Content::File(host_file.clone()),
            executable: false,
        });
    }
    let mut labels = spec.labels.clone();
    labels.insert(
        "org.opencontainers.image.version".into(),
        format!("v{version}"),
    );
    Ok(ImageInput {
        files,
        labels,
        entrypoint: Some(spec.entrypoint.clone()),
        user: Some(NON_ROOT_USER.into()),
        exposed_ports: spec.ports.clone(),
    })
}

/// `binary` at `path` in an image, with the shared libraries it loads at their own paths.
pub fn binary_files(binary: &Path, path: &str) -> Result<Vec<FileEntry>, BuildError> {
    let mut files = vec![FileEntry {
        path: path.trim_start_matches('/').to_string(),
        content: Content::File(binary.to_path_buf()),
        executable: true,
    }];
    for library in shared_libraries(binary)? {
        files.push(FileEntry {
            path: library
                .to_string_lossy()
                .trim_start_matches('/')
                .to_string(),
            content: Content::File(library),
            executable: true,
        });
    }
    Ok(files)
}

/// The shared libraries a dynamic executable loads, from `ldd` (none for a static one).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|source| BuildError::Read {
            path: PathBuf::from("ldd"),
            source,
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("not a dynamic executable") {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("not a dynamic executable") || text.contains("statically linked") {
            return Ok(Vec::new());
        }
        if !out.status.success() {
            return Err(BuildError::Input {
                path: binary.to_path_buf(),
                message: format!("ldd failed: {}", stderr.trim()),
            });
        }
    }
    parse_ldd(&text).map_err(|message| BuildError::Input {
        path: binary.to_path_buf(),
        message,
    })
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2
/// (0x…)` give paths; the vDSO has none. A library ldd cannot find is an error.
fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("statically linked") {
            continue;
        }
        if line.contains("=> not found") {
            return Err(format!("a shared library is missing: {line}"));
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.trim(),
            None => line,
        };
        let path = path.split(" (").next().unwrap_or_default().trim();
        if path.starts_with('/') {
            out.push(PathBuf::from(path));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x1)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x2)\n\t/lib64/ld-linux-x86-64.so.2 (0x3)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tlibfoo.so => not found\n").is_err());
        assert!(parse_ldd("\tstatically linked\n").unwrap().is_empty());
    }

    #[test]
    fn crate_versions_come_from_the_package_table() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(crate_version(root).unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
