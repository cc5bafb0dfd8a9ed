//! Process-wide settings made once, first thing in `main`, before any thread or database exists.
//!
//! **No transparent huge pages.** mimalloc asks the kernel for huge pages on its arenas, and every
//! fault in one then zeroes 2 MiB at once, however little of it is used. Under the saga load
//! that zeroing (`clear_page_erms` under `do_huge_pmd_anonymous_page`) was 12–14 % of the
//! service's CPU samples, all of it in the engine's writer and the saga workers
//! (docs/benchmarks/performance-goals.md). With huge pages off for the process, a fault zeroes the 4 KiB page
//! it touches. The setting is the process's own (`PR_SET_THP_DISABLE`), not the machine's.
//!
//! SQLite's compile-time options that cost every thread a global lock (its memory statistics
//! and the page cache shared by all connections) are set at build time instead, in
//! `.cargo/config.toml`: they cannot be changed once SQLite is compiled.

/// Applies the settings above. A refusal (another kernel, a sandbox) only logs: the service is
/// correct without them, only slower.
pub fn tune() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a plain system call with integer arguments; it changes only this process's
        // memory-management flags.
        let done = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if done != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "transparent huge pages stay on for this process"
            );
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn tuning_turns_transparent_huge_pages_off_for_the_process() {
        super::tune();
        // SAFETY: as in `tune`; PR_GET_THP_DISABLE reads the flag back.
        let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(disabled, 1, "PR_GET_THP_DISABLE after tune()");
    }
}
