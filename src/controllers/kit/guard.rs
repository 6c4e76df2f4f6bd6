//! Panics inside a reconcile stay inside that reconcile.
//!
//! A bug that one object triggers must not take OLM down for the whole cluster (and bring it
//! back into the same crash on restart). [`catch_panic`] polls a reconcile future inside
//! `catch_unwind`; a panic hook records the message, location and backtrace of a panic on
//! the polling thread, so the caller can report it on the object (condition, Event, metric,
//! log) while every other object keeps reconciling.

use crate::controllers::context::Context as Shared;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

/// A caught panic: what it said, where, and the stack at that moment.
#[derive(Debug)]
pub struct Panicked {
    pub message: String,
    pub location: String,
    pub backtrace: String,
}

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "panicked at {}: {}", self.location, self.message)
    }
}

thread_local! {
    /// True while this thread polls a guarded future.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<Panicked>> = const { RefCell::new(None) };
}

/// Installs the hook once per process. Panics outside guarded futures go to the hook that
/// was there before (the default prints them), so nothing else changes.
fn install_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
                return;
            }
            let message = if let Some(text) = info.payload().downcast_ref::<&str>() {
                (*text).to_string()
            } else if let Some(text) = info.payload().downcast_ref::<String>() {
                text.clone()
            } else {
                "a panic without a message".to_string()
            };
            let location = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_else(|| "an unknown location".into());
            let backtrace = Backtrace::force_capture().to_string();
            LAST_PANIC.with(|last| {
                *last.borrow_mut() = Some(Panicked {
                    message,
                    location,
                    backtrace,
                });
            });
        }));
    });
}

/// Runs `future`, turning a panic in any of its polls into `Err(Panicked)`.
pub async fn catch_panic<F: Future>(future: F) -> Result<F::Output, Panicked> {
    install_hook();
    Guarded {
        inner: Box::pin(future),
    }
    .await
}

struct Guarded<F: Future> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Guarded<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let was_guarded = GUARDED.with(|g| g.replace(true));
        let polled = panic::catch_unwind(AssertUnwindSafe(|| self.inner.as_mut().poll(cx)));
        GUARDED.with(|g| g.set(was_guarded));
        match polled {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => {
                let caught = LAST_PANIC.with(|last| last.borrow_mut().take());
                Poll::Ready(Err(caught.unwrap_or_else(|| Panicked {
                    message: "a panic the hook did not see".into(),
                    location: "an unknown location".into(),
                    backtrace: String::new(),
                })))
            }
        }
    }
}

/// What every controller does with a caught panic: count it, log it with its backtrace,
/// and (when there is an object to hang it on) publish a Warning Event on the object.
pub fn report_panic(
    ctx: &Shared,
    controller: &'static str,
    object: &str,
    regarding: Option<&ObjectReference>,
    panic: &Panicked,
) {
    ctx.metrics.reconcile_panicked(controller);
    tracing::error!(
        controller,
        object,
        %panic,
        backtrace = %panic.backtrace,
        "reconcile panicked; other objects are unaffected"
    );
    if let Some(regarding) = regarding {
        let kind = regarding.kind.as_deref().unwrap_or("object");
        ctx.event(
            regarding,
            EventType::Warning,
            "Panicked",
            "Sync",
            format!("reconcile {panic}; other {kind}s are unaffected"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_error_with_message_location_and_backtrace() {
        let caught = catch_panic(async {
            tokio::task::yield_now().await;
            let values: Vec<u32> = Vec::new();
            values[3]
        })
        .await
        .unwrap_err();
        assert!(caught.message.contains("index out of bounds"), "{caught}");
        assert!(caught.location.contains("guard.rs"), "{caught}");
        assert!(!caught.backtrace.is_empty());
    }

    #[tokio::test]
    async fn an_overflowing_duration_is_caught_like_any_panic() {
        let caught = catch_panic(async { std::time::Duration::from_secs_f64(1e30) })
            .await
            .unwrap_err();
        assert!(caught.message.contains("Duration"), "{caught}");
    }

    #[tokio::test]
    async fn results_pass_through_and_the_thread_stays_usable() {
        assert_eq!(catch_panic(async { 7 }).await.unwrap(), 7);
        let _ = catch_panic(async { panic!("first") }).await;
        assert_eq!(catch_panic(async { "after" }).await.unwrap(), "after");
    }
}
