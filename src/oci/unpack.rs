//! Applies image layers to a directory: gzip or plain tar, OCI whiteouts honoured, paths
//! that would leave the directory refused, links and devices skipped (bundles and
//! catalogs are regular files), and optionally only what is under one path (the catalog
//! label's directory).

use std::io::{self, BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("layer {layer}: {message}")]
    Layer { layer: String, message: String },
    #[error("layer {layer}: writing {path}: {source}")]
    Write {
        layer: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The path of a tar entry relative to the image root, or None when it has none or tries
/// to leave it.
fn relative(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Extracts one layer (`layer` names it in errors) into `dest`, keeping only entries
/// under `only` when given.
pub fn apply_layer(
    reader: impl Read,
    layer: &str,
    dest: &Path,
    only: Option<&Path>,
) -> Result<(), UnpackError> {
    let fail = |message: String| UnpackError::Layer {
        layer: layer.into(),
        message,
    };
    let write_err = |path: &Path, source: io::Error| UnpackError::Write {
        layer: layer.into(),
        path: path.to_path_buf(),
        source,
    };
    let mut buffered = BufReader::new(reader);
    let head = buffered.fill_buf().map_err(|e| fail(e.to_string()))?;
    let decoded: Box<dyn Read> = match head {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::GzDecoder::new(buffered)),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => {
            return Err(fail(
                "zstd layers are not supported; push gzip layers".into(),
            ));
        }
        _ => Box::new(buffered),
    };
    let only = only.and_then(relative);
    let mut archive = tar::Archive::new(decoded);
    let entries = archive.entries().map_err(|e| fail(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| fail(format!("not a tar archive: {e}")))?;
        let raw = entry.path().map_err(|e| fail(e.to_string()))?.into_owned();
        let Some(path) = relative(&raw) else {
            if raw.components().any(|c| c == Component::ParentDir) {
                return Err(fail(format!(
                    "entry {} leaves the image root",
                    raw.display()
                )));
            }
            continue;
        };
        if let Some(only) = &only
            && !path.starts_with(only)
        {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let parent = path.parent().unwrap_or(Path::new(""));
        if name == ".wh..wh..opq" {
            let dir = dest.join(parent);
            if let Ok(children) = std::fs::read_dir(&dir) {
                for child in children.flatten() {
                    remove(&child.path()).map_err(|e| write_err(&child.path(), e))?;
                }
            }
            continue;
        }
        if let Some(hidden) = name.strip_prefix(".wh.") {
            let target = dest.join(parent).join(hidden);
            remove(&target).map_err(|e| write_err(&target, e))?;
            continue;
        }
        let target = dest.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(&target).map_err(|e| write_err(&target, e))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(dir) = target.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
                }
                remove(&target).map_err(|e| write_err(&target, e))?;
                let mut file = std::fs::File::create(&target).map_err(|e| write_err(&target, e))?;
                io::copy(&mut entry, &mut file).map_err(|e| write_err(&target, e))?;
            }
            // Links, devices, FIFOs: nothing a bundle or catalog needs.
            _ => {}
        }
    }
    Ok(())
}

fn remove(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // set_path refuses `..`; write the name bytes directly to test the reader.
            header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn layers_apply_in_order_with_whiteouts_and_a_path_filter() {
        let dest = std::env::temp_dir().join(format!("olm-unpack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dest);
        let first = tar_of(&[
            ("configs/a/catalog.yaml", b"a"),
            ("configs/b/catalog.yaml", b"b"),
            ("bin/server", b"elf"),
        ]);
        let second = tar_of(&[("configs/.wh.b", b""), ("./configs/a/catalog.yaml", b"a2")]);
        let only = Some(Path::new("/configs"));
        apply_layer(first.as_slice(), "one", &dest, only).unwrap();
        apply_layer(second.as_slice(), "two", &dest, only).unwrap();
        assert_eq!(
            std::fs::read(dest.join("configs/a/catalog.yaml")).unwrap(),
            b"a2"
        );
        assert!(!dest.join("configs/b").exists());
        assert!(!dest.join("bin").exists());

        let escaping = tar_of(&[("../evil", b"x")]);
        let error = apply_layer(escaping.as_slice(), "bad", &dest, None).unwrap_err();
        assert!(
            error.to_string().contains("leaves the image root"),
            "{error}"
        );
        std::fs::remove_dir_all(&dest).unwrap();
    }
}
