//! A fast path for the YAML that manifests are made of: block mappings and sequences,
//! plain, quoted and block scalars, one-line flow collections. Rendering a large catalog
//! spent most of its time in libyaml (which decodes its input character by character
//! and allocates an event per token); this reads such text straight into a `Value`.
//!
//! It is a shortcut, never a second opinion: [`parse`] returns `None` for anything it does
//! not read exactly as the full parser (serde_yaml, in `reading/stream.rs`) does, which then
//! decides. Anchors, tags, merge keys, multi-line flow collections, keys that are not
//! plain strings, numbers other than plain integers, odd characters or indentation, and
//! every error all take that way. Scalars resolve as serde_yaml resolves untagged ones
//! (YAML 1.2 core schema); the tests compare both readings on real catalogs.

use serde_json::{Map, Value};

/// Deeper documents go to the full parser (and its limit).
const MAX_DEPTH: usize = 64;

/// `doc` (one YAML document, as `reading::stream::yaml_documents` splits a file) as a value, when
/// it is a mapping this reader reads exactly as the full parser does; `None` otherwise.
pub fn parse(doc: &str) -> Option<Value> {
    if !plain_characters(doc.as_bytes()) {
        return None;
    }
    // The empty text after a final line break is no line.
    let final_break = doc.ends_with('\n');
    let body = doc.strip_suffix('\n').unwrap_or(doc);
    let mut lines = Vec::with_capacity(body.len() / 32);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', body.as_bytes()) {
        lines.push(Line::new(&body[start..end]));
        start = end + 1;
    }
    lines.push(Line::new(&body[start..]));
    let mut p = Parser {
        lines,
        at: 0,
        depth: 0,
        final_break,
    };
    p.skip_blank();
    let Some(first) = p.line() else {
        return Some(Value::Null);
    };
    if first.indent == 0 && first.rest.starts_with("---") {
        let after = first.rest[3..].trim_start_matches(' ');
        if !(after.is_empty() || (after.starts_with('#') && first.rest[3..].starts_with(' '))) {
            return None;
        }
        p.at += 1;
        p.skip_blank();
    }
    let Some(first) = p.line() else {
        // Comments only, or nothing.
        return Some(Value::Null);
    };
    if first.indent != 0 || first.is_item() || !matches!(key_of(first.rest), KeyScan::Key(..)) {
        return None;
    }
    let value = p.block_map(0)?;
    p.skip_blank();
    p.line().is_none().then_some(value)
}

/// No character that the full parser treats differently: carriage returns and Unicode
/// line breaks (other line ends), control characters (refused), byte order marks.
fn plain_characters(bytes: &[u8]) -> bool {
    // Printable ASCII, line breaks and tabs, checked a block at a time without branches;
    // a block with anything else is looked at byte by byte.
    const BLOCK: usize = 64;
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + BLOCK).min(bytes.len());
        let mut other = false;
        for &b in &bytes[start..end] {
            other |= !((0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t');
        }
        if other && !plain_characters_in(bytes, start, end) {
            return false;
        }
        start = end;
    }
    true
}

/// [`plain_characters`] for the bytes from `start` to `end` (a character starting there
/// may end after it).
fn plain_characters_in(bytes: &[u8], start: usize, end: usize) -> bool {
    let mut i = start;
    while i < end {
        let b = bytes[i];
        if b < 0x20 {
            if b != b'\n' && b != b'\t' {
                return false;
            }
        } else if b == 0x7f {
            return false;
        } else if b >= 0xc2 {
            let next = bytes.get(i + 1).copied().unwrap_or(0);
            let third = bytes.get(i + 2).copied().unwrap_or(0);
            let odd = match b {
                // C1 controls, NEL among them.
                0xc2 => next < 0xa0,
                // LINE SEPARATOR, PARAGRAPH SEPARATOR.
                0xe2 => next == 0x80 && (third == 0xa8 || third == 0xa9),
                // BOM, U+FFFE, U+FFFF.
                0xef => (next == 0xbb && third == 0xbf) || (next == 0xbf && third >= 0xbe),
                _ => false,
            };
            if odd {
                return false;
            }
        }
        i += 1;
    }
    true
}

