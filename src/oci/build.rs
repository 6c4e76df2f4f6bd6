//! Reproducible images: the same input gives the same bytes, so the same digest. One gzip
//! layer of sorted entries (directories included) with fixed mtime, owner and modes, a
//! gzip header with mtime 0, and a config written with a fixed field order.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Serialize;
use sha2::Digest;

use super::input::{BuildError, Content, FileEntry, ImageInput};
use super::layout::{Descriptor, Layout};
use super::{CATALOG_CONFIGS_DIR, LABEL_CATALOG_CONFIGS, MEDIA_OCI_CONFIG, MEDIA_OCI_LAYER_GZIP};

/// The image config, fields in a fixed order (serde writes struct fields as declared).
#[derive(Serialize)]
struct ImageConfig<'a> {
    architecture: &'a str,
    os: &'a str,
    config: RunConfig<'a>,
    rootfs: RootFs,
}

#[derive(Serialize)]
struct RunConfig<'a> {
    #[serde(rename = "User", skip_serializing_if = "Option::is_none")]
    user: Option<&'a String>,
    #[serde(rename = "ExposedPorts", skip_serializing_if = "BTreeMap::is_empty")]
    exposed_ports: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "Labels")]
    labels: &'a BTreeMap<String, String>,
    #[serde(rename = "Entrypoint", skip_serializing_if = "Option::is_none")]
    entrypoint: Option<&'a Vec<String>>,
}

#[derive(Serialize)]
struct RootFs {
    #[serde(rename = "type")]
    type_: &'static str,
    diff_ids: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest<'a> {
    schema_version: u32,
    media_type: &'a str,
    config: &'a Descriptor,
    layers: Vec<&'a Descriptor>,
}

/// What a build produced in the layout.
#[derive(Clone, Debug)]
pub struct Built {
    pub manifest: Descriptor,
    pub layer: Descriptor,
}

/// The architecture our images are labelled with: images of files only run anywhere, and
/// readers that filter by platform (opm pulls linux/<arch>) look for the usual names.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Writes the image into `layout` and tags it `tag` in the layout's index.
pub fn build_into(input: &ImageInput, layout: &Layout, tag: &str) -> Result<Built, BuildError> {
    let (layer, diff_id) = write_layer(input, layout)?;
    let labels = &input.labels;
    let config = ImageConfig {
        architecture: go_arch(),
        os: "linux",
        config: RunConfig {
            user: input.user.as_ref(),
            exposed_ports: input
                .exposed_ports
                .iter()
                .map(|p| (format!("{p}/tcp"), serde_json::Map::new()))
                .collect(),
            labels,
            entrypoint: input.entrypoint.as_ref(),
        },
        rootfs: RootFs {
            type_: "layers",
            diff_ids: vec![diff_id],
        },
    };
    let config_bytes = serde_json::to_vec(&config).map_err(io::Error::other)?;
    let config = layout.write_blob(MEDIA_OCI_CONFIG, &config_bytes)?;
    let manifest = Manifest {
        schema_version: 2,
        media_type: super::MEDIA_OCI_MANIFEST,
        config: &config,
        layers: vec![&layer],
    };
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(io::Error::other)?;
    let manifest = layout.write_blob(super::MEDIA_OCI_MANIFEST, &manifest_bytes)?;
    layout.tag(tag, &manifest)?;
    Ok(Built { manifest, layer })
}

/// Counts and hashes what passes through.
struct Hashing<W> {
    inner: W,
    hasher: sha2::Sha256,
    written: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: sha2::Sha256::new(),
            written: 0,
        }
    }
    fn finish(self) -> (W, String, u64) {
        let digest = format!("sha256:{}", super::hex(&self.hasher.finalize()));
        (self.inner, digest, self.written)
    }
}

