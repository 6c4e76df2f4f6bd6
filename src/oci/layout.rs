//! An OCI image layout directory (`oci-layout`, `index.json`, `blobs/sha256/…`): what
//! `olm … build` writes when not pushing, and what `olm image push` reads.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::digest_hex;

/// The annotation an index entry names its tag with.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("OCI layout {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("OCI layout {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

/// The manifest fields we need to read back (images and the registry's answers).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    #[serde(default)]
    pub media_type: Option<String>,
    pub config: Descriptor,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// Opens `root` as a layout, creating an empty one when it does not exist yet.
    pub fn create(root: &Path) -> Result<Layout, LayoutError> {
        let layout = Layout {
            root: root.to_path_buf(),
        };
        std::fs::create_dir_all(root.join("blobs/sha256")).map_err(|e| layout.io(e))?;
        if !root.join("oci-layout").exists() {
            std::fs::write(
                root.join("oci-layout"),
                br#"{"imageLayoutVersion":"1.0.0"}"#,
            )
            .map_err(|e| layout.io(e))?;
        }
        if !root.join("index.json").exists() {
            layout.write_index(&Index {
                schema_version: 2,
                media_type: Some(super::MEDIA_OCI_INDEX.into()),
                manifests: Vec::new(),
            })?;
        }
        Ok(layout)
    }

    /// Opens an existing layout.
    pub fn open(root: &Path) -> Result<Layout, LayoutError> {
        let layout = Layout {
            root: root.to_path_buf(),
        };
        if !root.join("oci-layout").is_file() || !root.join("index.json").is_file() {
            return Err(layout.invalid("not an OCI image layout (no oci-layout or index.json)"));
        }
        Ok(layout)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn io(&self, source: io::Error) -> LayoutError {
        LayoutError::Io {
            path: self.root.clone(),
            source,
        }
    }

    fn invalid(&self, message: impl Into<String>) -> LayoutError {
        LayoutError::Invalid {
            path: self.root.clone(),
            message: message.into(),
        }
    }

    pub fn blob_path(&self, digest: &str) -> Result<PathBuf, LayoutError> {
        let hex =
            digest_hex(digest).ok_or_else(|| self.invalid(format!("bad digest {digest:?}")))?;
        Ok(self.root.join("blobs/sha256").join(hex))
    }

    pub fn read_blob(&self, digest: &str) -> Result<Vec<u8>, LayoutError> {
        let path = self.blob_path(digest)?;
        std::fs::read(&path).map_err(|source| LayoutError::Io { path, source })
    }

    pub fn write_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor, LayoutError> {
        let digest = super::sha256_digest(bytes);
        let path = self.blob_path(&digest)?;
        if !path.exists() {
            let (mut file, temp) = self.temp_blob()?;
            io::Write::write_all(&mut file, bytes).map_err(|e| self.io(e))?;
            drop(file);
            std::fs::rename(&temp, &path).map_err(|e| self.io(e))?;
        }
        Ok(Descriptor {
            media_type: media_type.into(),
            digest,
            size: bytes.len() as u64,
            annotations: None,
        })
    }

    /// A new file in the blobs directory, to be named by its digest once written.
    pub fn temp_blob(&self) -> Result<(std::fs::File, PathBuf), LayoutError> {
        for n in 0u32.. {
            let path = self
                .root
                .join(format!("blobs/.partial-{}-{n}", std::process::id()));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => return Ok((file, path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(self.io(e)),
            }
        }
        unreachable!("u32 ran out of temp names")
    }

    pub fn commit_blob(
        &self,
        temp: PathBuf,
        media_type: &str,
        digest: &str,
        size: u64,
    ) -> Result<Descriptor, LayoutError> {
        let path = self.blob_path(digest)?;
        std::fs::rename(&temp, &path).map_err(|e| self.io(e))?;
        Ok(Descriptor {
            media_type: media_type.into(),
            digest: digest.into(),
            size,
            annotations: None,
        })
    }

    fn read_index(&self) -> Result<Index, LayoutError> {
        let text = std::fs::read(self.root.join("index.json")).map_err(|e| self.io(e))?;
        serde_json::from_slice(&text).map_err(|e| self.invalid(format!("index.json: {e}")))
    }

    fn write_index(&self, index: &Index) -> Result<(), LayoutError> {
        let bytes = serde_json::to_vec_pretty(index).map_err(|e| self.invalid(e.to_string()))?;
        std::fs::write(self.root.join("index.json"), bytes).map_err(|e| self.io(e))
    }

    /// Names `manifest` `tag` in index.json, replacing what had that name.
    pub fn tag(&self, tag: &str, manifest: &Descriptor) -> Result<(), LayoutError> {
        let mut index = self.read_index()?;
        index.manifests.retain(|d| ref_name(d) != Some(tag));
        let mut entry = manifest.clone();
        entry.annotations = Some(BTreeMap::from([(REF_NAME.to_string(), tag.to_string())]));
        index.manifests.push(entry);
        self.write_index(&index)
    }

    /// The manifest named `tag`, or the only one when `tag` is None.
    pub fn resolve(&self, tag: Option<&str>) -> Result<Descriptor, LayoutError> {
        let index = self.read_index()?;
        match tag {
            Some(tag) => index
                .manifests
                .into_iter()
                .find(|d| ref_name(d) == Some(tag))
                .ok_or_else(|| self.invalid(format!("no image tagged {tag:?} in index.json"))),
            None => match index.manifests.as_slice() {
                [only] => Ok(only.clone()),
                [] => Err(self.invalid("index.json lists no image")),
                many => Err(self.invalid(format!(
                    "index.json lists {} images; name one with LAYOUT:TAG ({})",
                    many.len(),
                    many.iter()
                        .filter_map(ref_name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            },
        }
    }

    pub fn manifest(&self, descriptor: &Descriptor) -> Result<ImageManifest, LayoutError> {
        let bytes = self.read_blob(&descriptor.digest)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| self.invalid(format!("manifest {}: {e}", descriptor.digest)))
    }
}

fn ref_name(descriptor: &Descriptor) -> Option<&str> {
    descriptor
        .annotations
        .as_ref()
        .and_then(|a| a.get(REF_NAME))
        .map(String::as_str)
}
