//! A linear pre-check of YAML flow nesting, run before any YAML parse of untrusted text.
//!
//! libyaml (under serde_yaml) keeps one possible simple key per open flow collection and
//! rechecks them all at every token, so text like `[a: [a: [a: …` costs quadratic time
//! before serde's recursion limit ever sees it: 160 KB took 12 s, and a 1 MiB ConfigMap
//! minutes. Counting the brackets first refuses such text in linear time with the same
//! limit the parsers enforce (`MAX_NESTING`). The scanner follows YAML closely enough
//! that real text never trips it (quotes, comments, block scalars and brackets inside
//! plain scalars are skipped); where it is unsure it undercounts, leaving the parser's own
//! limit to decide.

use std::fmt;

use serde::de::DeserializeOwned;

use super::limits::MAX_NESTING;

/// A YAML parse of untrusted text failed: too deep for the pre-check, or the parser's error.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    #[error("{}", .0.located())]
    TooDeep(TooDeep),
    #[error(transparent)]
    Parse(#[from] serde_yaml::Error),
}

/// `serde_yaml::from_str` after the nesting pre-check. Text the fast path reads (nested no
/// deeper than its own, lower limit) and that makes a `T` needs neither; anything else, and
/// every error, goes to serde_yaml, which reads and names it.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    if let Some(value) = super::fast_yaml::parse(text)
        && let Ok(parsed) = serde_json::from_value(value)
    {
        return Ok(parsed);
    }
    check(text.as_bytes()).map_err(YamlError::TooDeep)?;
    Ok(serde_yaml::from_str(text)?)
}

/// `serde_yaml::from_slice` after the nesting pre-check.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, YamlError> {
    check(bytes).map_err(YamlError::TooDeep)?;
    Ok(serde_yaml::from_slice(bytes)?)
}

/// Flow collections (`[`/`{`) opened deeper than `MAX_NESTING`, at the opening bracket
/// that went past the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for TooDeep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nested more than the limit of {MAX_NESTING} levels")
    }
}

impl TooDeep {
    /// The message with its place, as serde_yaml words its own errors.
    pub fn located(&self) -> String {
        format!("{self} at line {} column {}", self.line, self.column)
    }
}

/// `Err` when the text opens flow collections more than `MAX_NESTING` deep.
pub fn check(text: &[u8]) -> Result<(), TooDeep> {
    // Text with fewer opening brackets than the limit cannot nest past it.
    let opening = text.iter().filter(|&&b| b == b'[' || b == b'{').count();
    if opening <= MAX_NESTING {
        return Ok(());
    }
    Scanner::new(text).run()
}

struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
    line_start: usize,
    /// Open flow collections; 0 is block context.
    depth: usize,
    /// A node may begin here: line start, after `- `, `? `, `: `, `[`, `{`, `,`, an anchor or tag.
    node_start: bool,
    /// The previous byte was whitespace (a `#` then starts a comment).
    after_space: bool,
    /// Column of the current line's first node, past indentation and `- ` entries.
    line_parent: usize,
    /// Inside a block scalar (`|`, `>`): lines indented more than this are its content.
    block_scalar_parent: Option<usize>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a [u8]) -> Self {
        Scanner {
            text,
            at: 0,
            line: 1,
            line_start: 0,
            depth: 0,
            node_start: true,
            after_space: true,
            line_parent: 0,
            block_scalar_parent: None,
        }
    }

    fn peek(&self, offset: usize) -> Option<u8> {
        self.text.get(self.at + offset).copied()
    }

    fn blank_or_end(b: Option<u8>) -> bool {
        matches!(b, None | Some(b' ' | b'\t' | b'\r' | b'\n'))
    }

    fn newline(&mut self) {
        self.line += 1;
        self.line_start = self.at + 1;
    }

    fn skip_to_line_end(&mut self) {
        while let Some(b) = self.peek(0) {
            if b == b'\n' {
                return;
            }
            self.at += 1;
        }
    }

    /// At a line start in block context: skip block scalar content, note the line's parent column.
    fn start_block_line(&mut self) {
        let rest = &self.text[self.at..];
        let indent = rest.iter().take_while(|&&b| b == b' ').count();
        let line_len = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        if let Some(parent) = self.block_scalar_parent {
            let blank = rest[..line_len].iter().all(u8::is_ascii_whitespace);
            if blank || indent > parent {
                self.at += line_len;
                return;
            }
            self.block_scalar_parent = None;
        }
        let mut column = indent;
        while rest.get(column) == Some(&b'-') && Self::blank_or_end(rest.get(column + 1).copied()) {
            column += 1;
            column += rest[column..].iter().take_while(|&&b| b == b' ').count();
        }
        self.line_parent = column;
        self.node_start = true;
        self.after_space = true;
        self.at += indent;
    }

    /// Past a quoted scalar that opens at `self.at`, newlines counted.
    fn skip_quoted(&mut self, quote: u8) {
        self.at += 1;
        while let Some(b) = self.peek(0) {
            match b {
                b'\\' if quote == b'"' => {
                    if self.peek(1) == Some(b'\n') {
                        self.at += 1;
                        self.newline();
                    }
                    self.at += 2;
                    continue;
                }
                b'\'' if quote == b'\'' && self.peek(1) == Some(b'\'') => {
                    self.at += 2;
                    continue;
                }
                b'\n' => self.newline(),
                b if b == quote => {
                    self.at += 1;
                    return;
                }
                _ => {}
            }
            self.at += 1;
        }
    }

    fn run(mut self) -> Result<(), TooDeep> {
        while self.at < self.text.len() {
            if self.at == self.line_start && self.depth == 0 {
                self.start_block_line();
                if self.at >= self.text.len() {
                    break;
                }
            }
            let b = self.text[self.at];
            match b {
                b'\n' => {
                    self.newline();
                    self.after_space = true;
                    self.at += 1;
                    continue;
                }
                b' ' | b'\t' | b'\r' => {
                    self.after_space = true;
                    self.at += 1;
                    continue;
                }
                b'#' if self.after_space => {
                    self.skip_to_line_end();
                    continue;
                }
                b'"' | b'\'' if self.node_start => {
                    self.skip_quoted(b);
                    self.node_start = false;
                    self.after_space = false;
                    continue;
                }
                b'[' | b'{' if self.depth > 0 || self.node_start => {
                    self.depth += 1;
                    if self.depth > MAX_NESTING {
                        return Err(TooDeep {
                            line: self.line,
                            column: self.at - self.line_start + 1,
                        });
                    }
                    self.node_start = true;
                }
                b']' | b'}' if self.depth > 0 => {
                    self.depth -= 1;
                    self.node_start = false;
                }
                b',' if self.depth > 0 => self.node_start = true,
                b'|' | b'>' if self.depth == 0 && self.node_start => {
                    self.block_scalar_parent = Some(self.line_parent);
                    self.skip_to_line_end();
                    continue;
                }
                b'-' | b'?' if self.node_start && Self::blank_or_end(self.peek(1)) => {}
                b':' if Self::blank_or_end(self.peek(1))
                    || (self.depth > 0
                        && matches!(self.peek(1), Some(b',' | b'[' | b']' | b'{' | b'}'))) =>
                {
                    self.node_start = true;
                }
                b'&' | b'!' if self.node_start => {
                    // An anchor or tag precedes its node: skip its name, stay at node start.
                    while !Self::blank_or_end(self.peek(0)) {
                        self.at += 1;
                    }
                    continue;
                }
                _ => self.node_start = false,
            }
            self.after_space = false;
            self.at += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests;