/// Streams the tar.gz into the layout (no whole layer in memory); returns its descriptor
/// and the uncompressed tar's digest (the config's diff_id).
fn write_layer(input: &ImageInput, layout: &Layout) -> Result<(Descriptor, String), BuildError> {
    let mut files: Vec<&FileEntry> = input.files.iter().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    for pair in files.windows(2) {
        if pair[0].path == pair[1].path {
            return Err(BuildError::Input {
                path: PathBuf::from(&pair[0].path),
                message: "two files at the same path in the image".into(),
            });
        }
    }
    let (file, temp) = layout.temp_blob()?;
    let compressed = Hashing::new(io::BufWriter::new(file));
    let gzip = GzEncoder::new(compressed, Compression::new(6));
    let mut tar = tar::Builder::new(Hashing::new(gzip));
    tar.mode(tar::HeaderMode::Deterministic);

    let mut seen = BTreeSet::new();
    for entry in files {
        let path = entry.path.trim_start_matches('/');
        // Parent directories first, once each, in path order.
        let mut parent = String::new();
        for part in path
            .split('/')
            .collect::<Vec<_>>()
            .split_last()
            .map(|(_, d)| d)
            .unwrap_or(&[])
        {
            parent.push_str(part);
            parent.push('/');
            if seen.insert(parent.clone()) {
                let mut header = header(tar::EntryType::Directory, 0o755, 0);
                tar.append_data(&mut header, &parent, io::empty())?;
            }
        }
        let mode = if entry.executable { 0o755 } else { 0o644 };
        match &entry.content {
            Content::Bytes(bytes) => {
                let mut header = header(tar::EntryType::Regular, mode, bytes.len() as u64);
                tar.append_data(&mut header, path, bytes.as_slice())?;
            }
            Content::File(source) => {
                let read_err = |source_err| BuildError::Read {
                    path: source.clone(),
                    source: source_err,
                };
                let file = std::fs::File::open(source).map_err(read_err)?;
                let size = file.metadata().map_err(read_err)?.len();
                let mut header = header(tar::EntryType::Regular, mode, size);
                tar.append_data(&mut header, path, file)?;
            }
        }
    }
    let tarred = tar.into_inner()?;
    let (gzip, diff_id, _) = tarred.finish();
    let compressed = gzip.finish()?;
    let (mut writer, digest, size) = compressed.finish();
    writer.flush()?;
    drop(writer);
    let layer = layout.commit_blob(temp, MEDIA_OCI_LAYER_GZIP, &digest, size)?;
    Ok((layer, diff_id))
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(source_date_epoch());
    header.set_uid(0);
    header.set_gid(0);
    header
}

/// `SOURCE_DATE_EPOCH` when set (reproducible-builds.org), else 0.
fn source_date_epoch() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Every regular file under `dir`, as image paths under `prefix`. Symlinks and other
/// special files are refused: an image must not depend on what they point at.
pub fn files_under(dir: &Path, prefix: &str) -> Result<Vec<FileEntry>, BuildError> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), prefix.trim_matches('/').to_string())];
    while let Some((dir, at)) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| BuildError::Read {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| BuildError::Read {
                path: dir.clone(),
                source,
            })?;
            let path = entry.path();
            let name = entry
                .file_name()
                .to_str()
                .map(str::to_string)
                .ok_or_else(|| BuildError::Input {
                    path: path.clone(),
                    message: "file name is not UTF-8".into(),
                })?;
            let inner = if at.is_empty() {
                name
            } else {
                format!("{at}/{name}")
            };
            let kind = entry.file_type().map_err(|source| BuildError::Read {
                path: path.clone(),
                source,
            })?;
            if kind.is_dir() {
                stack.push((path, inner));
            } else if kind.is_file() {
                #[cfg(unix)]
                let executable = {
                    use std::os::unix::fs::PermissionsExt;
                    entry
                        .metadata()
                        .map(|m| m.permissions().mode() & 0o111 != 0)
                        .unwrap_or(false)
                };
                #[cfg(not(unix))]
                let executable = false;
                out.push(FileEntry {
                    path: inner,
                    content: Content::File(path),
                    executable,
                });
            } else {
                return Err(BuildError::Input {
                    path,
                    message: "not a regular file or directory (symlinks are not put in images)"
                        .into(),
                });
            }
        }
    }
    Ok(out)
}

/// A registry+v1 bundle image: `manifests/` and `metadata/` at the root, and every
/// annotation of `metadata/annotations.yaml` as a config label (as operator-sdk's
/// bundle.Dockerfile does; readers need at least the bundle package label).
pub fn bundle_image(dir: &Path) -> Result<ImageInput, BuildError> {
    let annotations_path = dir.join("metadata/annotations.yaml");
    let text = std::fs::read_to_string(&annotations_path).map_err(|source| BuildError::Read {
        path: annotations_path.clone(),
        source,
    })?;
    #[derive(serde::Deserialize)]
    struct Annotations {
        annotations: BTreeMap<String, String>,
    }
    let parsed: Annotations = serde_yaml::from_str(&text).map_err(|e| BuildError::Input {
        path: annotations_path.clone(),
        message: format!("not a bundle annotations file: {e}"),
    })?;
    if !parsed.annotations.contains_key(super::LABEL_BUNDLE_PACKAGE) {
        return Err(BuildError::Input {
            path: annotations_path,
            message: format!("annotations has no {}", super::LABEL_BUNDLE_PACKAGE),
        });
    }
    let mut files = files_under(&dir.join("manifests"), "manifests")?;
    files.extend(files_under(&dir.join("metadata"), "metadata")?);
    Ok(ImageInput {
        files,
        labels: parsed.annotations,
        ..ImageInput::default()
    })
}

