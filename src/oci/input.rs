//! What an image is built from, and how building one fails: below [`super::build`], which
//! writes images, and [`super::binary`], which gathers a binary's files for them.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use super::layout::LayoutError;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error("writing the image: {0}")]
    Write(#[from] io::Error),
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Where a file's bytes come from.
#[derive(Clone, Debug)]
pub enum Content {
    File(PathBuf),
    Bytes(Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct FileEntry {
    /// Relative path inside the image, `/`-separated (`configs/pkg/catalog.yaml`).
    pub path: String,
    pub content: Content,
    pub executable: bool,
}

/// Everything an image is made of.
#[derive(Clone, Debug, Default)]
pub struct ImageInput {
    pub files: Vec<FileEntry>,
    pub labels: BTreeMap<String, String>,
    pub entrypoint: Option<Vec<String>>,
    /// `user[:group]` the image runs as (binary images run as non-root).
    pub user: Option<String>,
    /// Ports the program listens on (TCP), as documentation for readers of the config.
    pub exposed_ports: Vec<u16>,
}
