//! Results remembered by content: what a file parses to, found by its text, so that files
//! repeated across bundle directories (a package's CRDs, version after version) are parsed
//! once per render.

use quick_cache::sync::{Cache, GuardResult};
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};

/// A content is found by its whole text: the cache hashes it (foldhash, fast) and compares
/// the text itself to tell contents of one hash apart, so that no two contents are ever
/// taken for one (a cryptographic digest cost more than the parse it spared on small files).
type Key = Vec<u8>;

/// The share of the budget quick_cache keeps for its "hot" contents (those asked for again).
/// Its default (97%) suits a cache that favours frequency; what repeats here is the previous
/// bundle's files, which favours recency. On the community-operators test data (31 packages,
/// 31 MB of manifests, 35.3% of the bytes a repeat of an earlier file), with 8 MiB, an LRU
/// finds all 35.3%, quick_cache 28.1% at 97% and 35.3% at 50%; with 1 MB, 23.9%, 13.4% and
/// 25.2%. Nothing larger than this share is remembered.
const HOT_SHARE: f64 = 0.5;

/// A guess at the size of a manifest file, for quick_cache's table and its memory of
/// contents it let go (which come back as hot when asked for again).
const TYPICAL_CONTENT_BYTES: usize = 16 << 10;

/// What contents parsed to, within a budget of `budget` bytes of content, in a
/// [`quick_cache`] cache.
///
/// - A content is parsed once while it is remembered. A content two threads ask for at
///   once is parsed by one of them while the other waits for it and gets its result (even
///   when the result is not remembered).
/// - Failures are not remembered: a failed (or panicked) parse leaves the content to the
///   next thread that asks, a waiting one first.
/// - The contents remembered hold at most `budget` bytes in all. Which leave first when
///   they would pass it is quick_cache's choice (an S3-FIFO-like policy, see [`HOT_SHARE`]),
///   not strictly the least recently used as this memo's own list did.
/// - A content of more than half the budget (the hot share) is not remembered, and one of
///   more than the whole budget does not enter the cache at all: it is parsed each time.
pub struct ContentMemo<T> {
    budget: usize,
    cache: Cache<Key, T, ContentBytes, foldhash::quality::RandomState, FreeOutsideTheLock>,
}

/// A remembered content weighs its length in bytes.
#[derive(Clone)]
struct ContentBytes;

impl<T> Weighter<Key, T> for ContentBytes {
    fn weight(&self, content: &Key, _: &T) -> u64 {
        content.len() as u64
    }
}

/// Keeps every evicted entry until the cache's lock is released: freeing a large parse
/// takes a while, and not while the other threads wait (quick_cache's default keeps two).
#[derive(Clone)]
struct FreeOutsideTheLock;

impl<T> Lifecycle<Key, T> for FreeOutsideTheLock {
    type RequestState = Vec<(Key, T)>;

    fn on_evict(&self, evicted: &mut Self::RequestState, content: Key, parsed: T) {
        evicted.push((content, parsed));
    }
}

impl<T: Clone> ContentMemo<T> {
    /// Remembers what contents of up to `budget` bytes in all parsed to.
    pub fn new(budget: usize) -> Self {
        let options = OptionsBuilder::new()
            // One shard holds the whole budget (each of several would hold its part).
            .shards(1)
            .hot_allocation(HOT_SHARE)
            .weight_capacity(budget as u64)
            .estimated_items_capacity((budget / TYPICAL_CONTENT_BYTES).max(32))
            .build()
            .expect("every option is set");
        ContentMemo {
            budget,
            cache: Cache::with_options(
                options,
                ContentBytes,
                foldhash::quality::RandomState::default(),
                FreeOutsideTheLock,
            ),
        }
    }

