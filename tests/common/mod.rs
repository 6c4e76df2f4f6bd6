//! Paths and small helpers shared by the integration test crates.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` beside the repo (CI's layout), or `$OLM_SHARED_DIR`.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("OLM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared"))
}

/// The real community-operators packages, one folder per package.
pub fn community_operators() -> PathBuf {
    shared_dir().join("testdata/community-operators/operators")
}

/// Immediate subdirectories, sorted.
pub fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Bundle directories of every package under `root`.
pub fn bundle_dirs(root: &Path) -> Vec<PathBuf> {
    subdirs(root)
        .iter()
        .flat_map(|package| subdirs(package))
        .filter(|d| d.join("metadata/annotations.yaml").is_file())
        .collect()
}

/// A fresh, empty scratch directory for this test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
