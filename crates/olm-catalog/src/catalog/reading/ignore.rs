//! `.indexignore`: gitignore-style patterns that hide files from the catalog loader. Each
//! `.indexignore` applies to the directory it is in and everything below it.

use std::path::Path;

#[derive(Clone, Debug)]
struct Pattern {
    /// Directory (relative to the catalog root, `/`-separated) holding the .indexignore.
    base: String,
    glob: String,
    negated: bool,
    dir_only: bool,
    /// Anchored patterns (containing a `/` other than a trailing one) match from `base`.
    anchored: bool,
}

#[derive(Clone, Debug, Default)]
pub struct IgnoreRules {
    patterns: Vec<Pattern>,
}

impl IgnoreRules {
    /// Adds the patterns of one `.indexignore` found in `base_dir` (relative to the root).
    pub fn add_file(&mut self, base_dir: &str, text: &str) {
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, rest) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let (dir_only, rest) = match rest.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, rest),
            };
            let anchored = rest.contains('/');
            let glob = rest.trim_start_matches('/').to_string();
            self.patterns.push(Pattern {
                base: base_dir.to_string(),
                glob,
                negated,
                dir_only,
                anchored,
            });
        }
    }

    /// Whether a path (relative to the root, `/`-separated) is ignored. The last matching
    /// pattern wins, as in gitignore.
    pub fn is_ignored(&self, relative: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for p in &self.patterns {
            let Some(rel) = strip_base(relative, &p.base) else {
                continue;
            };
            if p.dir_only && !is_dir {
                continue;
            }
            let matched = if p.anchored {
                glob_match(&p.glob, rel)
            } else {
                rel.rsplit('/')
                    .next()
                    .is_some_and(|name| glob_match(&p.glob, name))
            };
            if matched {
                ignored = !p.negated;
            }
        }
        ignored
    }
}

fn strip_base<'a>(path: &'a str, base: &str) -> Option<&'a str> {
    if base.is_empty() {
        return Some(path);
    }
    path.strip_prefix(base)?.strip_prefix('/')
}

/// Glob match with `*` (no `/`), `?`, `**` (any number of path segments) and `[...]` classes.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => {
                let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
                (0..=t.len())
                    .any(|i| (i == 0 || t[i - 1] == b'/' || rest.is_empty()) && go(rest, &t[i..]))
            }
            Some(b'*') => (0..=t.len())
                .take_while(|&i| i == 0 || t[i - 1] != b'/')
                .any(|i| go(&p[1..], &t[i..])),
            Some(b'?') => !t.is_empty() && t[0] != b'/' && go(&p[1..], &t[1..]),
            Some(b'[') => {
                let Some(end) = p.iter().position(|&c| c == b']') else {
                    return t.first() == Some(&b'[') && go(&p[1..], &t[1..]);
                };
                let Some(&c) = t.first() else { return false };
                let class = &p[1..end];
                let (negate, class) = match class.first() {
                    Some(b'!' | b'^') => (true, &class[1..]),
                    _ => (false, class),
                };
                let mut i = 0;
                let mut hit = false;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == b'-' {
                        hit |= class[i] <= c && c <= class[i + 2];
                        i += 3;
                    } else {
                        hit |= class[i] == c;
                        i += 1;
                    }
                }
                hit != negate && go(&p[end + 1..], &t[1..])
            }
            Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// `/`-separated path of `path` relative to `root`.
pub fn relative_slash_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*.json", "a.json"));
        assert!(!glob_match("*.json", "d/a.json"));
        assert!(glob_match("**/a.json", "x/y/a.json"));
        assert!(glob_match("**/a.json", "a.json"));
        assert!(glob_match("docs/**", "docs/x/y.md"));
        assert!(glob_match("file?.yaml", "file1.yaml"));
        assert!(glob_match("[ab].yaml", "b.yaml"));
        assert!(!glob_match("[!ab].yaml", "b.yaml"));
    }

    #[test]
    fn rules_apply_below_their_directory_and_last_match_wins() {
        let mut rules = IgnoreRules::default();
        rules.add_file("", "*.md\n/expected/\n# comment\n");
        rules.add_file("pkg", "*.json\n!keep.json\n");
        assert!(rules.is_ignored("README.md", false));
        assert!(rules.is_ignored("pkg/notes.md", false));
        assert!(rules.is_ignored("expected", true));
        assert!(!rules.is_ignored("pkg/expected", true));
        assert!(rules.is_ignored("pkg/x.json", false));
        assert!(!rules.is_ignored("pkg/keep.json", false));
        assert!(!rules.is_ignored("other/x.json", false));
    }
}
