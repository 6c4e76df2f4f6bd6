//! The one error of the reading room, below the loader and the stream that both report it.

use std::path::{Path, PathBuf};

use crate::catalog::text::limits::human_bytes;

/// Why a catalog could not be read: the one error of the reading room. The `Stream…`
/// variants are what a [`stream`] reports, before the loader names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not a well-formed JSON or YAML stream. Line and column count from 1.
    #[error("{path}:{line}{}: document {document}: malformed {format}: {message}", column_suffix(*.column))]
    Parse {
        path: PathBuf,
        line: usize,
        column: Option<usize>,
        document: usize,
        format: &'static str,
        message: String,
    },
    #[error(
        "{path}:{line}: document {document}: a catalog blob must be an object with a \"schema\" key"
    )]
    MissingSchema {
        path: PathBuf,
        line: usize,
        document: usize,
    },
    #[error("{path}:{line}: document {document}: invalid {schema} {name:?}: {message}")]
    InvalidBlob {
        path: PathBuf,
        line: usize,
        document: usize,
        schema: String,
        name: String,
        message: String,
    },
    /// A document or YAML file past
    /// [`MAX_DOCUMENT_BYTES`](crate::catalog::text::limits::MAX_DOCUMENT_BYTES).
    #[error("{path}:{line}: document {document}: larger than the limit of {} for one {what}", human_bytes(*.limit))]
    TooLarge {
        path: PathBuf,
        what: &'static str,
        line: usize,
        document: usize,
        limit: usize,
    },
    /// More blobs (of one kind) in a catalog than its limit allows.
    #[error("{path}: more than the limit of {limit} {what} in one catalog")]
    TooMany {
        path: PathBuf,
        what: &'static str,
        limit: usize,
    },
    /// [`Self::Io`] from a [`stream`] of documents, which knows no file name.
    #[error(transparent)]
    StreamIo(std::io::Error),
    /// [`Self::Parse`] from a [`stream`]; `line` and `column` (in bytes) are 1-based and
    /// count from the start of the stream.
    #[error("line {line}{}: document {document}: malformed {format}: {message}", stream_column_suffix(*.column))]
    StreamMalformed {
        format: &'static str,
        document: usize,
        line: usize,
        column: Option<usize>,
        message: String,
    },
    /// [`Self::TooLarge`] from a [`stream`]: a document (or a YAML stream, read whole) past
    /// the limit.
    #[error(
        "line {line}: document {document}: larger than the limit of {} for one {what}",
        human_bytes(*.limit)
    )]
    StreamTooLarge {
        what: &'static str,
        document: usize,
        line: usize,
        limit: usize,
    },
}

fn column_suffix(column: Option<usize>) -> String {
    column.map(|c| format!(":{c}")).unwrap_or_default()
}

fn stream_column_suffix(column: Option<usize>) -> String {
    column.map(|c| format!(", column {c}")).unwrap_or_default()
}

impl LoadError {
    /// A [`stream`]'s error, named by the file it read (`path`); other errors as they are.
    pub(super) fn in_file(self, path: &Path) -> Self {
        match self {
            LoadError::StreamIo(source) => LoadError::Io {
                path: path.to_path_buf(),
                source,
            },
            LoadError::StreamMalformed {
                format,
                document,
                line,
                column,
                message,
            } => LoadError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                document,
                format,
                message,
            },
            LoadError::StreamTooLarge {
                what,
                document,
                line,
                limit,
            } => LoadError::TooLarge {
                path: path.to_path_buf(),
                what,
                line,
                document,
                limit,
            },
            other => other,
        }
    }
}
