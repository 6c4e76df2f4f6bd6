//! Reading one catalog file as a stream of documents, the way opm's loader (Kubernetes'
//! YAML-or-JSON decoder) reads it, for files and in-memory text alike:
//!
//! - If the first non-blank character in the first 4 KiB is `{`, the stream is read as JSON
//!   values, back to back, with nothing but JSON whitespace between them (`{…}{…}` is fine;
//!   `{…}} ]{…}` is not).
//! - Otherwise, or if the JSON reading fails before a second document was read, the rest of
//!   the stream (from the end of the last good document, after its line's trailing blanks)
//!   is read as YAML documents split at lines starting with `---`. In that fallback the
//!   JSON error is the one reported when the first YAML document fails too. So a UTF-8 BOM
//!   before a single JSON document, JSON with trailing commas, or one JSON document followed
//!   by YAML are all accepted, as opm accepts them.
//! - A YAML document that holds nothing (blank lines, comments, a lone `---`) is a `null`
//!   document; the caller decides what that means.
//!
//! tests/upstream_opm.rs checks these rules against opm itself, case by case.
//!
//! JSON is read in chunks: the extent of each top-level value is found by counting
//! brackets outside strings, then that value alone is parsed from its slice. Parsing from a
//! slice is several times faster than serde_json's reader, and only one document plus one
//! chunk is in memory at a time, so a huge catalog is never held twice (text and values).
//! Only the YAML fallback after a JSON failure (an error path) reads the rest at once.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value;

use super::error::LoadError;
use crate::catalog::text::limits::{MAX_DOCUMENT_BYTES, MAX_NESTING};

/// How far into a stream the JSON-or-YAML guess looks (opm's buffer size).
const SNIFF_LEN: usize = 4096;

/// How much to read at a time.
const CHUNK: usize = 1 << 20;

/// One document of a stream.
#[derive(Debug)]
pub struct Document {
    /// 1-based position in the stream.
    pub index: usize,
    /// 1-based line on which the document starts.
    pub line: usize,
    pub value: Value,
}

/// Why reading stopped: the stream is malformed (one of the `Stream…` variants of
/// [`LoadError`], which name no file), or the caller's callback failed.
#[derive(Debug)]
pub enum Stop<E> {
    Stream(LoadError),
    Callback(E),
}

impl<E> From<LoadError> for Stop<E> {
    fn from(e: LoadError) -> Self {
        Stop::Stream(e)
    }
}

/// Calls `each` with every document of the stream, in order, stopping at the first error.
pub fn for_each_document<E>(
    mut reader: impl BufRead,
    mut each: impl FnMut(Document) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let mut buf = Vec::with_capacity(SNIFF_LEN);
    while buf.len() < SNIFF_LEN {
        let available = reader.fill_buf().map_err(LoadError::StreamIo)?;
        if available.is_empty() {
            break;
        }
        let n = available.len().min(CHUNK);
        buf.extend_from_slice(&available[..n]);
        reader.consume(n);
    }
    if looks_like_json(&buf[..buf.len().min(SNIFF_LEN)]) {
        read_json(reader, buf, &mut each)
    } else {
        read_rest(reader, &mut buf, 1, 1)?;
        read_yaml(&buf, Position::START, 0, None, &mut each)
    }
}

