//! The process's allocator: mimalloc, asked for a plain block whenever the layout allows it.
//!
//! `mimalloc::MiMalloc` (0.1.52, mimalloc v3) hands every allocation to `mi_malloc_aligned`,
//! whatever its alignment. mimalloc's fast path for that takes blocks of at most 1 KiB
//! (`MI_SMALL_SIZE_MAX`); a larger one goes the generic way, and unless its size class happens to
//! be a power of two it is over-allocated by the alignment and offset into the block, even for
//! an alignment of 8. The gateway's request futures (several KiB, boxed once per request) and
//! its buffers all took that path: `mi_malloc_aligned` was about 4.5% of the instructions of an
//! h2c request under load (callgrind, 16 connections x 32 streams). mimalloc's blocks of 16
//! bytes or more are aligned to 16 (`MI_MAX_ALIGN_SIZE`; word-aligned below), so a layout whose
//! alignment is at most 16 and at most its size is served by `mi_malloc`, as the standard
//! library's own allocator does with `malloc`. A small block with a larger alignment (monoio's
//! timer, cache-padded to 128 bytes, is 640) is asked for at the next power of two: mimalloc
//! places power-of-two blocks of up to 4 KiB at their natural alignment, so the fast path serves
//! it (the alignment is checked all the same). Any other layout goes to `MiMalloc` as before.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment every mimalloc block of at least this many bytes has.
const MIN_ALIGN: usize = 16;

/// The largest block asked for at a power of two for its alignment: mimalloc's small blocks
/// (`MI_SMALL_SIZE_MAX`), so that rounding up at most doubles a small block.
const POW2_MAX: usize = 1024;

/// mimalloc, with the plain entry points where the layout allows them.
pub struct Mimalloc;

fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

/// A block of `layout` (aligned above [`MIN_ALIGN`], at most [`POW2_MAX`] bytes) from mimalloc's
/// power-of-two size classes, or null when the block it gave is not aligned after all.
fn pow2_block(layout: Layout) -> *mut u8 {
    let size = layout.size().max(layout.align()).next_power_of_two();
    // SAFETY: no precondition beyond the size.
    let p: *mut u8 = unsafe { libmimalloc_sys::mi_malloc(size).cast() };
    if p.is_null() || p as usize & (layout.align() - 1) == 0 {
        return p;
    }
    // SAFETY: `p` is the mimalloc block just allocated, freed once.
    unsafe { libmimalloc_sys::mi_free(p.cast::<c_void>()) };
    std::ptr::null_mut()
}

// SAFETY: every path returns a block of mimalloc's (or null), aligned as the layout asks: the
// plain ones only when mimalloc's own alignment of such a block covers it (see `MIN_ALIGN`); and
// `mi_free` frees any block of mimalloc's, however it was allocated.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            // SAFETY: no precondition beyond the size.
            return unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() };
        }
        if layout.size() <= POW2_MAX && layout.align() <= POW2_MAX {
            let p = pow2_block(layout);
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            // SAFETY: as `alloc`.
            unsafe { libmimalloc_sys::mi_zalloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator: a mimalloc block.
        unsafe { libmimalloc_sys::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(layout.align(), new_size) {
            // SAFETY: `ptr` is a mimalloc block; the new block keeps mimalloc's alignment,
            // which covers the layout's.
            unsafe { libmimalloc_sys::mi_realloc(ptr.cast::<c_void>(), new_size).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_their_layout_asks_for() {
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1usize, 7, 8, 15, 16, 17, 24, 40, 100, 640, 1000, 1024, 1025, 3300, 4096, 16384, 40000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; each block is written within its size, then freed once.
                unsafe {
                    let p = Mimalloc.alloc(layout);
                    assert!(!p.is_null() && (p as usize).is_multiple_of(align), "alloc {size} aligned {align}");
                    p.write_bytes(0xa5, size);
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert!(!z.is_null() && (z as usize).is_multiple_of(align), "zeroed {size} aligned {align}");
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    let r = Mimalloc.realloc(p, layout, size * 3);
                    assert!(!r.is_null() && (r as usize).is_multiple_of(align), "realloc {size} aligned {align}");
                    assert!(std::slice::from_raw_parts(r, size).iter().all(|&b| b == 0xa5));
                    Mimalloc.dealloc(r, Layout::from_size_align(size * 3, align).unwrap());
                    Mimalloc.dealloc(z, layout);
                }
            }
        }
    }
}