#[derive(Clone, Copy)]
struct Line<'a> {
    /// Leading spaces.
    indent: usize,
    /// The line after them.
    rest: &'a str,
    /// Nothing but spaces (a tab there is left to the full parser).
    blank: bool,
}

impl<'a> Line<'a> {
    fn new(raw: &'a str) -> Self {
        let rest = raw.trim_start_matches(' ');
        Line {
            indent: raw.len() - rest.len(),
            rest,
            blank: rest.is_empty(),
        }
    }

    fn is_comment(&self) -> bool {
        self.rest.starts_with('#')
    }

    /// A block sequence entry: `-` then a space or the end of the line.
    fn is_item(&self) -> bool {
        self.rest == "-" || self.rest.starts_with("- ")
    }
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
    depth: usize,
    /// The document's last line ends with a line break.
    final_break: bool,
}

/// How a line's text starts a mapping entry.
enum KeyScan<'a> {
    /// The key and the text after its `:`.
    Key(String, &'a str),
    NotKey,
    /// Something only the full parser reads right.
    Unsure,
}

impl<'a> Parser<'a> {
    fn line(&self) -> Option<Line<'a>> {
        self.lines.get(self.at).copied()
    }

    /// Past blank and comment lines.
    fn skip_blank(&mut self) {
        while let Some(l) = self.line() {
            if !(l.blank || l.is_comment()) {
                break;
            }
            self.at += 1;
        }
    }

    fn deeper(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// The node that starts on the next lines, as the value of an entry at `parent`'s
    /// indentation (a sequence may sit at that indentation when `same_level_seq`).
    fn block_node(&mut self, parent: usize, same_level_seq: bool) -> Option<Value> {
        self.skip_blank();
        let Some(line) = self.line() else {
            return Some(Value::Null);
        };
        if line.rest.starts_with('\t') {
            return None;
        }
        if line.indent > parent {
            if line.is_item() {
                self.block_seq(line.indent)
            } else {
                self.block_map(line.indent)
            }
        } else if same_level_seq && line.indent == parent && line.is_item() {
            self.block_seq(line.indent)
        } else {
            Some(Value::Null)
        }
    }

    fn block_map(&mut self, indent: usize) -> Option<Value> {
        self.deeper()?;
        let mut map = Map::new();
        loop {
            self.skip_blank();
            let Some(line) = self.line() else { break };
            if line.indent < indent {
                break;
            }
            if line.indent > indent || line.is_item() || line.rest.starts_with('\t') {
                return None;
            }
            let KeyScan::Key(key, after) = key_of(line.rest) else {
                return None;
            };
            self.at += 1;
            let value = self.value(after, indent, true)?;
            if map.insert(key, value).is_some() {
                return None;
            }
        }
        self.depth -= 1;
        Some(Value::Object(map))
    }

    fn block_seq(&mut self, indent: usize) -> Option<Value> {
        self.deeper()?;
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            let Some(line) = self.line() else { break };
            if line.indent < indent || (line.indent == indent && !line.is_item()) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let after = &line.rest[1..];
            let item = after.trim_start_matches(' ');
            let column = indent + 1 + (after.len() - item.len());
            if item.starts_with('\t') || item == "-" || item.starts_with("- ") {
                return None;
            }
            let value = match key_of(item) {
                KeyScan::Unsure => return None,
                KeyScan::Key(..) => {
                    // `- key: value` opens a mapping at the key's column.
                    self.lines[self.at] = Line {
                        indent: column,
                        rest: item,
                        blank: false,
                    };
                    self.block_map(column)?
                }
                KeyScan::NotKey => {
                    self.at += 1;
                    self.value(item, indent, false)?
                }
            };
            items.push(value);
        }
        self.depth -= 1;
        Some(Value::Array(items))
    }

    /// The value whose text starts with `text` on a line already consumed, belonging to an
    /// entry at `parent`'s indentation.
    fn value(&mut self, text: &'a str, parent: usize, same_level_seq: bool) -> Option<Value> {
        let t = text.trim_start_matches(' ');
        if t.is_empty() || (t.starts_with('#') && t.len() < text.len()) {
            return self.block_node(parent, same_level_seq);
        }
        let (value, rest) = match t.as_bytes()[0] {
            b'"' | b'\'' => {
                let (s, rest) = self.quoted(t)?;
                (Value::String(s), rest)
            }
            b'[' | b'{' => {
                let mut flow = Flow {
                    text: t,
                    at: 0,
                    depth: self.depth,
                };
                let value = flow.node()?;
                (value, &t[flow.at..])
            }
            b'|' | b'>' => return self.block_scalar(t, parent),
            b'-' if t.len() == 1 || t.as_bytes()[1] == b' ' => return None,
            b'#' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b'?' | b':' | b',' | b']' | b'}'
            | b'\t' => return None,
            _ => return self.plain(t, parent),
        };
        end_of_line(rest).then_some(value)
    }

    /// A quoted scalar that opens at the start of `first` and may go on over the next
    /// lines, folded as YAML folds flow scalars; with the text after it on its last line.
    fn quoted(&mut self, first: &'a str) -> Option<(String, &'a str)> {
        let double = first.starts_with('"');
        let mut out = String::new();
        let mut text = &first[1..];
        loop {
            let escaped_break = match quoted_line(text, double, &mut out)? {
                Segment::Closed(rest) => return Some((out, rest)),
                Segment::Open { escaped_break } => escaped_break,
            };
            let mut empty = 0;
            let line = loop {
                let line = self.line()?;
                self.at += 1;
                if !line.blank {
                    break line;
                }
                empty += 1;
            };
            if line.rest.trim_start_matches([' ', '\t']).is_empty() {
                return None;
            }
            let at_document_marker =
                line.indent == 0 && (line.rest.starts_with("---") || line.rest.starts_with("..."));
            // Continuation lines may sit at any indentation (libyaml checks none), but not
            // at a document marker.
            if at_document_marker || (escaped_break && empty > 0) {
                return None;
            }
            if !escaped_break {
                fold_line_break(&mut out, empty);
            }
            text = line.rest.trim_start_matches([' ', '\t']);
        }
    }

    /// A plain scalar starting with `first`, continued on the more indented lines after it.
    fn plain(&mut self, first: &str, parent: usize) -> Option<Value> {
        let first = plain_line(first)?;
        let mut folded: Option<String> = None;
        let mut blanks = 0;
        let mut i = self.at;
        while let Some(line) = self.lines.get(i) {
            if line.blank {
                blanks += 1;
                i += 1;
                continue;
            }
            if line.indent <= parent || line.is_comment() {
                break;
            }
            // Indicators mean nothing here: a continuation line is text, whatever it
            // starts with (a comment line, above, ends the scalar).
            let text = plain_line(line.rest)?;
            let s = folded.get_or_insert_with(|| first.to_string());
            fold_line_break(s, blanks);
            s.push_str(text);
            blanks = 0;
            i += 1;
            self.at = i;
        }
        match folded {
            None => resolve_plain(first),
            Some(s) => match resolve_plain(&s)? {
                Value::String(_) => Some(Value::String(s)),
                other => Some(other),
            },
        }
    }

    /// A literal (`|`) or folded (`>`) scalar whose header is `header`.
    fn block_scalar(&mut self, header: &str, parent: usize) -> Option<Value> {
        let (literal, chomp, explicit) = block_header(header)?;
        let (strip, keep) = (chomp == Some(b'-'), chomp == Some(b'+'));
        // The content's indentation is that of its first non-blank line, unless the header
        // gives it relative to the entry's (as libyaml counts it: the enclosing
        // collection's indentation).
        let mut content_indent = None;
        let mut i = self.at;
        while let Some(line) = self.lines.get(i) {
            if !line.blank {
                content_indent = Some(line.indent);
                break;
            }
            i += 1;
        }
        let ci = match (content_indent, explicit) {
            (Some(first), Some(n)) if first >= parent + n => parent + n,
            // No content where the header says: the full parser.
            (_, Some(_)) => return None,
            (Some(ci), None) if ci > parent => ci,
            _ if keep => return None,
            _ => return Some(Value::String(String::new())),
        };
        // Each line after the content indentation: (extra indentation, text); blank lines
        // are (0, "").
        let mut body: Vec<(usize, &str)> = Vec::new();
        let mut end = self.at;
        let mut i = self.at;
        while let Some(line) = self.lines.get(i) {
            if line.blank {
                if line.indent > ci {
                    return None;
                }
                body.push((0, ""));
            } else if line.indent >= ci {
                if line.rest.trim_start_matches('\t').is_empty() {
                    return None;
                }
                body.push((line.indent - ci, line.rest));
                end = i + 1;
            } else {
                break;
            }
            i += 1;
        }
        // Where the last line has no line break, chomping reads it differently.
        if i == self.lines.len() && !self.final_break {
            return None;
        }
        self.at = if keep { i } else { end };
        let mut trailing = 0;
        while body.last() == Some(&(0, "")) {
            body.pop();
            trailing += 1;
        }
        // Line breaks as libyaml joins them: kept in literal text; in folded text, one
        // between two lines that start with text folds to a space (or to the empty lines
        // between them), while one next to a more indented line stays.
        let mut s = String::new();
        let (mut after_line, mut previous_indented, mut empty_lines) = (false, false, 0);
        for &(extra, text) in &body {
            if (extra, text) == (0, "") {
                empty_lines += 1;
                continue;
            }
            let indented = extra > 0 || text.starts_with('\t');
            if !literal && after_line && !previous_indented && !indented {
                fold_line_break(&mut s, empty_lines);
            } else {
                if after_line {
                    s.push('\n');
                }
                s.extend(std::iter::repeat_n('\n', empty_lines));
            }
            empty_lines = 0;
            s.extend(std::iter::repeat_n(' ', extra));
            s.push_str(text);
            (after_line, previous_indented) = (true, indented);
        }
        if !strip && after_line {
            s.push('\n');
        }
        if keep {
            s.extend(std::iter::repeat_n('\n', trailing));
        }
        Some(Value::String(s))
    }
}

