//! Which files make up a catalog: below a directory, every `.json`, `.yaml` and `.yml`
//! file in path order, less what `.indexignore` files hide; or one file given by name.

use std::path::{Path, PathBuf};

use super::error::LoadError;
use super::ignore::{IgnoreRules, relative_slash_path};

/// The catalog files of `root` (a directory, or one file, which is then the only one).
pub fn catalog_files(root: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let meta = std::fs::metadata(root).map_err(|source| LoadError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    let mut files = Vec::new();
    collect_files(root, root, &mut IgnoreRules::default(), &mut files)?;
    Ok(files)
}

fn collect_files(
    root: &Path,
    dir: &Path,
    rules: &mut IgnoreRules,
    out: &mut Vec<PathBuf>,
) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let ignore_file = dir.join(".indexignore");
    if ignore_file.is_file() {
        let text = std::fs::read_to_string(&ignore_file).map_err(|source| LoadError::Io {
            path: ignore_file.clone(),
            source,
        })?;
        rules.add_file(&relative_slash_path(root, dir), &text);
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let is_dir = entry.file_type().map_err(io)?.is_dir() || path.is_dir();
        let relative = relative_slash_path(root, &path);
        if rules.is_ignored(&relative, is_dir) {
            continue;
        }
        if is_dir {
            collect_files(root, &path, rules, out)?;
        } else if is_catalog_file(&path) {
            out.push(path);
        }
    }
    Ok(())
}

fn is_catalog_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("json" | "yaml" | "yml")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_files_in_path_order_without_ignored_ones() {
        let root = std::env::temp_dir().join(format!("olm-catalog-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for file in [
            "b/catalog.yaml",
            "a.json",
            "a/z.yml",
            "a/notes.md",
            "a/skip/hidden.json",
            "c/old.json",
            "c/keep.json",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "{}").unwrap();
        }
        std::fs::write(root.join(".indexignore"), "skip/\n").unwrap();
        std::fs::write(root.join("c/.indexignore"), "*.json\n!keep.json\n").unwrap();

        let files = catalog_files(&root).unwrap();
        let relative: Vec<String> = files
            .iter()
            .map(|f| relative_slash_path(&root, f))
            .collect();
        assert_eq!(
            relative,
            ["a/z.yml", "a.json", "b/catalog.yaml", "c/keep.json"]
        );

        // One file is its own catalog, whatever its name.
        let one = root.join("a/notes.md");
        assert_eq!(catalog_files(&one).unwrap(), [one]);
        assert!(matches!(
            catalog_files(&root.join("missing")),
            Err(LoadError::Io { .. })
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
