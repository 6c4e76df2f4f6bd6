//! Results remembered by content: what a file parses to, keyed by the SHA-256 of its text,
//! so that files repeated across bundle directories (a package's CRDs, version after
//! version) are parsed once per render.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};

/// The SHA-256 of some content.
pub type Digest = [u8; 32];

pub fn digest(content: &[u8]) -> Digest {
    let digest = ring::digest::digest(&ring::digest::SHA256, content);
    digest.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// What contents parsed to, least recently used out first once the contents remembered
/// pass `budget` bytes. A content two threads ask for at once is parsed by one of them
/// while the other waits for it. Failures are not remembered.
pub struct ContentMemo<T> {
    budget: usize,
    remembered: Mutex<Entries<T>>,
    parsed: Condvar,
}

struct Entries<T> {
    bytes: usize,
    /// Least recently used first; a few hundred entries at most, so a scan is cheap.
    entries: VecDeque<(Digest, usize, T)>,
    /// Contents some thread is parsing now.
    parsing: Vec<Digest>,
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

    /// What the content with `digest` (`bytes` long) parsed to before, or `parse` it.
    pub fn get_or_parse<E>(
        &self,
        digest: Digest,
        bytes: usize,
        parse: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        {
            let mut memo = self.lock();
            loop {
                if let Some(at) = memo.entries.iter().position(|e| e.0 == digest) {
                    let entry = memo.entries.remove(at).expect("found just now");
                    let found = entry.2.clone();
                    memo.entries.push_back(entry);
                    return Ok(found);
                }
                if !memo.parsing.contains(&digest) {
                    break;
                }
                memo.waiting += 1;
                memo = self
                    .parsed
                    .wait(memo)
                    .unwrap_or_else(PoisonError::into_inner);
                memo.waiting -= 1;
            }
            memo.parsing.push(digest);
        }
        // Whatever the outcome (even a panic), the content is no longer being parsed.
        let parsing = Parsing(self, digest);
        let parsed = parse()?;
        if bytes <= self.budget {
            let mut evicted = Vec::new();
            {
                let mut memo = self.lock();
                memo.bytes += bytes;
                memo.entries.push_back((digest, bytes, parsed.clone()));
                while memo.bytes > self.budget {
                    let Some(old) = memo.entries.pop_front() else {
                        break;
                    };
                    memo.bytes -= old.1;
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

struct Parsing<'a, T: Clone>(&'a ContentMemo<T>, Digest);

impl<T: Clone> Drop for Parsing<'_, T> {
    fn drop(&mut self) {
        self.0.lock().parsing.retain(|d| *d != self.1);
        self.0.parsed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;

    fn remembered(memo: &ContentMemo<String>) -> Vec<String> {
        memo.lock().entries.iter().map(|e| e.2.clone()).collect()
    }

    #[test]
    fn a_content_is_parsed_once_and_the_oldest_leave_past_the_budget() {
        let memo = ContentMemo::new(10);
        let parses = AtomicUsize::new(0);
        let get = |text: &str| {
            memo.get_or_parse(digest(text.as_bytes()), text.len(), || {
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
    fn a_failure_is_not_remembered() {
        let memo = ContentMemo::<String>::new(100);
        let d = digest(b"bad");
        assert_eq!(memo.get_or_parse(d, 3, || Err("broken")), Err("broken"));
        assert_eq!(
            memo.get_or_parse(d, 3, || Ok::<_, &str>("fixed".into())),
            Ok("fixed".into())
        );
        assert!(memo.lock().parsing.is_empty());
    }

    #[test]
    fn a_second_thread_waits_for_the_parse_under_way() {
        let memo = ContentMemo::<String>::new(100);
        let d = digest(b"shared");
        let parses = AtomicUsize::new(0);
        let (started, wait_started) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let (memo, parses) = (&memo, &parses);
            let first = s.spawn(move || {
                memo.get_or_parse(d, 6, || {
                    parses.fetch_add(1, Ordering::SeqCst);
                    started.send(()).unwrap();
                    wait_release.recv().unwrap();
                    Ok::<_, ()>("parsed".to_string())
                })
            });
            wait_started.recv().unwrap();
            let second = s.spawn(move || {
                memo.get_or_parse(d, 6, || {
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
