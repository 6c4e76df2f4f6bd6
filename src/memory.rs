//! Allocator tuning for long-running processes that load large catalogs (`olm catalog
//! serve`, `olm run`): glibc's malloc keeps freed memory by default, so without this the
//! resident size would be the load's high-water mark rather than what is in use.

/// Makes glibc's malloc give freed memory back to the OS as it goes, for a process that
/// loads a catalog and then serves it for long.
///
/// By default glibc raises its mmap and trim thresholds (up to 32 MiB and twice that) each
/// time a large block is freed, and loading a catalog frees many (file buffers, decoded
/// manifests). After that, each arena would keep tens of MiB of freed memory, first what
/// the loader left at the top of its arena, then whatever large responses (manifests of
/// `GetBundle` and `ListBundles`) pass through it. Setting the thresholds pins them at
/// their defaults (128 KiB): blocks that large are mapped and unmapped on their own, and
/// an arena keeps at most 128 KiB of free memory at its top. Call it before the process
/// starts threads.
pub fn return_freed_memory_promptly() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const DEFAULT: libc::c_int = 128 * 1024;
        // SAFETY: mallopt only changes malloc's tuning parameters; it has no preconditions.
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, DEFAULT);
            libc::mallopt(libc::M_MMAP_THRESHOLD, DEFAULT);
        }
    }
}

/// Makes every thread allocate from glibc's one main arena, for `olm run`: by default each
/// thread that meets a busy arena gets one of its own (up to 8 per core), and what a catalog
/// load or a rebuild of the packagemanifests leaves in each of them (free chunks between
/// live ones, which no trim can give back) adds up: 188 MiB resident with two arenas, 177
/// with one, 210 by default, for the same served content (`hack/bench/packages.py`, large
/// set). Its threads mostly wait on the network, and each keeps a cache of small chunks of
/// its own (tcache), so sharing one arena costs no measurable latency there. Call it before
/// the process starts threads.
pub fn use_one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes malloc's tuning parameters; it has no preconditions.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Hands the heap freed after loading (each file's decoded blobs) back to the OS, so that
/// the resident size after startup is the index's, not the loader's high-water mark.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: glibc's malloc_trim only releases free memory; it has no preconditions.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    /// The tunings are ones glibc accepts (mallopt returns 1 on success, 0 for a parameter
    /// it does not know), and each function runs in a process that already has threads.
    #[test]
    fn tunings_are_accepted() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes malloc's tuning parameters; it has no preconditions.
        unsafe {
            assert_eq!(libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024), 1);
            assert_eq!(libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024), 1);
            assert_eq!(libc::mallopt(libc::M_ARENA_MAX, 1), 1);
        }
        super::return_freed_memory_promptly();
        super::use_one_arena();
        super::release_free_memory();
    }
}
