//! Work spread over every core, its results kept in order (rendering many bundle
//! directories, whose output must come in input order).

use std::collections::{BTreeMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Condvar, Mutex, PoisonError};

/// How many threads to work on: the cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

struct Queue<I, O> {
    todo: VecDeque<(usize, I)>,
    done: BTreeMap<usize, std::thread::Result<O>>,
    closed: bool,
}

/// Runs `work` on each item that `produce` pushes, on `workers` threads, and hands the
/// results to `sink` in the order the items were pushed. The calling thread produces and
/// sinks; at most `window` items are pushed and not yet sunk, so memory stays bounded
/// however large single items are and however long one takes. A push fails with the
/// sink's error, which ends `produce` early; a panic in `work` resumes on this thread.
pub fn map_in_order<I: Send, O: Send, E>(
    workers: usize,
    window: usize,
    produce: impl FnOnce(&mut dyn FnMut(I) -> Result<(), E>) -> Result<(), E>,
    work: impl Fn(I) -> O + Sync,
    mut sink: impl FnMut(O) -> Result<(), E>,
) -> Result<(), E> {
    if workers <= 1 {
        return produce(&mut |item| sink(work(item)));
    }
    let window = window.max(1);
    let queue = Mutex::new(Queue {
        todo: VecDeque::new(),
        done: BTreeMap::new(),
        closed: false,
    });
    let changed = Condvar::new();
    let lock = || queue.lock().unwrap_or_else(PoisonError::into_inner);
    let wait = |guard| changed.wait(guard).unwrap_or_else(PoisonError::into_inner);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let (seq, item) = {
                        let mut q = lock();
                        loop {
                            if let Some(next) = q.todo.pop_front() {
                                break next;
                            }
                            if q.closed {
                                return;
                            }
                            q = wait(q);
                        }
                    };
                    let out = std::panic::catch_unwind(AssertUnwindSafe(|| work(item)));
                    lock().done.insert(seq, out);
                    changed.notify_all();
                }
            });
        }
        // However this thread leaves (done, an error, a panic), the workers stop.
        let _close = Close(&queue, &changed);
        let mut sunk: usize = 0;
        // Sinks the results that are ready, in order, waiting for more while fewer than
        // `until` are sunk.
        let mut drain = |until: usize, sunk: &mut usize| -> Result<(), E> {
            loop {
                let out = {
                    let mut q = lock();
                    loop {
                        if let Some(out) = q.done.remove(sunk) {
                            break Some(out);
                        }
                        if *sunk >= until {
                            break None;
                        }
                        q = wait(q);
                    }
                };
                let Some(out) = out else { return Ok(()) };
                *sunk += 1;
                match out {
                    Ok(out) => sink(out)?,
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        };
        let mut pushed: usize = 0;
        produce(&mut |item| {
            drain((pushed + 1).saturating_sub(window), &mut sunk)?;
            lock().todo.push_back((pushed, item));
            changed.notify_all();
            pushed += 1;
            Ok(())
        })?;
        drain(pushed, &mut sunk)
    })
}

struct Close<'a, I, O>(&'a Mutex<Queue<I, O>>, &'a Condvar);

impl<I, O> Drop for Close<'_, I, O> {
    fn drop(&mut self) {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        q.closed = true;
        q.todo.clear();
        drop(q);
        self.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squares(workers: usize, window: usize, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        map_in_order(
            workers,
            window,
            |push| (0..n).try_for_each(push),
            |i: usize| {
                // Later items finish first, so order comes from the sink, not the work.
                std::thread::sleep(std::time::Duration::from_micros(((n - i) % 7) as u64 * 50));
                i * i
            },
            |sq| {
                out.push(sq);
                Ok::<_, ()>(())
            },
        )
        .unwrap();
        out
    }

    #[test]
    fn results_come_in_the_order_items_were_pushed() {
        let expected: Vec<usize> = (0..200).map(|i| i * i).collect();
        for (workers, window) in [(1, 1), (2, 1), (2, 3), (4, 16), (3, 1000)] {
            assert_eq!(
                squares(workers, window, 200),
                expected,
                "{workers} workers, window {window}"
            );
        }
    }

    #[test]
    fn no_more_than_the_window_is_in_flight() {
        let in_flight = std::sync::atomic::AtomicUsize::new(0);
        let most = std::sync::atomic::AtomicUsize::new(0);
        map_in_order(
            2,
            3,
            |push| {
                (0..50).try_for_each(|i| {
                    let now = in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                    push(i)
                })
            },
            |i: u32| i,
            |_| {
                in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, ()>(())
            },
        )
        .unwrap();
        // The item being pushed counts before the push waits for room.
        assert!(most.into_inner() <= 4);
    }

    #[test]
    fn a_sink_error_stops_the_producer() {
        let mut produced = 0;
        let result = map_in_order(
            2,
            2,
            |push| {
                (0..1000).try_for_each(|i| {
                    produced += 1;
                    push(i)
                })
            },
            |i: u32| i,
            |i| {
                if i == 10 {
                    Err(format!("item {i}"))
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!(result, Err("item 10".to_string()));
        assert!(produced < 20, "produced {produced} items after the error");
    }

    #[test]
    fn a_panic_in_work_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            map_in_order(
                2,
                4,
                |push| (0..100u32).try_for_each(push),
                |i| assert!(i != 42, "item 42"),
                |()| Ok::<_, ()>(()),
            )
        });
        assert!(caught.is_err());
    }
}
