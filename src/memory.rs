//! glibc malloc tuning for the catalog server (`olm-registry`; `olm run` and `olm catalog
//! serve` use jemalloc, see `crate::allocator`, where these touch a heap nothing uses):
//! glibc's malloc keeps freed memory by default, so without this the resident size would be
//! the load's high-water mark rather than what is in use.

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
        }
        super::return_freed_memory_promptly();
        super::release_free_memory();
    }
}
