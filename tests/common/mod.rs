//! Paths and small helpers shared by the integration test crates.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Upstream `opm` (v1.73.0): `$OLM_OPM` (set by hack/test), else what `hack/opm/build` cached.
pub fn opm() -> PathBuf {
    if let Some(path) = std::env::var_os("OLM_OPM") {
        return PathBuf::from(path);
    }
    let out = Command::new(repo().join("hack/opm/path"))
        .output()
        .expect("hack/opm/path runs");
    assert!(
        out.status.success(),
        "opm is not built; run hack/opm/build ({})",
        String::from_utf8_lossy(&out.stdout)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The community-operators testdata rendered by `olm catalog render` into `dir/catalog.json`,
/// without kuadrant-operator (its `oci://` related image makes `opm serve` refuse the whole
/// catalog) unless `with_kuadrant`.
pub fn render_testdata(dir: &Path, with_kuadrant: bool) {
    let packages: Vec<PathBuf> = subdirs(&community_operators())
        .into_iter()
        .filter(|p| with_kuadrant || !p.ends_with("kuadrant-operator"))
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(["catalog", "render"])
        .args(&packages)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("catalog.json"), out.stdout).unwrap();
}
