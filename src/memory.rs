//! Measured memory: a counting global allocator with per-thread net byte counters.
//!
//! The compile budget ([`crate::engine::budget`]) needs to know how much memory a compilation
//! really takes — estimates of DFA or tree sizes miss what they do not model. The `domino`
//! binary installs [`CountingAllocator`] as its global allocator and calls [`install`], which
//! hands the engine [`thread_net_bytes`] as its memory probe. Each thread's counter is a
//! const-initialised thread-local `Cell` (no destructor, so reading it never allocates and
//! works during thread exit); the allocator adds each allocation's size and subtracts each
//! free's, and never allocates itself. The counter is net bytes *on this thread*: memory one
//! thread allocates and another frees shows up as growth on the first and a drop on the
//! second, which is what a budget armed on the compiling thread wants to see.
//!
//! A library user who installs no counting allocator gets no probe, and the engine enforces
//! only the time budget ([`crate::engine::budget::memory_measured`] says which).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

/// The allocator underneath the counter: mimalloc (compiling a grammar is millions of small
/// allocations and frees; under glibc malloc they were about a third of a JSON Schema's time
/// to first mask on JSONSchemaBench), called as its plain `mi_malloc` family for the
/// alignments every mimalloc block has anyway (8 bytes: blocks are whole words, and a page's
/// first block is 16-aligned), and the aligned family only above that. (`mimalloc::MiMalloc`
/// calls `mi_malloc_aligned` for everything, whose fast path needs a free block of the size
/// at hand; otherwise it over-allocates, which was 13 % of the JSON Schema front end's
/// instructions and 6 % of lowering's on the slowest schemas.)
mod inner {
    use libmimalloc_sys as mi;
    use std::alloc::Layout;
    use std::ffi::{c_int, c_long, c_void};

    // mimalloc's option calls (in the library the -sys crate builds, which declares them
    // only under its `extended` feature, with v2's option numbers).
    unsafe extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
        fn mi_option_set(option: c_int, value: c_long);
    }

    /// `mi_option_purge_delay` in the mimalloc v3 that libmimalloc-sys 0.1.49 builds
    /// (`include/mimalloc.h`); its default is 1,000 ms, which [`keep_freed_memory`] checks
    /// before writing, so a renumbered option is left alone.
    const PURGE_DELAY: c_int = 15;
    const PURGE_DELAY_DEFAULT: c_long = 1_000;

    /// Stop mimalloc from returning freed memory to the OS (`purge_delay = -1`) unless
    /// `MIMALLOC_PURGE_DELAY` says otherwise. Whether the delay is now "never".
    pub(super) fn keep_freed_memory() -> bool {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return false;
        }
        // SAFETY: plain FFI calls on mimalloc's option table, safe from any thread.
        unsafe {
            match mi_option_get(PURGE_DELAY) {
                -1 => return true,
                PURGE_DELAY_DEFAULT => {}
                _ => return false,
            }
            mi_option_set(PURGE_DELAY, -1);
            mi_option_get(PURGE_DELAY) == -1
        }
    }

    /// Every mimalloc block is aligned to at least this: up to it the plain calls serve.
    const WORD: usize = 8;

    #[inline]
    pub(super) unsafe fn alloc(layout: Layout, zeroed: bool) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: plain FFI calls; mimalloc returns null or a block of `size` bytes aligned
        // to at least `WORD` (the plain calls) or to `align` (the aligned ones).
        unsafe {
            (match (align <= WORD, zeroed) {
                (true, false) => mi::mi_malloc(size),
                (true, true) => mi::mi_zalloc(size),
                (false, false) => mi::mi_malloc_aligned(size, align),
                (false, true) => mi::mi_zalloc_aligned(size, align),
            }) as *mut u8
        }
    }

    #[inline]
    pub(super) unsafe fn dealloc(ptr: *mut u8) {
        // SAFETY: `ptr` came from this module (the caller's contract), and `mi_free` frees
        // blocks of either family.
        unsafe { mi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    pub(super) unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = ptr as *mut c_void;
        // SAFETY: `ptr` came from `alloc` with this `layout` (the caller's contract); the
        // new block keeps the alignment the same family gave the old one.
        unsafe {
            (if layout.align() <= WORD {
                mi::mi_realloc(p, new_size)
            } else {
                mi::mi_realloc_aligned(p, new_size, layout.align())
            }) as *mut u8
        }
    }
}