    /// What `content` parsed to before, or `parse` it.
    pub fn get_or_parse<E>(
        &self,
        content: &[u8],
        parse: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        if content.len() > self.budget {
            return parse();
        }
        match self.cache.get_value_or_guard(content, None) {
            GuardResult::Value(parsed) => Ok(parsed),
            GuardResult::Guard(guard) => {
                // On an error (or a panic) the guard drops unfilled, and a thread waiting
                // for this content gets it to parse in turn.
                let parsed = parse()?;
                // Err only if the placeholder was removed, which nothing here does.
                let _ = guard.insert(parsed.clone());
                Ok(parsed)
            }
            GuardResult::Timeout => unreachable!("no timeout was given"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn remembered(memo: &ContentMemo<String>) -> Vec<String> {
        let mut parsed: Vec<String> = memo.cache.iter().map(|(_, parsed)| parsed).collect();
        parsed.sort();
        parsed
    }

    #[test]
    fn a_content_is_parsed_once_and_the_contents_stay_within_the_budget() {
        let memo = ContentMemo::new(10);
        let parses = AtomicUsize::new(0);
        let get = |text: &str| {
            memo.get_or_parse(text.as_bytes(), || {
                parses.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(text.to_uppercase())
            })
        };
        assert_eq!(get("abcd"), Ok("ABCD".into()));
        assert_eq!(get("abcd"), Ok("ABCD".into()));
        assert_eq!(parses.load(Ordering::SeqCst), 1);
        get("efgh").unwrap();
        get("abcd").unwrap(); // asked for again
        get("ijkl").unwrap(); // 12 bytes: "efgh", never asked for again, leaves
        assert_eq!(remembered(&memo), ["ABCD", "IJKL"]);
        assert!(memo.cache.weight() <= 10);
        assert_eq!(parses.load(Ordering::SeqCst), 3);
        // Larger than the whole budget: parsed every time, never remembered.
        get("0123456789ab").unwrap();
        get("0123456789ab").unwrap();
        assert_eq!(parses.load(Ordering::SeqCst), 5);
        // Larger than the hot share (half the budget): not remembered either.
        get("012345").unwrap();
        get("012345").unwrap();
        assert_eq!(parses.load(Ordering::SeqCst), 7);
        assert_eq!(remembered(&memo), ["ABCD", "IJKL"]);
    }

    #[test]
    fn contents_are_told_apart_by_their_whole_text() {
        let memo = ContentMemo::new(1 << 20);
        let a = "x".repeat(1000) + "a";
        let b = "x".repeat(1000) + "b";
        for text in [&a, &b, &a, &b] {
            let got = memo.get_or_parse(text.as_bytes(), || Ok::<_, ()>(text.clone()));
            assert_eq!(got.as_ref(), Ok(text));
        }
        assert_eq!(remembered(&memo).len(), 2);
    }

    #[test]
    fn a_failure_is_not_remembered() {
        let memo = ContentMemo::<String>::new(100);
        let d = b"bad";
        assert_eq!(memo.get_or_parse(d, || Err("broken")), Err("broken"));
        assert_eq!(
            memo.get_or_parse(d, || Ok::<_, &str>("fixed".into())),
            Ok("fixed".into())
        );
        // Nor is a panic: the next to ask parses.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            memo.get_or_parse(b"panics", || -> Result<String, ()> { panic!("parser bug") })
        }));
        assert!(panicked.is_err());
        assert_eq!(
            memo.get_or_parse(b"panics", || Ok::<_, ()>("parsed".into())),
            Ok("parsed".into())
        );
    }

    /// Runs `first` and, once it is under way, `second` on the same content, and lets the
    /// first finish only when the second has asked (and, very likely, waits).
    fn race(
        memo: &ContentMemo<String>,
        first: impl FnOnce() -> Result<String, String> + Send,
        second: impl FnOnce() -> Result<String, String> + Send,
    ) -> (Result<String, String>, Result<String, String>) {
        let d = b"shared";
        let (started, wait_started) = mpsc::channel();
        let (asking, wait_asking) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let first = s.spawn(move || {
                memo.get_or_parse(d, || {
                    started.send(()).unwrap();
                    wait_release.recv().unwrap();
                    first()
                })
            });
            wait_started.recv().unwrap();
            let second = s.spawn(move || {
                asking.send(()).unwrap();
                memo.get_or_parse(d, second)
            });
            wait_asking.recv().unwrap();
            // No API tells that a thread waits on quick_cache's placeholder; the results
            // below are the same either way (a wait, or a hit on the first's result).
            std::thread::sleep(Duration::from_millis(50));
            release.send(()).unwrap();
            (first.join().unwrap(), second.join().unwrap())
        })
    }

    #[test]
    fn a_second_thread_waits_for_the_parse_under_way() {
        let memo = ContentMemo::<String>::new(100);
        let parses = AtomicUsize::new(0);
        let parse = |result: &str| {
            parses.fetch_add(1, Ordering::SeqCst);
            Ok(result.to_string())
        };
        let (first, second) = race(&memo, || parse("parsed"), || parse("again"));
        // The second asks while the first parses: it gets the first's result.
        assert_eq!(first, Ok("parsed".into()));
        assert_eq!(second, Ok("parsed".into()));
        assert_eq!(parses.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_thread_waiting_on_a_failed_parse_parses_in_turn() {
        let memo = ContentMemo::<String>::new(100);
        let (first, second) = race(
            &memo,
            || Err("broken".into()),
            || Ok("parsed by the second".into()),
        );
        assert_eq!(first, Err("broken".into()));
        assert_eq!(second, Ok("parsed by the second".into()));
        assert_eq!(remembered(&memo), ["parsed by the second"]);
    }
}
