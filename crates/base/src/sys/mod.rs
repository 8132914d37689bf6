//! Thin, safe wrappers over the few foreign calls that neither `std`, `nix`, `socket2` nor
//! `mimalloc` wraps: a system call and one allocator call. The only place in the crate
//! where `unsafe` code is allowed; each call is one small function with its safety
//! argument beside it.

pub mod alloc;
pub mod tcp_info;
