//! The `olm` binary's allocator, chosen per command: jemalloc for the commands that run for
//! long and are judged by their resident size (`olm run`, `olm catalog serve`), mimalloc for
//! the batch commands that build and drop millions of small JSON values and exit (`olm
//! catalog render` spends a quarter of its CPU in glibc's malloc and free; with mimalloc it
//! takes about a fifth less CPU).
//!
//! For the servers, what counts is what stays resident after a catalog load or a rebuild
//! of the packagemanifests: glibc's malloc (one arena, thresholds pinned) kept 40 MiB of
//! heap resident for 17 MiB in use with the public community catalog loaded (free chunks
//! between live ones, which `malloc_trim` cannot return), mimalloc 70 MiB; jemalloc, with
//! one arena, no thread caches and dirty pages returned after a second by its background
//! thread ([`JEMALLOC_CONF`]), 24 MiB.
//!
//! The choice is made once, at the first allocation, from `/proc/self/cmdline` read with
//! plain system calls (nothing that allocates), so every block is freed by the allocator
//! that made it. Without `/proc`, jemalloc is used.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU8, Ordering};

use mimalloc::MiMalloc;
use tikv_jemallocator::Jemalloc;

const UNDECIDED: u8 = 0;
const JEMALLOC: u8 = 1;
const MIMALLOC: u8 = 2;

/// jemalloc's options (read by jemalloc when it starts, only in processes that use it): one
/// arena and no per-thread caches (the servers' threads mostly wait on the network, and
/// each cache or arena would keep freed blocks of its own), and freed pages handed back to
/// the OS after a second by a background thread, not at the next allocation.
pub const JEMALLOC_CONF: &[u8] =
    b"narenas:1,tcache:false,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Where jemalloc (built with the `_rjem_` prefix) looks for its options.
#[unsafe(export_name = "_rjem_malloc_conf")]
#[allow(non_upper_case_globals)]
pub static malloc_conf: &u8 = &JEMALLOC_CONF[0];

/// Dispatches to jemalloc or mimalloc, as the command line decides.
pub struct PerCommand {
    choice: AtomicU8,
}

impl PerCommand {
    pub const fn new() -> Self {
        PerCommand {
            choice: AtomicU8::new(UNDECIDED),
        }
    }

    fn uses_mimalloc(&self) -> bool {
        let choice = match self.choice.load(Ordering::Acquire) {
            UNDECIDED => {
                let decided = if is_long_running(&command_line()) {
                    JEMALLOC
                } else {
                    MIMALLOC
                };
                // Threads racing on their first allocation decide alike; one store wins.
                match self.choice.compare_exchange(
                    UNDECIDED,
                    decided,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => decided,
                    Err(already) => already,
                }
            }
            decided => decided,
        };
        choice == MIMALLOC
    }

    /// The allocator of this process.
    fn allocator(&self) -> &'static dyn GlobalAlloc {
        if self.uses_mimalloc() {
            &MiMalloc
        } else {
            &Jemalloc
        }
    }
}

impl Default for PerCommand {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to one allocator, the same for the life of the process
// (decided before the first block is handed out), so each block is freed or resized by
// the allocator that made it.
unsafe impl GlobalAlloc for PerCommand {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.allocator().alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.allocator().alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees; the same allocator made `ptr`.
        unsafe { self.allocator().dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees; the same allocator made `ptr`.
        unsafe { self.allocator().realloc(ptr, layout, new_size) }
    }
}

/// The start of `/proc/self/cmdline` (arguments separated by NUL), enough to find the
/// command; empty when it cannot be read.
struct CommandLine {
    bytes: [u8; 4096],
    len: usize,
}

impl CommandLine {
    fn args(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes[..self.len].split(|&b| b == 0).skip(1)
    }
}

fn command_line() -> CommandLine {
    let mut line = CommandLine {
        bytes: [0; 4096],
        len: 0,
    };
    // SAFETY: plain system calls on a NUL-terminated path and a buffer we own; the file
    // descriptor is closed before returning.
    unsafe {
        let fd = libc::open(
            c"/proc/self/cmdline".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return line;
        }
        while line.len < line.bytes.len() {
            let n = libc::read(
                fd,
                line.bytes[line.len..].as_mut_ptr().cast(),
                line.bytes.len() - line.len,
            );
            if n <= 0 {
                break;
            }
            line.len += n as usize;
        }
        libc::close(fd);
    }
    line
}

/// Whether the command is one that serves for long: `run` or `catalog serve`. Flags and
/// the values of `--log-format` (the one global option) are skipped; an unreadable command
/// line counts as long-running, whose allocator is the conservative one.
fn is_long_running(line: &CommandLine) -> bool {
    if line.len == 0 {
        return true;
    }
    let mut words = line
        .args()
        .filter(|a| !a.starts_with(b"-") && *a != b"text" && *a != b"json");
    matches!(
        (words.next(), words.next()),
        (Some(b"run"), _) | (Some(b"catalog"), Some(b"serve"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> CommandLine {
        let mut line = CommandLine {
            bytes: [0; 4096],
            len: 0,
        };
        for arg in args {
            let end = line.len + arg.len();
            line.bytes[line.len..end].copy_from_slice(arg.as_bytes());
            line.len = end + 1;
        }
        line
    }

    #[test]
    fn servers_get_jemalloc_batch_commands_get_mimalloc() {
        for long in [
            &["olm", "run"][..],
            &[
                "olm",
                "--log-format",
                "json",
                "run",
                "--packages-address",
                "x",
            ],
            &["olm", "--log-format=json", "catalog", "serve", "catalog/"],
            &["olm", "catalog", "--log-format", "text", "serve"],
            &[],
        ] {
            assert!(is_long_running(&line(long)), "{long:?}");
        }
        for batch in [
            &["olm", "catalog", "render", "run"][..],
            &["olm", "catalog", "validate", "serve"],
            &["olm", "resolve", "--catalog", "c"],
            &["olm", "crds"],
            &["olm"],
        ] {
            assert!(!is_long_running(&line(batch)), "{batch:?}");
        }
    }

    #[test]
    fn this_test_binary_reads_its_own_command_line() {
        let ours = command_line();
        let first = ours.bytes[..ours.len].split(|&b| b == 0).next().unwrap();
        let exe = std::env::args().next().unwrap();
        assert_eq!(first, exe.as_bytes());
    }
}