/// Reads the rest of the stream into `buf`, as YAML is read (whole), refusing more than
/// [`MAX_DOCUMENT_BYTES`] in all; `document` and `line` say where the YAML starts.
fn read_rest(
    reader: impl BufRead,
    buf: &mut Vec<u8>,
    document: usize,
    line: usize,
) -> Result<(), LoadError> {
    use std::io::Read;
    let room = (MAX_DOCUMENT_BYTES + 1).saturating_sub(buf.len()) as u64;
    reader
        .take(room)
        .read_to_end(buf)
        .map_err(LoadError::StreamIo)?;
    if buf.len() > MAX_DOCUMENT_BYTES {
        return Err(LoadError::StreamTooLarge {
            what: "YAML file",
            document,
            line,
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    Ok(())
}

/// Whether the first non-whitespace character (Unicode whitespace, as Go's
/// `unicode.IsSpace`) is `{`.
fn looks_like_json(head: &[u8]) -> bool {
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // Cut mid-character at the end, or not UTF-8: what comes before still decides.
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    text.trim_start_matches(char::is_whitespace)
        .starts_with('{')
}

/// A place in the stream: byte offset, 1-based line, and the offset at which that line
/// starts (for columns).
#[derive(Clone, Copy, Debug)]
struct Position {
    offset: usize,
    line: usize,
    line_start: usize,
}

impl Position {
    const START: Position = Position {
        offset: 0,
        line: 1,
        line_start: 0,
    };

    /// This position moved over `bytes` (which start at it).
    fn advanced_over(mut self, bytes: &[u8]) -> Position {
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        if newlines > 0 {
            self.line += newlines;
            let last = bytes.iter().rposition(|&b| b == b'\n').unwrap_or_default();
            self.line_start = self.offset + last + 1;
        }
        self.offset += bytes.len();
        self
    }

    fn column(&self) -> usize {
        self.offset - self.line_start + 1
    }
}

/// The JSON reading: see the module documentation.
fn read_json<E>(
    mut reader: impl BufRead,
    mut buf: Vec<u8>,
    each: &mut impl FnMut(Document) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let mut scanner = JsonScanner::new();
    // buf[..done] is read and passed on; `at` is where buf[done] is in the stream. The
    // buffer sheds what is done only when it takes in more, so that costs one move a chunk.
    let mut done = 0;
    let mut at = Position::START;
    // Documents read so far.
    let mut count = 0;
    let mut at_eof = false;
    loop {
        let failure = match scanner.scan(&buf, at_eof) {
            Scan::Value { range, start } => {
                let document = count + 1;
                if range.len() > MAX_DOCUMENT_BYTES {
                    return Err(LoadError::StreamTooLarge {
                        what: "JSON document",
                        document,
                        line: start.line,
                        limit: MAX_DOCUMENT_BYTES,
                    }
                    .into());
                }
                match parse_json(&buf[range.clone()]) {
                    Ok(value) => {
                        count = document;
                        each(Document {
                            index: document,
                            line: start.line,
                            value,
                        })
                        .map_err(Stop::Callback)?;
                        at = scanner.here(range.end);
                        done = range.end;
                        continue;
                    }
                    Err(e) => json_error(document, start, &e),
                }
            }
            Scan::Unexpected { at, message } => json_malformed(count + 1, at, message),
            Scan::NeedMore => {
                if at_eof {
                    return Ok(());
                }
                if let Some((begin, start)) = scanner.start
                    && buf.len() - begin > MAX_DOCUMENT_BYTES
                {
                    return Err(LoadError::StreamTooLarge {
                        what: "JSON document",
                        document: count + 1,
                        line: start.line,
                        limit: MAX_DOCUMENT_BYTES,
                    }
                    .into());
                }
                let available = reader.fill_buf().map_err(LoadError::StreamIo)?;
                if available.is_empty() {
                    at_eof = true;
                } else {
                    let n = available.len().min(CHUNK);
                    buf.drain(..done);
                    scanner.shed(done);
                    done = 0;
                    buf.extend_from_slice(&available[..n]);
                    reader.consume(n);
                }
                continue;
            }
        };
        // Like opm: with two documents read this is a JSON stream, and the error stands.
        if count >= 2 {
            return Err(failure.into());
        }
        read_rest(reader, &mut buf, count + 1, at.line)?;
        let rest = &buf[done..];
        let Some(blank) = trailing_blanks(rest) else {
            return Err(failure.into());
        };
        let start = at.advanced_over(&rest[..blank]);
        return read_yaml(&rest[blank..], start, count, Some(failure), each);
    }
}

/// One JSON value. Where serde_json refuses what Go's decoder (and so opm) reads, the value
/// is read again as Go reads it; that costs nothing on well-formed input.
fn parse_json(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice(bytes).or_else(|e| match go_lenient(bytes) {
        // Positions in the first error are the file's; report that one.
        Some(fixed) => serde_json::from_slice(&fixed).map_err(|_| e),
        None => Err(e),
    })
}

/// `bytes` as Go's JSON decoder sees them, if that differs: bytes that are not UTF-8 and
/// `\u` escapes of unpaired UTF-16 surrogates both stand for U+FFFD. Outside strings the
/// replacement is still an error, as it is to Go.
fn go_lenient(bytes: &[u8]) -> Option<Vec<u8>> {
    let lossy = String::from_utf8_lossy(bytes);
    let valid_utf8 = matches!(lossy, std::borrow::Cow::Borrowed(_));
    let text = lossy.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let digits = std::str::from_utf8(text.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    let mut unpaired = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].iter().position(|&b| b == b'\\') {
        let at = i + found;
        if text.get(at + 1) != Some(&b'u') {
            i = at + 2;
            continue;
        }
        match hex(at + 2) {
            Some(0xD800..=0xDBFF)
                if text.get(at + 6..at + 8) == Some(b"\\u")
                    && matches!(hex(at + 8), Some(0xDC00..=0xDFFF)) =>
            {
                i = at + 12;
            }
            Some(0xD800..=0xDFFF) => {
                unpaired.push(at);
                i = at + 6;
            }
            _ => i = at + 2,
        }
        i = i.min(text.len());
    }
    if unpaired.is_empty() && valid_utf8 {
        return None;
    }
    let mut fixed = Vec::with_capacity(text.len());
    let mut from = 0;
    for at in unpaired {
        fixed.extend_from_slice(&text[from..at]);
        fixed.extend_from_slice(b"\\ufffd");
        from = at + 6;
    }
    fixed.extend_from_slice(&text[from..]);
    Some(fixed)
}

/// What the scanner found in the buffer.
enum Scan {
    /// A complete top-level value that opens with `{` (its bracket structure at least),
    /// or one that is broken by a mismatched bracket or the end of the stream (serde_json
    /// then tells what is wrong with it). `start` is where it starts in the stream.
    Value {
        range: std::ops::Range<usize>,
        start: Position,
    },
    /// Something other than whitespace or an object between documents.
    Unexpected {
        at: Position,
        message: String,
    },
    NeedMore,
}

/// Finds top-level values by counting brackets outside strings, and lines as it goes. Its
/// state carries over between calls so a value that spans chunks is scanned once.
struct JsonScanner {
    /// Open brackets of the current value (`}` or `]`: what closes each).
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// Where the current value starts in the buffer, and in the stream.
    start: Option<(usize, Position)>,
    /// How far the buffer has been scanned.
    scanned: usize,
    /// How many bytes the buffer has shed: the stream offset of its first byte.
    shed: usize,
    /// The line being scanned, and the stream offset at which it starts. Only newlines
    /// outside strings count: inside a string one is an error anyway.
    line: usize,
    line_start: usize,
}

impl JsonScanner {
    fn new() -> Self {
        JsonScanner {
            open: Vec::new(),
            in_string: false,
            escaped: false,
            start: None,
            scanned: 0,
            shed: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// The buffer lost its first `n` bytes (all scanned, none in the current value).
    fn shed(&mut self, n: usize) {
        self.scanned -= n;
        self.shed += n;
        if let Some((start, _)) = &mut self.start {
            *start -= n;
        }
    }

    /// The stream position of `buf[i]`, where the scan stopped (no newline in between).
    fn here(&self, i: usize) -> Position {
        Position {
            offset: self.shed + i,
            line: self.line,
            line_start: self.line_start,
        }
    }

    fn scan(&mut self, buf: &[u8], at_eof: bool) -> Scan {
        let mut i = self.scanned;
        while i < buf.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else {
                    i += plain_string_bytes(&buf[i..]);
                    match buf.get(i) {
                        Some(b'\\') => self.escaped = true,
                        Some(_) => self.in_string = false,
                        None => break,
                    }
                }
                i += 1;
                continue;
            }
            match buf[i] {
                b'"' if self.start.is_some() => self.in_string = true,
                b'{' => {
                    if self.start.is_none() {
                        self.start = Some((i, self.here(i)));
                    }
                    self.open.push(b'}');
                }
                b'[' if self.start.is_some() => self.open.push(b']'),
                b @ (b'}' | b']') if self.start.is_some() => {
                    let matched = self.open.pop() == Some(b);
                    if !matched || self.open.is_empty() {
                        return self.value_until(i + 1);
                    }
                }
                b'\n' => {
                    self.line += 1;
                    self.line_start = self.shed + i + 1;
                }
                b' ' | b'\t' | b'\r' => {}
                _ if self.start.is_none() => {
                    self.scanned = i;
                    return Scan::Unexpected {
                        at: self.here(i),
                        message: between_documents(buf, i),
                    };
                }
                _ => {}
            }
            i += 1;
        }
        self.scanned = buf.len();
        if at_eof && self.start.is_some() {
            return self.value_until(buf.len());
        }
        Scan::NeedMore
    }

    /// The current value, ending before `end`; the scan goes on from there.
    fn value_until(&mut self, end: usize) -> Scan {
        let (begin, start) = self.start.take().unwrap_or((end, self.here(end)));
        self.open.clear();
        self.in_string = false;
        self.escaped = false;
        self.scanned = end;
        Scan::Value {
            range: begin..end,
            start,
        }
    }
}

/// How many bytes at the start of `bytes` are neither `"` nor `\`: the plain run of a
/// string. Looks at 32 bytes at a time (the compiler makes that a vector compare), since
/// catalogs are mostly long base64 strings.
fn plain_string_bytes(bytes: &[u8]) -> usize {
    const STRIDE: usize = 32;
    let special = |b: u8| b == b'"' || b == b'\\';
    let mut n = 0;
    for block in bytes.chunks_exact(STRIDE) {
        if block.iter().fold(false, |hit, &b| hit | special(b)) {
            break;
        }
        n += STRIDE;
    }
    n + bytes[n..]
        .iter()
        .position(|&b| special(b))
        .unwrap_or(bytes.len() - n)
}

/// Why the character at `at` (outside any document) cannot be there.
fn between_documents(buf: &[u8], at: usize) -> String {
    let shown = String::from_utf8_lossy(&buf[at..buf.len().min(at + 4)])
        .chars()
        .next()
        .unwrap_or(char::REPLACEMENT_CHARACTER);
    match buf[at] {
        // The start of a JSON value, but not of an object.
        b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
            "a catalog document must be a JSON object".into()
        }
        _ => format!("invalid character {shown:?} looking for beginning of value"),
    }
}

fn json_malformed(document: usize, at: Position, message: String) -> LoadError {
    LoadError::StreamMalformed {
        format: "JSON",
        document,
        line: at.line,
        column: Some(at.column()),
        message,
    }
}

/// serde_json's and serde_yaml's "recursion limit exceeded", saying which limit.
fn name_nesting_limit(message: &str) -> String {
    match message.strip_prefix("recursion limit exceeded") {
        Some(rest) => format!("nested more than the limit of {MAX_NESTING} levels{rest}"),
        None => message.to_string(),
    }
}

/// serde_json's error for a value that starts at `start`, placed in the stream.
fn json_error(document: usize, start: Position, e: &serde_json::Error) -> LoadError {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = name_nesting_limit(text.strip_suffix(&suffix).unwrap_or(&text));
    let (line, column) = if e.line() <= 1 {
        (start.line, start.column() + e.column().saturating_sub(1))
    } else {
        (start.line + e.line() - 1, e.column())
    };
    LoadError::StreamMalformed {
        format: "JSON",
        document,
        line,
        column: Some(column.max(1)),
        message,
    }
}

/// Where YAML reading starts after a JSON failure: past Unicode whitespace up to and
/// including the first newline. `None` (no YAML attempt) if the text ends first or a
/// character there is not valid UTF-8, as with opm.
fn trailing_blanks(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let rest = &buf[i..buf.len().min(i + 4)];
        let c = match std::str::from_utf8(rest) {
            Ok(s) => s.chars().next(),
            Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&rest[..e.valid_up_to()])
                .ok()
                .and_then(|s| s.chars().next()),
            Err(_) => None,
        }?;
        if c == char::REPLACEMENT_CHARACTER {
            return None;
        }
        if !c.is_whitespace() {
            return Some(i);
        }
        i += c.len_utf8();
        if c == '\n' {
            return Some(i);
        }
    }
}

