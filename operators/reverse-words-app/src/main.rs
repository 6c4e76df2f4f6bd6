//! The Reverse Words application the operator deploys: a small HTTP service on port 8080
//! (`APP_PORT`) that reverses what is posted to it.
//!
//! - `POST /` with `{"word": "PALC"}` → `{"reverse_word": "CLAP"}`; with
//!   `{"words": ["ab", "cd"]}` → `{"reverse_words": ["ba", "dc"]}`; a `text/plain` body →
//!   the text reversed. Empty or malformed input → 400 with `{"error": …}`.
//! - `GET /` → the release line; `GET /release` → `{"release", "version"}` (`RELEASE` env).
//! - `GET /health` → `Healthy`.

mod reverse;

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let port: u16 = match std::env::var("APP_PORT").map(|p| p.parse()) {
        Err(_) => 8080,
        Ok(Ok(port)) => port,
        Ok(Err(error)) => {
            eprintln!("APP_PORT: not a port number: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let release = std::env::var("RELEASE").unwrap_or_else(|_| "NotSet".into());
    let address = SocketAddr::from(([0, 0, 0, 0], port));
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("listening on {address}: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    eprintln!(
        "reverse-words-app {} (release {release}) listening on {address}",
        reverse::VERSION
    );
    let served = axum::serve(listener, app(release))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("serving: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn app(release: String) -> Router {
    Router::new()
        .route("/", get(reverse::release_line).post(reverse::reverse))
        .route("/release", get(reverse::release))
        .route("/health", get(|| async { "Healthy" }))
        .with_state(reverse::Release(release.into()))
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::{Request, StatusCode, header};
    use tower::ServiceExt;

    use super::app;

    async fn call(
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> (StatusCode, String) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let response = app("r1".into())
            .oneshot(request.body(Body::from(body.to_string())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    const JSON: Option<&str> = Some("application/json");

    #[tokio::test]
    async fn reverses_a_word_a_list_and_text() {
        assert_eq!(
            call("POST", "/", JSON, r#"{"word":"PALC"}"#).await,
            (StatusCode::OK, r#"{"reverse_word":"CLAP"}"#.into())
        );
        assert_eq!(
            call("POST", "/", JSON, r#"{"words":["ab","héllo"]}"#).await,
            (StatusCode::OK, r#"{"reverse_words":["ba","olléh"]}"#.into())
        );
        assert_eq!(
            call("POST", "/", Some("text/plain"), "hello world").await,
            (StatusCode::OK, "dlrow olleh".into())
        );
        // Without a content type a body that looks like JSON is read as JSON.
        assert_eq!(
            call("POST", "/", None, r#"{"word":"ab"}"#).await.1,
            r#"{"reverse_word":"ba"}"#
        );
    }

    #[tokio::test]
    async fn empty_and_malformed_input_is_a_400() {
        for (content_type, body) in [
            (JSON, ""),
            (JSON, "{"),
            (JSON, r#"{"word":""}"#),
            (JSON, r#"{"words":[]}"#),
            (JSON, r#"{"word":3}"#),
            (JSON, r#"{"other":"x"}"#),
            (Some("text/plain"), ""),
            (Some("text/plain"), "   "),
        ] {
            let (status, body_out) = call("POST", "/", content_type, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?} → {body_out}");
            assert!(body_out.starts_with(r#"{"error":"#), "{body_out}");
        }
    }

    #[tokio::test]
    async fn health_and_release() {
        assert_eq!(
            call("GET", "/health", None, "").await,
            (StatusCode::OK, "Healthy".into())
        );
        let (status, body) = call("GET", "/release", None, "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            format!(
                r#"{{"release":"r1","version":"v{}"}}"#,
                env!("CARGO_PKG_VERSION")
            )
        );
        let (_, line) = call("GET", "/", None, "").await;
        assert!(
            line.starts_with("Reverse Words Release: r1. App version: v"),
            "{line}"
        );
    }
}
