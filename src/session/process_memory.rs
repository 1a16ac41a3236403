//! The process's memory: its resident size (what a search's memory
//! budget reads) and handing the heap's freed memory back to the system
//! between the stages of a build or the trials of a search, so that what
//! one stage freed does not stay resident while the next one allocates.

/// Hands the heap's free memory back to the system, so that the resident
/// memory the budget reads falls when a session is dropped: mimalloc (the
/// compiler's allocator) purges its freed pages now rather than later,
/// and glibc (the allocator of a program that links the library without
/// choosing one) returns what its arenas keep.
pub fn return_freed_memory() {
    // SAFETY: `mi_collect` takes no pointer; it frees and purges what the
    // calling thread's heap no longer uses (nothing when mimalloc is not
    // the allocator in use).
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    trim_glibc_heap();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_glibc_heap() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: glibc's `malloc_trim` only releases free memory at the top
    // of its heaps and unused pages inside them; it takes no pointer.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_glibc_heap() {}

/// This process's resident memory in bytes (`VmRSS` of
/// `/proc/self/status`; `None` where there is none).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kilobytes: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kilobytes * 1024)
}