/// The YAML reading of `bytes` (which start at `start` in the stream), `count` documents
/// having been read before. When this is the fallback after a JSON failure, that failure
/// is what is reported if the first YAML document fails too.
fn read_yaml<E>(
    bytes: &[u8],
    start: Position,
    count: usize,
    mut json_failure: Option<LoadError>,
    each: &mut impl FnMut(Document) -> Result<(), E>,
) -> Result<(), Stop<E>> {
    let mut index = count;
    for chunk in yaml_documents(bytes, start.line) {
        index += 1;
        let parsed = match chunk {
            Ok((line, doc)) => parse_yaml_document(doc, line, index).map(|value| (line, value)),
            Err((line, message)) => Err(LoadError::StreamMalformed {
                format: "YAML",
                document: index,
                line,
                column: None,
                message,
            }),
        };
        let (line, value) = match (parsed, json_failure.take()) {
            (Ok((_, value)), Some(failure)) if !(value.is_object() || value.is_null()) => {
                return Err(failure.into());
            }
            (Err(_), Some(failure)) => return Err(failure.into()),
            (Err(e), None) => return Err(e.into()),
            (Ok(ok), _) => ok,
        };
        each(Document { index, line, value }).map_err(Stop::Callback)?;
    }
    Ok(())
}

/// The documents of YAML text as opm splits them: at lines that start with `---` followed
/// by nothing but blanks or a comment (anything else there is an error). A separator line
/// that opens the text or follows another separator belongs to the next document. Each
/// item is the document's first line (1-based, counting from `first_line`) and its bytes,
/// or the line of a bad separator and what is wrong with it.
pub(in crate::catalog) fn yaml_documents(
    bytes: &[u8],
    first_line: usize,
) -> impl Iterator<Item = Result<(usize, &[u8]), (usize, String)>> {
    let mut lines = lines_of(bytes).enumerate();
    let mut offset = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut start: Option<(usize, usize)> = None;
        for (n, line) in lines.by_ref() {
            let line_no = first_line + n;
            let at = offset;
            offset += line.len();
            if let Some(rest) = line.strip_prefix(b"---") {
                let rest = String::from_utf8_lossy(rest);
                let rest = rest.trim();
                if !rest.is_empty() && !rest.starts_with('#') {
                    done = true;
                    return Some(Err((
                        line_no,
                        format!("invalid YAML document separator: {rest}"),
                    )));
                }
                if let Some((s, l)) = start {
                    return Some(Ok((l, &bytes[s..at])));
                }
            }
            start.get_or_insert((at, line_no));
        }
        done = true;
        start.map(|(s, l)| Ok((l, &bytes[s..])))
    })
}

