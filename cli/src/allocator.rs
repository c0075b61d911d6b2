//! The process's allocator: jemalloc, for compiles above all (wasmtime's
//! compile threads allocate and free at a high rate, and under glibc's
//! malloc a quarter of a compile went to the allocator and its arena locks;
//! docs/performance.md), and a server's way of returning freed pages while
//! it is idle.

#[cfg(feature = "mcp")]
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(feature = "mcp")]
/// How often an idle server returns the pages freed longer ago than
/// jemalloc's decay time (10 s by default).
const DECAY_INTERVAL: Duration = Duration::from_secs(10);

/// Returns freed pages past their decay time every [`DECAY_INTERVAL`], for
/// a server's lifetime. jemalloc otherwise returns them only at its next
/// allocation, which an idle server does not make (it kept ~10 MiB of a
/// start-up's pages). Not jemalloc's own background thread: that defers
/// the purging allocations do as they go, and raised peak memory under a
/// burst of large requests by ~80 MiB.
#[cfg(feature = "mcp")]
pub(crate) fn return_idle_pages() {
    let spawned = std::thread::Builder::new()
        .name("allocator-decay".into())
        .spawn(|| {
            loop {
                std::thread::sleep(DECAY_INTERVAL);
                decay_all_arenas();
            }
        });
    if let Err(e) = spawned {
        tracing::debug!("freed pages return only on allocation: {e}");
    }
}

#[cfg(feature = "mcp")]
fn decay_all_arenas() {
    // MALLCTL_ARENAS_ALL (4096): every arena.
    let name = c"arena.4096.decay";
    // SAFETY: a NUL-terminated control name; `decay` reads and writes
    // nothing, so every pointer may be null.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}