/// Where a catalog image with a server keeps the server's index cache.
pub const CATALOG_CACHE_DIR: &str = "/tmp/cache";

/// A file-based catalog image: the catalog under `/configs` and the label that says so.
/// With `server` (the binary, and the index cache it built for this catalog), the image
/// also carries that registry server (and the shared libraries it loads) as its entrypoint,
/// listening on every address of the pod, with its cache, so upstream OLM v0 can run it as a
/// catalog pod that starts without parsing the catalog.
pub fn catalog_image(dir: &Path, server: Option<(&Path, &Path)>) -> Result<ImageInput, BuildError> {
    let configs = CATALOG_CONFIGS_DIR.trim_start_matches('/');
    let mut files = files_under(dir, configs)?;
    let mut labels = BTreeMap::new();
    labels.insert(
        LABEL_CATALOG_CONFIGS.to_string(),
        CATALOG_CONFIGS_DIR.to_string(),
    );
    let mut entrypoint = None;
    if let Some((server, cache)) = server {
        // With the libraries it loads, so the image runs from scratch (glibc builds too).
        files.extend(super::binary::binary_files(server, "bin/olm-registry")?);
        files.extend(files_under(cache, CATALOG_CACHE_DIR)?);
        entrypoint = Some(
            [
                "/bin/olm-registry",
                CATALOG_CONFIGS_DIR,
                "--address",
                "0.0.0.0",
                "--cache-dir",
                CATALOG_CACHE_DIR,
            ]
            .map(String::from)
            .to_vec(),
        );
    }
    Ok(ImageInput {
        files,
        labels,
        entrypoint,
        ..ImageInput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> ImageInput {
        let mut labels = BTreeMap::new();
        labels.insert("b".to_string(), "2".to_string());
        labels.insert("a".to_string(), "1".to_string());
        ImageInput {
            files: vec![
                FileEntry {
                    path: "configs/z/catalog.yaml".into(),
                    content: Content::Bytes(b"schema: olm.package\nname: z\n".to_vec()),
                    executable: false,
                },
                FileEntry {
                    path: "configs/a/catalog.yaml".into(),
                    content: Content::Bytes(b"schema: olm.package\nname: a\n".to_vec()),
                    executable: false,
                },
            ],
            labels,
            ..ImageInput::default()
        }
    }

    #[test]
    fn the_same_input_gives_the_same_digest_in_any_order() {
        let dir = std::env::temp_dir().join(format!("olm-oci-build-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let one = Layout::create(&dir.join("one")).unwrap();
        let two = Layout::create(&dir.join("two")).unwrap();
        let first = build_into(&input(), &one, "t").unwrap();
        let mut reversed = input();
        reversed.files.reverse();
        let second = build_into(&reversed, &two, "t").unwrap();
        assert_eq!(first.manifest.digest, second.manifest.digest);
        let mut changed = input();
        changed.labels.insert("c".into(), "3".into());
        let third = build_into(&changed, &two, "t").unwrap();
        assert_ne!(first.manifest.digest, third.manifest.digest);
        assert_eq!(first.layer.digest, third.layer.digest);

        // The layer lists parent directories before their files, all owned by root at mtime 0.
        let blob = std::fs::read(one.blob_path(&first.layer.digest).unwrap()).unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(blob.as_slice()));
        let entries: Vec<(String, u64, u32)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    h.mtime().unwrap(),
                    h.mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("configs/".to_string(), 0, 0o755),
                ("configs/a/".to_string(), 0, 0o755),
                ("configs/a/catalog.yaml".to_string(), 0, 0o644),
                ("configs/z/".to_string(), 0, 0o755),
                ("configs/z/catalog.yaml".to_string(), 0, 0o644),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn duplicate_paths_are_refused() {
        let mut doubled = input();
        doubled.files.push(doubled.files[0].clone());
        let dir = std::env::temp_dir().join(format!("olm-oci-dup-{}", std::process::id()));
        let layout = Layout::create(&dir).unwrap();
        let error = build_into(&doubled, &layout, "t").unwrap_err();
        assert!(
            error.to_string().contains("two files at the same path"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