/// A line break folded as YAML folds one between two lines of text: a space, or, when
/// `empty_lines` came between them, one line feed for each.
fn fold_line_break(out: &mut String, empty_lines: usize) {
    if empty_lines == 0 {
        out.push(' ');
    } else {
        out.extend(std::iter::repeat_n('\n', empty_lines));
    }
}

/// The text of one line of a plain scalar: up to a comment, without trailing blanks; `None`
/// when the line holds what only the full parser reads right (`: `, a final `:`, tabs).
fn plain_line(text: &str) -> Option<&str> {
    let text = match text.find(" #") {
        Some(i) => &text[..i],
        None => text,
    };
    let text = text.trim_end_matches(' ');
    if text.contains(": ") || text.ends_with(':') || text.contains('\t') {
        return None;
    }
    Some(text)
}

/// Nothing but blanks, or blanks and a comment, are left on the line.
fn end_of_line(rest: &str) -> bool {
    let t = rest.trim_start_matches(' ');
    t.is_empty() || (t.starts_with('#') && t.len() < rest.len())
}

/// The key at the start of `text` (a line after its indentation, or a sequence entry).
fn key_of(text: &str) -> KeyScan<'_> {
    let Some(&first) = text.as_bytes().first() else {
        return KeyScan::NotKey;
    };
    if first == b'"' || first == b'\'' {
        let Some((key, rest)) = quoted_on_line(text) else {
            return KeyScan::Unsure;
        };
        let rest = rest.trim_start_matches(' ');
        return match rest.strip_prefix(':') {
            Some(after) if after.is_empty() || after.starts_with(' ') => KeyScan::Key(key, after),
            _ if rest.starts_with(':') => KeyScan::Unsure,
            _ => KeyScan::NotKey,
        };
    }
    if matches!(first, b'[' | b'{') {
        // A flow collection as a key: the full parser.
        return if text.contains(": ") || text.trim_end_matches(' ').ends_with(':') {
            KeyScan::Unsure
        } else {
            KeyScan::NotKey
        };
    }
    if matches!(
        first,
        b'&' | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'%'
            | b'@'
            | b'`'
            | b'?'
            | b':'
            | b'#'
            | b','
            | b']'
            | b'}'
            | b'\t'
    ) {
        return KeyScan::Unsure;
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b':' if i + 1 == bytes.len() || bytes[i + 1] == b' ' => {
                let key = text[..i].trim_end_matches(' ');
                if key.contains('\t') || key == "<<" {
                    return KeyScan::Unsure;
                }
                return match resolve_plain(key) {
                    Some(Value::String(key)) => KeyScan::Key(key, &text[i + 1..]),
                    _ => KeyScan::Unsure,
                };
            }
            b'#' if i > 0 && bytes[i - 1] == b' ' => return KeyScan::NotKey,
            _ => {}
        }
        i += 1;
    }
    KeyScan::NotKey
}

