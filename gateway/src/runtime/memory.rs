//! Giving freed memory back to the system.
//!
//! mimalloc (the binary's allocator) returns the pages that frees empty to the system only after a
//! delay, and runs that deferred purge during later allocations and frees. A worker that goes
//! quiet after a burst therefore keeps the burst's memory for as long as it stays quiet. With
//! 10,000 idle plain keep-alive connections opened one after another, those were the tasks of
//! connections not parked yet, freed once they parked (`downstream::h1::park`). Each worker asks
//! for the deferred purge ([`collect`]) on its 100 ms tick when no request came since the last
//! one, and once a second otherwise (`listen::run`). Asked at every tick, it measured 0.41-0.48
//! KiB per idle plain connection instead of 0.70-0.75, with no CPU cost measured on either
//! driver (`loadtests/results/mi-collect-20261202.md`); once a second throughout was too
//! seldom. Gated so, 0.42 and 0.53 KiB. The call walks the worker's heap pages, which under
//! traffic buys nothing.

// Links the mimalloc library into every binary of this crate, tests included, not only the one
// that makes it the global allocator.
extern crate mimalloc as _;

unsafe extern "C" {
    /// mimalloc's `mi_collect`: frees what this thread's heap holds for later and runs the purges
    /// that are due (`force`: all of them, now).
    fn mi_collect(force: bool);
}

/// Runs mimalloc's deferred work for the calling thread's heap, giving the pages whose purge is
/// due back to the system. Cheap enough for a worker's tick; it touches no request state.
pub fn collect() {
    // SAFETY: `mi_collect` takes a plain flag and works on the calling thread's own heap; the
    // mimalloc library is linked through the `mimalloc` crate whether or not it is the global
    // allocator (in unit tests it is not, and there is nothing to collect).
    unsafe { mi_collect(false) }
}
