//! A global allocator that counts the bytes live while a fuzz input runs and
//! refuses any allocation that would take them above a limit.
//!
//! Install it in the binary or test that fuzzes:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: structlearn_fuzz::LimitAlloc = structlearn_fuzz::LimitAlloc;
//! ```
//!
//! Disarmed (the default) it adds one relaxed atomic load to each allocation.
//! Armed ([`arm`]), every allocation, reallocation and free updates the live
//! byte count (over all threads: loaders that score in parallel count too) and
//! its peak; an allocation that would exceed the limit returns null, which
//! aborts the process with "memory allocation of N bytes failed" — the fuzz
//! supervisor records that input as a memory failure. Code that allocates with
//! `try_reserve` gets an error instead and carries on.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering::Relaxed};

static ARMED: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static LIMIT: AtomicIsize = AtomicIsize::new(isize::MAX);
static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// The counting, limiting allocator (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct LimitAlloc;

/// What an armed stretch allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Largest number of bytes live at once (above the level when armed).
    pub peak: usize,
    /// Largest request refused (0: none).
    pub refused: usize,
}

/// Starts counting from zero live bytes, refusing allocations beyond `limit` bytes.
pub fn arm(limit: usize) {
    LIVE.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    REFUSED.store(0, Relaxed);
    LIMIT.store(isize::try_from(limit).unwrap_or(isize::MAX), Relaxed);
    ARMED.store(true, Relaxed);
}

/// Stops counting and returns what the armed stretch used.
pub fn disarm() -> Usage {
    ARMED.store(false, Relaxed);
    usage()
}

/// What the armed stretch used so far (it keeps counting).
pub fn usage() -> Usage {
    Usage { peak: PEAK.load(Relaxed).max(0) as usize, refused: REFUSED.load(Relaxed) }
}

/// Bytes live now (since [`arm`]).
pub fn live() -> usize {
    LIVE.load(Relaxed).max(0) as usize
}

/// Whether the allocator is counting (false if it is not the global allocator
/// or is disarmed).
pub fn armed() -> bool {
    ARMED.load(Relaxed)
}

/// Accounts `grow` more bytes; false (and nothing accounted) if that passes the limit.
fn admit(grow: usize) -> bool {
    let grow = isize::try_from(grow).unwrap_or(isize::MAX);
    let live = LIVE.fetch_add(grow, Relaxed).saturating_add(grow);
    if live > LIMIT.load(Relaxed) {
        LIVE.fetch_sub(grow, Relaxed);
        REFUSED.fetch_max(grow as usize, Relaxed);
        return false;
    }
    PEAK.fetch_max(live, Relaxed);
    true
}

fn release(shrink: usize) {
    LIVE.fetch_sub(isize::try_from(shrink).unwrap_or(isize::MAX), Relaxed);
}

// SAFETY: every call is forwarded to `System` with the caller's layout; the
// bookkeeping only decides whether to forward an allocation or return null,
// which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for LimitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Relaxed) && !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Relaxed) && !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(Relaxed) {
            release(layout.size());
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Relaxed) {
            if new_size > layout.size() {
                if !admit(new_size - layout.size()) {
                    return std::ptr::null_mut();
                }
            } else {
                release(layout.size() - new_size);
            }
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