/// How a line of a quoted scalar ends.
enum Segment<'a> {
    /// At the closing quote, with the text after it.
    Closed(&'a str),
    /// At the end of the line (after a `\` in a double-quoted scalar: the break is escaped).
    Open { escaped_break: bool },
}

/// Appends to `out` one line of a quoted scalar (the text after the opening quote, or a
/// continuation line after its indentation): white space at the end of the line is
/// folded away, escaped characters are kept.
fn quoted_line<'a>(text: &'a str, double: bool, out: &mut String) -> Option<Segment<'a>> {
    let mut pending = 0..0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' | '\t' => {
                if pending.is_empty() {
                    pending = i..i;
                }
                pending.end = i + 1;
                continue;
            }
            _ => {}
        }
        out.push_str(&text[pending.clone()]);
        pending = 0..0;
        match c {
            '\'' if !double => {
                if chars.peek().is_some_and(|&(_, n)| n == '\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Some(Segment::Closed(&text[i + 1..]));
                }
            }
            '"' if double => return Some(Segment::Closed(&text[i + 1..])),
            '\\' if double => {
                let Some((_, e)) = chars.next() else {
                    return Some(Segment::Open {
                        escaped_break: true,
                    });
                };
                out.push(escaped(e, &mut chars)?);
            }
            c => out.push(c),
        }
    }
    Some(Segment::Open {
        escaped_break: false,
    })
}

