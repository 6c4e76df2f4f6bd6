//! The API server's warnings (`Warning: 299 - "…"` response headers: a deprecated API
//! version, a field it dropped), as upstream's executor surfaces them: a layer of the client
//! hands every warning of a response to whoever is collecting in the current task, and
//! [`collect`] runs a future collecting them. Outside [`collect`] warnings are ignored.

use std::cell::RefCell;
use std::future::Future;

use http::header::WARNING;
use kube::Client;

tokio::task_local! {
    static COLLECTED: RefCell<Vec<String>>;
}

/// Runs `future`, returning its output and the warnings its requests received, each once
/// (reading and writing a deprecated version both warn of it).
pub async fn collect<F: Future>(future: F) -> (F::Output, Vec<String>) {
    COLLECTED
        .scope(RefCell::new(Vec::new()), async move {
            let output = future.await;
            let mut warnings = COLLECTED.with(RefCell::take);
            let mut seen = std::collections::HashSet::new();
            warnings.retain(|w| seen.insert(w.clone()));
            (output, warnings)
        })
        .await
}

/// A client from `config` whose responses' warnings reach [`collect`].
pub fn client(config: kube::Config) -> Result<Client, kube::Error> {
    let layer = tower::util::MapResponseLayer::new(record);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

fn record<B>(response: http::Response<B>) -> http::Response<B> {
    let _ = COLLECTED.try_with(|collected| {
        collected.borrow_mut().extend(
            response
                .headers()
                .get_all(WARNING)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .filter_map(warning_text),
        );
    });
    response
}

/// The text of a `299 <agent> "<text>"` warning (RFC 7234 as the API server writes it);
/// None for other codes or malformed values.
fn warning_text(value: &str) -> Option<String> {
    let rest = value.trim().strip_prefix("299 ")?;
    let (_agent, quoted) = rest.split_once(' ')?;
    let inner = quoted.trim().strip_prefix('"')?;
    let mut text = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.push(chars.next()?),
            '"' => return Some(text),
            c => text.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_read_as_the_api_server_writes_them() {
        assert_eq!(
            warning_text(r#"299 - "operators.io.operator-framework/v1 Deprecated is deprecated""#)
                .as_deref(),
            Some("operators.io.operator-framework/v1 Deprecated is deprecated")
        );
        assert_eq!(
            warning_text(r#"299 - "a \"quoted\" word""#).as_deref(),
            Some(r#"a "quoted" word"#)
        );
        assert_eq!(warning_text(r#"199 - "not ours""#), None);
        assert_eq!(warning_text("299 - unquoted"), None);
    }

    #[tokio::test]
    async fn only_the_collecting_task_sees_its_warnings() {
        let response = || {
            http::Response::builder()
                .header(WARNING, r#"299 - "one""#)
                .header(WARNING, r#"299 - "two""#)
                .body(())
                .unwrap()
        };
        // Outside a collection: ignored, no panic.
        record(response());
        let ((), warnings) = collect(async {
            record(response());
            record(response());
        })
        .await;
        assert_eq!(warnings, ["one", "two"]);
    }
}
