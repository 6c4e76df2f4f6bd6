//! Results remembered by content: what a file parses to, found by its text, so that files
//! repeated across bundle directories (a package's CRDs, version after version) are parsed
//! once per render.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Finds a content among those remembered: a fast hash and the length, then a comparison
/// of the whole text, so that no two contents are ever taken for one (a cryptographic
/// digest cost more than the parse it spared on small files).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    hash: u64,
    len: usize,
}

impl Key {
    fn of(content: &[u8]) -> Key {
        Key {
            hash: foldhash::quality::FixedState::with_seed(0).hash_one(content),
            len: content.len(),
        }
    }
}

/// What contents parsed to, least recently used out first once the contents remembered
/// pass `budget` bytes. A content two threads ask for at once is parsed by one of them
/// while the other waits for it. Failures are not remembered.
pub struct ContentMemo<T> {
    budget: usize,
    remembered: Mutex<Entries<T>>,
    parsed: Condvar,
}

struct Entry<T> {
    key: Key,
    content: Arc<[u8]>,
    parsed: T,
}

struct Entries<T> {
    bytes: usize,
    /// Least recently used first; a few hundred entries at most, so a scan is cheap.
    entries: VecDeque<Entry<T>>,
    /// Contents some thread is parsing now.
    parsing: Vec<Key>,
    /// Threads waiting for another's parse (so a test can see one wait).
    waiting: usize,
}

impl<T: Clone> ContentMemo<T> {
    /// Remembers what contents of up to `budget` bytes in all parsed to.
    pub fn new(budget: usize) -> Self {
        ContentMemo {
            budget,
            remembered: Mutex::new(Entries {
                bytes: 0,
                entries: VecDeque::new(),
                parsing: Vec::new(),
                waiting: 0,
            }),
            parsed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<T>> {
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What `content` parsed to before, or `parse` it.
    pub fn get_or_parse<E>(
        &self,
        content: &[u8],
        parse: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let key = Key::of(content);
        {
            let mut memo = self.lock();
            loop {
                let found = memo
                    .entries
                    .iter()
                    .position(|e| e.key == key && *e.content == *content);
                if let Some(at) = found {
                    let entry = memo.entries.remove(at).expect("found just now");
                    let found = entry.parsed.clone();
                    memo.entries.push_back(entry);
                    return Ok(found);
                }
                // Another content with the same key only makes this one wait its turn.
                if !memo.parsing.contains(&key) {
                    break;
                }
                memo.waiting += 1;
                memo = self
                    .parsed
                    .wait(memo)
                    .unwrap_or_else(PoisonError::into_inner);
                memo.waiting -= 1;
            }
            memo.parsing.push(key);
        }
        // Whatever the outcome (even a panic), the content is no longer being parsed.
        let parsing = Parsing(self, key);
        let parsed = parse()?;
        let bytes = content.len();
        if bytes <= self.budget {
            let entry = Entry {
                key,
                content: Arc::from(content),
                parsed: parsed.clone(),
            };
            let mut evicted = Vec::new();
            {
                let mut memo = self.lock();
                memo.bytes += bytes;
                memo.entries.push_back(entry);
                while memo.bytes > self.budget {
                    let Some(old) = memo.entries.pop_front() else {
                        break;
                    };
                    memo.bytes -= old.key.len;
                    evicted.push(old);
                }
            }
            // Freeing a large parse takes a while: not while the other threads wait.
            drop(evicted);
        }
        drop(parsing);
        Ok(parsed)
    }
}

struct Parsing<'a, T: Clone>(&'a ContentMemo<T>, Key);

impl<T: Clone> Drop for Parsing<'_, T> {
    fn drop(&mut self) {
        let mut memo = self.0.lock();
        if let Some(at) = memo.parsing.iter().position(|k| *k == self.1) {
            memo.parsing.swap_remove(at);
        }
        drop(memo);
        self.0.parsed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;

    fn remembered(memo: &ContentMemo<String>) -> Vec<String> {
        memo.lock()
            .entries
            .iter()
            .map(|e| e.parsed.clone())
            .collect()
    }

    #[test]
    fn a_content_is_parsed_once_and_the_oldest_leave_past_the_budget() {
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
        get("abcd").unwrap(); // now the most recently used
        get("ijkl").unwrap(); // 12 bytes: "efgh" leaves
        assert_eq!(remembered(&memo), ["ABCD", "IJKL"]);
        assert_eq!(parses.load(Ordering::SeqCst), 3);
        // Larger than the whole budget: parsed every time, never remembered.
        get("0123456789ab").unwrap();
        get("0123456789ab").unwrap();
        assert_eq!(parses.load(Ordering::SeqCst), 5);
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
        assert!(memo.lock().parsing.is_empty());
    }

    #[test]
    fn a_second_thread_waits_for_the_parse_under_way() {
        let memo = ContentMemo::<String>::new(100);
        let d = b"shared";
        let parses = AtomicUsize::new(0);
        let (started, wait_started) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let (memo, parses) = (&memo, &parses);
            let first = s.spawn(move || {
                memo.get_or_parse(d, || {
                    parses.fetch_add(1, Ordering::SeqCst);
                    started.send(()).unwrap();
                    wait_release.recv().unwrap();
                    Ok::<_, ()>("parsed".to_string())
                })
            });
            wait_started.recv().unwrap();
            let second = s.spawn(move || {
                memo.get_or_parse(d, || {
                    parses.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ()>("again".to_string())
                })
            });
            // The second asks while the first parses: it waits, then gets the first's result.
            while memo.lock().waiting == 0 {
                std::thread::yield_now();
            }
            release.send(()).unwrap();
            assert_eq!(first.join().unwrap(), Ok("parsed".into()));
            assert_eq!(second.join().unwrap(), Ok("parsed".into()));
        });
        assert_eq!(parses.load(Ordering::SeqCst), 1);
    }
}