/// The character a double-quoted scalar's escape `\e` stands for (reading the digits of
/// `\x`, `\u` and `\U` from `chars`).
fn escaped(e: char, chars: &mut impl Iterator<Item = (usize, char)>) -> Option<char> {
    let simple = match e {
        '0' => '\0',
        'a' => '\x07',
        'b' => '\x08',
        't' | '\t' => '\t',
        'n' => '\n',
        'v' => '\x0b',
        'f' => '\x0c',
        'r' => '\r',
        'e' => '\x1b',
        ' ' => ' ',
        '"' => '"',
        '/' => '/',
        '\\' => '\\',
        'N' => '\u{85}',
        '_' => '\u{a0}',
        'L' => '\u{2028}',
        'P' => '\u{2029}',
        'x' | 'u' | 'U' => {
            let digits = match e {
                'x' => 2,
                'u' => 4,
                _ => 8,
            };
            let mut code = 0u32;
            for _ in 0..digits {
                let (_, d) = chars.next()?;
                code = code * 16 + d.to_digit(16)?;
            }
            return char::from_u32(code);
        }
        _ => return None,
    };
    Some(simple)
}

/// A quoted scalar (double or single) that closes on its line, and the text after it.
fn quoted_on_line(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    match quoted_line(&text[1..], text.starts_with('"'), &mut out)? {
        Segment::Closed(rest) => Some((out, rest)),
        Segment::Open { .. } => None,
    }
}

/// A plain scalar's value as serde_yaml resolves untagged scalars: null, booleans and
/// integers; `None` for every other number (floats, hex, octal, binary, signs), which the
/// full parser resolves.
fn resolve_plain(s: &str) -> Option<Value> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        _ => {}
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return Some(Value::String(s.to_string()));
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if digits.len() > 1 && digits.starts_with('0') {
            // A leading zero makes digits a string (YAML 1.2).
            return Some(Value::String(s.to_string()));
        }
        return if s.starts_with('-') {
            s.parse::<i64>().ok().map(Value::from)
        } else {
            s.parse::<u64>().ok().map(Value::from)
        };
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let numberish = unsigned.parse::<f64>().is_ok()
        || unsigned.starts_with("0x")
        || unsigned.starts_with("0o")
        || unsigned.starts_with("0b")
        || matches!(
            unsigned,
            ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN"
        );
    if numberish {
        None
    } else {
        Some(Value::String(s.to_string()))
    }
}