/// The lines of `bytes`, each with its line break (`split_inclusive`, found by memchr).
fn lines_of(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (line, after) = rest.split_at(end);
        rest = after;
        Some(line)
    })
}

/// One document's text (as split by `yaml_documents`) as a value: only its first YAML
/// document counts, and one with no content is `null`.
fn parse_yaml_document(doc: &[u8], line: usize, index: usize) -> Result<Value, LoadError> {
    let doc = std::str::from_utf8(doc).map_err(|e| {
        let at = Position {
            offset: 0,
            line,
            line_start: 0,
        }
        .advanced_over(&doc[..e.valid_up_to()]);
        LoadError::StreamMalformed {
            format: "YAML",
            document: index,
            line: at.line,
            column: Some(at.column()),
            message: "invalid UTF-8".into(),
        }
    })?;
    let malformed = |e: serde_yaml::Error| {
        let (at_line, column) = e
            .location()
            .map_or((line, None), |l| (line + l.line() - 1, Some(l.column())));
        LoadError::StreamMalformed {
            format: "YAML",
            document: index,
            line: at_line,
            column,
            message: name_nesting_limit(&shift_lines(&e.to_string(), line - 1)),
        }
    };
    // Each document is its own YAML stream to opm, so a byte order mark may open any.
    let doc = doc.strip_prefix('\u{feff}').unwrap_or(doc);
    // Common manifests take a fast path that reads them as libyaml does (and nests them
    // only as deep as its own limit).
    if let Some(value) = crate::catalog::text::fast_yaml::parse(doc) {
        return Ok(value);
    }
    if let Err(deep) = crate::catalog::text::yaml_nesting::check(doc.as_bytes()) {
        return Err(LoadError::StreamMalformed {
            format: "YAML",
            document: index,
            line: line + deep.line - 1,
            column: Some(deep.column),
            message: deep.to_string(),
        });
    }
    libyaml_document(doc).map_err(malformed)
}

