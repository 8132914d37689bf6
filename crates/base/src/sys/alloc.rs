//! `mi_collect`: asks mimalloc, the allocator of `rpcbench-echo`, to give the calling
//! thread's free memory back to the kernel now.
//!
//! mimalloc keeps a heap per thread. A page whose blocks were freed by other threads, or
//! that the thread keeps for its next allocations, goes back to the kernel only when the
//! owning thread collects it, and an idle thread never does: a server left idle after 2,000
//! HTTP/2 connections closed kept +329% of its starting RSS (`report/server_attacks.md`).
//! The `mimalloc` crate exposes no safe call for it, and no option makes another thread
//! collect: this is the one call, made by the echo server's threads as they go idle.
#![allow(unsafe_code)]

/// Frees the calling thread's empty mimalloc pages and returns every free range of the
/// process's arenas to the kernel at once (`mi_collect(true)`): 2.5-27 µs in
/// `rpcbench-echo` between fresh-connection calls. In a process whose global allocator is
/// not mimalloc (the tests, `rpcbench`), it walks mimalloc's own heap, which nothing there
/// fills.
pub fn collect() {
    // SAFETY: `mi_collect` takes no pointers and touches only the calling thread's heap
    // and the arenas' own locked state; mimalloc documents it as callable from any thread
    // at any time (it initializes the thread's heap on demand).
    unsafe { libmimalloc_sys::mi_collect(true) }
}