/// A flow collection that closes on its line.
struct Flow<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl Flow<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    fn node(&mut self) -> Option<Value> {
        self.spaces();
        match self.peek()? {
            b'[' => self.seq(),
            b'{' => self.map(),
            b'"' | b'\'' => {
                let (s, rest) = quoted_on_line(&self.text[self.at..])?;
                self.at = self.text.len() - rest.len();
                Some(Value::String(s))
            }
            _ => {
                let s = self.plain()?;
                resolve_plain(s)
            }
        }
    }

    /// A plain scalar in flow context: up to `,`, a bracket, `: ` or a comment.
    fn plain(&mut self) -> Option<&str> {
        let start = self.at;
        let bytes = self.text.as_bytes();
        if matches!(
            bytes[start],
            b'#' | b'&'
                | b'*'
                | b'!'
                | b'|'
                | b'>'
                | b'%'
                | b'@'
                | b'`'
                | b'?'
                | b':'
                | b'-'
                | b','
        ) && !(bytes[start] == b'-' && bytes.get(start + 1).is_some_and(u8::is_ascii_digit))
        {
            return None;
        }
        let mut i = start;
        while i < bytes.len() {
            match bytes[i] {
                b',' | b'[' | b']' | b'{' | b'}' => break,
                b':' if matches!(bytes.get(i + 1), None | Some(b' ' | b',' | b']' | b'}')) => break,
                b'#' if bytes[i - 1] == b' ' => return None,
                b'\t' => return None,
                _ => {}
            }
            i += 1;
        }
        self.at = i;
        let s = self.text[start..i].trim_end_matches(' ');
        (!s.is_empty()).then_some(s)
    }

    /// A collection closed by `close`, its entries separated by commas, each read by
    /// `entry`.
    fn collection(
        &mut self,
        close: u8,
        mut entry: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.spaces();
        if self.peek()? != close {
            loop {
                entry(self)?;
                self.spaces();
                match self.peek()? {
                    b',' => self.at += 1,
                    c if c == close => break,
                    _ => return None,
                }
            }
        }
        self.at += 1;
        self.depth -= 1;
        Some(())
    }

    fn seq(&mut self) -> Option<Value> {
        let mut items = Vec::new();
        self.collection(b']', |flow| {
            items.push(flow.node()?);
            Some(())
        })?;
        Some(Value::Array(items))
    }

    fn map(&mut self) -> Option<Value> {
        let mut map = Map::new();
        self.collection(b'}', |flow| {
            flow.spaces();
            let key = match flow.node()? {
                Value::String(k) if flow.peek() == Some(b':') => k,
                _ => return None,
            };
            flow.at += 1;
            flow.spaces();
            if matches!(flow.peek()?, b',' | b'}') {
                return None;
            }
            let value = flow.node()?;
            if key == "<<" || map.insert(key, value).is_some() {
                return None;
            }
            Some(())
        })?;
        Some(Value::Object(map))
    }
}

/// A block scalar's header: literal (`|`) or folded, then a chomping indicator and an
/// indentation indicator, in either order. None when anything else follows on the line.
fn block_header(header: &str) -> Option<(bool, Option<u8>, Option<usize>)> {
    let literal = header.starts_with('|');
    let mut h = &header[1..];
    let (mut chomp, mut explicit) = (None, None);
    while let Some(&c) = h.as_bytes().first() {
        match c {
            b'-' | b'+' if chomp.is_none() => chomp = Some(c),
            b'1'..=b'9' if explicit.is_none() => explicit = Some(usize::from(c - b'0')),
            _ => break,
        }
        h = &h[1..];
    }
    end_of_line(h).then_some((literal, chomp, explicit))
}

#[cfg(test)]
mod tests;