thread_local! {
    static NET: Cell<i64> = const { Cell::new(0) };
}

#[inline]
fn add(delta: i64) {
    let _ = NET.try_with(|c| c.set(c.get().wrapping_add(delta)));
}

/// The process's allocator (mimalloc), counting each thread's net allocated bytes (see the module doc).
pub struct CountingAllocator;

// SAFETY: every call forwards to `inner` (mimalloc) with the caller's arguments unchanged;
// the counter update neither allocates nor touches the memory.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { inner::alloc(layout, false) };
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { inner::alloc(layout, true) };
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { inner::dealloc(ptr) };
        add(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { inner::realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Net bytes the current thread has allocated through [`CountingAllocator`] (0 when it is not
/// the global allocator).
pub fn thread_net_bytes() -> i64 {
    NET.try_with(Cell::get).unwrap_or(0)
}

/// Give the engine's compile budget [`thread_net_bytes`] as its memory probe, and keep freed
/// memory in the process ([`keep_freed_memory`]). Call it only where [`CountingAllocator`] is
/// the global allocator (the `domino` binary does).
pub fn install() {
    crate::engine::budget::set_memory_probe(thread_net_bytes);
    keep_freed_memory();
}

/// Keep the memory a dropped grammar, tree or request freed for the next one instead of
/// returning it to the OS: mimalloc's `purge_delay` set to "never" (its default returns freed
/// pages after 1 s). Returned pages come back zeroed by the kernel on their next touch, one
/// fault per page, and with transparent huge pages a fault zeroes 2 MiB: on the 2-core
/// development machine that was 38,500 page faults and 1.4 s of system time in a 14 s
/// `bench masks` run on Gemma 3 (886 faults and 0.55 s without purging), landing inside
/// compiles and first masks (time to first mask p99 10.4–11.7 → 9.7–11.3 ms, three pairs; see
/// `eval/bench/breadth.md`, twenty-first pass). The cost is a resident size that stays at its
/// high-water mark (peak 529 → 583 MB in that run). `MIMALLOC_PURGE_DELAY` in the environment
/// (milliseconds; `1000` is mimalloc's default) wins over this. Whether it took effect.
pub fn keep_freed_memory() -> bool {
    inner::keep_freed_memory()
}

#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: CountingAllocator = CountingAllocator;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::budget::{self, Budget, Limit};

    #[test]
    fn freed_memory_is_kept_unless_the_environment_says_otherwise() {
        // Option 15 holding mimalloc's purge-delay default (1,000 ms, no other option has
        // it) before the write is what makes it `purge_delay`: a libmimalloc-sys update
        // that renumbers the options fails here instead of setting another option.
        let set = keep_freed_memory();
        assert_eq!(set, std::env::var_os("MIMALLOC_PURGE_DELAY").is_none());
        // Idempotent: a second call finds "never" already set.
        assert_eq!(keep_freed_memory(), set);
    }

    #[test]
    fn the_counter_sees_this_threads_allocations() {
        let before = thread_net_bytes();
        let v = vec![1u8; 8 << 20];
        assert!(thread_net_bytes() - before >= 8 << 20);
        drop(v);
        assert!(thread_net_bytes() - before < 1 << 20);
    }

    #[test]
    fn a_memory_budget_stops_a_growing_compilation() {
        install();
        assert!(budget::memory_measured());
        let scope = Budget {
            time: None,
            max_bytes: Some(4 << 20),
        }
        .enter();
        let mut hog: Vec<Vec<u8>> = Vec::new();
        let mut stopped = None;
        for _ in 0..1000 {
            hog.push(vec![0u8; 64 << 10]);
            if let Err(e) = budget::check("a test stage") {
                stopped = Some(e);
                break;
            }
        }
        let e = stopped.expect("the memory budget stops it");
        assert_eq!(e.stage, "a test stage");
        assert!(
            matches!(e.limit, Limit::Memory { limit, used } if limit == 4 << 20 && used > limit)
        );
        assert!(e.to_string().contains("memory budget of 4 MB"), "{e}");
        drop(scope);
    }
}