/// The first YAML document of `doc` as libyaml (under serde_yaml) reads it, `null` when it
/// has none.
pub(in crate::catalog) fn libyaml_document(doc: &str) -> Result<Value, serde_yaml::Error> {
    let Some(document) = serde_yaml::Deserializer::from_str(doc).next() else {
        return Ok(Value::Null);
    };
    if !doc.contains("<<") {
        return Value::deserialize(document);
    }
    // Merge keys (`<<: *anchor`) are merged, as Go's YAML library merges them.
    let mut value = serde_yaml::Value::deserialize(document)?;
    value.apply_merge()?;
    Ok(yaml_to_json(value))
}

/// A YAML value as JSON; keys that are not strings become their YAML text, as Go's
/// YAML-to-JSON conversion makes them.
fn yaml_to_json(value: serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(&n).unwrap_or(Value::Null),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Y::String(s) => s,
                        Y::Bool(b) => b.to_string(),
                        Y::Number(n) => n.to_string(),
                        Y::Null => "null".into(),
                        other => serde_yaml::to_string(&other)
                            .unwrap_or_default()
                            .trim_end()
                            .to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Y::Tagged(tagged) => yaml_to_json(tagged.value),
    }
}

/// `message` with every "line N" made N + `by`, so positions count from the stream's start.
fn shift_lines(message: &str, by: usize) -> String {
    if by == 0 {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("line ") {
        let (before, after) = rest.split_at(at + "line ".len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + by).to_string()),
            Err(_) => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// All documents (as JSON text) or the error, reading through a buffer of `capacity`.
    fn read(bytes: &[u8], capacity: usize) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for_each_document(std::io::BufReader::with_capacity(capacity, bytes), |d| {
            out.push(format!("{}@{}:{}", d.index, d.line, d.value));
            Ok::<_, ()>(())
        })
        .map_err(|e| match e {
            Stop::Stream(e) => e.to_string(),
            Stop::Callback(()) => unreachable!(),
        })?;
        Ok(out)
    }

    #[test]
    fn documents_know_their_lines() {
        let text = b"{\"a\": 1}\n\n{\n  \"b\": \"}{\\\"\"\n}{\"c\": [{}]}";
        assert_eq!(
            read(text, 1 << 20).unwrap(),
            [r#"1@1:{"a":1}"#, r#"2@3:{"b":"}{\""}"#, r#"3@5:{"c":[{}]}"#]
        );
        let yaml = b"a: 1\n---\n# c\nb: 2\n";
        assert_eq!(
            read(yaml, 1 << 20).unwrap(),
            [r#"1@1:{"a":1}"#, r#"2@3:{"b":2}"#]
        );
    }

    #[test]
    fn yaml_errors_count_lines_from_the_start_of_the_file() {
        let err = read(b"a: 1\n---\nb: [1\n", 1 << 20).unwrap_err();
        assert!(err.starts_with("line 4"), "{err}");
        assert!(!err.contains("line 2 "), "{err}");
    }

    proptest! {
        /// Chunk boundaries never change what is read, valid or not.
        #[test]
        fn any_buffer_size_reads_the_same(
            docs in prop::collection::vec(
                prop_oneof![
                    Just(r#"{"schema":"olm.package","name":"p"}"#.to_string()),
                    Just("{\"x\": [1, {\"y\": \"a}]\\\\\"\"}]}".to_string()),
                    Just(format!("{{\"long\": \"{}\\\"{}\\\\\"}}", "a".repeat(40), "b".repeat(31))),
                    Just("\n\t ".to_string()),
                    Just("}".to_string()),
                    Just("{\"z\":".to_string()),
                    Just("[".to_string()),
                    Just("\u{feff}".to_string()),
                ],
                0..8,
            ),
            capacity in 1usize..64,
        ) {
            let text = docs.concat();
            prop_assert_eq!(read(text.as_bytes(), capacity), read(text.as_bytes(), 1 << 20));
        }
    }
}
