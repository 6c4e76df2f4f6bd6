//! The handlers: what is reversed, and how bad input is answered.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

pub const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

#[derive(Clone)]
pub struct Release(pub Arc<str>);

/// Reverses by characters (Unicode scalar values), as the original app does.
pub fn reverse_text(text: &str) -> String {
    text.chars().rev().collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    word: Option<String>,
    words: Option<Vec<String>>,
}

fn bad_request(message: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": message }))).into_response()
}

pub async fn reverse(headers: HeaderMap, body: Bytes) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let is_text = content_type.starts_with("text/")
        || (content_type.is_empty() && !body.trim_ascii_start().starts_with(b"{"));
    if is_text {
        let Ok(text) = std::str::from_utf8(&body) else {
            return bad_request("the body is not UTF-8 text");
        };
        if text.trim().is_empty() {
            return bad_request("nothing to reverse: the body is empty");
        }
        return reverse_text(text).into_response();
    }
    let input: Input = match serde_json::from_slice(&body) {
        Ok(input) => input,
        Err(error) => {
            return bad_request(&format!(
                "expected {{\"word\": \"…\"}} or {{\"words\": [\"…\"]}}: {error}"
            ));
        }
    };
    match (input.word, input.words) {
        (Some(word), None) if !word.is_empty() => {
            Json(json!({ "reverse_word": reverse_text(&word) })).into_response()
        }
        (None, Some(words)) if !words.is_empty() => {
            let reversed: Vec<String> = words.iter().map(|w| reverse_text(w)).collect();
            Json(json!({ "reverse_words": reversed })).into_response()
        }
        (Some(_), Some(_)) => bad_request("give either \"word\" or \"words\", not both"),
        _ => bad_request("nothing to reverse: \"word\" or \"words\" is missing or empty"),
    }
}

pub async fn release_line(State(release): State<Release>) -> String {
    format!(
        "Reverse Words Release: {}. App version: {VERSION}\n",
        release.0
    )
}

pub async fn release(State(release): State<Release>) -> Json<serde_json::Value> {
    Json(json!({ "release": &*release.0, "version": VERSION }))
}
